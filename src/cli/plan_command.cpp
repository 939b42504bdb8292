#include "cli/plan_command.h"

#include "cli/command.h"

#include "onnx/onnx_model.h"
#include "plan/row_graph.h"
#include "planner/row_planners.h"

#include "core/error.h"
#include "model/model.h"
#include "model/weight_dtype.h"
#include "plan/pipeline_units.h"
#include "planner/planners.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>

namespace huddle::cli {
namespace {

std::string bytes_text(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.1f} kB", b / 1e3);
}

// "embedding, layers 0-3, layer 4 attention": a stage's units in words.
std::string units_text(Range units, std::int64_t layers) {
  return pipeline::describe_units(static_cast<int>(units.first), static_cast<int>(units.second),
                                  layers);
}

// A pipeline plan's stages and the slices of a prompt of `seq_len` tokens.
nlohmann::json pipeline_json(const Plan& plan, std::int64_t seq_len) {
  nlohmann::json stages = nlohmann::json::array();
  for (const PipelineStage& s : plan.pipeline->stages) {
    nlohmann::json stage = {{"device", plan.devices[static_cast<std::size_t>(s.device)]},
                            {"units", {s.units.first, s.units.second}},
                            {"layers", units_text(s.units, plan.model.layers)}};
    if (s.grouped()) {
      // A tensor-parallel island: its devices (the leader is "device") and their shares.
      nlohmann::json names = nlohmann::json::array();
      for (const int d : s.group) names.push_back(plan.devices[static_cast<std::size_t>(d)]);
      stage["devices"] = names;
      stage["shares"] = s.shares;
    }
    stages.push_back(std::move(stage));
  }
  return {{"stages", stages},
          {"sliced", plan.pipeline->sliced},
          {"slices", plan.pipeline->slices_for(seq_len)}};
}

// An imported CNN: a row-split plan (EdgeFlow or a baseline) and the simulator's figures, with
// every other row strategy's prediction for comparison.
std::string row_plan_to_string(const PlanOptions& o, const ClusterSpec& cluster) {
  const auto model = onnx_import::OnnxModel::load(o.model_dir);
  const rows::RowGraph graph = rows::build_row_graph(model.graph());
  const std::string strategy = o.strategy == "auto" ? "edgeflow" : o.strategy;
  const WireFormat wire = parse_wire_option(o.wire).value_or(WireFormat::F32);
  const Plan plan = make_row_split_plan(strategy, graph, cluster, wire);
  if (!o.output.empty()) plan.save(o.output);
  const RowPrediction p = predict_rows(graph, cluster, *plan.rows, wire);
  nlohmann::json others = nlohmann::json::object();
  for (const std::string& s : row_strategies()) {
    others[s] =
        predict_rows(graph, cluster, plan_rows(s, graph, cluster, wire), wire).latency_s * 1e3;
  }
  const auto ranges = plan.rows->layer_ranges(graph, cluster.size());
  std::vector<std::int64_t> rows_total(static_cast<std::size_t>(cluster.size()), 0);
  std::vector<std::int64_t> columns_total = rows_total;
  for (std::size_t l = 0; l < ranges.size(); ++l) {
    auto& total = graph.layers[l].columns ? columns_total : rows_total;
    for (std::size_t d = 0; d < ranges[l].size(); ++d)
      total[d] += ranges[l][d].second - ranges[l][d].first;
  }
  if (o.json) {
    nlohmann::json devices = nlohmann::json::array();
    for (int d = 0; d < cluster.size(); ++d) {
      const auto i = static_cast<std::size_t>(d);
      devices.push_back({{"name", cluster.device(d).name},
                         {"rows", rows_total[i]},
                         {"columns", columns_total[i]},
                         {"busy_ms", p.busy_s[i] * 1e3},
                         {"bytes_sent", p.bytes_sent[i]}});
    }
    const nlohmann::json j = {{"strategy", strategy},
                              {"predicted_ms", p.latency_s * 1e3},
                              {"row_layers", graph.layers.size()},
                              {"devices", devices},
                              {"strategies_ms", others},
                              {"rows", plan.rows->to_json()}};
    return j.dump() + "\n";
  }
  std::string text = fmt::format("strategy {}, {} devices, {} row layers\n", strategy,
                                 cluster.size(), graph.layers.size());
  text += fmt::format("{:<16} {:>10} {:>10} {:>10} {:>12}\n", "device", "rows", "columns",
                      "busy ms", "bytes sent");
  for (int d = 0; d < cluster.size(); ++d) {
    const auto i = static_cast<std::size_t>(d);
    text += fmt::format("{:<16} {:>10} {:>10} {:>10.3f} {:>12}\n", cluster.device(d).name,
                        rows_total[i], columns_total[i], p.busy_s[i] * 1e3, p.bytes_sent[i]);
  }
  text += fmt::format("predicted latency: {:.3f} ms\n", p.latency_s * 1e3);
  for (const auto& [s, ms] : others.items())
    text += fmt::format("  {}: {:.3f} ms\n", s, ms.get<double>());
  return text;
}

// The model's graph with each weight's dtype as `huddle run --weight-dtype` would keep it (the
// planners count weight bytes from the graph), without converting a weight.
Graph graph_with_kept_dtypes(const Model& model, const std::string& weight_dtype) {
  Graph graph = model.graph();
  if (weight_dtype.empty()) return graph;
  LoadOptions options;
  options.weight_dtype = parse_weight_dtype(weight_dtype);
  if (!options.weight_dtype) {
    throw UsageError(
        fmt::format("--weight-dtype {}: expected f32, f16, bf16, q8_0 or q4_0", weight_dtype));
  }
  const std::map<std::string, WeightUse> uses = weight_uses(graph);
  for (std::size_t i = 0; i < graph.values().size(); ++i) {
    const Value& v = graph.values()[i];
    if (v.kind != ValueKind::Weight) continue;
    const Tensor& stored = model.weights().at(v.weight.tensor);
    graph.set_weight_dtype(static_cast<ValueId>(i), kept_dtype(stored.dtype(), stored.shape(),
                                                               uses.at(v.weight.tensor), options));
  }
  return graph;
}

}  // namespace

