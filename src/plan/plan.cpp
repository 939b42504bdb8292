#include "plan/plan.h"

#include "core/error.h"
#include "io/text_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

constexpr int kPlanVersion = 1;

std::string split_name(BlockSplit s) {
  switch (s) {
    case BlockSplit::Heads:
      return "heads";
    case BlockSplit::Columns:
      return "columns";
    case BlockSplit::Tokens:
      return "tokens";
  }
  return "?";
}

nlohmann::json ranges_json(const std::vector<Range>& ranges) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [b, e] : ranges) j.push_back({b, e});
  return j;
}

// Field access that names the file and the JSON path of what is wrong.
class Reader {
 public:
  Reader(const nlohmann::json& j, std::string path, const std::string& source)
      : j_(j), path_(std::move(path)), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw PlanError(fmt::format("{}: {}: {}", source_, path_.empty() ? "plan" : path_, what));
  }
  Reader at(const std::string& key) const {
    if (!j_.is_object()) fail("expected an object");
    if (!j_.contains(key)) Reader(j_, join(key), source_).fail("missing");
    return Reader(j_.at(key), join(key), source_);
  }
  Reader at(std::size_t i) const {
    return Reader(j_.at(i), fmt::format("{}[{}]", path_, i), source_);
  }
  bool has(const std::string& key) const { return j_.is_object() && j_.contains(key); }
  std::size_t array_size() const {
    if (!j_.is_array()) fail(fmt::format("expected an array, got {}", j_.dump()));
    return j_.size();
  }
  std::string str() const {
    if (!j_.is_string()) fail(fmt::format("expected a string, got {}", j_.dump()));
    return j_.get<std::string>();
  }
  std::int64_t integer() const {
    if (!j_.is_number_integer()) fail(fmt::format("expected an integer, got {}", j_.dump()));
    return j_.get<std::int64_t>();
  }
  double number() const {
    if (!j_.is_number()) fail(fmt::format("expected a number, got {}", j_.dump()));
    return j_.get<double>();
  }
  std::vector<Range> ranges() const {
    std::vector<Range> out;
    for (std::size_t i = 0; i < array_size(); ++i) {
      const Reader r = at(i);
      if (r.array_size() != 2) r.fail("expected [begin, end]");
      const std::int64_t b = r.at(0).integer(), e = r.at(1).integer();
      if (b < 0 || e < b) r.fail(fmt::format("[{}, {}] is not a range", b, e));
      out.emplace_back(b, e);
    }
    return out;
  }

 private:
  std::string join(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const nlohmann::json& j_;
  std::string path_;
  const std::string& source_;
};

void check_cover(const std::vector<Range>& ranges, std::int64_t total, int devices,
                 const std::string& what, const std::string& source) {
  if (static_cast<int>(ranges.size()) != devices) {
    throw PlanError(
        fmt::format("{}: {} has {} ranges for {} devices", source, what, ranges.size(), devices));
  }
  std::int64_t expected = 0;
  for (std::size_t d = 0; d < ranges.size(); ++d) {
    if (ranges[d].first != expected) {
      throw PlanError(
          fmt::format("{}: {}[{}] starts at {}, expected {} (ranges must be contiguous, in device "
                      "order)",
                      source, what, d, ranges[d].first, expected));
    }
    expected = ranges[d].second;
  }
  if (expected != total) {
    throw PlanError(
        fmt::format("{}: {} covers [0, {}) but the model has {}", source, what, expected, total));
  }
}

}  // namespace

PlanModel PlanModel::of(const ModelConfig& c) {
  return PlanModel{c.architecture, c.layers, c.hidden, c.ffn, c.heads, c.kv_heads};
}

nlohmann::json Plan::to_json() const {
  nlohmann::json layer_list = nlohmann::json::array();
  for (const LayerPlan& l : layers) {
    nlohmann::json j = {
        {"attention", split_name(l.attention)},
        {"mlp", split_name(l.mlp)},
        {"residual", l.residual == ResidualLayout::Tokens ? "tokens" : "replicated"}};
    if (l.attention == BlockSplit::Heads) j["heads"] = ranges_json(l.heads);
    if (l.mlp == BlockSplit::Columns) j["columns"] = ranges_json(l.columns);
    layer_list.push_back(std::move(j));
  }
  nlohmann::json device_list = nlohmann::json::array();
  for (const std::string& d : devices) device_list.push_back({{"name", d}});
  return {{"version", kPlanVersion},
          {"strategy", strategy},
          {"model",
           {{"architecture", model.architecture},
            {"layers", model.layers},
            {"hidden", model.hidden},
            {"heads", model.heads},
            {"kv_heads", model.kv_heads},
            {"ffn", model.ffn}}},
          {"devices", device_list},
          {"token_shares", token_shares},
          {"layers", layer_list}};
}

