#include "plan/pipeline.h"

#include "core/error.h"
#include "io/json_field.h"
#include "model/model_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace huddle {
namespace {

using PipelineReader = io::JsonField<PlanError>;

int device_index(const PipelineReader& r) {
  const std::int64_t device = r.integer();
  if (device < 0 || device > 1 << 16) r.fail(fmt::format("{} is no device", device));
  return static_cast<int>(device);
}

// "device": d, or "devices": [...] with optional "shares" (a group of one is a one-device stage).
void read_devices(const PipelineReader& s, PipelineStage& stage) {
  if (s.has("device") == s.has("devices")) {
    s.fail("a stage has either \"device\" (one device) or \"devices\" (a group)");
  }
  if (s.has("device")) {
    if (s.has("shares")) s.at("shares").fail("only a group stage (\"devices\") has shares");
    if (s.has("columns")) s.at("columns").fail("only a group stage (\"devices\") has columns");
    stage.device = device_index(s.at("device"));
    return;
  }
  const PipelineReader devices = s.at("devices");
  const std::size_t n = devices.array_size();
  if (n == 0) devices.fail("a group stage needs at least one device");
  std::vector<int> group;
  for (std::size_t k = 0; k < n; ++k) group.push_back(device_index(devices.at(k)));
  std::vector<double> shares(n, 1.0);
  if (s.has("shares")) {
    const PipelineReader r = s.at("shares");
    if (r.array_size() != n) {
      r.fail(
          fmt::format("{} shares for {} devices (one per device of the group)", r.array_size(), n));
    }
    for (std::size_t k = 0; k < n; ++k) shares[k] = r.at(k).positive();
  }
  stage = PipelineStage::of(std::move(group), stage.units, std::move(shares));
  if (s.has("columns")) {
    const PipelineReader r = s.at("columns");
    if (r.array_size() != n) {
      r.fail(fmt::format("{} column ranges for {} devices (one per device of the group)",
                         r.array_size(), n));
    }
    for (std::size_t k = 0; k < n; ++k) {
      const PipelineReader c = r.at(k);
      if (c.array_size() != 2) c.fail("expected [begin, end]");
      stage.columns.emplace_back(c.at(0).integer(), c.at(1).integer());
    }
  }
}

}  // namespace

PipelineStage PipelineStage::of(std::vector<int> members, Range units, std::vector<double> shares) {
  HUDDLE_CHECK(!members.empty());
  PipelineStage s;
  s.units = units;
  s.device = leader_of(members);
  if (members.size() == 1) return s;
  if (shares.empty()) shares.assign(members.size(), 1.0);
  s.group = std::move(members);
  s.shares = std::move(shares);
  return s;
}

std::vector<int> PipelineStage::members() const {
  return grouped() ? group : std::vector<int>{device};
}

int PipelineStage::member_index(int d) const {
  if (!grouped()) return d == device ? 0 : -1;
  const auto it = std::find(group.begin(), group.end(), d);
  return it == group.end() ? -1 : static_cast<int>(it - group.begin());
}

int PipelineStage::leader_of(const std::vector<int>& group) {
  HUDDLE_CHECK(!group.empty());
  return std::find(group.begin(), group.end(), 0) != group.end() ? 0 : group.front();
}

std::vector<Range> PipelineStage::member_heads(std::int64_t heads) const {
  if (!grouped()) return {{0, heads}};
  return split_at_least_one(heads, shares, "attention heads");
}

std::vector<Range> PipelineStage::member_columns(std::int64_t ffn) const {
  if (!grouped()) return {{0, ffn}};
  if (!columns.empty()) return columns;
  return split_at_least_one(ffn, shares, "MLP columns");
}

std::vector<std::int64_t> Pipeline::slices_for(std::int64_t tokens) const {
  if (tokens < 1) throw InputError("a step needs at least one token");
  if (!sliced) return {tokens};
  if (tokens > static_cast<std::int64_t>(slices.size())) {
    throw InputError(fmt::format(
        "a step of {} tokens is longer than the pipeline plan's slice table (1..{} tokens)", tokens,
        slices.size()));
  }
  return slices[static_cast<std::size_t>(tokens - 1)];
}