std::string plan_to_string(const PlanOptions& o) {
  const ClusterSpec cluster = ClusterSpec::load(o.cluster_file);
  if (onnx_import::is_onnx_path(o.model_dir)) return row_plan_to_string(o, cluster);
  if (!o.weight_dtype.empty() && onnx_import::is_onnx_path(o.model_dir))
    throw UsageError("--weight-dtype applies to transformer models, not ONNX CNNs");
  const Model model = Model::load(o.model_dir);
  const Graph graph = graph_with_kept_dtypes(model, o.weight_dtype);
  const CostModel cost(model.config(), graph, parse_wire_option(o.wire).value_or(WireFormat::F32));
  std::optional<double> deadline;
  if (o.deadline_ms) deadline = *o.deadline_ms / 1e3;
  const PlanResult result =
      run_planner(o.strategy, PlanRequest{cost, cluster, o.seq_len, deadline, o.hepti_mode});
  if (!o.output.empty()) {
    std::ofstream out(o.output);
    out << result.document.dump(1) << "\n";
    if (!out) throw Error(fmt::format("{}: cannot write plan", o.output));
  }
  const Prediction& p = result.prediction;
  if (o.json) {
    nlohmann::json devices = nlohmann::json::array();
    for (const DevicePrediction& d : p.devices) {
      devices.push_back(
          {{"name", d.name},
           {"heads", d.heads},
           {"ffn_columns", d.columns},
           {"tokens", d.tokens},
           {"memory_bytes", d.memory.total()},
           {"memory_budget_bytes", cluster.device(cluster.index_of(d.name)).memory_bytes},
           {"predicted_ms", d.busy_s() * 1e3},
           {"compute_ms", d.compute_s * 1e3},
           {"comm_ms", d.comm_s * 1e3},
           {"exposed_comm_ms", d.exposed_comm_s * 1e3}});
      if (result.plan && !result.plan->vocab.empty()) {  // the LM head split by vocabulary
        const auto [vb, ve] = result.plan->vocab[devices.size() - 1];
        devices.back()["head_rows"] = ve - vb;
      }
      if (d.stage >= 0) {
        devices.back()["stage"] = d.stage;
        devices.back()["units"] = {d.units.first, d.units.second};
        devices.back()["layers"] = units_text(d.units, model.config().layers);
      }
    }
    nlohmann::json j = {{"strategy", result.strategy},
                        {"mode", result.mode},
                        {"predicted_ms", p.latency_s * 1e3},
                        {"decode_ms", p.decode_s * 1e3},
                        {"seq_len", o.seq_len},
                        {"runnable", result.plan.has_value()},
                        {"devices", devices},
                        {"notes", result.notes}};
    if (result.plan && result.plan->pipelined())
      j["pipeline"] = pipeline_json(*result.plan, o.seq_len);
    return j.dump() + "\n";
  }
  std::string text =
      fmt::format("strategy {} (mode {}), {} device{}, {} tokens\n", result.strategy, result.mode,
                  p.devices.size(), p.devices.size() == 1 ? "" : "s", o.seq_len);
  text += fmt::format("{:<16} {:>6} {:>11} {:>7} {:>10} {:>10} {:>11} {:>10}\n", "device", "heads",
                      "mlp columns", "tokens", "memory", "budget", "compute ms", "comm ms");
  for (const DevicePrediction& d : p.devices) {
    text += fmt::format("{:<16} {:>6} {:>11} {:>7} {:>10} {:>10} {:>11.3f} {:>10.3f}\n", d.name,
                        d.heads, d.columns, d.tokens, bytes_text(d.memory.total()),
                        bytes_text(cluster.device(cluster.index_of(d.name)).memory_bytes),
                        d.compute_s * 1e3, d.exposed_comm_s * 1e3);
  }
  if (result.plan && !result.plan->vocab.empty()) {
    std::vector<std::string> rows;
    for (std::size_t d = 0; d < result.plan->vocab.size(); ++d) {
      const auto [vb, ve] = result.plan->vocab[d];
      rows.push_back(fmt::format("{} {}", result.plan->devices[d], ve - vb));
    }
    text +=
        fmt::format("LM head split by vocabulary, rows per device: {}\n", fmt::join(rows, ", "));
  }
  if (result.plan && result.plan->pipelined()) {
    const Pipeline& pipe = *result.plan->pipeline;
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      const PipelineStage& stage = pipe.stages[s];
      std::string who = result.plan->devices[static_cast<std::size_t>(stage.device)];
      if (stage.grouped()) {
        std::vector<std::string> members;
        for (std::size_t k = 0; k < stage.group.size(); ++k) {
          members.push_back(fmt::format(
              "{} ({:g})", result.plan->devices[static_cast<std::size_t>(stage.group[k])],
              stage.shares[k]));
        }
        who = fmt::format("island [{}] tensor-parallel", fmt::join(members, ", "));
      }
      text += fmt::format("stage {}: {} runs {}\n", s, who,
                          units_text(stage.units, model.config().layers));
    }
    text += fmt::format("slices of a {}-token prompt: {}\n", o.seq_len,
                        fmt::join(pipe.slices_for(o.seq_len), " "));
  }
  text += fmt::format("predicted latency: {:.3f} ms (prefill of {} tokens)", p.latency_s * 1e3,
                      o.seq_len);
  if (result.plan) text += fmt::format(", {:.3f} ms per decode step", p.decode_s * 1e3);
  text += "\n";
  for (const std::string& note : result.notes) text += "  " + note + "\n";
  if (!result.plan)
    text += fmt::format("note: {} plans cannot run on this runtime yet\n", result.mode);
  return text;
}

