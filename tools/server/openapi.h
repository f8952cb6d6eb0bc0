// The OpenAPI 3.0 document of the server's API (GET /openapi.json): every route, the request fields as
// a1111_api.cpp takes them (the limits of this server's options in their bounds), and every answer a
// route can give, errors included, so that a client generator or a schema checker (schemathesis) holds
// the server to it.
#pragma once

#include <nlohmann/json.hpp>

#include "tools/server/a1111_api.h"

namespace hd::server {

nlohmann::json openapi_document(const RequestLimits& limits);

}  // namespace hd::server
