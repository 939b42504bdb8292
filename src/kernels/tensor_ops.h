// N-D tensor kernels for imported graphs (ONNX): broadcasting arithmetic, activations, concat,
// strided slices, transposes, softmax over an axis, batched matmul.
//
// Each has a plain twin in kernels/cnn_reference.h (same signature). Tensors are contiguous,
// row-major, any rank up to kMaxRank; outputs are caller-allocated with the shape the graph's
// shape inference gives. Shape mismatches are programmer errors (HUDDLE_CHECK).
#pragma once

#include "core/tensor.h"
#include "kernels/cnn.h"

#include <cstdint>
#include <vector>

namespace huddle::kernels {

inline constexpr int kMaxRank = 8;

enum class BinaryOp : std::uint8_t { Add, Sub, Mul, Div };

// y = a op b with numpy broadcasting; y has the broadcast shape and may alias a or b when that
// operand has y's shape.
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y);

// y = act(x), element-wise; y may alias x.
void unary(const ActivationSpec& act, const Tensor& x, Tensor& y);

// y = inputs joined along `axis` (0 <= axis < rank). Inputs are contiguous, or 2-D column views
// (row stride wider than a row) when joined along columns (axis 1).
void concat(const std::vector<const Tensor*>& inputs, int axis, Tensor& y);

// y[i...] = x[starts[d] + i_d · steps[d] ...] for every dimension d (steps != 0; y's shape gives
// the counts). starts are already clamped into range by the caller.
void slice(const Tensor& x, const std::vector<std::int64_t>& starts,
           const std::vector<std::int64_t>& steps, Tensor& y);

// y = x with dimensions permuted: y.dim(i) == x.dim(perm[i]).
void transpose(const Tensor& x, const std::vector<std::int64_t>& perm, Tensor& y);

// Softmax of x viewed as [outer, len, inner] over the middle dimension; y may alias x.
void softmax_axis(const Tensor& x, std::int64_t outer, std::int64_t len, std::int64_t inner,
                  Tensor& y);

// y[..., M, N] = a[..., M, K] · b[..., K, N], batch dimensions broadcast (numpy matmul; ranks
// >= 2 after the caller's promotion of 1-D operands).
void matmul(const Tensor& a, const Tensor& b, Tensor& y);

// numpy broadcast of two shapes; empty optional-like result signalled by `ok` false.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out);

}  // namespace huddle::kernels
