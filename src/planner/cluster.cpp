#include "planner/cluster.h"

#include "core/error.h"
#include "io/json_field.h"
#include "io/strict_json.h"
#include "io/text_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <set>

namespace huddle {
namespace {

using Field = io::JsonField<LoadError>;

LinkSpec read_link(const Field& f) {
  LinkSpec l{f.at("bandwidth_bps").positive(), f.at("latency_s").non_negative()};
  if (f.has("duplex_bandwidth_bps"))
    l.duplex_bandwidth_bps = f.at("duplex_bandwidth_bps").positive();
  if (f.has("duplex_latency_s")) l.duplex_latency_s = f.at("duplex_latency_s").non_negative();
  return l;
}

OpCurve read_curve(const Field& f) {
  return OpCurve{f.at("gflops").positive(), f.at("overhead_us").non_negative() * 1e-6};
}

nlohmann::json curve_json(const OpCurve& c) {
  return {{"gflops", c.gflops}, {"overhead_us", c.overhead_s * 1e6}};
}

}  // namespace

const OpCurve& OpCurves::of(OpClass c) const {
  switch (c) {
    case OpClass::Gemm:
      return gemm;
    case OpClass::Gemv:
      return gemv;
    case OpClass::Attention:
      return attention;
    case OpClass::Elementwise:
      return elementwise;
  }
  return gemm;
}

void OpCurves::scale(double factor) {
  HUDDLE_CHECK(factor > 0);
  for (OpCurve* c : {&gemm, &attention, &elementwise, &gemv, &gemm_weights}) {
    c->gflops *= factor;
    c->overhead_s /= factor;
  }
}

double DeviceSpec::op_seconds(OpClass op, BlockType block, double flops, int ops) const {
  if (curves) {
    const OpCurve& c = curves->of(op);
    return static_cast<double>(ops) * c.overhead_s + flops / (c.gflops * 1e9);
  }
  return flops / (speed(block) * 1e9);
}

double DeviceSpec::linear_seconds(BlockType block, double rows, double flops, int ops) const {
  if (!curves) return flops / (speed(block) * 1e9);
  const double weight_flops = flops / std::max(rows, 1.0);
  if (rows <= 1) return curves->gemv.seconds(weight_flops) + (ops - 1) * curves->gemv.overhead_s;
  const OpCurve& weights = curves->weights_of_gemm();
  return weights.seconds(weight_flops) + (ops - 1) * weights.overhead_s +
         static_cast<double>(ops) * curves->gemm.overhead_s + flops / (curves->gemm.gflops * 1e9);
}

void DeviceSpec::scale_speed(double factor) {
  HUDDLE_CHECK(factor > 0);
  gflops *= factor;
  attention_gflops *= factor;
  mlp_gflops *= factor;
  connection_gflops *= factor;
  if (curves) curves->scale(factor);
}

double DeviceSpec::speed(BlockType block) const {
  switch (block) {
    case BlockType::Attention:
      return attention_gflops;
    case BlockType::Mlp:
      return mlp_gflops;
    case BlockType::Connection:
      return connection_gflops;
  }
  return gflops;
}

ClusterSpec ClusterSpec::from_json(const nlohmann::json& json, const std::string& source) {
  const Field root(json, source, "cluster");
  if (!json.is_object()) root.fail("expected a JSON object");
  ClusterSpec c;
  const Field devices = root.at("devices");
  if (devices.array_size() == 0) devices.fail("a cluster needs at least one device");
  std::set<std::string> names;
  for (std::size_t i = 0; i < devices.array_size(); ++i) {
    const Field d = devices.at(i);
    DeviceSpec spec;
    spec.name = d.at("name").str();
    if (spec.name.empty()) d.at("name").fail("must not be empty");
    if (!names.insert(spec.name).second)
      d.at("name").fail(fmt::format("device '{}' appears twice", spec.name));
    spec.gflops = d.at("gflops").positive();
    const double memory = d.at("memory_bytes").positive();
    if (memory > 9e18) d.at("memory_bytes").fail("too large");
    spec.memory_bytes = static_cast<std::int64_t>(memory);
    spec.attention_gflops = spec.mlp_gflops = spec.connection_gflops = spec.gflops;
    if (d.has("gflops_by_block")) {
      const Field by = d.at("gflops_by_block");
      if (by.has("attention")) spec.attention_gflops = by.at("attention").positive();
      if (by.has("mlp")) spec.mlp_gflops = by.at("mlp").positive();
      if (by.has("connection")) spec.connection_gflops = by.at("connection").positive();
    }
    if (d.has("cores")) spec.cores = d.at("cores").positive();
    if (d.has("comm_cpu_ns_per_byte"))
      spec.comm_cpu_s_per_byte = d.at("comm_cpu_ns_per_byte").positive() * 1e-9;
    if (d.has("quota_share")) {
      spec.quota_share = d.at("quota_share").positive();
      if (spec.quota_share > 1) d.at("quota_share").fail("must be at most 1");
    }
    if (d.has("op_curves")) {
      const Field curves = d.at("op_curves");
      spec.curves = OpCurves{read_curve(curves.at("gemm")), read_curve(curves.at("attention")),
                             read_curve(curves.at("elementwise")), OpCurve{}};
      spec.curves->gemv = curves.has("gemv") ? read_curve(curves.at("gemv")) : spec.curves->gemm;
      if (curves.has("gemm_weights"))
        spec.curves->gemm_weights = read_curve(curves.at("gemm_weights"));
    }
    c.devices_.push_back(std::move(spec));
  }
  if (root.has("default_link")) c.default_link_ = read_link(root.at("default_link"));
  std::set<std::pair<int, int>> given;
  if (root.has("links")) {
    const Field links = root.at("links");
    for (std::size_t i = 0; i < links.array_size(); ++i) {
      const Field l = links.at(i);
      const auto find = [&](const char* key) {
        const std::string name = l.at(key).str();
        for (int k = 0; k < c.size(); ++k) {
          if (c.devices_[static_cast<std::size_t>(k)].name == name) return k;
        }
        l.at(key).fail(fmt::format("no device is called '{}'", name));
      };
      const int from = find("from"), to = find("to");
      if (from == to) l.fail(fmt::format("a link from '{}' to itself", l.at("from").str()));
      if (!given.insert({from, to}).second) l.fail("this link is given twice");
      const LinkSpec spec = read_link(l);
      c.links_[{from, to}] = spec;
      // The reverse direction defaults to the same link unless the file gives it too.
      if (!given.contains({to, from})) c.links_[{to, from}] = spec;
    }
  }
  return c;
}

ClusterSpec ClusterSpec::load(const std::string& path) {
  const std::optional<std::string> text = io::read_text_file(path);
  if (!text) throw LoadError(fmt::format("{}: cannot open cluster file", path));
  return from_json(io::parse_strict_json(*text, path), path);
}

void ClusterSpec::save(const std::string& path) const {
  std::ofstream out(path);
  out << to_json().dump(1) << "\n";
  if (!out) throw Error(fmt::format("{}: cannot write the cluster file", path));
}

ClusterSpec ClusterSpec::uniform(std::vector<DeviceSpec> devices, LinkSpec link) {
  ClusterSpec c;
  for (DeviceSpec& d : devices) {
    HUDDLE_CHECK(d.gflops > 0 && d.memory_bytes > 0, "device '{}' needs speed and memory", d.name);
    if (!(d.attention_gflops > 0)) d.attention_gflops = d.gflops;
    if (!(d.mlp_gflops > 0)) d.mlp_gflops = d.gflops;
    if (!(d.connection_gflops > 0)) d.connection_gflops = d.gflops;
  }
  c.devices_ = std::move(devices);
  c.default_link_ = link;
  return c;
}

nlohmann::json ClusterSpec::to_json() const {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceSpec& d : devices_) {
    nlohmann::json device = {{"name", d.name},
                             {"gflops", d.gflops},
                             {"memory_bytes", d.memory_bytes},
                             {"gflops_by_block",
                              {{"attention", d.attention_gflops},
                               {"mlp", d.mlp_gflops},
                               {"connection", d.connection_gflops}}}};
    if (d.cores > 0) device["cores"] = d.cores;
    if (d.comm_cpu_s_per_byte > 0) device["comm_cpu_ns_per_byte"] = d.comm_cpu_s_per_byte * 1e9;
    if (d.quota_share > 0) device["quota_share"] = d.quota_share;
    if (d.curves) {
      device["op_curves"] = {{"gemm", curve_json(d.curves->gemm)},
                             {"attention", curve_json(d.curves->attention)},
                             {"elementwise", curve_json(d.curves->elementwise)},
                             {"gemv", curve_json(d.curves->gemv)}};
      if (d.curves->gemm_weights.gflops > 0)
        device["op_curves"]["gemm_weights"] = curve_json(d.curves->gemm_weights);
    }
    devices.push_back(std::move(device));
  }
  nlohmann::json links = nlohmann::json::array();
  for (const auto& [pair, l] : links_) {
    nlohmann::json link = {{"from", devices_[static_cast<std::size_t>(pair.first)].name},
                           {"to", devices_[static_cast<std::size_t>(pair.second)].name},
                           {"bandwidth_bps", l.bandwidth_bps},
                           {"latency_s", l.latency_s}};
    if (l.duplex_bandwidth_bps > 0) link["duplex_bandwidth_bps"] = l.duplex_bandwidth_bps;
    if (l.duplex_latency_s > 0) link["duplex_latency_s"] = l.duplex_latency_s;
    links.push_back(std::move(link));
  }
  nlohmann::json j = {{"devices", devices}, {"links", links}};
  if (default_link_) {
    j["default_link"] = {{"bandwidth_bps", default_link_->bandwidth_bps},
                         {"latency_s", default_link_->latency_s}};
  }
  return j;
}

