// Llama 3 rope scaling recovered from llama.cpp's per-frequency factors (model/rope_factors.h):
// the factors are made here with Hugging Face's llama3 formula (independent of Huddle's rope
// code), and the recovered scaling must give every pair the same factor; a GGUF whose scaling is
// only in `rope_freqs.weight` (as llama.cpp writes Llama 3) loads and gives the logits of the
// same file with Huddle's explicit parameters.
#include "model/rope_factors.h"

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "kernels/kernels.h"
#include "model/gguf_export.h"
#include "model/model.h"
#include "runtime/executor.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <vector>

namespace huddle {
namespace {

struct Llama3 {
  double theta;
  int head_dim;
  double factor, low, high, orig;
};

// transformers' _compute_llama3_parameters, as the divisor of each base inverse frequency.
std::vector<float> hf_factors(const Llama3& p) {
  std::vector<float> out;
  for (int i = 0; i < p.head_dim / 2; ++i) {
    const double inv = std::pow(p.theta, -2.0 * i / p.head_dim);
    const double wavelen = 2.0 * std::numbers::pi / inv;
    double scaled = inv;
    if (wavelen > p.orig / p.low) {
      scaled = inv / p.factor;
    } else if (wavelen >= p.orig / p.high) {
      const double smooth = (p.orig / wavelen - p.low) / (p.high - p.low);
      scaled = (1.0 - smooth) * inv / p.factor + smooth * inv;
    }
    out.push_back(static_cast<float>(inv / scaled));
  }
  return out;
}

// The factors the recovered JSON gives (through Huddle's config parsing and rope code).
std::vector<double> factors_of(const nlohmann::json& scaling, double theta, int head_dim) {
  kernels::RopeSpec spec;
  spec.theta = static_cast<float>(theta);
  spec.scaling = kernels::RopeScaling::Llama3;
  spec.factor = scaling.at("factor").get<float>();
  spec.low_freq_factor = scaling.at("low_freq_factor").get<float>();
  spec.high_freq_factor = scaling.at("high_freq_factor").get<float>();
  spec.original_max_positions = scaling.at("original_max_position_embeddings").get<std::int64_t>();
  kernels::RopeSpec plain = spec;
  plain.scaling = kernels::RopeScaling::None;
  std::vector<double> scaled(static_cast<std::size_t>(head_dim / 2)), base(scaled.size());
  kernels::rope_inv_freq(spec, head_dim, 0, scaled);
  kernels::rope_inv_freq(plain, head_dim, 0, base);
  for (std::size_t i = 0; i < scaled.size(); ++i) scaled[i] = base[i] / scaled[i];
  return scaled;
}

void expect_recovered(const Llama3& p, const char* what) {
  const std::vector<float> f = hf_factors(p);
  const nlohmann::json j = rope_scaling_from_factors(f, p.theta, p.head_dim, "test.gguf");
  ASSERT_EQ(j.at("rope_type"), "llama3") << what << ": " << j.dump();
  EXPECT_FLOAT_EQ(j.at("factor").get<float>(), static_cast<float>(p.factor)) << what;
  const std::vector<double> got = factors_of(j, p.theta, p.head_dim);
  for (std::size_t i = 0; i < f.size(); ++i) {
    EXPECT_NEAR(got[i], f[i], 1e-4 * f[i]) << what << " pair " << i << ": " << j.dump();
  }
}

TEST(RopeFactors, Llama31ParametersComeBackExactly) {
  const Llama3 p{500000.0, 128, 8.0, 1.0, 4.0, 8192.0};
  expect_recovered(p, "Llama 3.1");
  const nlohmann::json j = rope_scaling_from_factors(hf_factors(p), p.theta, 128, "test.gguf");
  EXPECT_EQ(j.at("original_max_position_embeddings"), 8192);
  EXPECT_NEAR(j.at("high_freq_factor").get<double>(), 4.0, 1e-3);
  EXPECT_NEAR(j.at("low_freq_factor").get<double>(), 1.0, 1e-3);
}

TEST(RopeFactors, OtherParametersGiveTheSameFrequencies) {
  expect_recovered({500000.0, 128, 32.0, 1.0, 4.0, 8192.0}, "Llama 3.2");
  expect_recovered({500000.0, 128, 8.0, 2.0, 8.0, 16384.0}, "low 2");
  // head_dim 32, theta 1e4: two pairs in the band, one, and none.
  expect_recovered({10000.0, 32, 8.0, 1.0, 4.0, 8192.0}, "two in the band");
  expect_recovered({10000.0, 32, 4.0, 1.0, 2.0, 2048.0}, "one in the band");
  expect_recovered({10000.0, 32, 4.0, 1.0, 1.05, 1500.0}, "none in the band");
}

TEST(RopeFactors, PlainAndLinear) {
  EXPECT_TRUE(rope_scaling_from_factors(std::vector<float>(64, 1.0f), 1e4, 128, "x").is_null());
  const nlohmann::json lin = rope_scaling_from_factors(std::vector<float>(64, 3.0f), 1e4, 128, "x");
  EXPECT_EQ(lin.at("rope_type"), "linear");
  EXPECT_EQ(lin.at("factor").get<float>(), 3.0f);
}

TEST(RopeFactors, FactorsNoScalingExplainsAreRefusedByName) {
  const auto refused = [](std::vector<float> f, int head_dim, const char* part) {
    try {
      rope_scaling_from_factors(f, head_dim == 128 ? 500000.0 : 10000.0, head_dim, "bad.gguf");
      ADD_FAILURE() << "no error for " << part;
    } catch (const LoadError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rope_freqs.weight"), std::string::npos) << msg;
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  };
  refused(std::vector<float>(16, 0.0f), 32, "not a finite number >= 1");
  refused({1, 1, 1, 1, 1, 1, 1, std::numeric_limits<float>::quiet_NaN()}, 16, "finite");
  refused(std::vector<float>(8, 1.0f), 32, "head_dim / 2 = 16");
  // Scaled pairs at high frequency, plain ones at low: the reverse of Llama 3's.
  std::vector<float> reversed = hf_factors({10000.0, 32, 8.0, 1.0, 4.0, 8192.0});
  std::reverse(reversed.begin(), reversed.end());
  refused(reversed, 32, "Llama 3");
  // A band (pairs 29-34 here) that is not Llama 3's blend: no parameters give it.
  std::vector<float> kinked = hf_factors({500000.0, 128, 8.0, 1.0, 4.0, 8192.0});
  kinked[31] += 0.5f;
  refused(kinked, 128, "Llama 3");
}

// A Llama-3-scaled tiny model, written by `huddle quantize` (parameters in huddle.rope_scaling)
// and again without that key (the factors alone, as llama.cpp's files have them).
TEST(RopeFactors, GgufWithOnlyTheFactorsLoadsAndGivesTheSameLogits) {
  testing::TempDir dir;
  const std::filesystem::path model = dir / "llama3-tiny";
  testing::copy_model(testing::fixture_model("llama-tiny"), model);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(model / "config.json"));
  config["rope_scaling"] = {{"rope_type", "llama3"},
                            {"factor", 8.0},
                            {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0},
                            {"original_max_position_embeddings", 8192}};
  std::ofstream(model / "config.json") << config.dump();
  const std::filesystem::path with_key = dir / "with-key.gguf", factors_only = dir / "factors.gguf";
  quantize_to_gguf(model, with_key, DType::Q8_0);
  {
    const io::GgufFile f = io::GgufFile::open(with_key);
    ASSERT_NE(f.find_tensor("rope_freqs.weight"), nullptr);
    io::GgufWriter w;
    for (const auto& [key, value] : f.layout().metadata) {
      if (key != "huddle.rope_scaling") w.set(key, value);
    }
    for (const io::GgufTensorInfo& t : f.tensors()) {
      const auto bytes = f.bytes(t);
      w.add_tensor(t.name, t.dtype, t.shape, [bytes](std::span<std::byte> out) {
        std::copy(bytes.begin(), bytes.end(), out.begin());
      });
    }
    w.write(factors_only);
  }
  const Model a = Model::load(with_key);
  const Model b = Model::load(factors_only);
  ASSERT_EQ(b.config().rope.scaling, kernels::RopeScaling::Llama3);
  EXPECT_EQ(b.config().rope.original_max_positions, 8192);
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % 500);
  Executor ea(a.graph(), a.weights(), a.config().max_positions);
  Executor eb(b.graph(), b.weights(), b.config().max_positions);
  const Tensor la = ea.forward(ids, true);
  const Tensor lb = eb.forward(ids, true);
  ASSERT_EQ(la.shape(), lb.shape());
  const std::vector<float> va = la.to_vector(), vb = lb.to_vector();
  double max_ref = 0, max_diff = 0;
  for (std::size_t i = 0; i < va.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(va[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(va[i]) - vb[i]));
  }
  EXPECT_GT(max_ref, 0.0);
  EXPECT_LE(max_diff, 1e-4 * max_ref);
}

}  // namespace
}  // namespace huddle
