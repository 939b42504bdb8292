// WeightSpill: converted weights written to an unlinked file and read back as views of its
// mapping; Model::load spills the 16-bit and quantised matrices it converts.
#include "model/weight_spill.h"

#include "core/quant.h"
#include "io/mapped_file.h"
#include "model/architecture.h"
#include "model/model.h"
#include "model/synth.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

namespace huddle {
namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST(WeightSpill, TensorsComeBackAsViewsOfAFileThatHasNoName) {
  testing::TempDir dir;
  std::vector<float> values(3 * 64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * static_cast<float>(i) - 7;
  const Tensor f32 = Tensor::from_f32({3, 64}, values);
  const Tensor q8 = quantize(f32, DType::Q8_0);
  WeightSpill spill(dir.path());
  ASSERT_TRUE(spill.add("a", f32));
  ASSERT_TRUE(spill.add("b", q8));
  // The file has no name from the start: a process killed now leaves nothing behind.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  auto views = spill.finish();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_TRUE(same_bytes(views.at("a"), f32));
  EXPECT_TRUE(same_bytes(views.at("b"), q8));
  EXPECT_TRUE(io::in_mapped_file(views.at("b").raw()));
  EXPECT_FALSE(io::in_mapped_file(q8.raw()));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(WeightSpill, WithoutAFileItDeclinesAndTheCallerKeepsItsTensors) {
  WeightSpill spill("/nonexistent/huddle-spill-dir");
  EXPECT_FALSE(spill.add("a", Tensor::from_f32({1, 32}, std::vector<float>(32, 1.0f))));
  EXPECT_TRUE(spill.finish().empty());
}

// A model quantised at load: its large matrices are views of the spill file, byte for byte the
// F32 weights quantised; small ones (norm scales) stay in memory.
TEST(WeightSpill, AModelQuantisedAtLoadHoldsItsLargeMatricesInTheSpillFile) {
  const Architecture& arch = *find_architecture("llama");
  ModelConfig c = find_preset(arch, "llama-1b");
  c.vocab_size = 1024;
  c.hidden = 512;
  c.layers = 1;
  c.heads = 8;
  c.kv_heads = 4;
  c.head_dim = 64;
  c.ffn = 2048;  // each MLP matrix 1.1 MB as Q8_0: spilled
  c.max_positions = 64;
  testing::TempDir dir;
  write_synthetic_model(arch, c, dir.path(), {});
  const Model f32 = Model::load(dir.path());
  const Model q8 = Model::load(dir.path(), {.weight_dtype = DType::Q8_0});
  int spilled = 0;
  for (const auto& [name, t] : q8.weights()) {
    const Tensor& source = f32.weights().at(name);
    if (t.dtype() == DType::Q8_0) {
      EXPECT_TRUE(same_bytes(t, quantize(source, DType::Q8_0))) << name;
      if (t.nbytes() >= (1u << 20)) {
        EXPECT_TRUE(io::in_mapped_file(t.raw())) << name;
        ++spilled;
      }
    } else {
      EXPECT_TRUE(same_bytes(t, source)) << name;
    }
  }
  EXPECT_EQ(spilled, 3);  // gate, up and down; attention, embedding and head are under 1 MiB
}

}  // namespace
}  // namespace huddle