int Pipeline::stage_of(int device) const {
  for (std::size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].member_index(device) >= 0) return static_cast<int>(s);
  }
  return -1;
}

nlohmann::json Pipeline::to_json() const {
  nlohmann::json stage_list = nlohmann::json::array();
  for (const PipelineStage& s : stages) {
    nlohmann::json j = {{"units", {s.units.first, s.units.second}}};
    if (s.grouped()) {
      j["devices"] = s.group;
      j["shares"] = s.shares;
      if (!s.columns.empty()) {
        nlohmann::json columns = nlohmann::json::array();
        for (const Range& c : s.columns) columns.push_back({c.first, c.second});
        j["columns"] = std::move(columns);
      }
    } else {
      j["device"] = s.device;
    }
    stage_list.push_back(std::move(j));
  }
  nlohmann::json j = {{"stages", stage_list}, {"sliced", sliced}};
  if (sliced) j["slices"] = slices;
  return j;
}

Pipeline Pipeline::from_json(const nlohmann::json& json, const std::string& source) {
  const PipelineReader root(json, source, "pipeline");
  Pipeline p;
  const PipelineReader stages = root.at("stages");
  for (std::size_t i = 0; i < stages.array_size(); ++i) {
    const PipelineReader s = stages.at(i);
    PipelineStage stage;
    read_devices(s, stage);
    const PipelineReader units = s.at("units");
    if (units.array_size() != 2) units.fail("expected [begin, end]");
    stage.units = {units.at(0).integer(), units.at(1).integer()};
    if (stage.units.first < 0 || stage.units.second <= stage.units.first) {
      units.fail(fmt::format("[{}, {}] is not a non-empty range of units", stage.units.first,
                             stage.units.second));
    }
    p.stages.push_back(stage);
  }
  if (p.stages.empty()) stages.fail("a pipeline needs at least one stage");
  p.sliced = root.at("sliced").boolean();
  if (!p.sliced) {
    if (root.has("slices")) root.at("slices").fail("an unsliced pipeline has no slice table");
    return p;
  }
  const PipelineReader table = root.at("slices");
  for (std::size_t n = 1; n <= table.array_size(); ++n) {
    const PipelineReader entry = table.at(n - 1);
    std::vector<std::int64_t> lengths;
    std::int64_t sum = 0;
    for (std::size_t k = 0; k < entry.array_size(); ++k) {
      const std::int64_t len = entry.at(k).integer();
      if (len < 1) entry.at(k).fail(fmt::format("slice length {}; slices hold >= 1 token", len));
      sum += len;
      lengths.push_back(len);
    }
    if (sum != static_cast<std::int64_t>(n)) {
      entry.fail(
          fmt::format("the slices for {} tokens sum to {} (the entry at index n - 1 "
                      "slices a step of n tokens)",
                      n, sum));
    }
    p.slices.push_back(std::move(lengths));
  }
  if (p.slices.empty()) table.fail("a sliced pipeline needs a slice table");
  return p;
}

