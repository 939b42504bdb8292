// Issue 15: weights stored F16 are kept 16-bit, and weights converted at load are held once;
// resident memory shows it. The real `huddle run` on one model stored F32 and F16 (`huddle synth
// --dtype`), peak RSS (VmHWM) as the run reports it (`--json`'s peak_rss_bytes).
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

// Under AddressSanitizer (its allocator, quarantine and shadow) the process without weights is
// about 115 MB instead of 20, but the weights' share measured the same: F16 0.52x, widened 1.40x
// F32's. ThreadSanitizer shadows every byte the program touches, mapped weights too (not
// measured here): skipped there.
#if defined(__SANITIZE_THREAD__)
#define HUDDLE_MEMORY_TEST_SKIPPED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HUDDLE_MEMORY_TEST_SKIPPED 1
#endif
#endif
// AddressSanitizer's quarantine keeps the converted copies that load frees once spilled: the
// Q8_0-at-load run measured 0.80x the F32 run's excess there (0.56x without it).
#if defined(__SANITIZE_ADDRESS__)
#define HUDDLE_MEMORY_QUARANTINE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HUDDLE_MEMORY_QUARANTINE 1
#endif
#endif
#ifdef HUDDLE_MEMORY_QUARANTINE
constexpr double kMaxQ8Excess = 0.9;
#else
constexpr double kMaxQ8Excess = 0.7;
#endif

namespace huddle {
namespace {

using testing::run_huddle;

struct PeakOfRun {
  double peak = 0;          // bytes, VmHWM of the huddle process
  double weight_bytes = 0;  // bytes of the weights in the dtypes the run kept
};

PeakOfRun run_for_peak(const std::filesystem::path& model, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"run",         "--model", model.string(), "--ids", "1,2,3,4",
                                   "--n-predict", "2",       "--threads",    "1",     "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_huddle(args, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return {};
  const nlohmann::json j = nlohmann::json::parse(r.out);
  return {j.at("peak_rss_bytes").get<double>(), j.at("weight_bytes").get<double>()};
}

TEST(ResidentMemory, SixteenBitWeightsHalveThePeak) {
#ifdef HUDDLE_MEMORY_TEST_SKIPPED
  GTEST_SKIP() << "ThreadSanitizer's shadow memory distorts resident memory";
#endif
  testing::TempDir dir;
  // 25.7 M parameters (103 MB in F32), all of them read by every run: the tied embedding is the
  // head. The KV cache (64 positions) and the activations of 6 tokens are under 1 MB; the largest
  // weight, the head, is 4 MB in F16.
  const nlohmann::json config = {{"model_type", "llama"},      {"vocab_size", 4096},
                                 {"hidden_size", 512},         {"intermediate_size", 2048},
                                 {"num_hidden_layers", 6},     {"num_attention_heads", 8},
                                 {"num_key_value_heads", 4},   {"max_position_embeddings", 64},
                                 {"tie_word_embeddings", true}};
  std::ofstream(dir / "config.json") << config.dump();
  for (const std::string dtype : {"f32", "f16"}) {
    const auto synth = run_huddle({"synth", "--arch", "llama", "--config", dir / "config.json",
                                   "-o", dir / dtype, "--dtype", dtype},
                                  120);
    ASSERT_EQ(synth.exit_code, 0) << synth.err;
  }
  // What the process holds besides these weights (binary, libraries, runtime): the same run on
  // the 2.7 MB llama-tiny fixture, less its weights.
  const PeakOfRun tiny = run_for_peak(testing::fixture_model("llama-tiny"));
  const PeakOfRun f32 = run_for_peak(dir / "f32");
  const PeakOfRun f16 = run_for_peak(dir / "f16");
  // Control: the F16 checkpoint widened to F32 at load (--weight-dtype f32), as a loader that
  // did not keep 16 bits would.
  const PeakOfRun widened = run_for_peak(dir / "f16", {"--weight-dtype", "f32"});
  // Quantised at load: the converted weights go to a spill file (model/weight_spill.h) and the
  // F32 pages they came from are dropped, so the executor's packed copy is the one held.
  const PeakOfRun q8 = run_for_peak(dir / "f32", {"--weight-dtype", "q8_0"});
  ASSERT_GT(tiny.peak, 0.0);
  const double baseline = tiny.peak - tiny.weight_bytes;
  const double f32_excess = f32.peak - baseline, f16_excess = f16.peak - baseline,
               widened_excess = widened.peak - baseline, q8_excess = q8.peak - baseline;
  std::printf(
      "peak RSS: baseline %.1f MB, F32 %.1f MB (weights %.1f MB), F16 %.1f MB (weights "
      "%.1f MB), F16 widened to F32 %.1f MB, F32 quantised to Q8_0 %.1f MB (weights %.1f MB)\n",
      baseline / 1e6, f32.peak / 1e6, f32.weight_bytes / 1e6, f16.peak / 1e6,
      f16.weight_bytes / 1e6, widened.peak / 1e6, q8.peak / 1e6, q8.weight_bytes / 1e6);
  // The runs kept the dtypes asked for.
  EXPECT_LT(f16.weight_bytes, 0.51 * f32.weight_bytes);
  EXPECT_GE(widened.weight_bytes, f32.weight_bytes);
  // The weights dominate the F32 run: at least 90% of them above the baseline.
  EXPECT_GE(f32_excess, 0.9 * f32.weight_bytes);
  // The halving. Kept 16-bit, the F16 run holds half the F32 run's weight bytes, plus one
  // packing run of rows held twice while it is packed (here the 4 MB head): measured 0.53 x
  // (baseline 19.9 MB, F32 124 MB, F16 75 MB). Weights widened to F32 hold as much as the F32 run
  // (measured 1.00 x since the F16 pages a weight was widened from are dropped; 1.45 x before),
  // so 0.6 x fails if the loader widened them, and leaves 7 MB for page-granularity and
  // allocator noise.
  EXPECT_LE(f16_excess, 0.6 * f32_excess);
  EXPECT_GE(widened_excess, 0.9 * f32_excess);
  // Quantised at load to Q8_0 (0.27x the bytes), held once: measured 0.56x the F32 run's excess
  // (baseline 20 MB, F32 124 MB, Q8_0 78 MB; the packed copy, one weight being packed, and the
  // allocator's free chunks of the copies converted on the way). Held twice, with the F32 pages
  // it came from, it was 1.49x (175 MB). (Under ASan, see kMaxQ8Excess.)
  EXPECT_LT(q8.weight_bytes, 0.3 * f32.weight_bytes);
  EXPECT_LE(q8_excess, kMaxQ8Excess * f32_excess);
}

}  // namespace
}  // namespace huddle
