// Plain reference kernels: one loop nest per definition, double accumulation, no threads.
#include "kernels/reference.h"

#include "core/quant.h"

#include "kernels/mat_view.h"
#include "kernels/shapes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

namespace huddle::kernels::reference {

using detail::as_mat;

void linear(const Tensor& x, const Tensor& w, WeightLayout layout, const Tensor* bias, Tensor& y) {
  const auto [t_count, k_count, n_count] = detail::check_linear(x, w, layout, bias, y);
  // Weights in other dtypes: the values they hold, widened to F32.
  const Tensor wf = w.dtype() == DType::F32 ? w : dequantize(w);
  const auto xm = as_mat(x);
  const auto wm = as_mat(wf);
  const auto ym = as_mat(y);
  for (std::int64_t t = 0; t < t_count; ++t) {
    for (std::int64_t n = 0; n < n_count; ++n) {
      double acc = bias != nullptr ? bias->f32()[n] : 0.0;
      for (std::int64_t k = 0; k < k_count; ++k) {
        const float wv = layout == WeightLayout::OutIn ? wm.row(n)[k] : wm.row(k)[n];
        acc += static_cast<double>(xm.row(t)[k]) * wv;
      }
      ym.row(t)[n] = static_cast<float>(acc);
    }
  }
}

void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, Tensor& y) {
  detail::check_row_op(x, &w, &b, y);
  const auto xm = as_mat(x);
  const auto ym = as_mat(y);
  for (std::int64_t r = 0; r < xm.rows; ++r) {
    const float* in = xm.row(r);
    double mean = 0.0;
    for (std::int64_t c = 0; c < xm.cols; ++c) mean += in[c];
    mean /= static_cast<double>(xm.cols);
    double var = 0.0;
    for (std::int64_t c = 0; c < xm.cols; ++c) var += (in[c] - mean) * (in[c] - mean);
    var /= static_cast<double>(xm.cols);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (std::int64_t c = 0; c < xm.cols; ++c) {
      ym.row(r)[c] = static_cast<float>((in[c] - mean) * inv * w.f32()[c] + b.f32()[c]);
    }
  }
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y) {
  detail::check_row_op(x, &w, nullptr, y);
  const auto xm = as_mat(x);
  const auto ym = as_mat(y);
  for (std::int64_t r = 0; r < xm.rows; ++r) {
    const float* in = xm.row(r);
    double ms = 0.0;
    for (std::int64_t c = 0; c < xm.cols; ++c) ms += static_cast<double>(in[c]) * in[c];
    ms /= static_cast<double>(xm.cols);
    const double inv = 1.0 / std::sqrt(ms + eps);
    for (std::int64_t c = 0; c < xm.cols; ++c) {
      ym.row(r)[c] = static_cast<float>(in[c] * inv * w.f32()[c]);
    }
  }
}

namespace {

template <typename F>
void map_elements(const Tensor& x, Tensor& y, F f) {
  detail::check_row_op(x, nullptr, nullptr, y);
  const auto xm = as_mat(x);
  const auto ym = as_mat(y);
  for (std::int64_t r = 0; r < xm.rows; ++r) {
    for (std::int64_t c = 0; c < xm.cols; ++c) {
      ym.row(r)[c] = static_cast<float>(f(static_cast<double>(xm.row(r)[c])));
    }
  }
}

template <typename F>
void zip(const Tensor& a, const Tensor& b, Tensor& y, F f) {
  detail::check_same_shape(a, b, "element-wise inputs");
  detail::check_same_shape(a, y, "element-wise output");
  const auto am = as_mat(a);
  const auto bm = as_mat(b);
  const auto ym = as_mat(y);
  for (std::int64_t r = 0; r < am.rows; ++r) {
    for (std::int64_t c = 0; c < am.cols; ++c) {
      ym.row(r)[c] = static_cast<float>(f(static_cast<double>(am.row(r)[c]), bm.row(r)[c]));
    }
  }
}

}  // namespace

// 0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³), written as x / (1 + e^(-2u)) (the same
// function): 1 + tanh(u) cancels catastrophically for negative u even in double.
void gelu_tanh(const Tensor& x, Tensor& y) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  map_elements(
      x, y, [k](double v) { return v / (1.0 + std::exp(-2.0 * k * (v + 0.044715 * v * v * v))); });
}

// 0.5·x·(1 + erf(x/√2)), written as 0.5·x·erfc(-x/√2) to avoid the same cancellation.
void gelu_erf(const Tensor& x, Tensor& y) {
  map_elements(x, y, [](double v) { return 0.5 * v * std::erfc(-v / std::numbers::sqrt2); });
}

