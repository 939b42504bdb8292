#include "plan/plan.h"

#include "core/error.h"
#include "io/json_field.h"
#include "io/strict_json.h"
#include "io/text_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
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
    case BlockSplit::Tiled2D:
      return "2d-tiled";
  }
  return "?";
}

nlohmann::json ranges_json(const std::vector<Range>& ranges) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [b, e] : ranges) j.push_back({b, e});
  return j;
}

using Reader = io::JsonField<PlanError>;

// The [begin, end] pairs of a ranges list.
std::vector<Range> read_ranges(const Reader& list) {
  std::vector<Range> out;
  for (std::size_t i = 0; i < list.array_size(); ++i) {
    const Reader r = list.at(i);
    if (r.array_size() != 2) r.fail("expected [begin, end]");
    const std::int64_t b = r.at(0).integer(), e = r.at(1).integer();
    if (b < 0 || e < b) r.fail(fmt::format("[{}, {}] is not a range", b, e));
    out.emplace_back(b, e);
  }
  return out;
}

// The same, which must have `expected` entries (one per `parts`).
std::vector<Range> read_ranges(const Reader& list, std::size_t expected, const char* parts) {
  const std::vector<Range> out = read_ranges(list);
  if (out.size() != expected)
    list.fail(fmt::format("{} ranges for {} {}", out.size(), expected, parts));
  return out;
}

void check_cover(const std::vector<Range>& ranges, std::int64_t total, int devices,
                 const std::string& what, const std::string& source,
                 const char* parts = "devices") {
  if (static_cast<int>(ranges.size()) != devices) {
    throw PlanError(
        fmt::format("{}: {} has {} ranges for {} {}", source, what, ranges.size(), devices, parts));
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

// 2D tiles need at least one unit per grid row / column.
void check_nonempty(const std::vector<Range>& ranges, const std::string& what,
                    const std::string& source, const char* part) {
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].second <= ranges[i].first) {
      throw PlanError(fmt::format("{}: {}[{}] is empty; every grid {} needs at least one", source,
                                  what, i, part));
    }
  }
}

}  // namespace

std::vector<int> Grid::row_group(int row) const {
  std::vector<int> ranks;
  for (int c = 0; c < cols; ++c) ranks.push_back(rank_at(row, c));
  return ranks;
}

std::vector<int> Grid::column_group(int col) const {
  std::vector<int> ranks;
  for (int r = 0; r < rows; ++r) ranks.push_back(rank_at(r, col));
  return ranks;
}

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
    if (l.attention == BlockSplit::Heads || l.attention == BlockSplit::Tiled2D)
      j["heads"] = ranges_json(l.heads);
    if (l.mlp == BlockSplit::Columns || l.mlp == BlockSplit::Tiled2D)
      j["columns"] = ranges_json(l.columns);
    if (l.attention == BlockSplit::Tiled2D) j["hidden"] = ranges_json(l.hidden);
    layer_list.push_back(std::move(j));
  }
  nlohmann::json device_list = nlohmann::json::array();
  for (const std::string& d : devices) device_list.push_back({{"name", d}});
  nlohmann::json j = {{"version", kPlanVersion},
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
  if (wire != WireFormat::F32) j["wire"] = wire_format_name(wire);
  if (gather_chunks != 1) j["gather_chunks"] = gather_chunks;
  if (!vocab.empty()) j["vocab"] = ranges_json(vocab);
  if (grid) j["grid"] = {{"rows", grid->rows}, {"cols", grid->cols}};
  if (pipeline) j["pipeline"] = pipeline->to_json();
  if (rows) j["rows"] = rows->to_json();
  if (assignment) j["assignment"] = assignment->to_json();
  return j;
}

