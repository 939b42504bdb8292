// Norms, activations, element-wise ops, softmax, embedding and RoPE: fast path against the
// reference over odd shapes, strided inputs and in-place (aliased) outputs.
#include "core/error.h"
#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <vector>

namespace huddle::kernels {
namespace {

using testing::close;
using testing::random_matrix;
using testing::random_tensor;

constexpr std::int64_t kRows[] = {1, 3, 13, 127, 130};
constexpr std::int64_t kCols[] = {1, 3, 13, 127, 130, 768};

struct Shape2 {
  std::int64_t rows, cols;
  bool strided;
};

std::vector<Shape2> row_grid() {
  std::vector<Shape2> grid;
  for (std::int64_t r : kRows) {
    for (std::int64_t c : kCols) {
      for (bool s : {false, true}) grid.push_back({r, c, s});
    }
  }
  grid.push_back({130, 3072, false});  // large enough to split across threads
  grid.push_back({64, 3072, true});
  return grid;
}

std::string describe_shape(const Shape2& s) {
  return fmt::format("[{}, {}]{}", s.rows, s.cols, s.strided ? " strided" : "");
}

TEST(Norm, LayerNormMatchesReference) {
  std::mt19937 rng(1);
  for (const Shape2& s : row_grid()) {
    // An offset mean makes the variance a small difference of large numbers.
    const Tensor x = random_matrix(rng, s.rows, s.cols, s.strided, 2.0f, 6.0f);
    const Tensor w = random_tensor(rng, {s.cols});
    const Tensor b = random_tensor(rng, {s.cols});
    Tensor ref = testing::nan_like(Tensor::empty(DType::F32, {s.rows, s.cols}));
    Tensor fast = testing::nan_like(ref);
    reference::layer_norm(x, w, b, 1e-5f, ref);
    layer_norm(x, w, b, 1e-5f, fast);
    EXPECT_TRUE(close(fast, ref)) << describe_shape(s);
  }
}

TEST(Norm, RmsNormMatchesReference) {
  std::mt19937 rng(2);
  for (const Shape2& s : row_grid()) {
    const Tensor x = random_matrix(rng, s.rows, s.cols, s.strided, -3.0f, 3.0f);
    const Tensor w = random_tensor(rng, {s.cols});
    Tensor ref = testing::nan_like(Tensor::empty(DType::F32, {s.rows, s.cols}));
    Tensor fast = testing::nan_like(ref);
    reference::rms_norm(x, w, 1e-6f, ref);
    rms_norm(x, w, 1e-6f, fast);
    EXPECT_TRUE(close(fast, ref)) << describe_shape(s);
  }
}

TEST(Norm, InPlace) {
  std::mt19937 rng(3);
  const Tensor x = random_tensor(rng, {13, 130});
  const Tensor w = random_tensor(rng, {130});
  const Tensor b = random_tensor(rng, {130});
  Tensor ref = Tensor::empty(DType::F32, {13, 130});
  reference::layer_norm(x, w, b, 1e-5f, ref);
  Tensor inplace = x.clone();
  layer_norm(inplace, w, b, 1e-5f, inplace);
  EXPECT_TRUE(close(inplace, ref));
  reference::rms_norm(x, w, 1e-5f, ref);
  inplace = x.clone();
  rms_norm(inplace, w, 1e-5f, inplace);
  EXPECT_TRUE(close(inplace, ref));
}

using UnaryFn = std::function<void(const Tensor&, Tensor&)>;

struct Unary {
  const char* name;
  UnaryFn fast, ref;
};

const std::vector<Unary>& unary_ops() {
  static const std::vector<Unary> ops = {
      {"gelu_tanh", gelu_tanh, reference::gelu_tanh},
      {"gelu_erf", gelu_erf, reference::gelu_erf},
      {"silu", silu, reference::silu},
  };
  return ops;
}

TEST(Activation, MatchesReferenceIncludingTails) {
  std::mt19937 rng(4);
  for (const Unary& op : unary_ops()) {
    for (const Shape2& s : row_grid()) {
      const Tensor x = random_matrix(rng, s.rows, s.cols, s.strided, -10.0f, 10.0f);
      Tensor ref = testing::nan_like(Tensor::empty(DType::F32, {s.rows, s.cols}));
      Tensor fast = testing::nan_like(ref);
      op.ref(x, ref);
      op.fast(x, fast);
      EXPECT_TRUE(close(fast, ref)) << op.name << " " << describe_shape(s);
    }
  }
}

TEST(Activation, ElementwiseAccuracyNearZeroAndExtremes) {
  // Relative accuracy per element, where a max-normalised check would hide errors. In the far
  // negative tails the float rounding of the exponent argument (e.g. z² = 72 in gelu_erf) limits
  // it to a few 1e-6; below 1e-30 in magnitude only the absolute floor applies.
  std::vector<float> values;
  for (float v = -12.0f; v <= 12.0f; v += 0.01f) values.push_back(v);
  for (float v : {-1e-6f, 1e-6f, -100.0f, 100.0f, -1e4f, 1e4f}) values.push_back(v);
  const Tensor x = Tensor::from_f32({static_cast<std::int64_t>(values.size())}, values);
  for (const Unary& op : unary_ops()) {
    Tensor ref = Tensor::empty(DType::F32, x.shape());
    Tensor fast = Tensor::empty(DType::F32, x.shape());
    op.ref(x, ref);
    op.fast(x, fast);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double r = ref.f32()[i];
      const double f = fast.f32()[i];
      EXPECT_LE(std::fabs(f - r), 1e-5 * std::fabs(r) + 1e-30)
          << op.name << "(" << values[i] << ") fast " << f << " ref " << r;
    }
  }
}

TEST(Activation, InPlace) {
  std::mt19937 rng(5);
  const Tensor x = random_tensor(rng, {13, 127}, -5.0f, 5.0f);
  for (const Unary& op : unary_ops()) {
    Tensor ref = Tensor::empty(DType::F32, x.shape());
    op.ref(x, ref);
    Tensor inplace = x.clone();
    op.fast(inplace, inplace);
    EXPECT_TRUE(close(inplace, ref)) << op.name;
  }
}

TEST(Elementwise, AddMulMatchReferenceAndAlias) {
  std::mt19937 rng(6);
  using BinaryFn = std::function<void(const Tensor&, const Tensor&, Tensor&)>;
  const std::pair<BinaryFn, BinaryFn> ops[] = {{add, reference::add}, {mul, reference::mul}};
  for (const auto& [fast_op, ref_op] : ops) {
    for (const Shape2& s : row_grid()) {
      const Tensor a = random_matrix(rng, s.rows, s.cols, s.strided);
      const Tensor b = random_matrix(rng, s.rows, s.cols, false);
      Tensor ref = testing::nan_like(Tensor::empty(DType::F32, {s.rows, s.cols}));
      Tensor fast = testing::nan_like(ref);
      ref_op(a, b, ref);
      fast_op(a, b, fast);
      EXPECT_TRUE(close(fast, ref)) << describe_shape(s);
      Tensor acc = b.clone();  // y aliases b: the residual-add pattern
      fast_op(a, acc, acc);
      EXPECT_TRUE(close(acc, ref)) << "aliased " << describe_shape(s);
    }
  }
}

TEST(Softmax, MatchesReference) {
  std::mt19937 rng(7);
  for (const Shape2& s : row_grid()) {
    const Tensor x = random_matrix(rng, s.rows, s.cols, s.strided, -30.0f, 30.0f);
    Tensor ref = x.clone();
    Tensor fast = x;  // in place on the strided view
    reference::softmax_rows(ref);
    softmax_rows(fast);
    EXPECT_TRUE(close(fast, ref)) << describe_shape(s);
  }
}

TEST(Softmax, LargeValuesStayFinite) {
  Tensor x = Tensor::from_f32({1, 3}, std::vector<float>{1e4f, 1e4f, -1e4f});
  softmax_rows(x);
  EXPECT_NEAR(x.f32()[0], 0.5, 1e-6);
  EXPECT_NEAR(x.f32()[1], 0.5, 1e-6);
  EXPECT_NEAR(x.f32()[2], 0.0, 1e-30);
}

TEST(Embedding, MatchesReferenceAndRejectsBadIds) {
  std::mt19937 rng(8);
  for (bool strided : {false, true}) {
    const Tensor table = random_matrix(rng, 50, 13, strided);
    const std::vector<std::int32_t> ids{0, 49, 7, 7, 23};
    Tensor ref = testing::nan_like(Tensor::empty(DType::F32, {5, 13}));
    Tensor fast = testing::nan_like(ref);
    reference::embedding(ids, table, ref);
    embedding(ids, table, fast);
    EXPECT_EQ(fast.to_vector(), ref.to_vector());
    for (std::int32_t bad : {50, -1, 1 << 30}) {
      const std::vector<std::int32_t> bad_ids{1, bad};
      Tensor y = Tensor::empty(DType::F32, {2, 13});
      try {
        embedding(bad_ids, table, y);
        ADD_FAILURE() << "id " << bad << " accepted";
      } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
        EXPECT_NE(msg.find("50"), std::string::npos) << msg;
      }
    }
  }
}

