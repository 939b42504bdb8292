// Max / average pooling over row bands, global average pooling, and resize (nearest, linear).
#include "core/error.h"
#include "kernels/cnn.h"
#include "kernels/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace huddle::kernels {

namespace {

// Taps of a window whose first tap is at input (top, left): inside the image, and inside the
// padded image (what count_include_pad divides by).
struct TapCount {
  std::int64_t valid = 0, padded = 0;
};

// Calls visit(row, col) for each tap of the window at (top, left) inside the height x width
// image, in row-major tap order: the order every pooling kernel here accumulates in, so that
// their outputs are the same float operations.
template <typename Visit>
TapCount visit_taps(const Window2d& win, std::int64_t top, std::int64_t left, std::int64_t height,
                    std::int64_t width, const Visit& visit) {
  const std::int64_t padded_h = height + win.pad_bottom, padded_w = width + win.pad_right;
  TapCount n;
  for (std::int64_t i = 0; i < win.kernel_h; ++i) {
    const std::int64_t ir = top + i * win.dilation_h;
    const bool row_in = ir >= 0 && ir < height;
    for (std::int64_t j = 0; j < win.kernel_w; ++j) {
      const std::int64_t ic = left + j * win.dilation_w;
      if (ir < padded_h && ic < padded_w) ++n.padded;
      if (!row_in || ic < 0 || ic >= width) continue;
      visit(ir, ic);
      ++n.valid;
    }
  }
  return n;
}

float average(float sum, const TapCount& n, bool count_include_pad) {
  const std::int64_t div = count_include_pad ? n.padded : n.valid;
  return div > 0 ? sum / static_cast<float>(div) : 0.0f;
}

}  // namespace

void pool2d(const Tensor& x, PoolKind kind, const Window2d& win, bool count_include_pad,
            const RowBand& band, Tensor& y) {
  HUDDLE_CHECK(x.rank() == 4 && y.rank() == 4 && x.contiguous() && y.contiguous());
  const std::int64_t nc = x.dim(0) * x.dim(1), hx = x.dim(2), w_in = x.dim(3);
  const std::int64_t rows = band.out_end - band.out_begin, wout = y.dim(3);
  HUDDLE_CHECK(y.dim(0) * y.dim(1) == nc && y.dim(2) == rows && wout == window_out_w(win, w_in));
  const RowSpan need = input_rows_for(win, band.out_begin, band.out_end, band.in_height);
  HUDDLE_CHECK(need.begin >= band.in_begin && need.end <= band.in_begin + hx);
  const std::int64_t padded_h = band.in_height + win.pad_bottom;
  // Output columns [q0, q1) whose windows lie inside the image's columns: there a row of output
  // is accumulated tap by tap over the whole column range (no per-tap bounds checks), in the same
  // tap order as the border columns, so every output is the same float operations either way.
  const std::int64_t q0 = std::min(wout, (win.pad_left + win.stride_w - 1) / win.stride_w);
  const std::int64_t last_tap = (win.kernel_w - 1) * win.dilation_w - win.pad_left;
  const std::int64_t q1 = std::max(
      q0, std::min(wout, w_in - 1 - last_tap < 0 ? std::int64_t{0}
                                                 : (w_in - 1 - last_tap) / win.stride_w + 1));
  const float init = kind == PoolKind::Max ? -std::numeric_limits<float>::infinity() : 0.0f;
  parallel_for(0, nc, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t ch = c0; ch < c1; ++ch) {
      const float* src = x.f32() + ch * hx * w_in;
      float* dst = y.f32() + ch * rows * wout;
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t top = (band.out_begin + r) * win.stride_h - win.pad_top;
        float* out = dst + r * wout;
        // One output at a border column, its taps checked one by one.
        auto border = [&](std::int64_t q) {
          float best = init, sum = 0.0f;
          const TapCount n = visit_taps(win, top, q * win.stride_w - win.pad_left, band.in_height,
                                        w_in, [&](std::int64_t ir, std::int64_t ic) {
                                          const float v = src[(ir - band.in_begin) * w_in + ic];
                                          best = std::max(best, v);
                                          sum += v;
                                        });
          out[q] = kind == PoolKind::Max ? best : average(sum, n, count_include_pad);
        };
        for (std::int64_t q = 0; q < q0; ++q) border(q);
        for (std::int64_t q = q1; q < wout; ++q) border(q);
        std::fill(out + q0, out + q1, init);
        std::int64_t valid_rows = 0, padded_rows = 0;
        for (std::int64_t i = 0; i < win.kernel_h; ++i) {
          const std::int64_t ir = top + i * win.dilation_h;
          if (ir < padded_h) ++padded_rows;
          if (ir < 0 || ir >= band.in_height) continue;
          ++valid_rows;
          const float* row = src + (ir - band.in_begin) * w_in;
          for (std::int64_t j = 0; j < win.kernel_w; ++j) {
            const float* tap = row + j * win.dilation_w - win.pad_left;
            if (kind == PoolKind::Max) {
              for (std::int64_t q = q0; q < q1; ++q)
                out[q] = std::max(out[q], tap[q * win.stride_w]);
            } else {
              for (std::int64_t q = q0; q < q1; ++q) out[q] += tap[q * win.stride_w];
            }
          }
        }
        if (kind == PoolKind::Average) {
          const TapCount n{valid_rows * win.kernel_w, padded_rows * win.kernel_w};
          for (std::int64_t q = q0; q < q1; ++q) out[q] = average(out[q], n, count_include_pad);
        }
      }
    }
  });
}

