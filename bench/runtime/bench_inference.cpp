// bench_inference: single-device prefill and decode speed of a model, beside what the machine's
// raw sgemm and memory bandwidth allow at the same shapes.
//
//   bench_inference --model DIR [--tokens 128] [--decode 16] [--threads 1,2] [--runs 5] [--json]
//
// Prefill: a T-token prompt, logits of the last position only (as generation does). Reported
// with the FLOPs of every linear layer and attention, and with the time raw cblas_sgemm needs
// for exactly the model's GEMMs (same M, K, N, transposition), so "efficiency" = raw GEMM time /
// prefill time. Decode: ms per token after the prompt, and the GB/s of weights streamed per token
// beside a plain read-bandwidth measurement of this machine. Medians and min..max over --runs.
#include "kernels/blas.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/executor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>

namespace huddle {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Stats {
  double median = 0, min = 0, max = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {median, v.front(), v.back()};
}

struct GemmShape {
  std::int64_t m, k, n;
  kernels::WeightLayout layout;
  auto operator<=>(const GemmShape&) const = default;
};

// The GEMMs of one prefill step, with multiplicity; the head runs on the last row only.
std::map<GemmShape, int> prefill_gemms(const Graph& g, std::int64_t tokens) {
  std::map<GemmShape, int> shapes;
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::Linear) continue;
    const Shape& w = g.value(op.inputs[1]).shape;
    const bool out_in = op.attrs.weight_layout == kernels::WeightLayout::OutIn;
    const std::int64_t rows = op.role == OpRole::Head ? 1 : tokens;
    ++shapes[{rows, out_in ? w[1] : w[0], out_in ? w[0] : w[1], op.attrs.weight_layout}];
  }
  return shapes;
}

double attention_flops(const Graph& g, std::int64_t tokens) {
  double flops = 0;
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::Attention) continue;
    const double pairs =
        op.attrs.causal ? tokens * (tokens + 1) / 2.0 : static_cast<double>(tokens) * tokens;
    flops += 2.0 * 2.0 * pairs * op.attrs.heads * op.attrs.head_dim;  // QKᵀ and PV
  }
  return flops;
}

// Bytes of weights a decode step reads (every linear weight; embeddings read one row only).
double decode_weight_bytes(const Graph& g) {
  double bytes = 0;
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::Linear) continue;
    for (std::size_t i = 1; i < op.inputs.size(); ++i) {
      bytes += static_cast<double>(shape_numel(g.value(op.inputs[i]).shape)) * sizeof(float);
    }
  }
  return bytes;
}

// Median time of raw cblas_sgemm for one shape.
double raw_gemm_ms(const GemmShape& s, int runs) {
  std::vector<float> a(static_cast<std::size_t>(s.m * s.k), 0.01f),
      b(static_cast<std::size_t>(s.k * s.n), 0.02f), c(static_cast<std::size_t>(s.m * s.n));
  const bool out_in = s.layout == kernels::WeightLayout::OutIn;
  auto once = [&] {
    kernels::raw_sgemm(kernels::Trans::No, out_in ? kernels::Trans::Yes : kernels::Trans::No, s.m,
                       s.n, s.k, 1.0f, a.data(), s.k, b.data(), out_in ? s.k : s.n, 0.0f, c.data(),
                       s.n);
  };
  once();
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    const auto start = Clock::now();
    once();
    t.push_back(ms_since(start));
  }
  return stats(t).median;
}

// Plain read bandwidth: sum of a 512 MiB array, split across `threads` threads.
double read_bandwidth_gbs(int threads, int runs) {
  const std::size_t n = (std::size_t{512} << 20) / sizeof(float);
  std::vector<float> data(n, 1.0f);
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    std::vector<double> partial(static_cast<std::size_t>(threads));
    const auto start = Clock::now();
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&, i] {
        const std::size_t b = n * static_cast<std::size_t>(i) / static_cast<std::size_t>(threads);
        const std::size_t e =
            n * static_cast<std::size_t>(i + 1) / static_cast<std::size_t>(threads);
        // 16 independent lanes: vectorises without reassociating float sums.
        float lanes[16] = {};
        for (std::size_t j = b; j + 16 <= e; j += 16) {
          for (int k = 0; k < 16; ++k) lanes[k] += data[j + static_cast<std::size_t>(k)];
        }
        partial[static_cast<std::size_t>(i)] = std::accumulate(lanes, lanes + 16, 0.0);
      });
    }
    for (auto& th : pool) th.join();
    t.push_back(ms_since(start));
    if (std::accumulate(partial.begin(), partial.end(), 0.0) < 0) std::puts("");  // keep the sums
  }
  return static_cast<double>(n * sizeof(float)) / (stats(t).median * 1e6);
}

