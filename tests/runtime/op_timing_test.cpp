// Per-op timing: the executor's wall and process-CPU clocks, trace spans that carry both across
// the wire, and the assignment profiler's charge of an op (its CPU time scaled to its provider's
// throttling) against hand-made samples.
#include "core/error.h"
#include "model/model.h"
#include "planner/profiling_paths.h"
#include "runtime/assign_profiler.h"
#include "runtime/executor.h"
#include "runtime/trace.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <vector>

namespace huddle {
namespace {

using assign::charged_seconds;
using assign::OpSample;

TEST(ChargedSeconds, UnthrottledSamplesCostTheirWallTime) {
  // cpu1: CPU time equals wall time; cpuN: two threads, CPU time twice the wall time.
  const std::vector<OpSample> samples = {
      {0, 0.004, 0.004}, {0, 0.001, 0.001}, {1, 0.002, 0.004}, {1, 0.003, 0.006}};
  const std::vector<double> charged = charged_seconds(samples, 2);
  ASSERT_EQ(charged.size(), samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i)
    EXPECT_NEAR(charged[i], samples[i].wall_s, 1e-12) << i;
}

TEST(ChargedSeconds, AThrottleStallIsSpreadOverTheProvidersOpsByCpuTime) {
  // A quarter-core device: 40 ops of 1 ms CPU each; one of them met the end of the quota and
  // waited 120 ms. The median wall time (1 ms) would miss the stall; the charge keeps the total
  // (160 ms) and gives every op its CPU share of it (4 ms). The other provider is untouched.
  std::vector<OpSample> samples;
  for (int i = 0; i < 40; ++i) samples.push_back({0, i == 17 ? 0.121 : 0.001, 0.001});
  samples.push_back({1, 0.005, 0.005});
  const std::vector<double> charged = charged_seconds(samples, 2);
  double total = 0;
  for (int i = 0; i < 40; ++i) {
    EXPECT_NEAR(charged[static_cast<std::size_t>(i)], 0.004, 1e-12) << i;
    total += charged[static_cast<std::size_t>(i)];
  }
  EXPECT_NEAR(total, 0.160, 1e-12);
  EXPECT_NEAR(charged.back(), 0.005, 1e-12);
}

TEST(ChargedSeconds, SamplesWithoutCpuTimeCostTheirWallTime) {
  const std::vector<OpSample> samples = {{0, 0.010, -1}, {0, 0.030, 0.010}, {1, 0.002, -1}};
  const std::vector<double> charged = charged_seconds(samples, 2);
  EXPECT_NEAR(charged[0], 0.010, 1e-12);
  EXPECT_NEAR(charged[1], 0.030, 1e-12);  // the provider's only CPU-timed sample: its own ratio
  EXPECT_NEAR(charged[2], 0.002, 1e-12);
}

TEST(FitOpOverheads, RecoversEachDevicesPerOpCostFromTheRunsGaps) {
  // Three devices; run r puts ops_on[r][d] ops on device d; the gaps follow 2 ms, 0.5 ms and
  // 0 ms per op exactly.
  const std::vector<std::vector<double>> ops_on = {
      {150, 0, 0}, {0, 150, 0}, {2, 148, 0}, {75, 50, 25}, {10, 0, 140}};
  const std::vector<double> per_op = {0.002, 0.0005, 0.0};
  std::vector<double> gaps;
  for (const auto& row : ops_on) {
    gaps.push_back(row[0] * per_op[0] + row[1] * per_op[1] + row[2] * per_op[2]);
  }
  const std::vector<double> fit = assign::fit_op_overheads(ops_on, gaps);
  ASSERT_EQ(fit.size(), 3u);
  for (std::size_t d = 0; d < 3; ++d) EXPECT_NEAR(fit[d], per_op[d], 1e-9) << d;
}

TEST(FitOpOverheads, NegativeCostsArePinnedToZeroAndUnusedDevicesCostNothing) {
  // Device 1's runs came in under their prediction (negative gaps): its cost is 0, not
  // negative, and device 0 keeps what its own runs show. Device 2 ran nothing.
  const std::vector<std::vector<double>> ops_on = {{100, 0, 0}, {0, 100, 0}, {100, 0, 0}};
  const std::vector<double> gaps = {0.1, -0.05, 0.1};
  const std::vector<double> fit = assign::fit_op_overheads(ops_on, gaps);
  EXPECT_NEAR(fit[0], 0.001, 1e-9);
  EXPECT_EQ(fit[1], 0.0);
  EXPECT_EQ(fit[2], 0.0);
}

// Gaps of runs that place ops_on[r][d] ops on device d under per-op costs, a fixed cost per run
// for every remote device used, and a constant every run pays.
std::vector<double> synthetic_gaps(const std::vector<std::vector<double>>& ops_on,
                                   const std::vector<double>& per_op,
                                   const std::vector<double>& fixed, double constant) {
  std::vector<double> gaps;
  for (const auto& row : ops_on) {
    double g = constant;
    for (std::size_t d = 0; d < row.size(); ++d) {
      g += row[d] * per_op[d] + (row[d] > 0 ? fixed[d] : 0.0);
    }
    gaps.push_back(g);
  }
  return gaps;
}

TEST(FitRunOverheads, RecoversEachRemotesFixedCostPerRun) {
  // 40 ops; device 0 is the process, devices 1 and 2 remotes costing 5 ms and 2 ms per run that
  // uses them; every run also pays 1 ms, which the per-op costs carry (40 ops each: 1/40 ms).
  // The first run is local only, as a node run of cpu1 or cpuN is.
  const std::vector<std::vector<double>> ops_on = {
      {40, 0, 0}, {2, 38, 0}, {1, 0, 39}, {20, 20, 0}, {10, 5, 25}, {30, 0, 10}, {5, 35, 0}};
  const std::vector<double> per_op = {0.0005, 0.0002, 0.0003}, fixed = {0, 0.005, 0.002};
  const double constant = 0.001;
  const assign::RunOverheads fit =
      assign::fit_run_overheads(ops_on, synthetic_gaps(ops_on, per_op, fixed, constant));
  ASSERT_EQ(fit.fixed.size(), 3u);
  for (std::size_t d = 0; d < 3; ++d) {
    EXPECT_NEAR(fit.per_op[d], per_op[d] + constant / 40, 1e-9) << d;
    EXPECT_NEAR(fit.fixed[d], fixed[d], 1e-9) << d;
  }
  EXPECT_EQ(fit.identified, (std::vector<bool>{false, true, true}));
  // The per-op fit alone cannot express a cost per run: its fit misses some runs by much more.
  const std::vector<double> gaps = synthetic_gaps(ops_on, per_op, fixed, constant);
  const std::vector<double> only_per_op = assign::fit_op_overheads(ops_on, gaps);
  double worst = 0;
  for (std::size_t r = 0; r < ops_on.size(); ++r) {
    double predicted = 0;
    for (std::size_t d = 0; d < 3; ++d) predicted += ops_on[r][d] * only_per_op[d];
    worst = std::max(worst, std::abs(predicted - gaps[r]));
  }
  EXPECT_GT(worst, 0.001);
}

TEST(FitRunOverheads, ARemoteEveryRunUsesKeepsItsFixedCostInTheConstant) {
  // Every run uses device 1: its 4 ms cannot be told from the constant. It gets 0, unidentified,
  // and the per-op costs (which sum to the constant per run) still reproduce every gap. A
  // negative fixed cost (runs through the remote came in faster) is pinned to 0.
  const std::vector<std::vector<double>> ops_on = {{30, 10}, {10, 30}, {20, 20}, {1, 39}};
  const std::vector<double> per_op = {0.0005, 0.0002}, fixed = {0, 0.004};
  const std::vector<double> gaps = synthetic_gaps(ops_on, per_op, fixed, 0.0);
  const assign::RunOverheads fit = assign::fit_run_overheads(ops_on, gaps);
  EXPECT_EQ(fit.fixed[1], 0.0);
  EXPECT_FALSE(fit.identified[1]);
  for (std::size_t r = 0; r < ops_on.size(); ++r) {
    EXPECT_NEAR(ops_on[r][0] * fit.per_op[0] + ops_on[r][1] * fit.per_op[1], gaps[r], 1e-9) << r;
  }
  const std::vector<std::vector<double>> mixed = {{40, 0}, {10, 30}, {20, 20}, {40, 0}};
  const assign::RunOverheads faster =
      assign::fit_run_overheads(mixed, synthetic_gaps(mixed, per_op, {0, -0.004}, 0.0));
  EXPECT_TRUE(faster.identified[1]);
  EXPECT_EQ(faster.fixed[1], 0.0);
}

// Synthetic forwards of gpt2-tiny's profiling runs over cpuN and a remote: every op takes
// `local_s` in process and `remote_s` on the remote, each value crossing devices is received in
// 10 us, and a forward's wall time is the sum of its ops and receives plus `fixed_s` when it
// uses the remote and 0.2 ms every forward pays.
std::vector<std::vector<assign::Forward>> synthetic_forwards(
    const Graph& graph, const assign::Dcg& dcg, const std::vector<assign::Assignment>& runs,
    double local_s, double remote_s, double fixed_s) {
  const assign::AssignProblem& p = dcg.problem();
  std::vector<std::vector<assign::Forward>> out;
  for (const assign::Assignment& run : runs) {
    auto device = [&](int op) { return p.provider_device[assign::at(run[assign::at(op)])]; };
    assign::Forward f;
    f.devices.resize(2);
    bool remote = false;
    for (int op = 0; op < p.num_ops(); ++op) {
      const double t = device(op) == 0 ? local_s : remote_s;
      f.devices[assign::at(device(op))].push_back({graph.ops()[assign::at(op)].name, t, -1});
      f.wall_s += t;
      remote = remote || device(op) != 0;
    }
    std::vector<std::pair<int, int>> received;  // (producer, receiving device)
    for (const assign::TensorEdge& e : p.edges) {
      const int to = e.to == assign::kEnd ? 0 : device(e.to);
      if (to == device(e.from) ||
          std::find(received.begin(), received.end(), std::pair{e.from, to}) != received.end())
        continue;
      received.emplace_back(e.from, to);
      const std::string value = graph.value(graph.ops()[assign::at(e.from)].output).name;
      f.devices[assign::at(to)].push_back({value + "@recv", 10e-6, -1});
      f.wall_s += 10e-6;
    }
    f.wall_s += 0.2e-3 + (remote ? fixed_s : 0.0);
    out.push_back({f, f, f});
  }
  return out;
}

TEST(FitRunOverheads, TheProfilerChargesARemotesFixedCostAndTheDpWeighsIt) {
  // The remote runs each op 50 us faster: 2 ms over gpt2-tiny's 40 ops it can run. A 5 ms
  // fixed cost per run outweighs that (every op stays in process), a 1 ms one does not.
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const std::vector<assign::Provider> providers = assign::parse_providers("cpuN,remote:h:7001");
  const assign::Dcg dcg(assign::make_problem(model.graph(), providers, 16));
  const std::vector<assign::Assignment> runs = assign::profiling_paths(dcg).all();
  for (const double fixed_s : {5e-3, 1e-3}) {
    std::vector<assign::MeasuredRun> measured;
    const assign::Costs costs = assign::costs_from_forwards(
        model.graph(), dcg, providers, runs,
        synthetic_forwards(model.graph(), dcg, runs, 100e-6, 50e-6, fixed_s), &measured);
    ASSERT_EQ(costs.device_fixed.size(), 2u);
    EXPECT_NEAR(costs.device_fixed[1], fixed_s, 0.1e-3) << fixed_s;
    for (const assign::MeasuredRun& m : measured) {
      EXPECT_NEAR(m.predicted_s, m.measured_s, 0.1e-3) << fixed_s;
    }
    const assign::DpResult best = assign::optimal_assignment(dcg, costs);
    const auto on_remote = std::count(best.assignment.begin(), best.assignment.end(), 1);
    if (fixed_s > 2e-3) {
      EXPECT_EQ(on_remote, 0);
    } else {
      EXPECT_EQ(on_remote, 40);
    }
  }
}

TEST(OpTiming, TheExecutorReadsTheProcessCpuClockOnlyWhenAsked) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  const std::vector<std::int32_t> ids = {5, 6, 7, 8};
  for (const bool measure : {false, true}) {
    std::vector<OpTime> times;
    executor.set_observer([&](const Op&, const Tensor&, const OpTime& t) { times.push_back(t); },
                          measure);
    executor.reset();
    (void)executor.forward(ids, /*all_rows=*/false);
    ASSERT_FALSE(times.empty());
    std::chrono::nanoseconds cpu_total{0};
    for (const OpTime& t : times) {
      EXPECT_GE(t.wall.count(), 0);
      if (measure) {
        EXPECT_GE(t.cpu.count(), 0);
        cpu_total += t.cpu;
      } else {
        EXPECT_EQ(t.cpu.count(), -1);
      }
    }
    if (measure) {
      EXPECT_GT(cpu_total.count(), 0);
    }
  }
}

TEST(OpTiming, SpansCarryCpuTimeThroughJsonAndOlderSpansReadAsUnmeasured) {
  TraceRecorder recorder;
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  executor.set_observer(recorder.observer(), /*measure_cpu=*/true);
  (void)executor.forward(std::vector<std::int32_t>{1, 2, 3}, /*all_rows=*/false);
  const std::vector<Span> back = TraceRecorder::from_json(recorder.to_json());
  ASSERT_EQ(back.size(), recorder.spans().size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].name, recorder.spans()[i].name);
    EXPECT_GE(back[i].cpu_us, 0);
    EXPECT_DOUBLE_EQ(back[i].cpu_us, recorder.spans()[i].cpu_us);
  }
  const auto old = nlohmann::json::parse(R"([["a", "compute", 0, 1.5, 2.5, 4]])");
  EXPECT_EQ(TraceRecorder::from_json(old).at(0).cpu_us, -1);
  EXPECT_THROW(
      (void)TraceRecorder::from_json(nlohmann::json::parse(R"([["a","compute",0,1,2,4,"x"]])")),
      TransportError);
  EXPECT_THROW(
      (void)TraceRecorder::from_json(nlohmann::json::parse(R"([["a","compute",0,1,2,4,5,6]])")),
      TransportError);
}