void add_plan_command(CLI::App& app) {
  auto options = std::make_shared<PlanOptions>();
  auto deadline = std::make_shared<double>(0);
  CLI::App* cmd =
      app.add_subcommand("plan", "Choose a plan for a model on a cluster and predict its latency");
  cmd->add_option("--cluster", options->cluster_file, "Cluster file (docs/planner.md)")->required();
  cmd->add_option("--model", options->model_dir, "Model directory (or an ONNX CNN)")->required();
  cmd->add_option("--strategy", options->strategy,
                  "auto, galaxy, hepti, hpipe, uniform-slices, gpipe, megatron, sp or local; "
                  "ONNX CNNs: auto (= edgeflow), edgeflow, rows-equal, rows-proportional, tiles")
      ->capture_default_str();
  cmd->add_option("--seq-len,--prompt-len", options->seq_len, "Tokens of the request to plan for")
      ->capture_default_str();
  CLI::Option* deadline_opt =
      cmd->add_option("--deadline-ms", *deadline, "Latency deadline (Hepti's D)");
  cmd->add_option("--hepti-mode", options->hepti_mode,
                  "Force Hepti's mode: ws, 1d or 2d (with --strategy hepti)")
      ->check(CLI::IsMember({"ws", "1d", "2d"}));
  cmd->add_option("-o,--output", options->output, "Write the plan here (for huddle run --plan)");
  cmd->add_option("--weight-dtype", options->weight_dtype,
                  "Plan for matrix weights kept in this dtype (as huddle run --weight-dtype): "
                  "f32, f16, bf16, q8_0, q4_0");
  cmd->add_option("--wire", options->wire, kWireHelp);
  cmd->add_flag("--json", options->json, "Print one JSON object");
  cmd->callback([options, deadline, deadline_opt] {
    if (deadline_opt->count() > 0) options->deadline_ms = *deadline;
    const std::string text = plan_to_string(*options);
    std::fwrite(text.data(), 1, text.size(), stdout);
  });
}

}  // namespace huddle::cli
