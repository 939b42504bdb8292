#include "serve/dashboard_routes.h"

#include "serve/dashboard_assets.h"
#include "serve/openai_json.h"
#include "serve/request_error.h"

#include <fmt/format.h>
#include <httplib.h>

#include <charconv>
#include <optional>

namespace huddle::serve {
namespace {

std::string content_type(std::string_view path) {
  if (path.ends_with(".html")) return "text/html; charset=utf-8";
  if (path.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (path.ends_with(".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

// The page's files by URL path: "/" is index.html.
const EmbeddedFile* asset_at(const std::string& path) {
  const std::string_view name = path == "/" ? std::string_view("index.html")
                                            : std::string_view(path).substr(path.empty() ? 0 : 1);
  for (const EmbeddedFile& f : dashboard_assets()) {
    if (f.path == name) return &f;
  }
  return nullptr;
}

const Dashboard& loaded(const std::atomic<const Dashboard*>& dashboard) {
  const Dashboard* d = dashboard.load();
  if (d == nullptr)
    throw RequestError(503, "the model is still loading", "unavailable_error", "", "loading");
  return *d;
}

// A non-negative integer query parameter (`what` names it in the error); none when absent.
std::optional<std::uint64_t> number_param(const httplib::Request& req, const std::string& name,
                                          const char* what) {
  if (!req.has_param(name.c_str())) return std::nullopt;
  const std::string text = req.get_param_value(name.c_str());
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw RequestError(400, fmt::format("'{}': expected {}, got '{}'", name, what, text),
                       "invalid_request_error", name);
  }
  return value;
}

}  // namespace

bool is_public_path(const std::string& path) {
  return path == "/health" || asset_at(path) != nullptr;
}

void add_dashboard_routes(httplib::Server& http, const std::atomic<const Dashboard*>& dashboard) {
  for (const EmbeddedFile& f : dashboard_assets()) {
    std::string path = "/";  // (not "/" + ...: GCC 12 warns falsely of overlapping copies)
    if (f.path != "index.html") path.append(f.path);
    http.Get(path, [&f](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-cache");
      res.set_content(f.bytes.data(), f.bytes.size(), content_type(f.path).c_str());
    });
  }
  http.Get("/v1/huddle/cluster", [&dashboard](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(loaded(dashboard).cluster_json()), "application/json");
  });
  http.Get("/v1/huddle/requests",
           [&dashboard](const httplib::Request& req, httplib::Response& res) {
             const std::uint64_t after = number_param(req, "after", "a request id").value_or(0);
             res.set_content(dump(loaded(dashboard).requests_json(after)), "application/json");
           });
  http.Get("/v1/huddle/ops", [&dashboard](const httplib::Request& req, httplib::Response& res) {
    const std::optional<std::uint64_t> request = number_param(req, "request", "a request id");
    const std::optional<std::uint64_t> step = number_param(req, "step", "a step number");
    res.set_content(dump(loaded(dashboard).step_ops_json(
                        request, step ? std::optional<std::size_t>(*step) : std::nullopt)),
                    "application/json");
  });
}

}  // namespace huddle::serve
