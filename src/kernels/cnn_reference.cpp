// Plain reference CNN and N-D kernels: direct loops, double accumulation, one thread.
#include "kernels/cnn_reference.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace huddle::kernels::reference {
namespace {

// Value of whole-input element (row ir, col ic) of channel plane `plane`, or nullopt-like flag.
bool at(const Tensor& x, std::int64_t plane, std::int64_t ir, std::int64_t ic, const RowBand& band,
        double& v) {
  if (ir < 0 || ir >= band.in_height || ic < 0 || ic >= x.dim(3)) return false;
  const std::int64_t local = ir - band.in_begin;
  HUDDLE_CHECK(local >= 0 && local < x.dim(2), "row {} not in the band's input", ir);
  v = x.f32()[(plane * x.dim(2) + local) * x.dim(3) + ic];
  return true;
}

// Index into a row-major shape from a flat index of `out`, broadcasting `s` against it.
std::int64_t broadcast_offset(const Shape& s, const Shape& out, std::int64_t flat) {
  std::int64_t off = 0, stride = 1;
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::size_t od = out.size() - 1 - k;
    const std::int64_t idx = flat % out[od];
    flat /= out[od];
    if (k < s.size()) {
      const std::size_t sd = s.size() - 1 - k;
      if (s[sd] != 1) off += idx * stride;
      stride *= s[sd];
    }
  }
  return off;
}

}  // namespace

double activation_ref(const ActivationSpec& act, double x) {
  switch (act.kind) {
    case Activation::None:
      return x;
    case Activation::Relu:
      return x > 0 ? x : 0;
    case Activation::Clip:
      return std::min(std::max(x, static_cast<double>(act.a)), static_cast<double>(act.b));
    case Activation::Sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case Activation::HardSigmoid:
      return std::max(0.0, std::min(1.0, act.a * x + act.b));
    case Activation::HardSwish:
      return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
    case Activation::Silu:
      return x / (1.0 + std::exp(-x));
  }
  return x;
}

void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Window2d& win,
            std::int64_t groups, const ActivationSpec& act, const RowBand& band, Tensor& y) {
  const std::int64_t n_batch = x.dim(0), c = x.dim(1), o = w.dim(0), cg = w.dim(1);
  const std::int64_t og = o / groups, rows = band.out_end - band.out_begin, wout = y.dim(3);
  HUDDLE_CHECK(c == cg * groups && y.dim(2) == rows);
  for (std::int64_t n = 0; n < n_batch; ++n) {
    for (std::int64_t oc = 0; oc < o; ++oc) {
      const std::int64_t g = oc / og;
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t q = 0; q < wout; ++q) {
          double sum = bias ? bias->f32()[oc] : 0.0;
          for (std::int64_t ci = 0; ci < cg; ++ci) {
            for (std::int64_t i = 0; i < win.kernel_h; ++i) {
              for (std::int64_t j = 0; j < win.kernel_w; ++j) {
                const std::int64_t ir =
                    (band.out_begin + r) * win.stride_h - win.pad_top + i * win.dilation_h;
                const std::int64_t ic = q * win.stride_w - win.pad_left + j * win.dilation_w;
                double v = 0;
                if (!at(x, n * c + g * cg + ci, ir, ic, band, v)) continue;
                sum += v * w.f32()[((oc * cg + ci) * win.kernel_h + i) * win.kernel_w + j];
              }
            }
          }
          y.f32()[((n * o + oc) * rows + r) * wout + q] =
              static_cast<float>(activation_ref(act, sum));
        }
      }
    }
  }
}

void pool2d(const Tensor& x, PoolKind kind, const Window2d& win, bool count_include_pad,
            const RowBand& band, Tensor& y) {
  const std::int64_t planes = x.dim(0) * x.dim(1), rows = band.out_end - band.out_begin;
  const std::int64_t wout = y.dim(3);
  for (std::int64_t p = 0; p < planes; ++p) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t q = 0; q < wout; ++q) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        std::int64_t valid = 0, padded = 0;
        for (std::int64_t i = 0; i < win.kernel_h; ++i) {
          for (std::int64_t j = 0; j < win.kernel_w; ++j) {
            const std::int64_t ir =
                (band.out_begin + r) * win.stride_h - win.pad_top + i * win.dilation_h;
            const std::int64_t ic = q * win.stride_w - win.pad_left + j * win.dilation_w;
            if (ir < band.in_height + win.pad_bottom && ic < x.dim(3) + win.pad_right) ++padded;
            double v = 0;
            if (!at(x, p, ir, ic, band, v)) continue;
            best = std::max(best, v);
            sum += v;
            ++valid;
          }
        }
        const std::int64_t div = count_include_pad ? padded : valid;
        y.f32()[(p * rows + r) * wout + q] = static_cast<float>(
            kind == PoolKind::Max ? best : (div > 0 ? sum / static_cast<double>(div) : 0.0));
      }
    }
  }
}

void global_avg_pool(const Tensor& x, Tensor& y) {
  const std::int64_t hw = x.dim(2) * x.dim(3);
  for (std::int64_t p = 0; p < x.dim(0) * x.dim(1); ++p) {
    double sum = 0;
    for (std::int64_t i = 0; i < hw; ++i) sum += x.f32()[p * hw + i];
    y.f32()[p] = static_cast<float>(sum / static_cast<double>(hw));
  }
}

