// Run time of HPipe's prepare phase (plan_hpipe: stages over every device order, then a slicing
// for every prompt length up to the context) at real model sizes, and the predicted prefill of
// hpipe (with and without the refinement beyond the paper), uniform-slices and gpipe.
//
//   build/bench/planner/bench_hpipe_plan [--runs 3] [--prompt 128]
//
// The cluster: four CPU-like devices of 40, 20, 10 and 5 GFLOP/s with fitted op curves (GEMM at
// the speed, GEMV at a quarter, attention at half, element-wise at an eighth; 5-20 us fixed cost
// per op), 1 Gbit/s links, 0.5 ms latency. Medians and [min, max] over --runs runs.
#include "model/architecture.h"
#include "model/synth.h"
#include "planner/cost_model.h"
#include "planner/hpipe_planner.h"

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
  return 0;
}
