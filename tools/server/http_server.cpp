#include "tools/server/http_server.h"

#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <list>
#include <mutex>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/text.h"
#include "core/thread_pool.h"
#include "io/png.h"
#include "pipeline/infotext.h"
#include "pipeline/init_image.h"
#include "tools/server/base64.h"
#include "tools/server/client_connection.h"
#include "tools/server/openapi.h"

namespace hd::server {

namespace {

using nlohmann::json;

int http_status(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput:
    case ErrorKind::kUnsupported:
      return 422;  // what A1111's API answers a request it cannot take with
    case ErrorKind::kBusy:
    case ErrorKind::kOutOfMemory:
      return 503;  // try again later, or smaller
    case ErrorKind::kCancelled:
      return 409;
    default:
      return 500;
  }
}

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  // Replacing what is not UTF-8 (an error message may quote a malformed body's bytes): a reply never throws.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void reply_error(httplib::Response& res, int status, const std::string& detail) {
  if (status == 503) res.set_header("Retry-After", "5");
  if (status == 401) res.set_header("WWW-Authenticate", "Basic realm=\"hipDiffusion\"");
  reply(res, status, {{"detail", detail}});
}

json parse_body(const httplib::Request& req) {
  return parse_request(req.body);
}

// A1111's random seeds: below 2^32 - 1.
uint64_t random_seed() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng() % 4294967294u;
}

bool same_secret(const std::string& a, const std::string& b) {
  // Every byte compared whatever the first difference: the time tells nothing of where it is.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= (i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0);
  return diff == 0;
}

bool authorized(const httplib::Request& req,
                const std::vector<std::pair<std::string, std::string>>& credentials) {
  const std::string header = req.get_header_value("Authorization");
  if (!header.starts_with("Basic ")) return false;
  std::string given;
  try {
    const std::vector<uint8_t> bytes = base64_decode(std::string_view(header).substr(6), "the credentials");
    given.assign(bytes.begin(), bytes.end());
  } catch (const Error&) {
    return false;
  }
  bool ok = false;
  for (const auto& [user, password] : credentials) ok |= same_secret(given, user + ":" + password);
  return ok;
}

// The generations in progress, by request, so that /interrupt reaches every job of a request being made.
class Requests {
 public:
  using Jobs = std::vector<std::shared_ptr<serve::Job>>;
  // A request's entry for its life: removed when the handler leaves, however it leaves.
  class Entry {
   public:
    explicit Entry(Requests& all) : all_(all) {
      std::lock_guard lock(all_.mutex_);
      it_ = all_.requests_.emplace(all_.requests_.end());
    }
    ~Entry() {
      std::lock_guard lock(all_.mutex_);
      for (const auto& job : *it_) job->cancel();  // nothing of a request that left is made
      all_.requests_.erase(it_);
    }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    void append(
        std::shared_ptr<serve::Job> job) {  // registered as it is queued: an interrupt then reaches it
      std::lock_guard lock(all_.mutex_);
      it_->push_back(std::move(job));
    }

   private:
    Requests& all_;
    std::list<Jobs>::iterator it_;
  };

  // A1111's interrupt: every request with a picture being made (or started) stops, its rest too.
  void interrupt() {
    std::lock_guard lock(mutex_);
    for (const Jobs& jobs : requests_) {
      const bool started = std::any_of(jobs.begin(), jobs.end(), [](const auto& j) {
        return !j->model_name().empty() &&
               j->progress().state != serve::JobState::kDone;  // admitted, not ended
      });
      if (started)
        for (const auto& job : jobs) job->cancel();
    }
  }

 private:
  std::mutex mutex_;
  std::list<Jobs> requests_;
};

// How often a handler waiting for its pictures looks whether its client is still there.
constexpr std::chrono::milliseconds kClientCheckInterval{100};

class Server {
 public:
  Server(serve::Engine& engine, const ServerOptions& options) : engine_(engine), options_(options) {}

