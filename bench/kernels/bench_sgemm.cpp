// GEMM and GEMV throughput for the linear layers of the gpt2 and ~1B Llama presets.
//
//   build-kernels/bench/kernels/bench_sgemm [--threads 1,2] [--shapes gpt2|llama1b|all] [--runs 7]
//                                           [--rows 128]
//
// For every weight shape K x N it prints
//   - kernels::linear() at M = 128 (a 128-token prompt; oneDNN's matmul where built,
//     kernels/matmul_dnnl.cpp) and raw cblas_sgemm beside it, GFLOP/s = 2·M·K·N / time (the two
//     alternate run by run); --rows 16,64,128 measures each of those M instead (a split
//     strategy's linears see T / devices / chunks rows);
//   - GEMV at M = 1 (one decode step), GB/s = weight bytes / time, for cblas_sgemv and for
//     kernels::linear() at T = 1 (huddle's own GEMV loops), in the layout the model stores;
// as the median and [min, max] over --runs runs (the two GEMVs alternate run by run). A GEMV run
// streams a rotating set of weight copies totalling >= 256 MB, so weights come from DRAM as in real
// decoding (every layer's weights are read once per token), not from the 32 MB L3.
#include "core/error.h"
#include "core/tensor.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using huddle::kernels::Trans;
using huddle::kernels::WeightLayout;
using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  std::int64_t k, n;
  WeightLayout layout;  // as the checkpoint stores it
};

// gpt2 (124M): hidden 768, Conv1D weights [K, N]; the tied lm head is wte [V, C].
const std::vector<Shape> kGpt2 = {
    {"gpt2 attn.c_attn", 768, 2304, WeightLayout::InOut},
    {"gpt2 attn.c_proj", 768, 768, WeightLayout::InOut},
    {"gpt2 mlp.c_fc", 768, 3072, WeightLayout::InOut},
    {"gpt2 mlp.c_proj", 3072, 768, WeightLayout::InOut},
    {"gpt2 lm_head", 768, 50257, WeightLayout::OutIn},
};
// ~1B Llama: hidden 2048, ffn 8192, 32 heads, 8 kv heads (k/v 2048 -> 512), vocab 32000.
const std::vector<Shape> kLlama1b = {
    {"llama q/o_proj", 2048, 2048, WeightLayout::OutIn},
    {"llama k/v_proj", 2048, 512, WeightLayout::OutIn},
    {"llama gate/up", 2048, 8192, WeightLayout::OutIn},
    {"llama down_proj", 8192, 2048, WeightLayout::OutIn},
    {"llama lm_head", 2048, 32000, WeightLayout::OutIn},
};

struct Stats {
  double median, min, max;
};

// Times each of `fns` (fn(call) does one unit of `work`) over `runs` runs, alternating between
// them run by run so that a change in machine load affects all alike. A run repeats fn for at
// least `min_run_s`. Returns work / second per run as median [min, max], one per fn.
std::vector<Stats> measure(const std::vector<std::function<void(int)>>& fns, double work, int runs,
                           double min_run_s) {
  std::vector<int> reps;
  for (const auto& fn : fns) {
    fn(0);  // warm-up: page faults, library start-up, thread wake-up
    const auto t0 = Clock::now();
    fn(1);
    const double single = std::chrono::duration<double>(Clock::now() - t0).count();
    reps.push_back(std::max(1, static_cast<int>(min_run_s / std::max(single, 1e-9))));
  }
  std::vector<std::vector<double>> rates(fns.size());
  int call = 2;
  for (int r = 0; r < runs; ++r) {
    for (std::size_t f = 0; f < fns.size(); ++f) {
      const auto start = Clock::now();
      for (int i = 0; i < reps[f]; ++i) fns[f](call++);
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      rates[f].push_back(work * reps[f] / s);
    }
  }
  std::vector<Stats> out;
  for (auto& v : rates) {
    std::sort(v.begin(), v.end());
    out.push_back({v[v.size() / 2], v.front(), v.back()});
  }
  return out;
}

std::string fmt_stats(const Stats& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%7.1f [%6.1f, %6.1f]", s.median, s.min, s.max);
  return buf;
}

huddle::Tensor filled(huddle::Shape shape, float value) {
  huddle::Tensor t = huddle::Tensor::empty(huddle::DType::F32, std::move(shape));
  std::fill(t.f32(), t.f32() + t.numel(), value);
  return t;
}

// Other processes skew the figures on a shared machine; the report says how busy it was.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five;
  in >> one >> five;
  return in ? one + " (1 min), " + five + " (5 min)" : "unknown";
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