// Profiling runs are timed in passes: every run once per pass, so the host's slow minutes fall on
// every run alike; each run gets one forward per pass, in pass order.
TEST(OpTiming, ProfilingRunsAreTimedInPassesOverEveryRun) {
  std::vector<std::size_t> order;
  const auto forwards = assign::time_runs_in_passes(3, 2, [&](std::size_t r) {
    order.push_back(r);
    assign::Forward f;
    f.wall_s = static_cast<double>(order.size());
    return std::vector<assign::Forward>{f};
  });
  EXPECT_EQ(order, (std::vector<std::size_t>{0, 1, 2, 0, 1, 2}));
  ASSERT_EQ(forwards.size(), 3u);
  for (std::size_t r = 0; r < 3; ++r) {
    ASSERT_EQ(forwards[r].size(), 2u);
    EXPECT_DOUBLE_EQ(forwards[r][0].wall_s, static_cast<double>(r + 1));
    EXPECT_DOUBLE_EQ(forwards[r][1].wall_s, static_cast<double>(r + 4));
  }
}

// The Chrome trace file carries each span's CPU time where it was measured, and only there.
TEST(OpTiming, ChromeTraceEventsCarryCpuTimeWhereMeasured) {
  const std::string path = ::testing::TempDir() + "op_timing_trace.json";
  write_chrome_trace(path, {"primary"},
                     {{{"conv", "compute", 0, 10, 5, 3, 4.5}, {"x@send", "comm", -1, 15, 2}}});
  std::ifstream in(path);
  const auto j = nlohmann::json::parse(in);
  std::vector<nlohmann::json> spans;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "X") spans.push_back(e);
  }
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].at("name"), "conv");
  EXPECT_DOUBLE_EQ(spans[0].at("args").at("cpu_us").get<double>(), 4.5);
  EXPECT_EQ(spans[0].at("args").at("rows"), 3);
  EXPECT_FALSE(spans[1].at("args").contains("cpu_us"));
  EXPECT_EQ(spans[1].at("tid"), 1);
  std::remove(path.c_str());
}

