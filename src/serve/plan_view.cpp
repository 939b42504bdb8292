#include "serve/plan_view.h"

#include "plan/pipeline_units.h"

#include <fmt/format.h>

#include <numeric>
#include <string>
#include <vector>

namespace huddle::serve {
namespace {

// "0-7" for [0, 8).
std::string span_text(const Range& r) {
  if (r.second - r.first == 1) return std::to_string(r.first);
  return fmt::format("{}-{}", r.first, r.second - 1);
}

std::string layers_text(std::size_t begin, std::size_t end) {
  if (end - begin == 1) return fmt::format("layer {}", begin);
  return fmt::format("layers {}-{}", begin, end - 1);
}

// Device d's part of one layer, in words.
std::string layer_part(const Plan& plan, const LayerPlan& layer, std::size_t d) {
  if (plan.tiled_2d()) {
    const Grid& g = *plan.grid;
    const auto row = static_cast<std::size_t>(g.row_of(static_cast<int>(d)));
    const auto col = static_cast<std::size_t>(g.col_of(static_cast<int>(d)));
    return fmt::format("hidden {} x heads {} of {}, FFN columns {} of {}",
                       span_text(layer.hidden[row]), span_text(layer.heads[col]), plan.model.heads,
                       span_text(layer.columns[col]), plan.model.ffn);
  }
  std::vector<std::string> parts;
  if (layer.attention == BlockSplit::Heads) {
    parts.push_back(fmt::format("heads {} of {}", span_text(layer.heads[d]), plan.model.heads));
  } else {
    parts.push_back("attention over its tokens");
  }
  if (layer.mlp == BlockSplit::Columns) {
    parts.push_back(
        fmt::format("FFN columns {} of {}", span_text(layer.columns[d]), plan.model.ffn));
  } else {
    parts.push_back("MLP over its tokens");
  }
  if (layer.residual == ResidualLayout::Tokens) parts.push_back("its tokens of the residual");
  std::string text;
  for (const std::string& p : parts) text += (text.empty() ? "" : ", ") + p;
  return text;
}

// Device d's layers, consecutive layers held alike on one line.
std::vector<std::string> layer_lines(const Plan& plan, std::size_t d) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  std::string current;
  for (std::size_t l = 0; l <= plan.layers.size(); ++l) {
    const std::string part = l < plan.layers.size() ? layer_part(plan, plan.layers[l], d) : "";
    if (l > 0 && (l == plan.layers.size() || part != current))
      lines.push_back(fmt::format("{}: {}", layers_text(begin, l), current));
    if (l == 0 || part != current) {
      begin = l;
      current = part;
    }
  }
  return lines;
}

std::vector<std::string> holds(const Plan& plan, std::size_t d) {
  if (plan.pipelined()) {
    const int stage = plan.pipeline->stage_of(static_cast<int>(d));
    if (stage < 0) return {"no pipeline stage"};
    const PipelineStage& st = plan.pipeline->stages[static_cast<std::size_t>(stage)];
    const Range units = st.units;
    return {
        fmt::format("stage {}{}: {}", stage,
                    st.grouped() ? fmt::format(" (tensor-parallel group of {})", st.group.size())
                                 : std::string(),
                    pipeline::describe_units(static_cast<int>(units.first),
                                             static_cast<int>(units.second), plan.model.layers))};
  }
  if (plan.op_assigned()) {
    return {fmt::format("operators assigned by provider ({} providers)",
                        plan.assignment->providers.size())};
  }
  if (plan.row_split()) return {"output rows of each row layer (row-split CNN)"};
  std::vector<std::string> lines = layer_lines(plan, d);
  if (plan.tiled_2d()) {
    lines.insert(
        lines.begin(),
        fmt::format("grid cell ({}, {}) of {} x {}", plan.grid->row_of(static_cast<int>(d)),
                    plan.grid->col_of(static_cast<int>(d)), plan.grid->rows, plan.grid->cols));
  }
  return lines;
}

}  // namespace

nlohmann::json plan_view(const Plan& plan) {
  const double total = std::accumulate(plan.token_shares.begin(), plan.token_shares.end(), 0.0);
  nlohmann::json devices = nlohmann::json::array();
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    const double share =
        d < plan.token_shares.size() && total > 0 ? plan.token_shares[d] / total : 0.0;
    devices.push_back({{"name", plan.devices[d]}, {"share", share}, {"holds", holds(plan, d)}});
  }
  return {{"strategy", plan.strategy}, {"layers", plan.model.layers}, {"devices", devices}};
}

nlohmann::json local_plan_view(const std::string& device, std::int64_t layers) {
  nlohmann::json one = {{"name", device},
                        {"share", 1.0},
                        {"holds", {fmt::format("the whole model ({} layers)", layers)}}};
  return {{"strategy", "local"}, {"layers", layers}, {"devices", nlohmann::json::array({one})}};
}

}  // namespace huddle::serve
