// Channels-last kernels ([N,H,W,C], kernels/cnn.h) against their NCHW twins on transposed
// tensors: pooling bit for bit (the same taps in the same order), convolution within GEMM
// reassociation; and transpose's tiled 2-D path against plain index arithmetic.
#include "kernels/cnn.h"
#include "kernels/tensor_ops.h"
#include "kernels/test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

namespace huddle::kernels {
namespace {

using testing::close;
using testing::nan_like;
using testing::random_tensor;

Tensor to_nhwc(const Tensor& x) {
  Tensor y = Tensor::empty(DType::F32, {x.dim(0), x.dim(2), x.dim(3), x.dim(1)});
  transpose(x, {0, 2, 3, 1}, y);
  return y;
}

Tensor to_nchw(const Tensor& x) {
  Tensor y = Tensor::empty(DType::F32, {x.dim(0), x.dim(3), x.dim(1), x.dim(2)});
  transpose(x, {0, 3, 1, 2}, y);
  return y;
}

Window2d square_window(std::int64_t k, std::int64_t stride, std::int64_t pad, std::int64_t dil) {
  Window2d win;
  win.kernel_h = win.kernel_w = k;
  win.stride_h = win.stride_w = stride;
  win.pad_top = win.pad_left = win.pad_bottom = win.pad_right = pad;
  win.dilation_h = win.dilation_w = dil;
  return win;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// y[i] = x[permuted i], one element at a time (the definition transpose's tiles must keep).
Tensor plain_transpose(const Tensor& x, const std::vector<std::int64_t>& perm) {
  const auto rank = static_cast<std::size_t>(x.rank());
  Shape ys(rank);
  for (std::size_t d = 0; d < rank; ++d) ys[d] = x.dim(static_cast<int>(perm[d]));
  Tensor y = Tensor::empty(DType::F32, ys);
  std::vector<std::int64_t> xstride(rank, 1);
  for (std::size_t d = rank - 1; d > 0; --d)
    xstride[d - 1] = xstride[d] * x.dim(static_cast<int>(d));
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    std::int64_t rem = i, off = 0;
    for (std::size_t k = 0; k < rank; ++k) {
      const std::size_t d = rank - 1 - k;
      off += (rem % ys[d]) * xstride[static_cast<std::size_t>(perm[d])];
      rem /= ys[d];
    }
    y.f32()[i] = x.f32()[off];
  }
  return y;
}

TEST(ChannelsLast, TransposeEqualsItsDefinitionForEveryPermutation) {
  std::mt19937 rng(5);
  // Shapes with size-1 dimensions and sizes around the 32-element tile.
  const std::vector<Shape> shapes = {{1, 3, 33, 35}, {2, 40, 1, 7}, {1, 1, 5, 1}, {3, 31, 65, 2}};
  for (const Shape& s : shapes) {
    const Tensor x = random_tensor(rng, s);
    std::vector<std::int64_t> perm(4);
    std::iota(perm.begin(), perm.end(), 0);
    do {
      const Tensor want = plain_transpose(x, perm);
      Tensor got = nan_like(want);
      transpose(x, perm, got);
      EXPECT_TRUE(same_bits(got, want))
          << shape_str(s) << " perm " << perm[0] << perm[1] << perm[2] << perm[3];
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  // A 5-D head layout: [1, 3, 85, 20, 20] -> [1, 3, 20, 20, 85].
  const Tensor x = random_tensor(rng, {1, 3, 85, 20, 20});
  const Tensor want = plain_transpose(x, {0, 1, 3, 4, 2});
  Tensor got = nan_like(want);
  transpose(x, {0, 1, 3, 4, 2}, got);
  EXPECT_TRUE(same_bits(got, want));
}

TEST(ChannelsLast, PoolingGivesTheNchwBits) {
  std::mt19937 rng(7);
  struct NhwcPoolCase {
    std::int64_t n, c, h, w, k, stride, pad, dil;
    bool ceil;
  };
  const std::vector<NhwcPoolCase> cases = {{1, 3, 13, 13, 2, 2, 0, 1, false},
                                           {2, 5, 13, 11, 3, 2, 1, 1, false},
                                           {1, 70, 9, 9, 3, 1, 1, 2, false},
                                           {1, 4, 13, 13, 3, 2, 0, 1, true},
                                           {1, 16, 8, 8, 2, 2, 1, 1, true}};
  for (const NhwcPoolCase& pc : cases) {
    Window2d win = square_window(pc.k, pc.stride, pc.pad, pc.dil);
    win.ceil_mode = pc.ceil;
    const Tensor x = random_tensor(rng, {pc.n, pc.c, pc.h, pc.w});
    const std::int64_t ho = window_out_h(win, pc.h), wo = window_out_w(win, pc.w);
    for (PoolKind kind : {PoolKind::Max, PoolKind::Average}) {
      for (bool include_pad : {false, true}) {
        Tensor want = nan_like(Tensor::empty(DType::F32, {pc.n, pc.c, ho, wo}));
        pool2d(x, kind, win, include_pad, whole_band(pc.h, ho), want);
        Tensor got = nan_like(Tensor::empty(DType::F32, {pc.n, ho, wo, pc.c}));
        pool2d_nhwc(to_nhwc(x), kind, win, include_pad, whole_band(pc.h, ho), got);
        EXPECT_TRUE(same_bits(to_nchw(got), want))
            << "pool c" << pc.c << " h" << pc.h << " k" << pc.k << " pad " << pc.pad;
      }
    }
    Tensor want = nan_like(Tensor::empty(DType::F32, {pc.n, pc.c, 1, 1}));
    global_avg_pool(x, want);
    Tensor got = nan_like(Tensor::empty(DType::F32, {pc.n, 1, 1, pc.c}));
    global_avg_pool_nhwc(to_nhwc(x), got);
    EXPECT_TRUE(same_bits(to_nchw(got), want)) << "global pool c" << pc.c;
  }
}

TEST(ChannelsLast, ConvolutionMatchesNchw) {
  std::mt19937 rng(11);
  struct NhwcConvCase {
    std::int64_t n, c, h, w, o, k, stride, pad, dil, groups;
  };
  const std::vector<NhwcConvCase> cases = {
      // n, c, h, w, o, k, stride, pad, dil, groups
      {1, 3, 13, 13, 16, 3, 1, 1, 1, 1}, {1, 16, 13, 11, 8, 1, 1, 0, 1, 1},
      {2, 5, 9, 7, 7, 3, 2, 1, 1, 1},    {1, 8, 13, 13, 8, 3, 1, 1, 1, 8},
      {1, 8, 14, 9, 16, 3, 2, 1, 1, 8},  {1, 6, 12, 12, 9, 3, 1, 2, 2, 3},
      {1, 3, 17, 17, 4, 7, 2, 3, 1, 1},  {1, 64, 7, 7, 32, 1, 1, 0, 1, 1}};
  const std::vector<ActivationSpec> acts = {{Activation::None, 0, 0},
                                            {Activation::Relu, 0, 0},
                                            {Activation::Silu, 0, 0},
                                            {Activation::HardSigmoid, 0.2f, 0.5f}};
  for (const NhwcConvCase& cc : cases) {
    const Window2d win = square_window(cc.k, cc.stride, cc.pad, cc.dil);
    const Tensor x = random_tensor(rng, {cc.n, cc.c, cc.h, cc.w});
    const Tensor w = random_tensor(rng, {cc.o, cc.c / cc.groups, cc.k, cc.k});
    const Tensor b = random_tensor(rng, {cc.o});
    const std::int64_t ho = window_out_h(win, cc.h), wo = window_out_w(win, cc.w);
    for (std::size_t ai = 0; ai < acts.size(); ++ai) {
      const Tensor* bias = ai % 2 == 0 ? &b : nullptr;
      Tensor want = nan_like(Tensor::empty(DType::F32, {cc.n, cc.o, ho, wo}));
      conv2d(x, w, bias, win, cc.groups, acts[ai], whole_band(cc.h, ho), want);
      Tensor got = nan_like(Tensor::empty(DType::F32, {cc.n, ho, wo, cc.o}));
      conv2d_nhwc(to_nhwc(x), w, bias, win, cc.groups, acts[ai], whole_band(cc.h, ho), got);
      EXPECT_TRUE(close(to_nchw(got), want))
          << "conv c" << cc.c << " h" << cc.h << " o" << cc.o << " k" << cc.k << " s" << cc.stride
          << " g" << cc.groups << " act " << activation_name(acts[ai].kind);
    }
  }
}

// y = residual_act(act(conv + bias) + r) with r in y on entry: oneDNN's sum post-op, its
// activation after the sum where it has no post-op for it (hard_sigmoid), and the unfused path
// where the conv's own activation has none.
TEST(ChannelsLast, ConvolutionAddsTheResidualInPlace) {
  std::mt19937 rng(17);
  const Window2d win = square_window(3, 1, 1, 1);
  const Tensor x = random_tensor(rng, {1, 9, 11, 11});
  const Tensor w = random_tensor(rng, {16, 9, 3, 3});
  const Tensor b = random_tensor(rng, {16});
  const Tensor r = random_tensor(rng, {1, 11, 11, 16});
  const std::vector<std::pair<ActivationSpec, ActivationSpec>> cases = {
      {{Activation::None, 0, 0}, {Activation::Relu, 0, 0}},
      {{Activation::Silu, 0, 0}, {Activation::None, 0, 0}},
      {{Activation::Relu, 0, 0}, {Activation::HardSigmoid, 0.2f, 0.5f}},
      {{Activation::HardSigmoid, 0.2f, 0.5f}, {Activation::Clip, -0.5f, 0.5f}}};
  for (const auto& [act, residual_act] : cases) {
    Tensor want = Tensor::empty(DType::F32, {1, 11, 11, 16});
    conv2d_nhwc(to_nhwc(x), w, &b, win, 1, act, whole_band(11, 11), want);
    for (std::int64_t i = 0; i < want.numel(); ++i) want.f32()[i] += r.f32()[i];
    apply_activation(residual_act, want.f32(), want.numel());
    Tensor got = r.clone();
    conv2d_nhwc(to_nhwc(x), w, &b, win, 1, act, whole_band(11, 11), got, &residual_act);
    EXPECT_TRUE(close(got, want)) << activation_name(act.kind) << " then "
                                  << activation_name(residual_act.kind);
  }
}

}  // namespace
}  // namespace huddle::kernels
