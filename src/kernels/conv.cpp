// Convolution: oneDNN where it is built (conv_dnnl.cpp: about 2x faster, measured), else a
// depthwise loop, 1x1 direct GEMM, or im2col + OpenBLAS sgemm; fused bias and activation.
// im2col's extra memory is bounded by doing it in row chunks (at most kColsBudget floats).
#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/cnn.h"
#include "kernels/conv_dnnl.h"
#include "kernels/tensor_ops.h"
#include "kernels/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace huddle::kernels {
namespace {

// Floats in one im2col buffer: large enough for long GEMMs, small enough to stay in L2/L3.
constexpr std::int64_t kColsBudget = std::int64_t{1} << 20;

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return -floor_div(-a, b);
}

// Output columns q in [q0, q1) whose input column q·stride - pad + j·dil lies in [0, w).
void valid_cols(std::int64_t j, std::int64_t stride, std::int64_t pad, std::int64_t dil,
                std::int64_t w, std::int64_t wout, std::int64_t& q0, std::int64_t& q1) {
  const std::int64_t off = j * dil - pad;  // input col = q·stride + off
  q0 = std::clamp<std::int64_t>(ceil_div(-off, stride), 0, wout);
  q1 = std::clamp<std::int64_t>(floor_div(w - 1 - off, stride) + 1, q0, wout);
}

void check_band(const Tensor& x, const Window2d& win, const RowBand& band) {
  HUDDLE_CHECK(band.out_end > band.out_begin && band.out_begin >= 0);
  const RowSpan need = input_rows_for(win, band.out_begin, band.out_end, band.in_height);
  HUDDLE_CHECK(need.begin >= band.in_begin && need.end <= band.in_begin + x.dim(2),
               "band needs input rows [{}, {}), tensor holds [{}, {})", need.begin, need.end,
               band.in_begin, band.in_begin + x.dim(2));
}

void depthwise(const float* x, std::int64_t w_in, const float* wt, const Window2d& win,
               const RowBand& band, std::int64_t wout, float* y) {
  const std::int64_t rows = band.out_end - band.out_begin;
  std::fill(y, y + rows * wout, 0.0f);
  for (std::int64_t i = 0; i < win.kernel_h; ++i) {
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t ir =
          (band.out_begin + r) * win.stride_h - win.pad_top + i * win.dilation_h;
      if (ir < 0 || ir >= band.in_height) continue;
      const float* src = x + (ir - band.in_begin) * w_in;
      float* dst = y + r * wout;
      for (std::int64_t j = 0; j < win.kernel_w; ++j) {
        const float k = wt[i * win.kernel_w + j];
        std::int64_t q0 = 0, q1 = 0;
        valid_cols(j, win.stride_w, win.pad_left, win.dilation_w, w_in, wout, q0, q1);
        const std::int64_t off = j * win.dilation_w - win.pad_left;
        if (win.stride_w == 1) {
          const float* s = src + off;
          for (std::int64_t q = q0; q < q1; ++q) dst[q] += k * s[q];
        } else {
          for (std::int64_t q = q0; q < q1; ++q) dst[q] += k * src[q * win.stride_w + off];
        }
      }
    }
  }
}

// cols[K = cg·kh·kw, rows·wout] for output rows [r0, r1) (whole-output indices).
void im2col(const float* x, std::int64_t cg, std::int64_t hx, std::int64_t w_in,
            const Window2d& win, const RowBand& band, std::int64_t r0, std::int64_t r1,
            std::int64_t wout, float* cols) {
  const std::int64_t khw = win.kernel_h * win.kernel_w;
  const std::int64_t n = (r1 - r0) * wout;
  parallel_for(
      0, cg * khw,
      [&](std::int64_t k0, std::int64_t k1) {
        for (std::int64_t k = k0; k < k1; ++k) {
          const std::int64_t c = k / khw, i = (k % khw) / win.kernel_w, j = k % win.kernel_w;
          float* dst_row = cols + k * n;
          std::int64_t q0 = 0, q1 = 0;
          valid_cols(j, win.stride_w, win.pad_left, win.dilation_w, w_in, wout, q0, q1);
          const std::int64_t off = j * win.dilation_w - win.pad_left;
          for (std::int64_t r = r0; r < r1; ++r) {
            float* dst = dst_row + (r - r0) * wout;
            const std::int64_t ir = r * win.stride_h - win.pad_top + i * win.dilation_h;
            if (ir < 0 || ir >= band.in_height) {
              std::fill(dst, dst + wout, 0.0f);
              continue;
            }
            const float* src = x + (c * hx + ir - band.in_begin) * w_in;
            std::fill(dst, dst + q0, 0.0f);
            if (win.stride_w == 1) {
              std::copy(src + q0 + off, src + q1 + off, dst + q0);
            } else {
              for (std::int64_t q = q0; q < q1; ++q) dst[q] = src[q * win.stride_w + off];
            }
            std::fill(dst + q1, dst + wout, 0.0f);
          }
        }
      },
      std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(n, 1)));
}

}  // namespace