struct Options {
  std::string model;
  std::int64_t tokens = 128;
  int decode = 16;
  std::vector<int> threads = {1, 2};
  int runs = 5;
  bool json = false;
};

int run(const Options& o) {
  const Model model = Model::load(o.model);
  const Graph& g = model.graph();
  std::mt19937 rng(42);
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(o.tokens));
  for (auto& id : prompt)
    id = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(model.config().vocab_size));

  const auto gemms = prefill_gemms(g, o.tokens);
  double gemm_flops = 0;
  for (const auto& [s, count] : gemms) gemm_flops += 2.0 * s.m * s.k * s.n * count;
  const double flops = gemm_flops + attention_flops(g, o.tokens);
  const double weight_bytes = decode_weight_bytes(g);

  std::printf("# %s: %s, %.1fM weight parameters, prompt %lld tokens, %d decode steps, %d runs\n",
              o.model.c_str(), model.architecture().name.c_str(),
              static_cast<double>(model.weight_bytes()) / 4e6, static_cast<long long>(o.tokens),
              o.decode, o.runs);
  std::printf("# BLAS: %s\n", kernels::blas_description().c_str());
  std::printf(
      "| threads | prefill ms (min..max) | GFLOP/s | raw sgemm GFLOP/s | raw GEMM ms | GEMM "
      "efficiency | "
      "decode ms/token (min..max) | weights GB/s | read GB/s "
      "|\n|---|---|---|---|---|---|---|---|---|\n");
  nlohmann::json results = nlohmann::json::array();
  for (int threads : o.threads) {
    kernels::set_num_threads(threads);
    double raw_ms = 0;
    for (const auto& [s, count] : gemms) raw_ms += raw_gemm_ms(s, o.runs) * count;

    Executor executor(g, model.weights(), model.config().max_positions);
    executor.forward(prompt, false);  // warm-up: page in the weights, size the caches
    std::vector<double> prefill, decode;
    for (int r = 0; r < o.runs; ++r) {
      executor.reset();
      auto start = Clock::now();
      Tensor out = executor.forward(prompt, false);
      prefill.push_back(ms_since(start));
      std::vector<double> steps;
      for (int d = 0; d < o.decode; ++d) {
        const std::int32_t next = static_cast<std::int32_t>(
            std::max_element(out.f32(), out.f32() + out.dim(1)) - out.f32());
        start = Clock::now();
        out = executor.forward(std::span(&next, 1), false);
        steps.push_back(ms_since(start));
      }
      decode.push_back(stats(steps).median);
    }
    const Stats p = stats(prefill), d = stats(decode);
    const double bw = read_bandwidth_gbs(threads, 3);
    const double gflops = flops / (p.median * 1e6);
    const double raw_gflops = gemm_flops / (raw_ms * 1e6);
    const double gbs = weight_bytes / (d.median * 1e6);
    std::printf(
        "| %d | %.1f (%.1f..%.1f) | %.1f | %.1f | %.1f | %.0f%% | %.2f (%.2f..%.2f) | %.1f | %.1f "
        "|\n",
        threads, p.median, p.min, p.max, gflops, raw_gflops, raw_ms, 100.0 * raw_ms / p.median,
        d.median, d.min, d.max, gbs, bw);
    results.push_back({{"threads", threads},
                       {"prefill_ms", p.median},
                       {"prefill_min_ms", p.min},
                       {"prefill_max_ms", p.max},
                       {"gflops", gflops},
                       {"raw_sgemm_gflops", raw_gflops},
                       {"raw_gemm_ms", raw_ms},
                       {"decode_ms", d.median},
                       {"decode_min_ms", d.min},
                       {"decode_max_ms", d.max},
                       {"weights_gbs", gbs},
                       {"read_gbs", bw}});
  }
  if (o.json)
    std::printf("%s\n", nlohmann::json{{"model", o.model}, {"results", results}}.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace huddle

int main(int argc, char** argv) {
  huddle::Options o;
  CLI::App app{"Single-device prefill/decode benchmark"};
  app.add_option("--model", o.model, "Model directory")->required();
  app.add_option("--tokens", o.tokens, "Prompt tokens");
  app.add_option("--decode", o.decode, "Decode steps per run");
  app.add_option("--threads", o.threads, "Thread counts")->delimiter(',');
  app.add_option("--runs", o.runs, "Timed runs (median and min..max reported)");
  app.add_flag("--json", o.json, "Also print one JSON line with the results");
  CLI11_PARSE(app, argc, argv);
  huddle::kernels::configure_blas_environment();  // before any thread or BLAS call
  try {
    return huddle::run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_inference: %s\n", e.what());
    return 1;
  }
}