int ClusterSpec::index_of(const std::string& name) const {
  for (int i = 0; i < size(); ++i) {
    if (devices_[static_cast<std::size_t>(i)].name == name) return i;
  }
  throw PlanError(fmt::format("the cluster has no device called '{}'", name));
}

bool ClusterSpec::has_own_link(int from, int to) const {
  return links_.contains({from, to});
}

LinkSpec ClusterSpec::link(int from, int to) const {
  HUDDLE_CHECK(from != to && from >= 0 && to >= 0 && from < size() && to < size());
  if (const auto it = links_.find({from, to}); it != links_.end()) return it->second;
  if (default_link_) return *default_link_;
  throw PlanError(
      fmt::format("the cluster file gives no link from '{}' to '{}' and no default_link",
                  device(from).name, device(to).name));
}

void ClusterSpec::set_link(int a, int b, LinkSpec link) {
  HUDDLE_CHECK(a != b && a >= 0 && b >= 0 && a < size() && b < size());
  links_[{a, b}] = link;
  links_[{b, a}] = link;
}

ClusterSpec ClusterSpec::subset(const std::vector<int>& indices) const {
  ClusterSpec c;
  c.default_link_ = default_link_;
  for (int i : indices) c.devices_.push_back(device(i));
  for (std::size_t a = 0; a < indices.size(); ++a) {
    for (std::size_t b = 0; b < indices.size(); ++b) {
      if (a == b) continue;
      const auto it = links_.find({indices[a], indices[b]});
      if (it != links_.end()) c.links_[{static_cast<int>(a), static_cast<int>(b)}] = it->second;
    }
  }
  return c;
}

ClusterSpec ClusterSpec::with_device(DeviceSpec device, LinkSpec link) const {
  ClusterSpec c = *this;
  c.devices_.push_back(std::move(device));
  const int added = c.size() - 1;
  for (int d = 0; d < added; ++d) c.set_link(d, added, link);
  return c;
}

}  // namespace huddle