const char* activation_name(Activation kind) {
  switch (kind) {
    case Activation::None:
      return "none";
    case Activation::Relu:
      return "relu";
    case Activation::Clip:
      return "clip";
    case Activation::Sigmoid:
      return "sigmoid";
    case Activation::HardSigmoid:
      return "hard_sigmoid";
    case Activation::HardSwish:
      return "hard_swish";
    case Activation::Silu:
      return "silu";
  }
  return "?";
}

std::int64_t window_out_h(const Window2d& w, std::int64_t in_h) {
  const std::int64_t span = w.dilation_h * (w.kernel_h - 1) + 1;
  const std::int64_t room = in_h + w.pad_top + w.pad_bottom - span;
  if (room < 0) return 0;
  return (w.ceil_mode ? ceil_div(room, w.stride_h) : room / w.stride_h) + 1;
}

std::int64_t window_out_w(const Window2d& w, std::int64_t in_w) {
  const std::int64_t span = w.dilation_w * (w.kernel_w - 1) + 1;
  const std::int64_t room = in_w + w.pad_left + w.pad_right - span;
  if (room < 0) return 0;
  return (w.ceil_mode ? ceil_div(room, w.stride_w) : room / w.stride_w) + 1;
}

RowBand whole_band(std::int64_t in_height, std::int64_t out_height) {
  return RowBand{0, out_height, 0, in_height};
}

RowSpan input_rows_for(const Window2d& w, std::int64_t r0, std::int64_t r1,
                       std::int64_t in_height) {
  const std::int64_t first = r0 * w.stride_h - w.pad_top;
  const std::int64_t last = (r1 - 1) * w.stride_h - w.pad_top + (w.kernel_h - 1) * w.dilation_h;
  return RowSpan{std::clamp<std::int64_t>(first, 0, in_height),
                 std::clamp<std::int64_t>(last + 1, 0, in_height)};
}

void apply_activation(const ActivationSpec& act, float* x, std::int64_t n) {
  switch (act.kind) {
    case Activation::None:
      return;
    case Activation::Relu:
      for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
      return;
    case Activation::Clip:
      for (std::int64_t i = 0; i < n; ++i) x[i] = std::min(std::max(x[i], act.a), act.b);
      return;
    case Activation::Sigmoid:
      for (std::int64_t i = 0; i < n; ++i) x[i] = 1.0f / (1.0f + std::exp(-x[i]));
      return;
    case Activation::HardSigmoid:
      for (std::int64_t i = 0; i < n; ++i)
        x[i] = std::max(0.0f, std::min(1.0f, act.a * x[i] + act.b));
      return;
    case Activation::HardSwish:
      for (std::int64_t i = 0; i < n; ++i)
        x[i] = x[i] * std::max(0.0f, std::min(1.0f, x[i] / 6.0f + 0.5f));
      return;
    case Activation::Silu:
      for (std::int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
      return;
  }
}

void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Window2d& win,
            std::int64_t groups, const ActivationSpec& act, const RowBand& band, Tensor& y) {
  HUDDLE_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4 && x.contiguous() &&
               y.contiguous() && w.contiguous());
  const std::int64_t n_batch = x.dim(0), c = x.dim(1), hx = x.dim(2), w_in = x.dim(3);
  const std::int64_t o = w.dim(0), cg = w.dim(1), og = o / groups;
  const std::int64_t rows = band.out_end - band.out_begin, wout = y.dim(3);
  HUDDLE_CHECK(groups >= 1 && c == cg * groups && o % groups == 0 && y.dim(0) == n_batch &&
               y.dim(1) == o && y.dim(2) == rows && win.kernel_h == w.dim(2) &&
               win.kernel_w == w.dim(3));
  HUDDLE_CHECK(wout == window_out_w(win, w_in));
  HUDDLE_CHECK(!bias || bias->numel() == o);
  check_band(x, win, band);
#ifdef HUDDLE_WITH_DNNL
  if (conv2d_dnnl(x, w, bias, win, groups, act, band, y, false, nullptr)) return;
