// Models with weights kept in 16 bits or quantised at load (Model::load's LoadOptions): which
// dtype each tensor is kept in, the memory it takes, and the answer against F32 runs.
//
// Tolerances: a 16-bit or quantised model is compared with an F32 run over the values its weights
// hold (widened), so 16-bit weights differ only by float32 reassociation (the golden tests'
// 1e-4). Q8_0/Q4_0 also round each activation row to int8 blocks (kernels/lowp.h), which moves
// these chaotic tiny random models' logits by a few percent (docs/kernels.md: measured bounds).
// Agreement of top-1 ids with F32 is measured on a smoother model (weights of std 0.02).
#include "core/quant.h"
#include "io/npy.h"
#include "model/model.h"
#include "model/synth.h"
#include "runtime/executor.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <tuple>

namespace huddle {
namespace {

using testing::TempDir;

// The model's weights widened to F32: the values a 16-bit or quantised model multiplies by.
WeightMap widened(const Model& model) {
  WeightMap out;
  for (const auto& [name, t] : model.weights()) out.emplace(name, dequantize(t));
  return out;
}

Tensor logits(const Graph& graph, const WeightMap& weights, std::int64_t max_positions,
              const std::vector<std::int32_t>& ids) {
  Executor executor(graph, weights, max_positions);
  return executor.forward(ids, true).clone();
}

// references/<model>.16 (the first fixtures) or .40 (the later architectures).
std::string stem_of(const std::string& model) {
  const std::string s16 = "references/" + model + ".16";
  return std::filesystem::exists(testing::fixture(s16 + ".ids.json"))
             ? s16
             : "references/" + model + ".40";
}

std::vector<std::int32_t> prompt_of(const std::string& model) {
  return testing::read_ids(testing::fixture(stem_of(model) + ".ids.json"));
}

// LoadOptions::only_tensors: only the named tensors are read (converted, in weights()); every
// weight value of the graph still records its kept dtype, as a whole load does.
TEST(WeightDtype, OnlyTheNamedTensorsAreRead) {
  const std::filesystem::path dir = testing::fixture_model("llama-tiny");
  const Model whole = Model::load(dir, {.weight_dtype = DType::Q8_0});
  const std::set<std::string> some = {"model.layers.2.mlp.up_proj.weight",
                                      "model.layers.1.mlp.down_proj.weight", "model.norm.weight",
                                      "not.a.tensor.of.the.model"};
  const Model part = Model::load(dir, {.weight_dtype = DType::Q8_0, .only_tensors = some});
  ASSERT_EQ(part.weights().size(), 3u);
  for (const auto& [name, t] : part.weights()) {
    ASSERT_TRUE(some.contains(name)) << name;
    const Tensor& w = whole.weights().at(name);
    ASSERT_EQ(t.dtype(), w.dtype()) << name;
    ASSERT_EQ(t.shape(), w.shape()) << name;
    EXPECT_EQ(std::memcmp(t.raw(), w.raw(), w.nbytes()), 0) << name;
  }
  EXPECT_EQ(part.weights().at("model.layers.2.mlp.up_proj.weight").dtype(), DType::Q8_0);
  EXPECT_LT(part.weight_bytes(), whole.weight_bytes());
  EXPECT_EQ(part.tensor_names(), whole.tensor_names());
  ASSERT_EQ(part.graph().values().size(), whole.graph().values().size());
  for (std::size_t i = 0; i < whole.graph().values().size(); ++i) {
    EXPECT_EQ(part.graph().values()[i].dtype, whole.graph().values()[i].dtype) << i;
  }
}

TEST(WeightDtype, KeptDtypesAndFallbacks) {
  const Model q8 = Model::load(testing::fixture_model("llama-tiny"), {.weight_dtype = DType::Q8_0});
  const auto dtype = [&](const std::string& name) { return q8.weights().at(name).dtype(); };
  EXPECT_EQ(dtype("model.layers.0.self_attn.q_proj.weight"), DType::Q8_0);
  EXPECT_EQ(dtype("model.layers.0.mlp.up_proj.weight"), DType::Q8_0);  // [344, 128]
  EXPECT_EQ(dtype("model.embed_tokens.weight"), DType::Q8_0);
  EXPECT_EQ(dtype("lm_head.weight"), DType::Q8_0);
  // Rows of 344 are not whole blocks of 32: kept in 16 bits, as llama.cpp falls back.
  EXPECT_EQ(dtype("model.layers.0.mlp.down_proj.weight"), DType::F16);
  EXPECT_EQ(dtype("model.layers.0.input_layernorm.weight"), DType::F32);
  EXPECT_EQ(q8.weight_block(), 32);

  const Model f32 = Model::load(testing::fixture_model("llama-tiny"));
  EXPECT_EQ(f32.weights().at("model.embed_tokens.weight").dtype(), DType::F32);
  EXPECT_EQ(f32.weight_block(), 1);
  // Kept as stored: the F32 fixture's matrices are views of the mapped file, not copies.
  const Tensor view = f32.weights().at("model.layers.1.mlp.gate_proj.weight");
  EXPECT_NE(view.owner(), nullptr);
}

TEST(WeightDtype, SixteenBitWeightsHalveTheBytes) {
  const Model f32 = Model::load(testing::fixture_model("llama-tiny"));
  for (DType d : {DType::F16, DType::BF16}) {
    const Model half = Model::load(testing::fixture_model("llama-tiny"), {.weight_dtype = d});
    const double ratio =
        static_cast<double>(half.weight_bytes()) / static_cast<double>(f32.weight_bytes());
    // Matrices halve; the norm scales (F32) are 0.2% of the bytes.
    EXPECT_GT(ratio, 0.5) << dtype_name(d);
    EXPECT_LT(ratio, 0.505) << dtype_name(d);
  }
  const Model q4 = Model::load(testing::fixture_model("llama-tiny"), {.weight_dtype = DType::Q4_0});
  EXPECT_LT(static_cast<double>(q4.weight_bytes()) / static_cast<double>(f32.weight_bytes()), 0.3);
}

struct Case {
  std::string model;
  DType dtype;
  double tolerance;  // relative_error against the F32 run over the same values
};

class KeptWeights : public ::testing::TestWithParam<Case> {};

TEST_P(KeptWeights, MatchF32RunOnTheSameValues) {
  const Case& c = GetParam();
  const Model model = Model::load(testing::fixture_model(c.model), {.weight_dtype = c.dtype});
  const auto ids = prompt_of(c.model);
  const Tensor kept = logits(model.graph(), model.weights(), model.config().max_positions, ids);
  const Tensor f32 = logits(model.graph(), widened(model), model.config().max_positions, ids);
  EXPECT_LE(testing::relative_error(kept, f32), c.tolerance);
  if (!dtype_is_quantized(c.dtype)) {
    // Against the float64 golden reference of the F32 fixture: the weights' 16-bit rounding.
    const Tensor reference = io::read_npy(testing::fixture(stem_of(c.model) + ".npy"));
    EXPECT_LE(testing::relative_error(kept, reference), 5e-2);
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  std::string name = p.param.model + "_" + std::string(dtype_name(p.param.dtype));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, KeptWeights,
    ::testing::Values(Case{"gpt2-tiny", DType::F16, 1e-4}, Case{"gpt2-tiny", DType::BF16, 1e-4},
                      Case{"llama-tiny", DType::F16, 1e-4}, Case{"llama-tiny", DType::BF16, 1e-4},
                      Case{"qwen2-tiny", DType::F16, 1e-4}, Case{"bert-tiny", DType::F16, 1e-4},
                      Case{"gpt2-tiny", DType::Q8_0, 1e-2}, Case{"gpt2-tiny", DType::Q4_0, 1e-2},
                      Case{"llama-tiny", DType::Q8_0, 5e-2}, Case{"llama-tiny", DType::Q4_0, 7e-2},
                      Case{"qwen2-tiny", DType::Q8_0, 5e-2}),
    case_name);

// A smooth Llama (weights of std 0.02, synth) at 512 positions: top-1 agreement with F32.
TEST(WeightDtype, TopOneAgreementOver512Positions) {
  const Architecture& arch = *find_architecture("llama");
  ModelConfig c = find_preset(arch, "llama-1b");
  c.vocab_size = 512;
  c.hidden = 256;
  c.layers = 2;
  c.heads = 8;
  c.kv_heads = 4;
  c.head_dim = 32;
  c.ffn = 512;
  c.max_positions = 512;
  TempDir dir;
  write_synthetic_model(arch, c, dir.path(), {});
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::int32_t> token(0, static_cast<std::int32_t>(c.vocab_size) - 1);
  std::vector<std::int32_t> ids(512);
  for (auto& id : ids) id = token(rng);

  const Model f32 = Model::load(dir.path());
  const Tensor ref = logits(f32.graph(), f32.weights(), c.max_positions, ids);
  const std::vector<std::int32_t> top = testing::row_argmax(ref);
  // Measured (seed 5): Q8_0 96.3% of all positions, 100% of the 264 decisive ones, logits error
  // 1.9%; Q4_0 66.4% and 87.1%, error 24%. Random weights leave many near-ties (top-1 within 5% of
  // the largest logit of the runner-up), where any rounding flips the argmax.
  for (const auto& [dtype, min_agreement, min_decisive, max_error] :
       {std::tuple{DType::Q8_0, 0.95, 0.99, 0.03}, std::tuple{DType::Q4_0, 0.60, 0.80, 0.30}}) {
    const Model q = Model::load(dir.path(), {.weight_dtype = dtype});
    const Tensor out = logits(q.graph(), q.weights(), c.max_positions, ids);
    const std::vector<std::int32_t> qtop = testing::row_argmax(out);
    std::size_t same = 0;
    for (std::size_t i = 0; i < top.size(); ++i) same += top[i] == qtop[i] ? 1 : 0;
    const double agreement = static_cast<double>(same) / static_cast<double>(top.size());
    const double error = testing::relative_error(out, ref);
    // Positions whose F32 top-1 leads the runner-up by more than 5% of the largest logit.
    const std::vector<float> r = ref.to_vector(), o = out.to_vector();
    double max_logit = 0.0;
    for (float v : r) max_logit = std::max(max_logit, std::fabs(static_cast<double>(v)));
    std::size_t decisive = 0, decisive_same = 0;
    const auto vocab = static_cast<std::size_t>(c.vocab_size);
    for (std::size_t i = 0; i < top.size(); ++i) {
      double second = -1e30;
      for (std::size_t v = 0; v < vocab; ++v) {
        if (static_cast<std::int32_t>(v) != top[i]) {
          second = std::max(second, static_cast<double>(r[i * vocab + v]));
        }
      }
      if (r[i * vocab + static_cast<std::size_t>(top[i])] - second > 0.05 * max_logit) {
        ++decisive;
        decisive_same += top[i] == qtop[i] ? 1 : 0;
      }
    }
    std::printf("%s: decisive positions %zu, agreement there %zu\n",
                std::string(dtype_name(dtype)).c_str(), decisive, decisive_same);
    (void)o;
    const double decisive_agreement =
        decisive > 0 ? static_cast<double>(decisive_same) / static_cast<double>(decisive) : 0.0;
    EXPECT_GE(decisive, top.size() / 4) << dtype_name(dtype);
    EXPECT_GE(decisive_agreement, min_decisive) << dtype_name(dtype);
    std::printf("%s: top-1 agreement %.4f over %zu positions, logits relative error %.4f\n",
                std::string(dtype_name(dtype)).c_str(), agreement, top.size(), error);
    EXPECT_GE(agreement, min_agreement) << dtype_name(dtype);
    EXPECT_LE(error, max_error) << dtype_name(dtype);
  }
}

TEST(WeightDtype, ParseNames) {
  EXPECT_EQ(parse_weight_dtype("q8_0"), DType::Q8_0);
  EXPECT_EQ(parse_weight_dtype("Q4_0"), DType::Q4_0);
  EXPECT_EQ(parse_weight_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_weight_dtype("i32"), std::nullopt);
  EXPECT_EQ(parse_weight_dtype("q5_k"), std::nullopt);
}

// Owned copies of the model's weights in `owned` (as a worker receives them), and a weak
// reference to each copy's storage by name: expired once nothing holds the copy.
std::map<std::string, std::weak_ptr<const void>> owned_copies(const Model& model,
                                                              WeightMap& owned) {
  std::map<std::string, std::weak_ptr<const void>> storage;
  for (const auto& [name, t] : model.weights()) {
    Tensor copy = t.clone();
    storage[name] = copy.owner();
    owned.emplace(name, std::move(copy));
  }
  return storage;
}

// An executor binds Q8_0/Q4_0 linear weights packed (kernels/packed_weight.h) and keeps only the
// shape of a weight that nothing but packed linears reads: a map of owned copies (as a worker
// receives them) frees those once the caller lets go of it, and the answer is the one of an
// executor bound to the model's own tensors. Weights other ops read (the embedding, norms) stay.
TEST(PackedBinding, WeightsOnlyPackedLinearsReadAreLetGo) {
  for (DType dtype : {DType::Q8_0, DType::Q4_0, DType::F16, DType::BF16}) {
    const Model model = Model::load(testing::fixture_model("llama-tiny"), {.weight_dtype = dtype});
    WeightMap owned;
    const auto storage = owned_copies(model, owned);
    const std::vector<std::int32_t> ids = {509, 17, 230, 5, 81, 400, 12};
    const Tensor expected =
        logits(model.graph(), model.weights(), model.config().max_positions, ids);
    Executor executor(model.graph(), owned, model.config().max_positions);
    owned.clear();
    const std::string q = "model.layers.0.self_attn.q_proj.weight";
    ASSERT_EQ(model.weights().at(q).dtype(), dtype);
    EXPECT_TRUE(storage.at(q).expired()) << dtype_name(dtype);
    EXPECT_FALSE(storage.at("model.embed_tokens.weight").expired()) << dtype_name(dtype);
    EXPECT_FALSE(storage.at("model.norm.weight").expired()) << dtype_name(dtype);
    const Tensor got = executor.forward(ids, true);
    ASSERT_EQ(got.shape(), expected.shape());
    EXPECT_EQ(got.to_vector(), expected.to_vector()) << dtype_name(dtype);
  }
}

// A head tied to the embedding (qwen2-tiny) packs the table once: the embedding reads its rows
// from the packed form, so the table's own storage is let go of too, and the answer is the one
// of an executor bound to the model's tensors.
TEST(PackedBinding, ATiedTableIsHeldOncePacked) {
  for (DType dtype : {DType::Q8_0, DType::F16}) {
    const Model model = Model::load(testing::fixture_model("qwen2-tiny"), {.weight_dtype = dtype});
    ASSERT_TRUE(model.config().tie_word_embeddings);
    WeightMap owned;
    const auto storage = owned_copies(model, owned);
    const std::vector<std::int32_t> ids = {5, 17, 230, 5, 81};
    const Tensor expected =
        logits(model.graph(), model.weights(), model.config().max_positions, ids);
    Executor executor(model.graph(), owned, model.config().max_positions);
    owned.clear();
    EXPECT_TRUE(storage.at("model.embed_tokens.weight").expired()) << dtype_name(dtype);
    const Tensor got = executor.forward(ids, true);
    EXPECT_EQ(got.to_vector(), expected.to_vector()) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace huddle