void global_avg_pool(const Tensor& x, Tensor& y) {
  HUDDLE_CHECK(x.rank() == 4 && y.numel() == x.dim(0) * x.dim(1) && x.contiguous());
  const std::int64_t hw = x.dim(2) * x.dim(3);
  parallel_for(0, y.numel(), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const float* p = x.f32() + c * hw;
      double sum = 0.0;
      for (std::int64_t i = 0; i < hw; ++i) sum += p[i];
      y.f32()[c] = static_cast<float>(sum / static_cast<double>(hw));
    }
  });
}

void pool2d_nhwc(const Tensor& x, PoolKind kind, const Window2d& win, bool count_include_pad,
                 const RowBand& band, Tensor& y) {
  HUDDLE_CHECK(x.rank() == 4 && y.rank() == 4 && x.contiguous() && y.contiguous());
  const std::int64_t n = x.dim(0), hx = x.dim(1), w = x.dim(2), c = x.dim(3);
  const std::int64_t rows = band.out_end - band.out_begin, wo = y.dim(2);
  HUDDLE_CHECK(y.dim(0) == n && y.dim(3) == c && y.dim(1) == rows && wo == window_out_w(win, w));
  const RowSpan need = input_rows_for(win, band.out_begin, band.out_end, band.in_height);
  HUDDLE_CHECK(need.begin >= band.in_begin && need.end <= band.in_begin + hx);
  parallel_for(0, n * rows, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t b = r / rows;
      const std::int64_t top = (band.out_begin + r % rows) * win.stride_h - win.pad_top;
      const float* src = x.f32() + b * hx * w * c;
      for (std::int64_t q = 0; q < wo; ++q) {
        float* dst = y.f32() + (r * wo + q) * c;
        std::fill(dst, dst + c,
                  kind == PoolKind::Max ? -std::numeric_limits<float>::infinity() : 0.0f);
        const TapCount taps = visit_taps(win, top, q * win.stride_w - win.pad_left, band.in_height,
                                         w, [&](std::int64_t ir, std::int64_t ic) {
                                           const float* tap =
                                               src + ((ir - band.in_begin) * w + ic) * c;
                                           if (kind == PoolKind::Max) {
                                             for (std::int64_t k = 0; k < c; ++k)
                                               dst[k] = std::max(dst[k], tap[k]);
                                           } else {
                                             for (std::int64_t k = 0; k < c; ++k) dst[k] += tap[k];
                                           }
                                         });
        if (kind == PoolKind::Average) {
          for (std::int64_t k = 0; k < c; ++k) dst[k] = average(dst[k], taps, count_include_pad);
        }
      }
    }
  });
}

void global_avg_pool_nhwc(const Tensor& x, Tensor& y) {
  HUDDLE_CHECK(x.rank() == 4 && y.numel() == x.dim(0) * x.dim(3) && x.contiguous());
  const std::int64_t n = x.dim(0), hw = x.dim(1) * x.dim(2), c = x.dim(3);
  // Channel blocks: each sums its channels over every position in order, in double, as
  // global_avg_pool does per channel.
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (c + kBlock - 1) / kBlock;
  parallel_for(0, n * blocks, [&](std::int64_t t0, std::int64_t t1) {
    double sum[kBlock];
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t b = t / blocks, k0 = (t % blocks) * kBlock;
      const std::int64_t k1 = std::min(c, k0 + kBlock);
      std::fill(sum, sum + kBlock, 0.0);
      const float* p = x.f32() + b * hw * c;
      for (std::int64_t i = 0; i < hw; ++i) {
        for (std::int64_t k = k0; k < k1; ++k) sum[k - k0] += p[i * c + k];
      }
      for (std::int64_t k = k0; k < k1; ++k)
        y.f32()[b * c + k] = static_cast<float>(sum[k - k0] / static_cast<double>(hw));
    }
  });
}