namespace {

// A group stage as built in code (from_json already checks what JSON can get wrong): two or more
// members, one positive share each, the leader as device, and a head and an FFN column per member.
void validate_group(const PipelineStage& s, const ModelConfig& config, const std::string& source,
                    const std::string& field) {
  if (s.group.size() < 2) {
    throw PlanError(
        fmt::format("{}: {}: a group stage needs at least two devices (a stage of one "
                    "device is {{\"device\": d}})",
                    source, field));
  }
  if (s.shares.size() != s.group.size()) {
    throw PlanError(fmt::format("{}: {}: {} shares for {} devices", source, field, s.shares.size(),
                                s.group.size()));
  }
  for (const double share : s.shares) {
    if (!(share > 0) || !std::isfinite(share)) {
      throw PlanError(fmt::format("{}: {}: share {} (shares are > 0)", source, field, share));
    }
  }
  if (s.device != PipelineStage::leader_of(s.group)) {
    throw PlanError(fmt::format("{}: {}: the stage's device {} is not its leader {}", source, field,
                                s.device, PipelineStage::leader_of(s.group)));
  }
  const auto n = static_cast<std::int64_t>(s.group.size());
  if (n > config.heads || n > config.ffn) {
    throw PlanError(fmt::format(
        "{}: {}: {} devices in a tensor-parallel group, but the model has {} attention heads and "
        "{} FFN columns (at least one of each per device)",
        source, field, n, config.heads, config.ffn));
  }
  if (s.columns.empty()) return;
  const std::string columns = field.substr(0, field.rfind('.')) + ".columns";
  if (s.columns.size() != s.group.size()) {
    throw PlanError(fmt::format("{}: {}: {} column ranges for {} devices", source, columns,
                                s.columns.size(), s.group.size()));
  }
  std::int64_t next = 0;
  for (std::size_t k = 0; k < s.columns.size(); ++k) {
    const Range& c = s.columns[k];
    if (c.first != next || c.second <= c.first) {
      throw PlanError(fmt::format(
          "{}: {}[{}] is [{}, {}): the members' FFN columns must cover [0, {}) in order, at "
          "least one each",
          source, columns, k, c.first, c.second, config.ffn));
    }
    next = c.second;
  }
  if (next != config.ffn) {
    throw PlanError(fmt::format("{}: {}: the ranges end at {}, the model has {} FFN columns",
                                source, columns, next, config.ffn));
  }
}

}  // namespace

void Pipeline::validate(const ModelConfig& config, int devices, const std::string& source) const {
  const int units = pipeline::unit_count(config.layers);
  std::int64_t expected = 0;
  std::set<int> seen;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const PipelineStage& s = stages[i];
    const std::string field = s.grouped() ? fmt::format("pipeline.stages[{}].devices", i)
                                          : fmt::format("pipeline.stages[{}].device", i);
    for (const int d : s.members()) {
      if (d < 0 || d >= devices) {
        throw PlanError(fmt::format("{}: {}: device {} is not one of the plan's {} devices", source,
                                    field, d, devices));
      }
      if (!seen.insert(d).second) {
        throw PlanError(fmt::format("{}: {}: device {} already runs a stage", source, field, d));
      }
    }
    if (s.grouped()) validate_group(s, config, source, field);
    if (s.units.first != expected) {
      throw PlanError(
          fmt::format("{}: pipeline.stages[{}].units starts at {}, expected {} (stages "
                      "cover the units exactly once, in order)",
                      source, i, s.units.first, expected));
    }
    expected = s.units.second;
  }
  if (expected != units) {
    throw PlanError(
        fmt::format("{}: pipeline stages cover units [0, {}) but the model has {} "
                    "({} layers: embedding, attention and MLP of each layer, head)",
                    source, expected, units, config.layers));
  }
  if (sliced && !config.causal) {
    throw PlanError(
        fmt::format("{}: a {} attends in both directions, so its prompt cannot be "
                    "sliced; plan it with \"sliced\": false",
                    source, config.architecture));
  }
  if (static_cast<std::int64_t>(slices.size()) > config.max_positions) {
    throw PlanError(
        fmt::format("{}: the slice table covers {} tokens, longer than the model's "
                    "context of {}",
                    source, slices.size(), config.max_positions));
  }
}

std::vector<std::int64_t> equal_slices(std::int64_t tokens, std::int64_t count) {
  HUDDLE_CHECK(tokens >= 1 && count >= 1);
  count = std::min(count, tokens);
  std::vector<std::int64_t> out(static_cast<std::size_t>(count), tokens / count);
  for (std::int64_t i = 0; i < tokens % count; ++i) ++out[static_cast<std::size_t>(i)];
  return out;
}

}  // namespace huddle
