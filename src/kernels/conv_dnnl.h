// The oneDNN path of kernels::conv2d (conv_dnnl.cpp says why and how). Built when oneDNN is
// (HUDDLE_WITH_DNNL; not in ThreadSanitizer builds, whose uninstrumented OpenMP runtime TSan
// cannot follow).
#pragma once

#include "kernels/cnn.h"

namespace huddle::kernels {

// y = act(conv(x, w) + bias) over `band`, as conv2d (channels_last: x and y [N, H, W, C], and
// residual_act as conv2d_nhwc's); false when oneDNN does not take this convolution (the caller
// computes it, y untouched). Runs on threads_here() OpenMP threads.
bool conv2d_dnnl(const Tensor& x, const Tensor& w, const Tensor* bias, const Window2d& win,
                 std::int64_t groups, const ActivationSpec& act, const RowBand& band, Tensor& y,
                 bool channels_last, const ActivationSpec* residual_act);

// The convolutions built and cached (cached_convolutions() in cnn.h).
std::size_t conv_dnnl_cached();

}  // namespace huddle::kernels
