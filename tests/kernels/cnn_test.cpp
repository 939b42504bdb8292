// CNN and N-D kernels: fast path vs plain reference over a grid of shapes (odd sizes, 1, 13,
// 127), fixed seeds, tolerance kTol · max|ref|; and the row-band form of conv and pooling, whose
// bands must reproduce the whole image's rows exactly.
#include "kernels/cnn.h"
#include "kernels/cnn_reference.h"
#include "kernels/kernels.h"
#include "kernels/tensor_ops.h"
#include "kernels/test_util.h"

#include <gtest/gtest.h>

#include <cstring>

namespace huddle::kernels {
namespace {

using testing::close;
using testing::nan_like;
using testing::random_tensor;

struct ConvCase {
  std::int64_t n, c, h, w, o, k, stride, pad, dil, groups;
};

Window2d window(const ConvCase& cc) {
  Window2d w;
  w.kernel_h = w.kernel_w = cc.k;
  w.stride_h = w.stride_w = cc.stride;
  w.pad_top = w.pad_left = w.pad_bottom = w.pad_right = cc.pad;
  w.dilation_h = w.dilation_w = cc.dil;
  return w;
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      // n, c, h, w, o, k, stride, pad, dil, groups
      {1, 3, 13, 13, 16, 3, 1, 1, 1, 1},  // 3x3 same
      {1, 16, 13, 11, 8, 1, 1, 0, 1, 1},  // 1x1 direct GEMM
      {2, 5, 9, 7, 7, 3, 2, 1, 1, 1},     // stride 2, odd channels, batch 2
      {1, 8, 13, 13, 8, 3, 1, 1, 1, 8},   // depthwise
      {1, 8, 14, 9, 16, 3, 2, 1, 1, 8},   // depthwise, multiplier 2, stride 2
      {1, 6, 12, 12, 9, 3, 1, 2, 2, 3},   // grouped + dilation
      {1, 4, 1, 127, 5, 1, 1, 0, 1, 1},   // one row
      {1, 1, 127, 3, 1, 5, 1, 2, 1, 1},   // 127 rows, tall kernel
      {1, 3, 17, 17, 4, 7, 2, 3, 1, 1},   // 7x7 stem
      {1, 13, 5, 5, 13, 5, 1, 0, 1, 13},  // depthwise 5x5 no pad
      {1, 8, 8, 8, 12, 1, 2, 0, 1, 1},    // 1x1 stride 2 (im2col path)
      {1, 127, 3, 3, 1, 3, 1, 1, 1, 1},   // 127 channels in
  };
  return cases;
}

TEST(CnnKernels, ConvMatchesReferenceWithEveryActivation) {
  std::mt19937 rng(13);
  const std::vector<ActivationSpec> acts = {
      {Activation::None, 0, 0},      {Activation::Relu, 0, 0},
      {Activation::Clip, 0, 6},      {Activation::Silu, 0, 0},
      {Activation::HardSwish, 0, 0}, {Activation::HardSigmoid, 0.2f, 0.5f},
      {Activation::Sigmoid, 0, 0}};
  for (const ConvCase& cc : conv_cases()) {
    const Window2d win = window(cc);
    const Tensor x = random_tensor(rng, {cc.n, cc.c, cc.h, cc.w});
    const Tensor w = random_tensor(rng, {cc.o, cc.c / cc.groups, cc.k, cc.k});
    const Tensor b = random_tensor(rng, {cc.o});
    const std::int64_t ho = window_out_h(win, cc.h), wo = window_out_w(win, cc.w);
    ASSERT_GT(ho, 0);
    for (std::size_t ai = 0; ai < acts.size(); ++ai) {
      const Tensor* bias = ai % 2 == 0 ? &b : nullptr;
      Tensor fast = nan_like(Tensor::empty(DType::F32, {cc.n, cc.o, ho, wo}));
      Tensor ref = nan_like(fast);
      conv2d(x, w, bias, win, cc.groups, acts[ai], whole_band(cc.h, ho), fast);
      reference::conv2d(x, w, bias, win, cc.groups, acts[ai], whole_band(cc.h, ho), ref);
      EXPECT_TRUE(close(fast, ref))
          << "conv c" << cc.c << " h" << cc.h << " w" << cc.w << " o" << cc.o << " k" << cc.k
          << " s" << cc.stride << " g" << cc.groups << " act " << activation_name(acts[ai].kind);
    }
  }
}

// The oneDNN path keeps each convolution's weights reordered into its layout. A worker binds new
// weight tensors in every session: once a weight tensor is freed, its copy must go at the next
// build, or a long-running worker grows by a model's conv weights per session. Ten "sessions"
// of fresh weights leave no more cached convolutions than one.
TEST(CnnKernels, ConvolutionsOfFreedWeightsAreNotKept) {
  std::mt19937 rng(5);
  const ConvCase cc{1, 16, 13, 13, 32, 3, 1, 1, 1, 1};
  const Window2d win = window(cc);
  const Tensor x = random_tensor(rng, {cc.n, cc.c, cc.h, cc.w});
  Tensor y = Tensor::empty(DType::F32, {cc.n, cc.o, cc.h, cc.w});
  std::size_t after_first = 0;
  for (int session = 0; session < 10; ++session) {
    const Tensor w = random_tensor(rng, {cc.o, cc.c, cc.k, cc.k});
    conv2d(x, w, nullptr, win, 1, {Activation::Relu, 0, 0}, whole_band(cc.h, cc.h), y);
    if (session == 0) {
      after_first = cached_convolutions();
      if (after_first == 0) GTEST_SKIP() << "built without oneDNN: nothing is cached";
    }
    EXPECT_LE(cached_convolutions(), after_first) << "session " << session;
  }
}

// Output rows [r0, r1) computed from only the input rows they need equal the same rows of the
// whole-image output, for several split points (the form EdgeFlow's row partitions will use):
// pooling bit for bit, convolution within GEMM reassociation.
TEST(CnnKernels, ConvAndPoolRowBandsEqualTheWholeImage) {
  std::mt19937 rng(7);
  for (const ConvCase& cc : conv_cases()) {
    if (cc.n != 1) continue;
    const Window2d win = window(cc);
    const Tensor x = random_tensor(rng, {1, cc.c, cc.h, cc.w});
    const Tensor w = random_tensor(rng, {cc.o, cc.c / cc.groups, cc.k, cc.k});
    const std::int64_t ho = window_out_h(win, cc.h), wo = window_out_w(win, cc.w);
    Tensor whole = Tensor::empty(DType::F32, {1, cc.o, ho, wo});
    conv2d(x, w, nullptr, win, cc.groups, {Activation::Relu, 0, 0}, whole_band(cc.h, ho), whole);
    for (std::int64_t split = 1; split < ho; split += std::max<std::int64_t>(1, ho / 4)) {
      for (const auto& [r0, r1] : {std::pair{std::int64_t{0}, split}, std::pair{split, ho}}) {
        const RowSpan need = input_rows_for(win, r0, r1, cc.h);
        ASSERT_LT(need.begin, need.end);
        // The band's input: only rows [need.begin, need.end) of each channel.
        Tensor xb = Tensor::empty(DType::F32, {1, cc.c, need.end - need.begin, cc.w});
        for (std::int64_t ch = 0; ch < cc.c; ++ch) {
          std::memcpy(xb.f32() + ch * (need.end - need.begin) * cc.w,
                      x.f32() + (ch * cc.h + need.begin) * cc.w,
                      static_cast<std::size_t>((need.end - need.begin) * cc.w) * sizeof(float));
        }
        const RowBand band{r0, r1, need.begin, cc.h};
        Tensor part = nan_like(Tensor::empty(DType::F32, {1, cc.o, r1 - r0, wo}));
        Tensor part_ref = nan_like(part);
        conv2d(xb, w, nullptr, win, cc.groups, {Activation::Relu, 0, 0}, band, part);
        reference::conv2d(xb, w, nullptr, win, cc.groups, {Activation::Relu, 0, 0}, band, part_ref);
        EXPECT_TRUE(close(part, part_ref));
        for (std::int64_t oc = 0; oc < cc.o; ++oc) {
          for (std::int64_t r = r0; r < r1; ++r) {
            for (std::int64_t q = 0; q < wo; ++q) {
              // Equal up to GEMM blocking (BLAS sums in another order for another width).
              ASSERT_NEAR(part.f32()[(oc * (r1 - r0) + r - r0) * wo + q],
                          whole.f32()[(oc * ho + r) * wo + q], 1e-5 * cc.c * cc.k * cc.k)
                  << "conv k" << cc.k << " s" << cc.stride << " rows [" << r0 << ", " << r1
                  << ") oc " << oc << " r " << r << " q " << q;
            }
          }
        }
        // Max pooling over the same band.
        if (cc.pad < cc.k && cc.dil == 1) {
          Tensor pw = Tensor::empty(DType::F32, {1, cc.c, ho, wo});
          pool2d(x, PoolKind::Max, win, false, whole_band(cc.h, ho), pw);
          Tensor pb = Tensor::empty(DType::F32, {1, cc.c, r1 - r0, wo});
          pool2d(xb, PoolKind::Max, win, false, band, pb);
          for (std::int64_t ch = 0; ch < cc.c; ++ch) {
            for (std::int64_t r = r0; r < r1; ++r) {
              for (std::int64_t q = 0; q < wo; ++q) {
                ASSERT_EQ(pb.f32()[(ch * (r1 - r0) + r - r0) * wo + q],
                          pw.f32()[(ch * ho + r) * wo + q]);
              }
            }
          }
        }
      }
    }
  }
}

TEST(CnnKernels, PoolsMatchReference) {
  std::mt19937 rng(3);
  struct PoolCase {
    std::int64_t c, h, w, k, stride, pad;
    bool ceil;
  };
  const std::vector<PoolCase> cases = {{3, 13, 13, 2, 2, 0, false}, {5, 13, 11, 3, 2, 1, false},
                                       {1, 127, 3, 3, 1, 1, false}, {4, 13, 13, 3, 2, 0, true},
                                       {2, 1, 127, 1, 1, 0, false}, {16, 8, 8, 2, 2, 1, true}};
  for (const PoolCase& pc : cases) {
    Window2d win;
    win.kernel_h = win.kernel_w = pc.k;
    win.stride_h = win.stride_w = pc.stride;
    win.pad_top = win.pad_left = win.pad_bottom = win.pad_right = pc.pad;
    win.ceil_mode = pc.ceil;
    const Tensor x = random_tensor(rng, {1, pc.c, pc.h, pc.w});
    const std::int64_t ho = window_out_h(win, pc.h), wo = window_out_w(win, pc.w);
    for (PoolKind kind : {PoolKind::Max, PoolKind::Average}) {
      for (bool include_pad : {false, true}) {
        Tensor fast = nan_like(Tensor::empty(DType::F32, {1, pc.c, ho, wo}));
        Tensor ref = nan_like(fast);
        pool2d(x, kind, win, include_pad, whole_band(pc.h, ho), fast);
        reference::pool2d(x, kind, win, include_pad, whole_band(pc.h, ho), ref);
        EXPECT_TRUE(close(fast, ref)) << "pool h" << pc.h << " k" << pc.k << " ceil " << pc.ceil;
      }
    }
    Tensor g = nan_like(Tensor::empty(DType::F32, {1, pc.c, 1, 1}));
    Tensor gr = nan_like(g);
    global_avg_pool(x, g);
    reference::global_avg_pool(x, gr);
    EXPECT_TRUE(close(g, gr));
  }
}

TEST(CnnKernels, ResizeMatchesReference) {
  std::mt19937 rng(5);
  const Tensor x = random_tensor(rng, {1, 3, 13, 7});
  for (ResizeMode mode : {ResizeMode::Nearest, ResizeMode::Linear}) {
    for (CoordMode coord : {CoordMode::HalfPixel, CoordMode::PytorchHalfPixel,
                            CoordMode::AlignCorners, CoordMode::Asymmetric}) {
      for (NearestMode nm : {NearestMode::RoundPreferFloor, NearestMode::RoundPreferCeil,
                             NearestMode::Floor, NearestMode::Ceil}) {
        for (const auto& [ho, wo] : {std::pair{26, 14}, std::pair{6, 3}, std::pair{1, 1}}) {
          ResizeSpec s{mode, coord, nm, static_cast<float>(ho) / 13.0f,
                       static_cast<float>(wo) / 7.0f};
          Tensor fast = nan_like(Tensor::empty(DType::F32, {1, 3, ho, wo}));
          Tensor ref = nan_like(fast);
          resize(x, s, fast);
          reference::resize(x, s, ref);
          EXPECT_TRUE(close(fast, ref)) << static_cast<int>(mode) << static_cast<int>(coord)
                                        << static_cast<int>(nm) << " " << ho << "x" << wo;
        }
      }
    }
  }
  // Nearest x2, asymmetric + floor (the YOLO fixture): out[y][x] = in[y/2][x/2] exactly.
  Tensor up = Tensor::empty(DType::F32, {1, 3, 26, 14});
  resize(x, {ResizeMode::Nearest, CoordMode::Asymmetric, NearestMode::Floor, 2.0f, 2.0f}, up);
  EXPECT_EQ(up.f32()[(2 * 26 + 25) * 14 + 13], x.f32()[(2 * 13 + 12) * 7 + 6]);
}

TEST(CnnKernels, BroadcastingArithmeticMatchesReference) {
  std::mt19937 rng(11);
  const std::vector<std::pair<Shape, Shape>> cases = {{{1, 13, 5, 5}, {1, 13, 5, 5}},
                                                      {{1, 13, 5, 5}, {1, 13, 1, 1}},
                                                      {{1, 13, 5, 5}, {1}},
                                                      {{2, 1, 7}, {3, 1}},
                                                      {{127}, {1, 127}},
                                                      {{1, 4, 1, 3}, {1, 1, 5, 1}}};
  for (const auto& [sa, sb] : cases) {
    const Tensor a = random_tensor(rng, sa);
    const Tensor b = random_tensor(rng, sb, 0.5f, 2.0f);
    Shape out;
    ASSERT_TRUE(broadcast_shapes(sa, sb, out));
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div}) {
      Tensor fast = nan_like(Tensor::empty(DType::F32, out));
      Tensor ref = nan_like(fast);
      binary(op, a, b, fast);
      reference::binary(op, a, b, ref);
      EXPECT_TRUE(close(fast, ref))
          << shape_str(sa) << " op " << static_cast<int>(op) << " " << shape_str(sb);
    }
  }
  Shape out;
  EXPECT_FALSE(broadcast_shapes({2, 3}, {4, 3}, out));
}