Plan Plan::from_json(const nlohmann::json& json, const std::string& source) {
  const Reader root(json, "", source);
  if (!json.is_object()) root.fail("expected a JSON object");
  const std::int64_t version = root.at("version").integer();
  if (version != kPlanVersion) {
    root.at("version").fail(
        fmt::format("plan version {} is not supported (this is {})", version, kPlanVersion));
  }
  Plan p;
  p.strategy = root.at("strategy").str();
  const Reader m = root.at("model");
  p.model.architecture = m.at("architecture").str();
  p.model.layers = m.at("layers").integer();
  p.model.hidden = m.at("hidden").integer();
  p.model.heads = static_cast<int>(m.at("heads").integer());
  p.model.kv_heads = static_cast<int>(m.at("kv_heads").integer());
  p.model.ffn = m.at("ffn").integer();
  const Reader devices = root.at("devices");
  for (std::size_t i = 0; i < devices.array_size(); ++i)
    p.devices.push_back(devices.at(i).at("name").str());
  if (p.devices.empty()) devices.fail("a plan needs at least one device");
  const Reader shares = root.at("token_shares");
  if (shares.array_size() != p.devices.size()) {
    shares.fail(fmt::format("{} shares for {} devices", shares.array_size(), p.devices.size()));
  }
  double share_sum = 0;
  for (std::size_t i = 0; i < shares.array_size(); ++i) {
    const double s = shares.at(i).number();
    if (!(s >= 0)) shares.at(i).fail("a share must be >= 0");
    share_sum += s;
    p.token_shares.push_back(s);
  }
  if (!(share_sum > 0)) shares.fail("shares must not all be 0");
  const Reader layers = root.at("layers");
  for (std::size_t i = 0; i < layers.array_size(); ++i) {
    const Reader l = layers.at(i);
    LayerPlan lp;
    const std::string attention = l.at("attention").str();
    if (attention == "heads") {
      lp.attention = BlockSplit::Heads;
      lp.heads = l.at("heads").ranges();
    } else if (attention == "tokens") {
      lp.attention = BlockSplit::Tokens;
    } else {
      l.at("attention").fail(fmt::format("'{}' is not 'heads' or 'tokens'", attention));
    }
    const std::string mlp = l.at("mlp").str();
    if (mlp == "columns") {
      lp.mlp = BlockSplit::Columns;
      lp.columns = l.at("columns").ranges();
    } else if (mlp == "tokens") {
      lp.mlp = BlockSplit::Tokens;
    } else {
      l.at("mlp").fail(fmt::format("'{}' is not 'columns' or 'tokens'", mlp));
    }
    const std::string residual = l.at("residual").str();
    if (residual == "tokens") {
      lp.residual = ResidualLayout::Tokens;
    } else if (residual == "replicated") {
      lp.residual = ResidualLayout::Replicated;
    } else {
      l.at("residual").fail(fmt::format("'{}' is not 'tokens' or 'replicated'", residual));
    }
    p.layers.push_back(std::move(lp));
  }
  return p;
}

Plan Plan::load(const std::string& path) {
  const std::optional<std::string> text = io::read_text_file(path);
  if (!text) throw PlanError(fmt::format("{}: cannot open plan file", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    throw PlanError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  return from_json(j, path);
}

void Plan::save(const std::string& path) const {
  std::ofstream out(path);
  out << to_json().dump(1) << "\n";
  if (!out) throw Error(fmt::format("{}: cannot write plan", path));
}

void Plan::validate(const ModelConfig& config, const std::string& source) const {
  const PlanModel actual = PlanModel::of(config);
  if (!(model == actual)) {
    throw PlanError(
        fmt::format("{}: the plan is for a {} with {} layers, hidden {}, {} heads ({} kv), ffn {}; "
                    "the model is a {} with {} layers, hidden {}, {} heads ({} kv), ffn {}",
                    source, model.architecture, model.layers, model.hidden, model.heads,
                    model.kv_heads, model.ffn, actual.architecture, actual.layers, actual.hidden,
                    actual.heads, actual.kv_heads, actual.ffn));
  }
  if (static_cast<std::int64_t>(layers.size()) != config.layers) {
    throw PlanError(fmt::format("{}: layers has {} entries; the model has {} layers", source,
                                layers.size(), config.layers));
  }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerPlan& l = layers[i];
    if (l.attention == BlockSplit::Heads) {
      check_cover(l.heads, config.heads, num_devices(), fmt::format("layers[{}].heads", i), source);
    }
    if (l.mlp == BlockSplit::Columns) {
      check_cover(l.columns, config.ffn, num_devices(), fmt::format("layers[{}].columns", i),
                  source);
    }
  }
}

}  // namespace huddle