Plan Plan::from_json(const nlohmann::json& json, const std::string& source) {
  const Reader root(json, source, "plan");
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
  if (root.has("wire")) {
    const Reader w = root.at("wire");
    const std::optional<WireFormat> wire = parse_wire_format(w.str());
    if (!wire) w.fail(fmt::format("unknown wire format (one of {})", wire_format_names()));
    p.wire = *wire;
  }
  if (root.has("gather_chunks")) {
    const Reader c = root.at("gather_chunks");
    const std::int64_t chunks = c.integer();
    if (chunks < 1 || chunks > kMaxGatherChunks)
      c.fail(fmt::format("{} chunks; 1 to {}", chunks, kMaxGatherChunks));
    p.gather_chunks = static_cast<int>(chunks);
  }
  if (root.has("vocab")) p.vocab = read_ranges(root.at("vocab"), p.devices.size(), "devices");
  if (root.has("grid")) {
    const Reader g = root.at("grid");
    const std::int64_t rows = g.at("rows").integer(), cols = g.at("cols").integer();
    if (rows < 1) g.at("rows").fail(fmt::format("{} grid rows; a grid needs at least one", rows));
    if (cols < 1)
      g.at("cols").fail(fmt::format("{} grid columns; a grid needs at least one", cols));
    if (rows * cols != static_cast<std::int64_t>(p.devices.size())) {
      g.fail(fmt::format("a {} x {} grid for {} devices", rows, cols, p.devices.size()));
    }
    p.grid = Grid{static_cast<int>(rows), static_cast<int>(cols)};
  }
  if (root.has("pipeline")) {
    if (p.grid) root.at("pipeline").fail("a plan is either 2d-tiled (\"grid\") or a pipeline");
    p.pipeline = Pipeline::from_json(json.at("pipeline"), source + ": pipeline");
  }
  if (root.has("rows")) {
    if (p.grid || p.pipeline)
      root.at("rows").fail("a row-split plan has no \"grid\" and no \"pipeline\"");
    p.rows = RowPlan::from_json(json.at("rows"), source + ": rows");
  }
  if (root.has("assignment")) {
    if (p.grid || p.pipeline || p.rows)
      root.at("assignment").fail("an assignment plan has no \"grid\", \"pipeline\" or \"rows\"");
    p.assignment = OpAssignment::from_json(json.at("assignment"), source + ": assignment");
    const auto remotes = assign::remote_addresses(p.assignment->parsed_providers());
    if (p.devices.size() != remotes.size() + 1) {
      devices.fail(fmt::format("{} devices; the providers need the primary and {} remote(s)",
                               p.devices.size(), remotes.size()));
    }
    for (std::size_t i = 0; i < remotes.size(); ++i) {
      if (p.devices[i + 1] != remotes[i]) {
        devices.at(i + 1).fail(fmt::format("'{}'; the providers give device {} as '{}'",
                                           p.devices[i + 1], i + 1, remotes[i]));
      }
    }
  }
  if (!p.vocab.empty() && (p.grid || p.pipeline || p.rows || p.assignment)) {
    root.at("vocab").fail(
        "only a layer-split plan splits the head by vocabulary (not a 2d-tiled, pipeline, "
        "row-split or assignment plan)");
  }
  const Reader layers = root.at("layers");
  if (p.assignment && layers.array_size() != 0)
    layers.fail("an assignment plan places ops by \"assignment\"; its \"layers\" must be empty");
  if (p.rows && layers.array_size() != 0)
    layers.fail("a row-split plan places ops by \"rows\"; its \"layers\" must be empty");
  if (p.pipeline && layers.array_size() != 0)
    layers.fail("a pipeline plan runs whole units per stage; its \"layers\" must be empty");
  for (std::size_t i = 0; i < layers.array_size(); ++i) {
    const Reader l = layers.at(i);
    LayerPlan lp;
    const std::string attention = l.at("attention").str();
    if (p.grid) {
      // A 2D-tiled plan: every layer is tiled, attention and MLP, with a replicated residual.
      if (attention != "2d-tiled") {
        l.at("attention")
            .fail(fmt::format(
                "'{}' in a 2D-tiled plan (it has a \"grid\"); every layer must be '2d-tiled'",
                attention));
      }
      if (l.at("mlp").str() != "2d-tiled") {
        l.at("mlp").fail(fmt::format("'{}' in a 2d-tiled layer; the MLP must be '2d-tiled' too",
                                     l.at("mlp").str()));
      }
      if (l.at("residual").str() != "replicated") {
        l.at("residual")
            .fail(fmt::format("'{}' in a 2d-tiled layer; it must be 'replicated'",
                              l.at("residual").str()));
      }
      lp.attention = lp.mlp = BlockSplit::Tiled2D;
      lp.residual = ResidualLayout::Replicated;
      const auto rows = static_cast<std::size_t>(p.grid->rows);
      const auto cols = static_cast<std::size_t>(p.grid->cols);
      lp.hidden = read_ranges(l.at("hidden"), rows, "grid rows");
      lp.heads = read_ranges(l.at("heads"), cols, "grid columns");
      lp.columns = read_ranges(l.at("columns"), cols, "grid columns");
      p.layers.push_back(std::move(lp));
      continue;
    }
    if (attention == "heads") {
      lp.attention = BlockSplit::Heads;
      lp.heads = read_ranges(l.at("heads"));
    } else if (attention == "tokens") {
      lp.attention = BlockSplit::Tokens;
    } else if (attention == "2d-tiled") {
      l.at("attention").fail("'2d-tiled' needs the plan's \"grid\" ({\"rows\": R, \"cols\": C})");
    } else {
      l.at("attention").fail(fmt::format("'{}' is not 'heads', 'tokens' or '2d-tiled'", attention));
    }
    const std::string mlp = l.at("mlp").str();
    if (mlp == "columns") {
      lp.mlp = BlockSplit::Columns;
      lp.columns = read_ranges(l.at("columns"));
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
    j = io::parse_strict_json(*text, path);  // nesting bounded, no duplicate keys
  } catch (const LoadError& e) {
    throw PlanError(e.what());
  }
  return from_json(j, path);
}

void Plan::save(const std::string& path) const {
  std::ofstream out(path);
  out << to_json().dump(1) << "\n";
  if (!out) throw Error(fmt::format("{}: cannot write plan", path));
}

PlanModel PlanModel::of(const rows::RowGraph& graph) {
  PlanModel m;
  m.architecture = "onnx";
  // Row layers only: a plan saved before column layers existed (its head whole on device 0) still
  // fits the model.
  m.layers = std::count_if(graph.layers.begin(), graph.layers.end(),
                           [](const rows::RowLayer& l) { return !l.columns; });
  return m;
}

void Plan::validate(const rows::RowGraph& graph, const std::string& source) const {
  const PlanModel actual = PlanModel::of(graph);
  if (!(rows || assignment) || !(model == actual)) {
    throw PlanError(fmt::format(
        "{}: the plan is for a {} with {} layers; the model is an imported CNN with {} row layers "
        "(a row-split or operator-assignment plan for it is needed)",
        source, model.architecture, model.layers, actual.layers));
  }
  if (assignment) return;  // ops are checked against the graph when lowering (lowering_assign.h)
  rows->validate(graph, num_devices(), source);
}

void Plan::validate(const ModelConfig& config, const std::string& source) const {
  if (rows) {
    throw PlanError(fmt::format("{}: a row-split plan (for an imported CNN) cannot run a {}",
                                source, config.architecture));
  }
  const PlanModel actual = PlanModel::of(config);
  if (!(model == actual)) {
    throw PlanError(
        fmt::format("{}: the plan is for a {} with {} layers, hidden {}, {} heads ({} kv), ffn {}; "
                    "the model is a {} with {} layers, hidden {}, {} heads ({} kv), ffn {}",
                    source, model.architecture, model.layers, model.hidden, model.heads,
                    model.kv_heads, model.ffn, actual.architecture, actual.layers, actual.hidden,
                    actual.heads, actual.kv_heads, actual.ffn));
  }
  if (pipeline) {
    pipeline->validate(config, num_devices(), source);
    return;
  }
  if (assignment) return;  // ops are checked against the graph when lowering (lowering_assign.h)
  if (static_cast<std::int64_t>(layers.size()) != config.layers) {
    throw PlanError(fmt::format("{}: layers has {} entries; the model has {} layers", source,
                                layers.size(), config.layers));
  }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerPlan& l = layers[i];
    if (grid) {
      const auto field = [i](const char* name) { return fmt::format("layers[{}].{}", i, name); };
      if (grid->rows * grid->cols != num_devices() || l.attention != BlockSplit::Tiled2D ||
          l.mlp != BlockSplit::Tiled2D || l.residual != ResidualLayout::Replicated) {
        throw PlanError(
            fmt::format("{}: layers[{}] is not a 2d-tiled layer of a {} x {} grid "
                        "of {} devices",
                        source, i, grid->rows, grid->cols, num_devices()));
      }
      check_cover(l.hidden, config.hidden, grid->rows, field("hidden"), source, "grid rows");
      check_cover(l.heads, config.heads, grid->cols, field("heads"), source, "grid columns");
      check_cover(l.columns, config.ffn, grid->cols, field("columns"), source, "grid columns");
      check_nonempty(l.hidden, field("hidden"), source, "row");
      check_nonempty(l.heads, field("heads"), source, "column");
      check_nonempty(l.columns, field("columns"), source, "column");
      continue;
    }
    if (l.attention == BlockSplit::Tiled2D || l.mlp == BlockSplit::Tiled2D) {
      throw PlanError(
          fmt::format("{}: layers[{}] is 2d-tiled but the plan has no \"grid\"", source, i));
    }
    if (l.attention == BlockSplit::Heads) {
      check_cover(l.heads, config.heads, num_devices(), fmt::format("layers[{}].heads", i), source);
    }
    if (l.mlp == BlockSplit::Columns) {
      check_cover(l.columns, config.ffn, num_devices(), fmt::format("layers[{}].columns", i),
                  source);
    }
  }
  if (!vocab.empty()) {
    if (grid) throw PlanError(fmt::format("{}: a 2d-tiled plan cannot split the vocab", source));
    check_cover(vocab, config.vocab_size, num_devices(), "vocab", source);
  }
}

