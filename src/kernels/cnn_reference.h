// Plain reference twins of kernels/cnn.h and kernels/tensor_ops.h: straightforward loops with
// double accumulation, no threads, no BLAS. The fast paths are tested against these.
#pragma once

#include "kernels/cnn.h"
#include "kernels/tensor_ops.h"

namespace huddle::kernels::reference {

void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Window2d& win,
            std::int64_t groups, const ActivationSpec& act, const RowBand& band, Tensor& y);
void pool2d(const Tensor& x, PoolKind kind, const Window2d& win, bool count_include_pad,
            const RowBand& band, Tensor& y);
void global_avg_pool(const Tensor& x, Tensor& y);
void resize(const Tensor& x, const ResizeSpec& spec, Tensor& y);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y);
void unary(const ActivationSpec& act, const Tensor& x, Tensor& y);
void softmax_axis(const Tensor& x, std::int64_t outer, std::int64_t len, std::int64_t inner,
                  Tensor& y);
void matmul(const Tensor& a, const Tensor& b, Tensor& y);

// One activation on one value, in double (shared by the references).
double activation_ref(const ActivationSpec& act, double x);

}  // namespace huddle::kernels::reference
