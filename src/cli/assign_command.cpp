#include "cli/assign_command.h"

#include "core/error.h"
#include "model/model.h"
#include "net/key.h"
#include "onnx/onnx_model.h"
#include "planner/assign_planner.h"
#include "runtime/assign_cnn.h"
#include "runtime/assign_profiler.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

namespace huddle::cli {

namespace {

// What `huddle assign` prints for outcome `r` of `graph` (and the baseline plans it writes).
std::string outcome_text(const AssignOptions& o, const std::vector<assign::Provider>& providers,
                         const assign::AssignOutcome& r, const Graph& graph, bool cnn) {
  if (!o.output.empty()) r.plan.save(o.output);

  nlohmann::json per_provider = nlohmann::json::object();
  for (const assign::Provider& p : providers) per_provider[p.spec] = 0;
  for (int p : r.optimal.assignment) {
    per_provider[providers[static_cast<std::size_t>(p)].spec] =
        per_provider[providers[static_cast<std::size_t>(p)].spec].get<int>() + 1;
  }
  // The DA classes by index, and each profiling run's prediction term by term, so a prediction
  // that misses its run can be traced to the nodes of one provider or the crossings of a class.
  const auto spec_of = [&](int provider) {
    return provider == assign::kEnd ? std::string("end")
                                    : providers[static_cast<std::size_t>(provider)].spec;
  };
  nlohmann::json da_classes = nlohmann::json::array();
  for (std::size_t c = 0; c < r.da_keys.size(); ++c) {
    const assign::DaKey& k = r.da_keys[c];
    da_classes.push_back({{"from", spec_of(k.src)},
                          {"to", spec_of(k.dst)},
                          {"bytes", k.bytes},
                          {"cost_ms", c < r.costs.da.size() ? r.costs.da[c] * 1e3 : 0.0}});
  }
  nlohmann::json runs = nlohmann::json::array();
  for (const assign::MeasuredRun& m : r.profiled) {
    nlohmann::json nodes = nlohmann::json::object();
    for (std::size_t p = 0; p < m.predicted.node_by_provider.size(); ++p)
      nodes[providers[p].spec] = m.predicted.node_by_provider[p] * 1e3;
    nlohmann::json crossings = nlohmann::json::array();
    for (std::size_t c = 0; c < m.predicted.crossings_by_da.size(); ++c) {
      if (m.predicted.crossings_by_da[c] > 0) {
        crossings.push_back({{"class", c},
                             {"count", m.predicted.crossings_by_da[c]},
                             {"ms", m.predicted.edges_by_da[c] * 1e3}});
      }
    }
    runs.push_back({{"measured_ms", m.measured_s * 1e3},
                    {"predicted_ms", m.predicted_s * 1e3},
                    {"nodes_ms", nodes},
                    {"crossings", crossings},
                    {"fixed_ms", m.predicted.fixed * 1e3}});
  }
  nlohmann::json baselines = nlohmann::json::array();
  if (!o.baseline_plans_dir.empty()) std::filesystem::create_directories(o.baseline_plans_dir);
  for (std::size_t i = 0; i < r.baselines.size(); ++i) {
    const auto& [b, predicted] = r.baselines[i];
    nlohmann::json entry = {{"name", b.name}, {"predicted_ms", predicted * 1e3}};
    if (!o.baseline_plans_dir.empty()) {
      const std::filesystem::path path =
          std::filesystem::path(o.baseline_plans_dir) / fmt::format("baseline-{}.json", i);
      assign::trimmed_assignment_plan(r.plan.model, graph, providers, b.assignment).save(path);
      entry["plan"] = path.string();
    }
    baselines.push_back(std::move(entry));
  }
  // Each device's fitted fixed cost per run that uses it (the primary's is in the overhead).
  const std::vector<std::string> addresses = assign::remote_addresses(providers);
  nlohmann::json devices = nlohmann::json::array();
  for (std::size_t d = 0; d <= addresses.size(); ++d) {
    const bool identified = d < r.fixed_identified.size() && r.fixed_identified[d];
    devices.push_back({{"name", d == 0 ? "primary" : addresses[d - 1]},
                       {"fixed_ms", r.costs.fixed(static_cast<int>(d)) * 1e3},
                       {"fixed_identified", identified}});
  }
  if (o.json) {
    nlohmann::json j = {
        {"model", o.model_dir},
        {"providers", assign::provider_specs(providers)},
        {"dcg", {{"nodes", r.dcg_nodes}, {"edges", r.dcg_edges}, {"da_edges", r.da_edges}}},
        {"profiling_runs", r.node_runs + r.edge_runs},
        {"node_runs", r.node_runs},
        {"edge_runs", r.edge_runs},
        {"da_classes", da_classes},
        {"runs", runs},
        {"optimal",
         {{"predicted_ms", r.optimal.cost * 1e3},
          {"exact", r.exact},
          {"ops_per_provider", per_provider}}},
        {"baselines", baselines},
        {"overhead_ms", r.costs.overhead * 1e3},
        {"devices", devices}};
    if (!cnn) j["prompt_len"] = o.prompt_len;
    return j.dump(1) + "\n";
  }
  std::string text = fmt::format(
      "DCG: {} nodes, {} edges, {} DA edges ({})\n"
      "profiling runs: {} ({} node runs + {} edge runs)\n",
      r.dcg_nodes, r.dcg_edges, r.da_edges,
      cnn ? "one run of the CNN" : fmt::format("prefill of {} tokens", o.prompt_len),
      r.node_runs + r.edge_runs, r.node_runs, r.edge_runs);
  for (std::size_t i = 0; i < r.profiled.size(); ++i) {
    text += fmt::format("  run {}: measured {:.3f} ms, predicted {:.3f} ms\n", i,
                        r.profiled[i].measured_s * 1e3, r.profiled[i].predicted_s * 1e3);
  }
  text += fmt::format("overhead: {:.3f} ms per run\n", r.costs.overhead * 1e3);
  for (std::size_t d = 1; d <= addresses.size(); ++d) {
    text += fmt::format("device {}: fixed {:.3f} ms per run that uses it{}\n", addresses[d - 1],
                        r.costs.fixed(static_cast<int>(d)) * 1e3,
                        devices[d]["fixed_identified"].get<bool>()
                            ? ""
                            : " (every profiling run used it: left in the overhead)");
  }
  text +=
      fmt::format("optimal: predicted {:.3f} ms ({}), ops per provider {}\n", r.optimal.cost * 1e3,
                  r.exact ? "exact" : "assembly-line heuristic", per_provider.dump());
  for (const auto& [b, predicted] : r.baselines) {
    text += fmt::format("baseline {}: predicted {:.3f} ms\n", b.name, predicted * 1e3);
  }
  if (!o.output.empty())
    text += fmt::format("wrote {} (huddle run --plan {})\n", o.output, o.output);
  return text;
}

}  // namespace

std::string assign_to_string(const AssignOptions& o) {
  const std::vector<assign::Provider> providers = assign::parse_providers(o.providers);
  if (o.repeats < 1) throw UsageError(fmt::format("--repeats {} < 1", o.repeats));
  std::optional<net::PresharedKey> key;
  if (!o.key_file.empty()) key = net::load_key_file(o.key_file);
  if (!assign::remote_addresses(providers).empty() && !key) {
    throw UsageError("a remote provider needs --key-file");
  }
  if (onnx_import::is_onnx_path(o.model_dir)) {
    // An imported CNN: one run of its inputs (deterministic values of their shapes) per sample.
    const auto model = onnx_import::OnnxModel::load(o.model_dir);
    const assign::AssignOutcome r = assign::plan_cnn_assignment(
        model, providers, assign::profiling_inputs(model), o.repeats, key ? &*key : nullptr);
    return outcome_text(o, providers, r, model.graph(), /*cnn=*/true);
  }
  const Model model = Model::load(o.model_dir);
  const assign::AssignOutcome r =
      assign::plan_assignment(model, providers, o.prompt_len, o.repeats, key ? &*key : nullptr);
  return outcome_text(o, providers, r, model.graph(), /*cnn=*/false);
}

void add_assign_command(CLI::App& app) {
  auto options = std::make_shared<AssignOptions>();
  CLI::App* cmd = app.add_subcommand(
      "assign", "Profile execution providers with the fewest runs and assign each op to one");
  cmd->add_option("--model", options->model_dir, "Model directory, or an ONNX CNN (MODEL.onnx)")
      ->required();
  cmd->add_option("--providers", options->providers,
                  "Providers in priority order: cpu1, cpuN, remote:HOST:PORT[:kind,...]")
      ->required();
  cmd->add_option("--key-file", options->key_file, "Cluster key (remote providers)");
  cmd->add_option("--prompt-len", options->prompt_len, "Tokens of the prefill to plan for")
      ->capture_default_str();
  cmd->add_option("--repeats", options->repeats, "Timed repeats of each profiling run")
      ->capture_default_str();
  cmd->add_option("-o,--output", options->output, "Write the plan here (for huddle run --plan)");
  cmd->add_option("--baseline-plans", options->baseline_plans_dir,
                  "Write every baseline's plan to DIR/baseline-<i>.json (benchmarks run them)");
  cmd->add_flag("--json", options->json, "Print one JSON object");
  cmd->callback([options] {
    const std::string text = assign_to_string(*options);
    std::fwrite(text.data(), 1, text.size(), stdout);
  });
}

}  // namespace huddle::cli