#endif
  const std::int64_t khw = win.kernel_h * win.kernel_w;
  const bool pointwise = khw == 1 && win.stride_h == 1 && win.stride_w == 1 && win.pad_top == 0 &&
                         win.pad_left == 0 && win.pad_right == 0 && win.pad_bottom == 0;
  for (std::int64_t n = 0; n < n_batch; ++n) {
    const float* xn = x.f32() + n * c * hx * w_in;
    float* yn = y.f32() + n * o * rows * wout;
    if (cg == 1 && groups == c) {
      parallel_for(0, o, [&](std::int64_t o0, std::int64_t o1) {
        for (std::int64_t oc = o0; oc < o1; ++oc) {
          depthwise(xn + (oc / og) * hx * w_in, w_in, w.f32() + oc * khw, win, band, wout,
                    yn + oc * rows * wout);
        }
      });
    } else if (pointwise) {
      // Output rows [out_begin, out_end) read the same input rows: B is [cg, rows·w] with a row
      // stride of one input channel.
      for (std::int64_t g = 0; g < groups; ++g) {
        raw_sgemm(Trans::No, Trans::No, og, rows * wout, cg, 1.0f, w.f32() + g * og * cg, cg,
                  xn + g * cg * hx * w_in + (band.out_begin - band.in_begin) * w_in, hx * w_in,
                  0.0f, yn + g * og * rows * wout, rows * wout);
      }
    } else {
      const std::int64_t k = cg * khw;
      const std::int64_t chunk = std::clamp<std::int64_t>(kColsBudget / (k * wout), 1, rows);
      // Reused across calls on this thread (grow-only, never zeroed: im2col writes every
      // element): a fresh buffer per conv costs page faults comparable to the GEMM itself.
      thread_local std::vector<float> cols;
      if (cols.size() < static_cast<std::size_t>(k * chunk * wout))
        cols.resize(static_cast<std::size_t>(k * chunk * wout));
      for (std::int64_t g = 0; g < groups; ++g) {
        for (std::int64_t r0 = band.out_begin; r0 < band.out_end; r0 += chunk) {
          const std::int64_t r1 = std::min(r0 + chunk, band.out_end);
          im2col(xn + g * cg * hx * w_in, cg, hx, w_in, win, band, r0, r1, wout, cols.data());
          raw_sgemm(Trans::No, Trans::No, og, (r1 - r0) * wout, k, 1.0f, w.f32() + g * og * k, k,
                    cols.data(), (r1 - r0) * wout, 0.0f,
                    yn + g * og * rows * wout + (r0 - band.out_begin) * wout, rows * wout);
        }
      }
    }
    if (bias || act.kind != Activation::None) {
      parallel_for(0, o, [&](std::int64_t o0, std::int64_t o1) {
        for (std::int64_t oc = o0; oc < o1; ++oc) {
          float* p = yn + oc * rows * wout;
          if (bias) {
            const float b = bias->f32()[oc];
            for (std::int64_t i = 0; i < rows * wout; ++i) p[i] += b;
          }
          apply_activation(act, p, rows * wout);
        }
      });
    }
  }
}

void conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, const Window2d& win,
                 std::int64_t groups, const ActivationSpec& act, const RowBand& band, Tensor& y,
                 const ActivationSpec* residual_act) {
  HUDDLE_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4 && x.contiguous() &&
               y.contiguous() && w.contiguous());
  HUDDLE_CHECK(y.dim(0) == x.dim(0) && y.dim(3) == w.dim(0) &&
               y.dim(1) == band.out_end - band.out_begin &&
               y.dim(2) == window_out_w(win, x.dim(2)));
  // The band's rows of x as NCHW dims, for the NCHW checks.
  const Tensor x_dims = Tensor::borrow(DType::F32, {x.dim(0), x.dim(3), x.dim(1), x.dim(2)},
                                       const_cast<float*>(x.f32()));
  check_band(x_dims, win, band);
#ifdef HUDDLE_WITH_DNNL
  if (conv2d_dnnl(x, w, bias, win, groups, act, band, y, true, residual_act)) return;
#endif
  // The NCHW path between two transposes (builds without oneDNN, where the graph pass that makes
  // channels-last convs is not run for speed; tests reach it), then the residual.
  Tensor xc = Tensor::empty(DType::F32, {x.dim(0), x.dim(3), x.dim(1), x.dim(2)});
  transpose(x, {0, 3, 1, 2}, xc);
  Tensor yc = Tensor::empty(DType::F32, {y.dim(0), y.dim(3), y.dim(1), y.dim(2)});
  conv2d(xc, w, bias, win, groups, act, band, yc);
  if (!residual_act) {
    transpose(yc, {0, 2, 3, 1}, y);
    return;
  }
  Tensor conv = Tensor::empty(DType::F32, y.shape());
  transpose(yc, {0, 2, 3, 1}, conv);
  float* out = y.f32();
  for (std::int64_t i = 0; i < y.numel(); ++i) out[i] += conv.f32()[i];
  apply_activation(*residual_act, out, y.numel());
}

bool channels_last_convs() {
#ifdef HUDDLE_WITH_DNNL
  return true;
#else
  return false;
#endif
}

std::size_t cached_convolutions() {
#ifdef HUDDLE_WITH_DNNL
  return conv_dnnl_cached();
#else
  return 0;
#endif
}

}  // namespace huddle::kernels