Plan Plan::aligned_to_blocks(std::int64_t granule, const ModelConfig& config) const {
  Plan out = *this;
  if (granule <= 1) return out;
  const auto align = [&](std::vector<Range>& ranges, const std::string& field) {
    const std::vector<Range> aligned = align_ranges(ranges, granule);
    for (std::size_t d = 0; d < ranges.size(); ++d) {
      if (ranges[d].second > ranges[d].first && aligned[d].second <= aligned[d].first) {
        throw PlanError(
            fmt::format("{}[{}] ({} of them) is less than a block of {} once cuts fall on block "
                        "boundaries (block-quantised weights); use fewer devices or F16 weights",
                        field, d, ranges[d].second - ranges[d].first, granule));
      }
    }
    ranges = aligned;
  };
  if (out.pipeline) {
    // A group's members hold FFN columns by its shares: fixed on block boundaries instead.
    for (std::size_t s = 0; s < out.pipeline->stages.size(); ++s) {
      PipelineStage& stage = out.pipeline->stages[s];
      if (!stage.grouped()) continue;
      std::vector<Range> columns = stage.member_columns(config.ffn);
      align(columns, fmt::format("pipeline.stages[{}].columns", s));
      stage.columns = std::move(columns);
    }
  }
  for (std::size_t i = 0; i < out.layers.size(); ++i) {
    LayerPlan& l = out.layers[i];
    if (l.mlp == BlockSplit::Columns || l.mlp == BlockSplit::Tiled2D)
      align(l.columns, fmt::format("layers[{}].columns", i));
    if (l.attention == BlockSplit::Tiled2D) align(l.hidden, fmt::format("layers[{}].hidden", i));
  }
  return out;
}

}  // namespace huddle
