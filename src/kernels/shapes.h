// Internal: shape checks shared by the fast and reference kernels, so both accept exactly the
// same inputs. Shape mismatches are programmer errors (HUDDLE_CHECK); token ids come from users
// and throw InputError.
#pragma once

#include "kernels/kernels.h"

#include <cstdint>
#include <span>

namespace huddle::kernels::detail {

struct LinearDims {
  std::int64_t t, k, n;
};
LinearDims check_linear(const Tensor& x, const Tensor& w, WeightLayout layout, const Tensor* bias,
                        const Tensor& y);

// x [R, C] with params[C] (each may be null); y same shape as x.
std::int64_t check_row_op(const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& y);

void check_same_shape(const Tensor& a, const Tensor& b, const char* what);

// Throws InputError naming the first id outside [0, vocab) and its position.
void check_token_ids(std::span<const std::int32_t> ids, std::int64_t vocab);
void check_embedding(std::span<const std::int32_t> ids, const Tensor& table, const Tensor& y);

void check_rope(const Tensor& x, std::span<const std::int32_t> positions, int heads, int head_dim);

// Returns S, the number of keys.
std::int64_t check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads,
                             int kv_heads, int head_dim, std::int64_t q_pos0, bool causal,
                             const Tensor& out, std::int64_t window);

}  // namespace huddle::kernels::detail