// Exposed communication per layer: each comm span less the compute inside it, filed under its
// layer (slot 0 outside the blocks); the slots sum to exposed_comm_us.
TEST(OpTiming, ExposedCommunicationIsSplitByLayer) {
  const std::vector<Span> spans = {
      {"embed@tokens", "comm", -1, 0, 10},           // 10 exposed, outside the blocks
      {"blk.0.norm@replicated", "comm", 0, 10, 20},  // 20 less the 15 of GEMM inside: 5
      {"blk.0.q", "compute", 0, 12, 15},
      {"blk.0.attn", "compute", 0, 30, 40},     // outside every comm span
      {"blk.2.down@tokens", "comm", 2, 70, 8},  // 8: nothing inside
  };
  const std::vector<double> by_layer = exposed_comm_by_layer_us(spans);
  ASSERT_EQ(by_layer.size(), 4u);
  EXPECT_DOUBLE_EQ(by_layer[0], 10);
  EXPECT_DOUBLE_EQ(by_layer[1], 5);
  EXPECT_DOUBLE_EQ(by_layer[2], 0);
  EXPECT_DOUBLE_EQ(by_layer[3], 8);
  EXPECT_DOUBLE_EQ(exposed_comm_us(spans), 23);
  EXPECT_EQ(exposed_comm_by_layer_us({}), std::vector<double>{0.0});
}

