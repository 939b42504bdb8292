#include "kernels/shapes.h"

#include "core/error.h"
#include "core/quant.h"

namespace huddle::kernels::detail {
namespace {

void check_f32_2d(const Tensor& t, const char* what) {
  HUDDLE_CHECK(t.dtype() == DType::F32 && t.rank() == 2, "{} must be a 2-D F32 tensor, got {} {}",
               what, dtype_name(t.dtype()), shape_str(t.shape()));
}

void check_vector(const Tensor& t, std::int64_t n, const char* what) {
  HUDDLE_CHECK(t.dtype() == DType::F32 && t.contiguous() && t.numel() == n,
               "{} must be {} contiguous F32 values, got {} {}", what, n, dtype_name(t.dtype()),
               shape_str(t.shape()));
}

}  // namespace

LinearDims check_linear(const Tensor& x, const Tensor& w, WeightLayout layout, const Tensor* bias,
                        const Tensor& y) {
  check_f32_2d(x, "linear input");
  HUDDLE_CHECK(
      is_weight_dtype(w.dtype()) && w.rank() == 2,
      "linear weight must be a 2-D F32, F16, BF16, Q8_0, Q4_0, Q4_K or Q6_K tensor, got {} {}",
      dtype_name(w.dtype()), shape_str(w.shape()));
  check_f32_2d(y, "linear output");
  const std::int64_t k = x.dim(1);
  const std::int64_t n = layout == WeightLayout::OutIn ? w.dim(0) : w.dim(1);
  const std::int64_t wk = layout == WeightLayout::OutIn ? w.dim(1) : w.dim(0);
  HUDDLE_CHECK(wk == k, "linear: input {} vs weight {} ({})", shape_str(x.shape()),
               shape_str(w.shape()), layout == WeightLayout::OutIn ? "OutIn" : "InOut");
  HUDDLE_CHECK(y.dim(0) == x.dim(0) && y.dim(1) == n, "linear: output {} for input {}, N = {}",
               shape_str(y.shape()), shape_str(x.shape()), n);
  if (bias != nullptr) check_vector(*bias, n, "linear bias");
  return {x.dim(0), k, n};
}

std::int64_t check_row_op(const Tensor& x, const Tensor* w, const Tensor* b, const Tensor& y) {
  HUDDLE_CHECK(x.dtype() == DType::F32 && x.rank() >= 1, "row op input {}", shape_str(x.shape()));
  check_same_shape(x, y, "row op");
  const std::int64_t c = x.dim(-1);
  if (w != nullptr) check_vector(*w, c, "norm weight");
  if (b != nullptr) check_vector(*b, c, "norm bias");
  return c;
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* what) {
  HUDDLE_CHECK(a.dtype() == DType::F32 && b.dtype() == DType::F32 && a.shape() == b.shape(),
               "{}: shapes {} and {} (F32 required)", what, shape_str(a.shape()),
               shape_str(b.shape()));
}

void check_token_ids(std::span<const std::int32_t> ids, std::int64_t vocab) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      throw InputError(fmt::format("token id {} at position {} is outside the vocabulary [0, {})",
                                   ids[i], i, vocab));
    }
  }
}

void check_embedding(std::span<const std::int32_t> ids, const Tensor& table, const Tensor& y) {
  HUDDLE_CHECK(
      is_weight_dtype(table.dtype()) && table.rank() == 2,
      "embedding table must be a 2-D F32, F16, BF16, Q8_0, Q4_0, Q4_K or Q6_K tensor, got {} {}",
      dtype_name(table.dtype()), shape_str(table.shape()));
  check_f32_2d(y, "embedding output");
  HUDDLE_CHECK(y.dim(0) == static_cast<std::int64_t>(ids.size()) && y.dim(1) == table.dim(1),
               "embedding: output {} for {} ids and table {}", shape_str(y.shape()), ids.size(),
               shape_str(table.shape()));
  check_token_ids(ids, table.dim(0));
}

void check_rope(const Tensor& x, std::span<const std::int32_t> positions, int heads, int head_dim) {
  check_f32_2d(x, "rope input");
  HUDDLE_CHECK(heads >= 1 && head_dim >= 2 && head_dim % 2 == 0,
               "rope: heads {} head_dim {} (head_dim must be even)", heads, head_dim);
  HUDDLE_CHECK(x.dim(1) == static_cast<std::int64_t>(heads) * head_dim &&
                   x.dim(0) == static_cast<std::int64_t>(positions.size()),
               "rope: input {} for {} positions, {} heads of {}", shape_str(x.shape()),
               positions.size(), heads, head_dim);
  for (std::int32_t p : positions) HUDDLE_CHECK(p >= 0, "rope: negative position {}", p);
}

std::int64_t check_attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads,
                             int kv_heads, int head_dim, std::int64_t q_pos0, bool causal,
                             const Tensor& out, std::int64_t window) {
  check_f32_2d(q, "attention q");
  check_f32_2d(k, "attention k");
  check_f32_2d(v, "attention v");
  check_f32_2d(out, "attention out");
  HUDDLE_CHECK(heads >= 1 && kv_heads >= 1 && head_dim >= 1 && heads % kv_heads == 0,
               "attention: {} heads, {} kv heads, head_dim {}", heads, kv_heads, head_dim);
  const std::int64_t t = q.dim(0);
  const std::int64_t s = k.dim(0);
  HUDDLE_CHECK(q.dim(1) == static_cast<std::int64_t>(heads) * head_dim,
               "attention: q {} for {} heads of {}", shape_str(q.shape()), heads, head_dim);
  HUDDLE_CHECK(k.dim(1) == static_cast<std::int64_t>(kv_heads) * head_dim && v.shape() == k.shape(),
               "attention: k {} v {} for {} kv heads of {}", shape_str(k.shape()),
               shape_str(v.shape()), kv_heads, head_dim);
  HUDDLE_CHECK(out.shape() == q.shape(), "attention: out {} for q {}", shape_str(out.shape()),
               shape_str(q.shape()));
  HUDDLE_CHECK(q_pos0 >= 0, "attention: q_pos0 {}", q_pos0);
  HUDDLE_CHECK(window >= 0 && (window == 0 || causal),
               "attention: sliding window {} (must be >= 0, and causal when set)", window);
  if (causal) {
    HUDDLE_CHECK(q_pos0 + t <= s,
                 "attention: causal queries at {}..{} need that many keys, have {}", q_pos0,
                 q_pos0 + t - 1, s);
  } else {
    HUDDLE_CHECK(s >= 1 || t == 0, "attention: no keys for {} queries", t);
  }
  return s;
}

}  // namespace huddle::kernels::detail