void resize(const Tensor& x, const ResizeSpec& spec, Tensor& y) {
  const std::int64_t h = x.dim(2), w = x.dim(3), ho = y.dim(2), wo = y.dim(3);
  auto coord = [&](std::int64_t o, double scale, std::int64_t in, std::int64_t out) -> double {
    switch (spec.coord) {
      case CoordMode::HalfPixel:
        return (o + 0.5) / scale - 0.5;
      case CoordMode::PytorchHalfPixel:
        return out > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
      case CoordMode::AlignCorners:
        return out > 1 ? static_cast<double>(o) * (in - 1) / (out - 1) : 0.0;
      case CoordMode::Asymmetric:
        return o / scale;
    }
    return 0.0;
  };
  auto nearest = [&](double cf, std::int64_t in) -> std::int64_t {
    double r = 0;
    if (spec.nearest == NearestMode::Floor) r = std::floor(cf);
    if (spec.nearest == NearestMode::Ceil) r = std::ceil(cf);
    if (spec.nearest == NearestMode::RoundPreferCeil) r = std::floor(cf + 0.5);
    if (spec.nearest == NearestMode::RoundPreferFloor) r = std::ceil(cf - 0.5);
    return std::clamp<std::int64_t>(static_cast<std::int64_t>(r), 0, in - 1);
  };
  for (std::int64_t p = 0; p < x.dim(0) * x.dim(1); ++p) {
    const float* src = x.f32() + p * h * w;
    for (std::int64_t r = 0; r < ho; ++r) {
      for (std::int64_t q = 0; q < wo; ++q) {
        const double cy = coord(r, spec.scale_h, h, ho), cx = coord(q, spec.scale_w, w, wo);
        double v = 0;
        if (spec.mode == ResizeMode::Nearest) {
          v = src[nearest(cy, h) * w + nearest(cx, w)];
        } else {
          const double yy = std::clamp(cy, 0.0, h - 1.0), xx = std::clamp(cx, 0.0, w - 1.0);
          const auto y0 = static_cast<std::int64_t>(std::floor(yy));
          const auto x0 = static_cast<std::int64_t>(std::floor(xx));
          const std::int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
          const double fy = yy - y0, fx = xx - x0;
          v = (1 - fy) * ((1 - fx) * src[y0 * w + x0] + fx * src[y0 * w + x1]) +
              fy * ((1 - fx) * src[y1 * w + x0] + fx * src[y1 * w + x1]);
        }
        y.f32()[(p * ho + r) * wo + q] = static_cast<float>(v);
      }
    }
  }
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    const double u = a.f32()[broadcast_offset(a.shape(), y.shape(), i)];
    const double v = b.f32()[broadcast_offset(b.shape(), y.shape(), i)];
    double r = 0;
    switch (op) {
      case BinaryOp::Add:
        r = u + v;
        break;
      case BinaryOp::Sub:
        r = u - v;
        break;
      case BinaryOp::Mul:
        r = u * v;
        break;
      case BinaryOp::Div:
        r = u / v;
        break;
    }
    y.f32()[i] = static_cast<float>(r);
  }
}

void unary(const ActivationSpec& act, const Tensor& x, Tensor& y) {
  for (std::int64_t i = 0; i < x.numel(); ++i)
    y.f32()[i] = static_cast<float>(activation_ref(act, x.f32()[i]));
}

void softmax_axis(const Tensor& x, std::int64_t outer, std::int64_t len, std::int64_t inner,
                  Tensor& y) {
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const float* src = x.f32() + o * len * inner + i;
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (std::int64_t j = 0; j < len; ++j) m = std::max(m, static_cast<double>(src[j * inner]));
      for (std::int64_t j = 0; j < len; ++j) sum += std::exp(src[j * inner] - m);
      std::vector<double> out(static_cast<std::size_t>(len));
      for (std::int64_t j = 0; j < len; ++j)
        out[static_cast<std::size_t>(j)] = std::exp(src[j * inner] - m) / sum;
      for (std::int64_t j = 0; j < len; ++j)
        y.f32()[o * len * inner + i + j * inner] =
            static_cast<float>(out[static_cast<std::size_t>(j)]);
    }
  }
}

void matmul(const Tensor& a, const Tensor& b, Tensor& y) {
  const std::int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  const Shape ab(a.shape().begin(), a.shape().end() - 2);
  const Shape bb(b.shape().begin(), b.shape().end() - 2);
  const Shape yb(y.shape().begin(), y.shape().end() - 2);
  for (std::int64_t bi = 0; bi < shape_numel(yb); ++bi) {
    const std::int64_t oa = broadcast_offset(ab, yb, bi), ob = broadcast_offset(bb, yb, bi);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (std::int64_t t = 0; t < k; ++t)
          sum += static_cast<double>(a.f32()[oa * m * k + i * k + t]) *
                 b.f32()[ob * k * n + t * n + j];
        y.f32()[bi * m * n + i * n + j] = static_cast<float>(sum);
      }
    }
  }
}

}  // namespace huddle::kernels::reference