TEST(Rope, MatchesReferenceAtLongPositions) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<std::int32_t> pos_dist(0, 200000);
  for (float theta : {10000.0f, 500000.0f}) {
    for (int heads : {1, 3}) {
      for (int head_dim : {2, 8, 64}) {
        for (std::int64_t t : {1, 3, 13, 130}) {
          for (bool strided : {false, true}) {
            std::vector<std::int32_t> positions(static_cast<std::size_t>(t));
            for (auto& p : positions) p = pos_dist(rng);
            positions[0] = 0;
            Tensor x = random_matrix(rng, t, heads * head_dim, strided);
            Tensor ref = x.clone();
            reference::rope(ref, positions, heads, head_dim, {theta});
            rope(x, positions, heads, head_dim, {theta});
            EXPECT_TRUE(close(x, ref))
                << "theta " << theta << " heads " << heads << " D " << head_dim << " T " << t;
          }
        }
      }
    }
  }
}

TEST(Rope, PreservesPairNorms) {
  std::mt19937 rng(10);
  Tensor x = random_tensor(rng, {4, 2 * 16});
  const Tensor before = x.clone();
  const std::vector<std::int32_t> positions{0, 1, 1000, 123456};
  rope(x, positions, 2, 16, {10000.0f});
  for (std::int64_t t = 0; t < 4; ++t) {
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 8; ++i) {
        const float* a = before.f32() + t * 32 + h * 16;
        const float* b = x.f32() + t * 32 + h * 16;
        EXPECT_NEAR(a[i] * a[i] + a[i + 8] * a[i + 8], b[i] * b[i] + b[i + 8] * b[i + 8], 1e-6);
      }
    }
  }
}

}  // namespace
}  // namespace huddle::kernels
