#include "plan/pipeline.h"

#include "core/error.h"
#include "io/json_field.h"
#include "model/model_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <set>

namespace huddle {
namespace {

using Reader = io::JsonField<PlanError>;

}  // namespace

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
    if (stages[s].device == device) return static_cast<int>(s);
  }
  return -1;
}

nlohmann::json Pipeline::to_json() const {
  nlohmann::json stage_list = nlohmann::json::array();
  for (const PipelineStage& s : stages) {
    stage_list.push_back({{"device", s.device}, {"units", {s.units.first, s.units.second}}});
  }
  nlohmann::json j = {{"stages", stage_list}, {"sliced", sliced}};
  if (sliced) j["slices"] = slices;
  return j;
}

Pipeline Pipeline::from_json(const nlohmann::json& json, const std::string& source) {
  const Reader root(json, source, "pipeline");
  Pipeline p;
  const Reader stages = root.at("stages");
  for (std::size_t i = 0; i < stages.array_size(); ++i) {
    const Reader s = stages.at(i);
    PipelineStage stage;
    const std::int64_t device = s.at("device").integer();
    if (device < 0 || device > 1 << 16) s.at("device").fail(fmt::format("{} is no device", device));
    stage.device = static_cast<int>(device);
    const Reader units = s.at("units");
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
  const Reader table = root.at("slices");
  for (std::size_t n = 1; n <= table.array_size(); ++n) {
    const Reader entry = table.at(n - 1);
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

void Pipeline::validate(const ModelConfig& config, int devices, const std::string& source) const {
  const int units = pipeline::unit_count(config.layers);
  std::int64_t expected = 0;
  std::set<int> seen;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const PipelineStage& s = stages[i];
    if (s.device < 0 || s.device >= devices) {
      throw PlanError(
          fmt::format("{}: pipeline.stages[{}].device {} is not one of the plan's {} "
                      "devices",
                      source, i, s.device, devices));
    }
    if (!seen.insert(s.device).second) {
      throw PlanError(fmt::format("{}: pipeline.stages[{}]: device {} already runs a stage", source,
                                  i, s.device));
    }
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
