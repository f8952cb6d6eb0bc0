// `hipdiffusion serve`'s HTTP side: AUTOMATIC1111's API (a1111_api.h) over cpp-httplib, on one serving
// engine. Loopback unless told otherwise; HTTP basic authentication on every request when credentials are
// given; limits on the body, the picture, the steps, the pictures per request and the queue, each a clear
// 4xx; errors as A1111's clients read them ({"detail": "..."}). A client that closes its connection
// before its answer gets its unfinished pictures cancelled. SIGTERM or SIGINT: new generations get 503,
// the accepted ones finish and are answered, then the server ends.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "serve/engine.h"
#include "tools/server/a1111_api.h"

namespace hd::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 7860;  // 0: any free port (the chosen one is printed)
  std::vector<std::pair<std::string, std::string>> credentials;  // --api-auth user:pass,...
  size_t max_body_bytes = size_t(32) << 20;
  RequestLimits limits;
};

// Serves `engine` until SIGTERM or SIGINT; returns the process's exit code. Prints "listening on
// http://HOST:PORT" to stderr once it accepts connections.
int serve_http(serve::Engine& engine, const ServerOptions& options);

// --api-auth's "user:pass,user2:pass2"; an Error naming the malformed entry otherwise.
std::vector<std::pair<std::string, std::string>> parse_credentials(const std::string& text);

}  // namespace hd::server