TEST(CnnKernels, SoftmaxMatmulAndUnaryMatchReference) {
  std::mt19937 rng(17);
  const Tensor x = random_tensor(rng, {2, 13, 5}, -4.0f, 4.0f);
  for (const auto& [outer, len, inner] :
       {std::tuple{2, 13, 5}, std::tuple{26, 5, 1}, std::tuple{1, 130, 1}}) {
    Tensor fast = nan_like(x), ref = nan_like(x);
    softmax_axis(x, outer, len, inner, fast);
    reference::softmax_axis(x, outer, len, inner, ref);
    EXPECT_TRUE(close(fast, ref));
  }
  for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{
           {{1, 13}, {13, 127}}, {{3, 5, 7}, {7, 2}}, {{2, 1, 4, 3}, {5, 3, 1}}}) {
    const Tensor a = random_tensor(rng, sa), b = random_tensor(rng, sb);
    Shape batch;
    ASSERT_TRUE(
        broadcast_shapes(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2), batch));
    batch.push_back(sa[sa.size() - 2]);
    batch.push_back(sb.back());
    Tensor fast = nan_like(Tensor::empty(DType::F32, batch)), ref = nan_like(fast);
    matmul(a, b, fast);
    reference::matmul(a, b, ref);
    EXPECT_TRUE(close(fast, ref)) << shape_str(sa) << " x " << shape_str(sb);
  }
  for (Activation act : {Activation::Relu, Activation::Sigmoid, Activation::HardSwish,
                         Activation::Silu, Activation::Clip, Activation::HardSigmoid}) {
    const ActivationSpec spec{act, act == Activation::Clip ? -1.0f : 0.3f,
                              act == Activation::Clip ? 2.5f : 0.4f};
    Tensor fast = nan_like(x), ref = nan_like(x);
    unary(spec, x, fast);
    reference::unary(spec, x, ref);
    EXPECT_TRUE(close(fast, ref)) << activation_name(act);
  }
}