void bench_shape(const Shape& s, std::int64_t m, bool with_gemv, int runs) {
  const bool out_in = s.layout == WeightLayout::OutIn;
  const huddle::Shape w_shape = out_in ? huddle::Shape{s.n, s.k} : huddle::Shape{s.k, s.n};

  // linear and sgemm at M = m.
  const huddle::Tensor a = filled({m, s.k}, 0.01f);
  const huddle::Tensor w = filled(w_shape, 0.02f);
  huddle::Tensor c = filled({m, s.n}, 0.0f);
  const double flop = 2.0 * m * s.k * s.n;
  const auto sgemm = [&](int) {
    huddle::kernels::raw_sgemm(Trans::No, out_in ? Trans::Yes : Trans::No, m, s.n, s.k, 1.0f,
                               a.f32(), s.k, w.f32(), out_in ? s.k : s.n, 0.0f, c.f32(), s.n);
  };
  const auto linear = [&](int) { huddle::kernels::linear(a, w, s.layout, nullptr, c); };
  const std::vector<Stats> gemm = measure({linear, sgemm}, flop * 1e-9, runs, 0.05);

  if (!with_gemv) {
    std::printf("%-18s %6lld %6lld %-5s %5lld | %s | %s\n", s.name, static_cast<long long>(s.k),
                static_cast<long long>(s.n), out_in ? "OutIn" : "InOut", static_cast<long long>(m),
                fmt_stats(gemm[0]).c_str(), fmt_stats(gemm[1]).c_str());
    std::fflush(stdout);
    return;
  }

  // GEMV at M = 1 over rotating weight copies (>= 256 MB in all).
  const double bytes = 4.0 * s.k * s.n;
  const int copies = std::max(1, static_cast<int>((256e6 + bytes - 1) / bytes));
  std::vector<huddle::Tensor> ws;
  for (int i = 0; i < copies; ++i) ws.push_back(filled(w_shape, 0.02f));
  const huddle::Tensor x = filled({1, s.k}, 0.01f);
  huddle::Tensor y = filled({1, s.n}, 0.0f);
  const auto sgemv = [&](int call) {
    const huddle::Tensor& wi = ws[static_cast<std::size_t>(call % copies)];
    // Row-major A [rows, cols] with y = op(A)·x: OutIn stores [N, K] (no transpose), InOut
    // stores [K, N] (transpose).
    huddle::kernels::raw_sgemv(out_in ? Trans::No : Trans::Yes, wi.dim(0), wi.dim(1), 1.0f,
                               wi.f32(), wi.dim(1), x.f32(), 0.0f, y.f32());
  };
  const auto ours = [&](int call) {
    huddle::kernels::linear(x, ws[static_cast<std::size_t>(call % copies)], s.layout, nullptr, y);
  };
  const std::vector<Stats> gemv = measure({sgemv, ours}, bytes * 1e-9, runs, 0.05);

  std::printf("%-18s %6lld %6lld %-5s | %s | %s | %s | %s\n", s.name, static_cast<long long>(s.k),
              static_cast<long long>(s.n), out_in ? "OutIn" : "InOut", fmt_stats(gemm[0]).c_str(),
              fmt_stats(gemm[1]).c_str(), fmt_stats(gemv[0]).c_str(), fmt_stats(gemv[1]).c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GEMM (M=128) and GEMV (M=1) throughput for the gpt2 and llama1b linear layers"};
  std::vector<int> threads{1, 2};
  std::string shapes = "all";
  int runs = 7;
  std::vector<std::int64_t> rows{128};
  app.add_option("--threads", threads, "thread counts to measure")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--shapes", shapes, "gpt2, llama1b or all")
      ->check(CLI::IsMember({"gpt2", "llama1b", "all"}));
  app.add_option("--runs", runs, "runs per point (>= 5)")->check(CLI::Range(5, 1000));
  app.add_option("--rows", rows, "GEMM row counts M (with a single 128 the GEMVs run too)")
      ->delimiter(',')
      ->check(CLI::Range(1, 65536));
  CLI11_PARSE(app, argc, argv);
  huddle::kernels::configure_blas_environment();  // before any thread or BLAS call

  std::vector<Shape> selected;
  if (shapes == "gpt2" || shapes == "all")
    selected.insert(selected.end(), kGpt2.begin(), kGpt2.end());
  if (shapes == "llama1b" || shapes == "all") {
    selected.insert(selected.end(), kLlama1b.begin(), kLlama1b.end());
  }

  std::ostringstream command;
  for (int i = 0; i < argc; ++i) command << (i ? " " : "") << argv[i];
  try {
    std::printf("# command: %s\n", command.str().c_str());
    std::printf("# cpu: %s, %u hardware threads\n", cpu_name().c_str(),
                std::thread::hardware_concurrency());
    std::printf("# blas: %s\n", huddle::kernels::blas_description().c_str());
    std::printf("# %d runs per point, each >= 50 ms; median [min, max]\n", runs);
    std::printf("# GEMV streams >= 256 MB of weight copies per pass (DRAM, not cache)\n");
    std::printf("# load average before: %s\n", load_average().c_str());
    for (int t : threads) {
      huddle::kernels::set_num_threads(t);
      std::printf("\nthreads = %d\n", t);
      const bool with_gemv = rows == std::vector<std::int64_t>{128};
      if (with_gemv) {
        std::printf("%-18s %6s %6s %-5s | %-23s | %-23s | %-23s | %-23s\n", "layer", "K", "N", "W",
                    "linear M=128 GFLOP/s", "sgemm M=128 GFLOP/s", "cblas_sgemv M=1 GB/s",
                    "huddle linear M=1 GB/s");
      } else {
        std::printf("%-18s %6s %6s %-5s %5s | %-23s | %-23s\n", "layer", "K", "N", "W", "M",
                    "linear GFLOP/s", "sgemm GFLOP/s");
      }
      for (const Shape& s : selected) {
        for (std::int64_t m : rows) bench_shape(s, m, with_gemv, runs);
      }
    }
    std::printf("\n# load average after: %s\n", load_average().c_str());
  } catch (const huddle::Error& e) {
    std::fprintf(stderr, "bench_sgemm: %s\n", e.what());
    return 1;
  }
  return 0;
}
