// linear() with 16-bit and block-quantised weights at decode shapes (one token: GEMV) and at a
// prompt (GEMM), per weight dtype and per instruction-set path (kernels/lowp.h).
//
//   build/bench/kernels/bench_lowp_gemv [--threads 1,2] [--runs 7] [--prefill 128] [--cpu-time]
//
// For each [N, K] OutIn weight of a ~1B Llama it prints, as median [min, max] over --runs runs:
//   - decode GB/s = weight bytes (in the dtype) / time of linear() at T = 1, streaming rotating
//     weight copies of >= 256 MB in all so weights come from DRAM as in real decoding; per path,
//     and for Q8_0/Q4_0 on paths with tile kernels both with tiles (what linear() does) and with
//     one dot product per output;
//   - prefill GFLOP/s = 2·T·K·N / time at T = --prefill, every way a quantised product can go:
//     tiles (qtile.h), sgemm on dequantised weight panels, and int8 dot products per output;
//   - for Q4_0, Q5_0, Q8_0, Q4_K and Q6_K, both again on the weight packed as executors bind it
//     (packed_weight.h; Q5_0 and the k-quants have only packed kernels and the row dot products).
#include "core/error.h"
#include "core/kquant.h"
#include "core/quant.h"
#include "core/tensor.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"
#include "kernels/linear_lowp.h"
#include "kernels/lowp.h"
#include "kernels/packed_weight.h"
#include "kernels/qtile.h"

#include <CLI/CLI.hpp>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using huddle::DType;
using huddle::Tensor;
using huddle::kernels::Isa;
using huddle::kernels::WeightLayout;
using Clock = std::chrono::steady_clock;