// Calibration's CPU per run: a device's spans of 2 runs of the same 3 ops, each run's compute
// spans' CPU summed (the comm span's not); spans that do not divide into the runs, or a compute
// span without CPU time, are refused.
TEST(OpTiming, ComputeCpuIsSummedPerRun) {
  const std::vector<Span> spans = {
      {"conv", "compute", -1, 0, 10, -1, 8}, {"x@rows", "comm", -1, 10, 5, -1, 3},
      {"add", "compute", -1, 15, 2, -1, 2},  {"conv", "compute", -1, 20, 12, -1, 11},
      {"x@rows", "comm", -1, 32, 6, -1, 4},  {"add", "compute", -1, 38, 3, -1, 2.5},
  };
  const std::vector<double> by_run = compute_cpu_by_run_s(spans, 2);
  ASSERT_EQ(by_run.size(), 2u);
  EXPECT_NEAR(by_run[0], 10e-6, 1e-15);
  EXPECT_NEAR(by_run[1], 13.5e-6, 1e-15);
  EXPECT_EQ(compute_cpu_by_run_s({}, 3), std::vector<double>(3, 0.0));
  EXPECT_THROW(compute_cpu_by_run_s(spans, 4), Error);
  EXPECT_THROW(compute_cpu_by_run_s(spans, 0), Error);
  std::vector<Span> unmeasured = spans;
  unmeasured[3].cpu_us = -1;
  EXPECT_THROW(compute_cpu_by_run_s(unmeasured, 2), Error);
}

}  // namespace
}  // namespace huddle