void silu(const Tensor& x, Tensor& y) {
  map_elements(x, y, [](double v) { return v / (1.0 + std::exp(-v)); });
}

void add(const Tensor& a, const Tensor& b, Tensor& y) {
  zip(a, b, y, [](double u, double v) { return u + v; });
}

void mul(const Tensor& a, const Tensor& b, Tensor& y) {
  zip(a, b, y, [](double u, double v) { return u * v; });
}

void softmax_rows(Tensor& x) {
  detail::check_row_op(x, nullptr, nullptr, x);
  const auto xm = as_mat(x);
  for (std::int64_t r = 0; r < xm.rows; ++r) {
    float* row = xm.row(r);
    const double mx = *std::max_element(row, row + xm.cols);
    double total = 0.0;
    for (std::int64_t c = 0; c < xm.cols; ++c) total += std::exp(row[c] - mx);
    for (std::int64_t c = 0; c < xm.cols; ++c) {
      row[c] = static_cast<float>(std::exp(row[c] - mx) / total);
    }
  }
}

void embedding(std::span<const std::int32_t> ids, const Tensor& table, Tensor& y) {
  detail::check_embedding(ids, table, y);
  const Tensor tf = table.dtype() == DType::F32 ? table : dequantize(table);
  const auto tm = as_mat(tf);
  const auto ym = as_mat(y);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    for (std::int64_t c = 0; c < tm.cols; ++c) {
      ym.row(static_cast<std::int64_t>(t))[c] = tm.row(ids[t])[c];
    }
  }
}

void rope(Tensor& x, std::span<const std::int32_t> positions, int heads, int head_dim,
          const RopeSpec& spec) {
  detail::check_rope(x, positions, heads, head_dim);
  const auto xm = as_mat(x);
  const int half = head_dim / 2;
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (std::int64_t t = 0; t < xm.rows; ++t) {
    rope_inv_freq(spec, head_dim, positions[static_cast<std::size_t>(t)], inv_freq);
    for (int h = 0; h < heads; ++h) {
      float* v = xm.row(t) + static_cast<std::int64_t>(h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle =
            positions[static_cast<std::size_t>(t)] * inv_freq[static_cast<std::size_t>(i)];
        const double x1 = v[i];
        const double x2 = v[i + half];
        v[i] = static_cast<float>(x1 * std::cos(angle) - x2 * std::sin(angle));
        v[i + half] = static_cast<float>(x2 * std::cos(angle) + x1 * std::sin(angle));
      }
    }
  }
}

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int kv_heads,
               int head_dim, std::int64_t q_pos0, bool causal, Tensor& out, std::int64_t window) {
  const std::int64_t s_count =
      detail::check_attention(q, k, v, heads, kv_heads, head_dim, q_pos0, causal, out, window);
  const auto qm = as_mat(q);
  const auto km = as_mat(k);
  const auto vm = as_mat(v);
  const auto om = as_mat(out);
  const int group = heads / kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::vector<double> scores(static_cast<std::size_t>(s_count));
  for (std::int64_t t = 0; t < qm.rows; ++t) {
    const std::int64_t keys = causal ? q_pos0 + t + 1 : s_count;
    const std::int64_t first = window > 0 ? std::max<std::int64_t>(0, keys - window) : 0;
    for (int h = 0; h < heads; ++h) {
      const std::int64_t qo = static_cast<std::int64_t>(h) * head_dim;
      const std::int64_t ko = static_cast<std::int64_t>(h / group) * head_dim;
      double mx = -INFINITY;
      for (std::int64_t s = first; s < keys; ++s) {
        double dot = 0.0;
        for (int d = 0; d < head_dim; ++d) {
          dot += static_cast<double>(qm.row(t)[qo + d]) * km.row(s)[ko + d];
        }
        scores[static_cast<std::size_t>(s)] = dot * scale;
        mx = std::max(mx, dot * scale);
      }
      double total = 0.0;
      for (std::int64_t s = first; s < keys; ++s) {
        scores[static_cast<std::size_t>(s)] = std::exp(scores[static_cast<std::size_t>(s)] - mx);
        total += scores[static_cast<std::size_t>(s)];
      }
      for (int d = 0; d < head_dim; ++d) {
        double acc = 0.0;
        for (std::int64_t s = first; s < keys; ++s) {
          acc += scores[static_cast<std::size_t>(s)] * vm.row(s)[ko + d];
        }
        om.row(t)[qo + d] = static_cast<float>(acc / total);
      }
    }
  }
}

}  // namespace huddle::kernels::reference