// --cpu-time: time by this process's CPU time instead of the wall clock, so that other programs
// taking the cores (a shared machine) do not count; only meaningful with one thread.
bool g_cpu_time = false;
double now_s() {
  if (g_cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

struct Shape {
  const char* name;
  std::int64_t n, k;
};
const std::vector<Shape> kShapes = {
    {"q/o_proj 2048x2048", 2048, 2048},
    {"gate/up 8192x2048", 8192, 2048},
    {"down 2048x8192", 2048, 8192},
};

struct Stats {
  double median, min, max;
};

// Times fn (one unit of `work` per call) over `runs` runs of >= min_run_s each.
Stats measure(const std::function<void(int)>& fn, double work, int runs, double min_run_s) {
  fn(0);
  const double t0 = now_s();
  fn(1);
  const double single = now_s() - t0;
  const int reps = std::max(1, static_cast<int>(min_run_s / std::max(single, 1e-9)));
  std::vector<double> rates;
  int call = 2;
  for (int r = 0; r < runs; ++r) {
    const double start = now_s();
    for (int i = 0; i < reps; ++i) fn(call++);
    rates.push_back(work * reps / (now_s() - start));
  }
  std::sort(rates.begin(), rates.end());
  return {rates[rates.size() / 2], rates.front(), rates.back()};
}

std::string fmt_stats(const Stats& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%6.1f [%5.1f, %5.1f]", s.median, s.min, s.max);
  return buf;
}

std::string first_line_of(const char* path, const char* prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five;
  in >> one >> five;
  return in ? one + " (1 min), " + five + " (5 min)" : "unknown";
}

Tensor random_f32(std::mt19937& rng, huddle::Shape shape) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t = Tensor::empty(DType::F32, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(rng) * 0.02f;
  return t;
}

void bench(const Shape& s, DType dtype, int runs, std::int64_t prefill) {
  std::mt19937 rng(1);
  const Tensor w32 = random_f32(rng, {s.n, s.k});
  // The types Huddle only reads (Q5_0, k-quants): random blocks.
  const Tensor w = dtype == DType::F32 ? w32
                   : huddle::can_quantize(dtype)
                       ? huddle::quantize(w32, dtype)
                       : huddle::random_blocks(rng, dtype, s.n, s.k, 0.02f);
  const double bytes = static_cast<double>(w.nbytes());
  const int copies = std::max(1, static_cast<int>((256e6 + bytes - 1) / bytes));
  std::vector<Tensor> ws;
  for (int i = 0; i < copies; ++i) ws.push_back(w.clone());
  using huddle::kernels::PackedWeight;
  std::vector<std::shared_ptr<const PackedWeight>> packs;
  for (const Tensor& c : ws) {
    if (auto p = PackedWeight::pack(c, WeightLayout::OutIn)) packs.push_back(std::move(p));
  }
  const Tensor x = random_f32(rng, {1, s.k});
  Tensor y = Tensor::empty(DType::F32, {1, s.n});

  std::vector<Isa> isas = {Isa::Scalar};
  if (dtype != DType::F32) {
    isas.clear();
    for (Isa isa : huddle::kernels::kAllIsas) {
      if (huddle::kernels::isa_supported(isa)) isas.push_back(isa);
    }
  }
  for (Isa isa : isas) {
    huddle::kernels::force_isa(isa);
    const bool tiled = huddle::kernels::detail::qtile_fn(dtype, isa) != nullptr;
    for (const bool tiles : tiled ? std::vector<bool>{true, false} : std::vector<bool>{false}) {
      huddle::kernels::detail::set_qtiles_enabled(tiles);
      const Stats decode = measure(
          [&](int call) {
            huddle::kernels::linear(x, ws[static_cast<std::size_t>(call % copies)],
                                    WeightLayout::OutIn, nullptr, y);
          },
          bytes * 1e-9, runs, 0.05);
      const std::string path = dtype == DType::F32 ? "f32 loops"
                                                   : std::string(huddle::kernels::isa_name(isa)) +
                                                         (tiles ? " tiles" : "");
      std::printf("%-20s %-5s %-16s | decode %s GB/s\n", s.name,
                  std::string(huddle::dtype_name(dtype)).c_str(), path.c_str(),
                  fmt_stats(decode).c_str());
      std::fflush(stdout);
    }
    huddle::kernels::detail::set_qtiles_enabled(true);
    if (!packs.empty()) {
      const Stats decode = measure(
          [&](int call) {
            const auto i = static_cast<std::size_t>(call % copies);
            huddle::kernels::linear(x, ws[i], packs[i].get(), WeightLayout::OutIn, nullptr, y);
          },
          bytes * 1e-9, runs, 0.05);
      std::printf("%-20s %-5s %-16s | decode %s GB/s\n", s.name,
                  std::string(huddle::dtype_name(dtype)).c_str(),
                  (std::string(huddle::kernels::isa_name(isa)) + " packed").c_str(),
                  fmt_stats(decode).c_str());
      std::fflush(stdout);
    }
  }
  huddle::kernels::force_isa(std::nullopt);
  if (prefill <= 1) return;
  const Tensor xs = random_f32(rng, {prefill, s.k});
  Tensor ys = Tensor::empty(DType::F32, {prefill, s.n});
  const double flop = 2.0 * static_cast<double>(prefill * s.k * s.n) * 1e-9;
  const auto run = [&](int) { huddle::kernels::linear(xs, w, WeightLayout::OutIn, nullptr, ys); };
  std::string line;
  const bool tiled =
      huddle::kernels::detail::qtile_fn(dtype, huddle::kernels::best_isa()) != nullptr;
  if (tiled) line = "tiles " + fmt_stats(measure(run, flop, runs, 0.05)) + "  ";
  if (!packs.empty()) {
    const auto packed = [&](int) {
      huddle::kernels::linear(xs, w, packs.front().get(), WeightLayout::OutIn, nullptr, ys);
    };
    line += "packed " + fmt_stats(measure(packed, flop, runs, 0.05)) + "  ";
  }
  huddle::kernels::detail::set_qtiles_enabled(false);
  line += "sgemm " + fmt_stats(measure(run, flop, runs, 0.05));
  if (dtype != DType::F32) {
    huddle::kernels::detail::set_lowp_gemm_tokens(prefill + 1);  // dot products at every T
    const Stats dots = measure(run, flop, runs, 0.05);
    huddle::kernels::detail::set_lowp_gemm_tokens(huddle::kernels::detail::kLowpGemmTokens);
    line += "  dots(" + std::string(huddle::kernels::isa_name(huddle::kernels::best_isa())) + ") " +
            fmt_stats(dots);
  }
  huddle::kernels::detail::set_qtiles_enabled(true);
  std::printf("%-20s %-5s T=%-8lld | prefill GFLOP/s: %s\n", s.name,
              std::string(huddle::dtype_name(dtype)).c_str(), static_cast<long long>(prefill),
              line.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "linear() with F16/BF16/Q8_0/Q4_0/Q5_0/Q4_K/Q6_K weights: decode GB/s and prefill GFLOP/s"};
  std::vector<int> threads{1};
  int runs = 7;
  std::int64_t prefill = 128;
  std::vector<std::string> dtypes{"f32", "f16", "bf16", "q8_0", "q4_0"};
  app.add_option("--threads", threads, "thread counts")->delimiter(',')->check(CLI::PositiveNumber);
  app.add_option("--runs", runs, "runs per point (>= 5)")->check(CLI::Range(5, 1000));
  app.add_option("--prefill", prefill, "prompt tokens for the GEMM figures (<= 1: none)");
  app.add_option("--dtypes", dtypes, "weight dtypes")->delimiter(',');
  app.add_flag("--cpu-time", g_cpu_time, "time by process CPU time (one thread; a busy machine)");
  CLI11_PARSE(app, argc, argv);
  huddle::kernels::configure_blas_environment();  // before any thread or BLAS call

  std::ostringstream command;
  for (int i = 0; i < argc; ++i) command << (i ? " " : "") << argv[i];
  try {
    std::printf("# command: %s\n", command.str().c_str());
    std::printf("# cpu: %s, %u hardware threads; best path %s\n",
                first_line_of("/proc/cpuinfo", "model name").c_str(),
                std::thread::hardware_concurrency(),
                std::string(huddle::kernels::isa_name(huddle::kernels::best_isa())).c_str());
    std::printf("# blas: %s\n", huddle::kernels::blas_description().c_str());
    std::printf("# %d runs per point, each >= 50 ms; median [min, max]\n", runs);
    std::printf("# load average before: %s\n", load_average().c_str());
    for (int t : threads) {
      huddle::kernels::set_num_threads(t);
      std::printf("\nthreads = %d\n", t);
      for (const Shape& s : kShapes) {
        for (const std::string& name : dtypes) {
          std::string upper = name;
          for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
          const auto dtype = huddle::parse_dtype(upper);
          if (!dtype || !huddle::is_weight_dtype(*dtype)) {
            std::fprintf(stderr, "bench_lowp_gemv: unknown dtype %s\n", name.c_str());
            return 2;
          }
          bench(s, *dtype, runs, prefill);
        }
      }
    }
    std::printf("\n# load average after: %s\n", load_average().c_str());
  } catch (const huddle::Error& e) {
    std::fprintf(stderr, "bench_lowp_gemv: %s\n", e.what());
    return 1;
  }
  return 0;
}