TEST(CnnKernels, ConcatSliceTransposeMoveTheRightElements) {
  std::mt19937 rng(19);
  const Tensor a = random_tensor(rng, {1, 2, 3, 4}), b = random_tensor(rng, {1, 5, 3, 4});
  Tensor cat = Tensor::empty(DType::F32, {1, 7, 3, 4});
  concat({&a, &b}, 1, cat);
  EXPECT_EQ(cat.f32()[(0 * 3 + 2) * 4 + 3], a.f32()[(0 * 3 + 2) * 4 + 3]);
  EXPECT_EQ(cat.f32()[(3 * 3 + 1) * 4 + 2], b.f32()[(1 * 3 + 1) * 4 + 2]);
  // Slice channels [2, 7) step 2 and columns reversed.
  Tensor s = Tensor::empty(DType::F32, {1, 3, 3, 4});
  slice(cat, {0, 2, 0, 3}, {1, 2, 1, -1}, s);
  EXPECT_EQ(s.f32()[(1 * 3 + 2) * 4 + 0], cat.f32()[(4 * 3 + 2) * 4 + 3]);
  EXPECT_EQ(s.f32()[(2 * 3 + 0) * 4 + 3], cat.f32()[(6 * 3 + 0) * 4 + 0]);
  Tensor t = Tensor::empty(DType::F32, {4, 3, 1, 2});
  transpose(a, {3, 2, 0, 1}, t);
  for (std::int64_t i = 0; i < 4; ++i)
    for (std::int64_t j = 0; j < 3; ++j)
      for (std::int64_t k = 0; k < 2; ++k)
        ASSERT_EQ(t.f32()[(i * 3 + j) * 2 + k], a.f32()[(k * 3 + j) * 4 + i]);
}

TEST(CnnKernels, ThreadCountDoesNotChangeConvBeyondBlasReassociation) {
  std::mt19937 rng(23);
  const ConvCase cc{1, 16, 31, 29, 24, 3, 1, 1, 1, 1};
  const Window2d win = window(cc);
  const Tensor x = random_tensor(rng, {1, cc.c, cc.h, cc.w});
  const Tensor w = random_tensor(rng, {cc.o, cc.c, 3, 3});
  Tensor one = Tensor::empty(DType::F32, {1, cc.o, 31, 29}), two = one.clone();
  const int before = num_threads();
  set_num_threads(1);
  conv2d(x, w, nullptr, win, 1, {}, whole_band(31, 31), one);
  set_num_threads(2);
  conv2d(x, w, nullptr, win, 1, {}, whole_band(31, 31), two);
  set_num_threads(before);
  EXPECT_TRUE(close(one, two));
}

}  // namespace
}  // namespace huddle::kernels
