// The dashboard's routes, added to the server beside the OpenAI ones:
//   GET /  (and /dashboard.js, /dashboard.css)  the page, embedded in the binary; it loads without
//                                               an API key and asks for one when the data
//                                               routes answer 401
//   GET /v1/huddle/cluster                      Dashboard::cluster_json()
//   GET /v1/huddle/requests?after=ID            Dashboard::requests_json(ID): requests newer than
//                                               ID, and the running one
//   GET /v1/huddle/ops?request=ID&step=N        Dashboard::step_ops_json(ID, N): one step op by
//                                               op on every device (404 when not kept)
// The data routes need the API key like /v1/*, and answer 503 (code "loading") until the model
// is loaded.
#pragma once

#include "serve/dashboard.h"

#include <atomic>
#include <string>

namespace httplib {
class Server;
}

namespace huddle::serve {

// Whether `path` is served without an API key: /health and the page's files.
bool is_public_path(const std::string& path);

// `dashboard` is read at every request (nullptr: loading); it must outlive the server.
void add_dashboard_routes(httplib::Server& http, const std::atomic<const Dashboard*>& dashboard);

}  // namespace huddle::serve