namespace {

// The input coordinate of output index `o` (ONNX Resize's coordinate_transformation_mode).
double source_coord(CoordMode mode, std::int64_t o, float scale, std::int64_t in,
                    std::int64_t out) {
  switch (mode) {
    case CoordMode::HalfPixel:
      return (static_cast<double>(o) + 0.5) / scale - 0.5;
    case CoordMode::PytorchHalfPixel:
      return out > 1 ? (static_cast<double>(o) + 0.5) / scale - 0.5 : 0.0;
    case CoordMode::AlignCorners:
      return out > 1 ? static_cast<double>(o) * static_cast<double>(in - 1) /
                           static_cast<double>(out - 1)
                     : 0.0;
    case CoordMode::Asymmetric:
      return static_cast<double>(o) / scale;
  }
  return 0.0;
}

std::int64_t nearest_index(NearestMode mode, double c, std::int64_t in) {
  double r = 0.0;
  switch (mode) {
    case NearestMode::Floor:
      r = std::floor(c);
      break;
    case NearestMode::Ceil:
      r = std::ceil(c);
      break;
    case NearestMode::RoundPreferFloor:
      r = (c - std::floor(c) == 0.5) ? std::floor(c) : std::round(c);
      break;
    case NearestMode::RoundPreferCeil:
      r = std::round(c);
      break;
  }
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(r), 0, in - 1);
}

struct Tap {
  std::int64_t i0 = 0, i1 = 0;
  float w1 = 0.0f;  // weight of i1; i0 gets 1 - w1
};

std::vector<Tap> taps(const ResizeSpec& s, float scale, std::int64_t in, std::int64_t out) {
  std::vector<Tap> t(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    const double c = source_coord(s.coord, o, scale, in, out);
    Tap& tap = t[static_cast<std::size_t>(o)];
    if (s.mode == ResizeMode::Nearest) {
      tap.i0 = tap.i1 = nearest_index(s.nearest, c, in);
    } else {
      const double cc = std::clamp(c, 0.0, static_cast<double>(in - 1));
      tap.i0 = static_cast<std::int64_t>(std::floor(cc));
      tap.i1 = std::min(tap.i0 + 1, in - 1);
      tap.w1 = static_cast<float>(cc - static_cast<double>(tap.i0));
    }
  }
  return t;
}

}  // namespace

RowSpan resize_input_rows(const ResizeSpec& spec, std::int64_t in_height, std::int64_t out_height,
                          std::int64_t r0, std::int64_t r1) {
  if (r0 >= r1) return {};
  // Source rows never decrease with the output row, in every coordinate mode.
  const std::vector<Tap> t = taps(spec, spec.scale_h, in_height, out_height);
  return RowSpan{t[static_cast<std::size_t>(r0)].i0, t[static_cast<std::size_t>(r1 - 1)].i1 + 1};
}

void resize(const Tensor& x, const ResizeSpec& spec, const RowBand& band, std::int64_t out_height,
            Tensor& y) {
  HUDDLE_CHECK(x.rank() == 4 && y.rank() == 4 && x.dim(0) == y.dim(0) && x.dim(1) == y.dim(1));
  HUDDLE_CHECK(y.dim(2) == band.out_end - band.out_begin);
  const RowSpan need =
      resize_input_rows(spec, band.in_height, out_height, band.out_begin, band.out_end);
  HUDDLE_CHECK(band.out_begin >= band.out_end ||
                   (need.begin >= band.in_begin && need.end <= band.in_begin + x.dim(2)),
               "resize band needs input rows [{}, {}), tensor holds [{}, {})", need.begin, need.end,
               band.in_begin, band.in_begin + x.dim(2));
  const std::int64_t h = x.dim(2), w = x.dim(3), rows = y.dim(2), wo = y.dim(3);
  const std::vector<Tap> th = taps(spec, spec.scale_h, band.in_height, out_height);
  const std::vector<Tap> tw = taps(spec, spec.scale_w, w, wo);
  parallel_for(0, x.dim(0) * x.dim(1), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const float* src = x.f32() + c * h * w;
      float* dst = y.f32() + c * rows * wo;
      for (std::int64_t r = 0; r < rows; ++r) {
        const Tap& a = th[static_cast<std::size_t>(band.out_begin + r)];
        const float* row0 = src + (a.i0 - band.in_begin) * w;
        const float* row1 = src + (a.i1 - band.in_begin) * w;
        for (std::int64_t q = 0; q < wo; ++q) {
          const Tap& b = tw[static_cast<std::size_t>(q)];
          if (spec.mode == ResizeMode::Nearest) {
            dst[r * wo + q] = row0[b.i0];
          } else {
            const float top = row0[b.i0] + (row0[b.i1] - row0[b.i0]) * b.w1;
            const float bot = row1[b.i0] + (row1[b.i1] - row1[b.i0]) * b.w1;
            dst[r * wo + q] = top + (bot - top) * a.w1;
          }
        }
      }
    }
  });
}

void resize(const Tensor& x, const ResizeSpec& spec, Tensor& y) {
  resize(x, spec, whole_band(x.dim(2), y.dim(2)), y.dim(2), y);
}

}  // namespace huddle::kernels