  void route(httplib::Server& http) {
    http.Post("/sdapi/v1/txt2img",
              [this](const auto& req, auto& res) { generate(req, res, Endpoint::kTxt2Img); });
    http.Post("/sdapi/v1/img2img",
              [this](const auto& req, auto& res) { generate(req, res, Endpoint::kImg2Img); });
    http.Get("/sdapi/v1/progress",
             [this](const auto&, auto& res) { reply(res, 200, progress_of(engine_.status())); });
    http.Post("/sdapi/v1/interrupt", [this](const auto&, auto& res) {
      requests_.interrupt();
      reply(res, 200, json::object());
    });
    http.Post("/sdapi/v1/skip", [this](const auto&, auto& res) {
      const serve::Engine::Status s = engine_.status();
      if (!s.running.empty()) s.running.front()->cancel();  // the oldest picture being made
      reply(res, 200, json::object());
    });
    http.Get("/sdapi/v1/sd-models",
             [this](const auto&, auto& res) { reply(res, 200, models_list(engine_.catalogue())); });
    http.Get("/sdapi/v1/loras",
             [this](const auto&, auto& res) { reply(res, 200, loras_list(engine_.options().loras)); });
    http.Get("/sdapi/v1/samplers", [](const auto&, auto& res) { reply(res, 200, samplers_list()); });
    http.Get("/sdapi/v1/schedulers", [](const auto&, auto& res) { reply(res, 200, schedulers_list()); });
    http.Get("/sdapi/v1/options",
             [this](const auto&, auto& res) { reply(res, 200, options_of(engine_.current_model())); });
    http.Post("/sdapi/v1/options", [this](const auto& req, auto& res) {
      if (const auto model = read_options(parse_body(req))) engine_.select_model(*model);
      reply(res, 200, nullptr);
    });
    http.Get("/openapi.json",
             [this](const auto&, auto& res) { reply(res, 200, openapi_document(options_.limits)); });
    http.Get("/internal/ping", [](const auto&, auto& res) { reply(res, 200, json::object()); });
  }

 private:
  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    const json body = parse_body(req);
    const GenerationRequest request = read_generation(body, endpoint, options_.limits, random_seed);
    // Every picture queued at once (they run together); a refusal part-way, or any failure, leaves the
    // entry, which cancels the jobs it holds.
    Requests::Entry entry(requests_);
    std::vector<std::shared_ptr<serve::Job>> jobs;
    for (size_t i = 0; i < request.pictures.size(); ++i) {
      jobs.push_back(engine_.submit(request.job(i)));
      entry.append(jobs.back());
    }
    std::vector<Delivered> pictures;
    std::string model;
    bool interrupted = false;
    // A client that closes its connection gets nothing more made: its pictures are cancelled (by the
    // entry, as this handler leaves) before their next step, and the queue moves on.
    const ClientConnection client(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    if (!client.found()) {
      static std::once_flag said;
      std::call_once(said, [] {
        std::fprintf(stderr, "warning: a request's connection was not found among this process's sockets: "
                             "a client that leaves is not noticed, and its pictures are made\n");
      });
    }
    std::vector<const GenerationResult*> made(jobs.size(), nullptr);  // (the jobs hold them)
    for (size_t i = 0; i < jobs.size(); ++i) {
      while (!jobs[i]->wait_for(kClientCheckInterval)) {
        if (!client.gone()) continue;
        std::fprintf(stderr, "%s:%d closed its connection: its request's unfinished pictures are cancelled\n",
                     req.remote_addr.c_str(), req.remote_port);
        return reply_error(res, 499, "the client closed its connection");  // nginx's code; nobody reads it
      }
      try {
        made[i] = &jobs[i]->wait();
        model = jobs[i]->model_name();
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kCancelled) throw;  // the request fails; the entry cancels its rest
        interrupted = true;  // interrupted or skipped: A1111 answers with the pictures made
      }
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (made[i] == nullptr) continue;
      std::optional<InfotextRefiner> refiner;
      if (!jobs[i]->refiner_name().empty())
        refiner = InfotextRefiner{jobs[i]->refiner_name(), request.refiner_switch_at};
      GenerationParams shown = request.pictures[i];  // its LoRAs written back as the tags they came as
      shown.prompt += jobs[i]->lora_tags();
      pictures.push_back({i, {}, infotext(shown, jobs[i]->model_name(), refiner)});
    }
    // Encoded only to be sent, a picture a thread (a 512x512 PNG takes 14 ms on the development machine's
    // core, and a batch's pictures end together).
    if (request.send_images) {
      ThreadPool::global().parallel_for(int64_t(pictures.size()), 1, [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) {
          Delivered& d = pictures[size_t(k)];
          d.png = encode_png(rgb8_of(made[d.index]->image, 0), {{"parameters", d.infotext}});
        }
      });
    }
    res.status = 200;
    res.set_content(generation_response(body, request, model, pictures, interrupted), "application/json");
  }

  serve::Engine& engine_;
  const ServerOptions& options_;
  Requests requests_;
};

// SIGTERM and SIGINT: the handler (whichever thread takes the signal: OpenBLAS starts threads of its own
// before main) only writes the signal's number into a pipe, which a thread of the server's reads.
int stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int signal) {
  const char c = char(signal);
  [[maybe_unused]] const ssize_t written = write(stop_pipe[1], &c, 1);
}

