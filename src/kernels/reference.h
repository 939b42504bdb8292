// Plain reference kernels: straightforward loops in double-precision accumulation, no threads,
// no BLAS. Same contracts and signatures as kernels/kernels.h; the fast path is tested against
// these.
#pragma once

#include "kernels/kernels.h"

namespace huddle::kernels::reference {

void linear(const Tensor& x, const Tensor& w, WeightLayout layout, const Tensor* bias, Tensor& y);
void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, Tensor& y);
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y);
void gelu_tanh(const Tensor& x, Tensor& y);
void gelu_erf(const Tensor& x, Tensor& y);
void silu(const Tensor& x, Tensor& y);
void add(const Tensor& a, const Tensor& b, Tensor& y);
void mul(const Tensor& a, const Tensor& b, Tensor& y);
void softmax_rows(Tensor& x);
void embedding(std::span<const std::int32_t> ids, const Tensor& table, Tensor& y);
void rope(Tensor& x, std::span<const std::int32_t> positions, int heads, int head_dim,
          const RopeSpec& spec);
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int kv_heads,
               int head_dim, std::int64_t q_pos0, bool causal, Tensor& out,
               std::int64_t window = 0);

}  // namespace huddle::kernels::reference
