// Run time of HPipe's prepare phase (plan_hpipe: stages over every device order, then a slicing
// for every prompt length up to the context) at real model sizes, and the predicted prefill of
// hpipe (with and without the refinement beyond the paper), uniform-slices and gpipe.
//
//   build/bench/planner/bench_hpipe_plan [--runs 3] [--prompt 128] [--predictions-only]
//
// Then, for the two-island scenario (two 40 GFLOP/s devices on 1 Gbit/s, two 20 GFLOP/s
// ones on 1 Gbit/s, 1000 / 100 / 50 / 10 Mbit/s between the islands, 1 ms latency) and the same
// with 10 Gbit/s islands, the predicted prefill of hpipe (fast islands may become tensor-parallel
// stages), hpipe without islands, uniform-slices, gpipe and galaxy (the cost model's figures, not
// measured). --predictions-only skips the run-time part.
//
// The cluster: four CPU-like devices of 40, 20, 10 and 5 GFLOP/s with fitted op curves (GEMM at
// the speed, GEMV at a quarter, attention at half, element-wise at an eighth; 5-20 us fixed cost
// per op), 1 Gbit/s links, 0.5 ms latency. Medians and [min, max] over --runs runs.
#include "model/architecture.h"
#include "model/synth.h"
#include "planner/cost_model.h"
#include "planner/hpipe_planner.h"
#include "planner/planners.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace huddle;

DeviceSpec cpu(const std::string& name, double gflops) {
  DeviceSpec d;
  d.name = name;
  d.gflops = d.attention_gflops = d.mlp_gflops = d.connection_gflops = gflops;
  d.memory_bytes = 16'000'000'000;
  OpCurves c;
  c.gemm = {gflops, 20e-6};
  c.gemv = {gflops / 4, 10e-6};
  c.attention = {gflops / 2, 15e-6};
  c.elementwise = {gflops / 8, 5e-6};
  d.curves = c;
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"HPipe planner run time"};
  int runs = 3;
  std::int64_t prompt = 128;
  app.add_option("--runs", runs, "runs per case");
  app.add_option("--prompt", prompt, "prompt length of the predictions");
  bool predictions_only = false;
  app.add_flag("--predictions-only", predictions_only, "only the two-island predictions");
  CLI11_PARSE(app, argc, argv);
  const ClusterSpec cluster =
      ClusterSpec::uniform({cpu("L", 40), cpu("M", 20), cpu("S", 10), cpu("XS", 5)}, {1e9, 0.0005});
  struct Case {
    const char* arch;
    const char* preset;
    std::int64_t context;
  };
  for (const Case& c : {Case{"gpt2", "gpt2", 1024}, Case{"llama", "llama-1b", 1024},
                        Case{"llama", "llama-1b", 2048}}) {
    if (predictions_only) break;
    const Architecture& arch = *find_architecture(c.arch);
    const ModelConfig config = find_preset(arch, c.preset);
    const Graph graph = arch.build_graph(config, [](const std::string&) { return true; });
    const CostModel cost(config, graph);
    std::vector<double> seconds;
    PipelineSchedule s;
    for (int r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      s = plan_hpipe(cost, cluster, prompt, c.context);
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf("%-9s context %5lld: plan_hpipe %.3f s [%.3f, %.3f], %zu stages, %s\n", c.preset,
                static_cast<long long>(c.context), seconds[seconds.size() / 2], seconds.front(),
                seconds.back(), s.stage_devices.size(), s.note.c_str());
    HpipeOptions pure;
    pure.refine = false;
    const PipelineSchedule p = plan_hpipe(cost, cluster, prompt, c.context, pure);
    const PipelineSchedule u = plan_uniform_slices(cost, cluster, prompt, c.context);
    const PipelineSchedule g = plan_gpipe(cost, cluster, prompt, c.context);
    const auto& sl = s.slices[static_cast<std::size_t>(prompt - 1)];
    std::printf(
        "  prompt %lld: predicted prefill hpipe %.1f ms (%zu slices), paper-only %.1f ms (%zu), "
        "uniform-slices %.1f ms (%zu), gpipe %.1f ms; decode %.2f ms\n",
        static_cast<long long>(prompt), s.predicted_prefill_s * 1e3, sl.size(),
        p.predicted_prefill_s * 1e3, p.slices[static_cast<std::size_t>(prompt - 1)].size(),
        u.predicted_prefill_s * 1e3, u.slices[static_cast<std::size_t>(prompt - 1)].size(),
        g.predicted_prefill_s * 1e3, s.predicted_decode_s * 1e3);
  }
  std::printf("\ntwo islands, prompt %lld, predicted prefill ms:\n",
              static_cast<long long>(prompt));
  std::printf("%-9s %9s %9s %9s %9s %9s %9s %9s %s\n", "model", "island", "between", "hpipe",
              "no-island", "uniform", "gpipe", "galaxy", "hpipe's island stages");
  for (const auto& [arch_name, preset] :
       {std::pair<const char*, const char*>{"gpt2", "gpt2"}, {"llama", "llama-1b"}}) {
    const Architecture& arch = *find_architecture(arch_name);
    const ModelConfig config = find_preset(arch, preset);
    const Graph graph = arch.build_graph(config, [](const std::string&) { return true; });
    const CostModel cost(config, graph);
    for (const double inner : {1000.0, 10000.0}) {
      for (const double mbit : {1000.0, 100.0, 50.0, 10.0}) {
        ClusterSpec islands = ClusterSpec::uniform(
            {cpu("A1", 40), cpu("A2", 40), cpu("B1", 20), cpu("B2", 20)}, {mbit * 1e6, 0.001});
        islands.set_link(0, 1, {inner * 1e6, 0.0005});
        islands.set_link(2, 3, {inner * 1e6, 0.0005});
        const std::int64_t context = std::max<std::int64_t>(prompt, 512);
        const PipelineSchedule hs = plan_hpipe(cost, islands, prompt, context);
        HpipeOptions plain;
        plain.islands = false;
        const double p = plan_hpipe(cost, islands, prompt, context, plain).predicted_prefill_s;
        const double u = plan_uniform_slices(cost, islands, prompt, context).predicted_prefill_s;
        const double g = plan_gpipe(cost, islands, prompt, context).predicted_prefill_s;
        const PlanRequest request{cost, islands, prompt, std::nullopt};
        const double gx = run_planner("galaxy", request).prediction.latency_s;
        std::string groups;
        for (std::size_t i = 0; i < hs.stage_devices.size(); ++i) {
          const StageGroup sg = hs.group(i);
          if (sg.single()) continue;
          groups += groups.empty() ? "" : " ";
          for (std::size_t k = 0; k < sg.members.size(); ++k)
            groups += (k ? "+" : "") + islands.device(sg.members[k]).name;
        }
        std::printf("%-9s %9.0f %9.0f %9.1f %9.1f %9.1f %9.1f %9.1f %s\n", preset, inner, mbit,
                    hs.predicted_prefill_s * 1e3, p * 1e3, u * 1e3, g * 1e3, gx * 1e3,
                    groups.empty() ? "-" : groups.c_str());
      }
    }
  }
  return 0;
}