void catch_stop_signals() {
  HD_CHECK_KIND(pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) == 0, ErrorKind::kRuntime,
                "cannot make a pipe for signals");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

// The next stop signal's number, or 0 when none came within `milliseconds`.
int next_stop_signal(int milliseconds) {
  pollfd fd{stop_pipe[0], POLLIN, 0};
  if (poll(&fd, 1, milliseconds) <= 0) return 0;
  char c = 0;
  return read(stop_pipe[0], &c, 1) == 1 ? int(c) : 0;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_credentials(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string_view entry : split_list(text)) {
    const size_t colon = entry.find(':');
    HD_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < entry.size(),
             "--api-auth takes user:password pairs separated by commas; an entry is \"",
             entry.substr(0, colon), colon == std::string::npos ? "" : ":...", "\"");
    out.emplace_back(entry.substr(0, colon), entry.substr(colon + 1));
  }
  return out;
}

int serve_http(serve::Engine& engine, const ServerOptions& options) {
  httplib::Server http;
  // Every queued or running generation holds a connection's thread while it waits: room for all of them,
  // and for the other endpoints and idle keep-alive connections beside them.
  const size_t threads = engine.options().max_queue + size_t(engine.options().max_batch_rows) + 32;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(options.max_body_bytes);
  http.set_read_timeout(std::chrono::seconds(30));
  http.set_write_timeout(std::chrono::seconds(30));
  // Before any body is read: a body must say its length (cpp-httplib 0.11 applies the size limit to that
  // length only) and come unencoded (it would inflate gzip or brotli without a limit); then credentials.
  // A refusal closes the connection, whose unread body would otherwise be taken for the next request.
  http.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    const auto refuse = [&](int status, const std::string& why) {
      reply_error(res, status, why);
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    };
    if (req.has_header("Transfer-Encoding"))
      return refuse(411, "a body must come with a Content-Length, not in chunks");
    if (req.has_header("Content-Encoding"))
      return refuse(415, "a compressed body is not taken: send it plain");
    if (req.method == "POST" && !req.has_header("Content-Length"))
      return refuse(411, "a POST must say its Content-Length (0 for none)");
    if (!options.credentials.empty() && !authorized(req, options.credentials))
      return refuse(401, "authentication required (HTTP basic, as the server's --api-auth)");
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      reply_error(res, http_status(e.kind()), e.what());
    } catch (const std::bad_alloc&) {
      reply_error(res, 503, "out of host memory");
    } catch (const std::exception& e) {
      reply_error(res, 500, std::string("internal error: ") + e.what());
    }
  });
  const size_t max_body = options.max_body_bytes;
  http.set_error_handler([max_body](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own answer
    if (res.status == 413)
      return reply_error(res, 413, str_cat("the body is larger than this server's ", max_body, " bytes"));
    if (res.status == 404) return reply_error(res, 404, "Not Found");
    if (res.status == 405) return reply_error(res, 405, "Method Not Allowed");
    reply_error(res, res.status, res.status == 400 ? "Bad Request" : str_cat("HTTP error ", res.status));
  });
  Server server(engine, options);
  server.route(http);

  const int port = options.port == 0 ? http.bind_to_any_port(options.host)
                                     : (http.bind_to_port(options.host, options.port) ? options.port : -1);
  HD_CHECK_KIND(port > 0, ErrorKind::kRuntime, "cannot listen on ", options.host, ":", options.port,
                " (in use, or not an address of this machine)");
  catch_stop_signals();
  std::atomic<bool> ended = false;
  std::thread stopper([&] {
    while (!ended) {
      const int signal = next_stop_signal(100);
      if (signal == 0) continue;
      std::signal(SIGTERM, SIG_DFL);  // a second signal ends the process at once
      std::signal(SIGINT, SIG_DFL);
      std::fprintf(stderr, "%s: finishing the accepted generations, refusing new ones\n",
                   signal == SIGTERM ? "SIGTERM" : "SIGINT");
      engine.stop();  // returns when every accepted generation has ended; their answers are being written
      // A signal before the listener ran would stop nothing: wait until it runs (or ended on its own).
      while (!http.is_running() && !ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      http.stop();  // its threads finish the requests in hand first
      return;
    }
  });
  std::fprintf(stderr, "listening on http://%s:%d\n", options.host.c_str(), port);
  bool listened = false;
  try {
    listened = http.listen_after_bind();
  } catch (...) {
    ended = true;
    stopper.join();
    throw;
  }
  ended = true;
  stopper.join();
  engine.stop();
  return listened ? 0 : 1;
}

}  // namespace hd::server
