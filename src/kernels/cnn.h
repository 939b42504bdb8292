// CNN kernels on f32 NCHW tensors: convolution, pooling, resize, fused activations.
//
// Every function here has a plain twin with the same signature in kernels/cnn_reference.h;
// tests/kernels/cnn_test.cpp compares the two over a grid of shapes including odd sizes.
//
// Row bands (EdgeFlow): a conv or pool can compute a sub-range of its output rows from a tensor
// that holds only the input rows those output rows read (plus nothing else). RowBand says which:
// the kernel computes output rows [out_begin, out_end) of the whole output; its input tensor holds
// rows [in_begin, in_begin + x.dim(2)) of the whole input, whose full height is in_height. Input
// rows outside [0, in_height) are the window's explicit top/bottom padding (zero for convolution
// and average pooling, ignored by max pooling); rows inside [0, in_height) that the band needs must
// be present in x (checked). The output tensor has out_end - out_begin rows.
//
// Contracts: tensors are contiguous; outputs are caller-allocated with the stated shapes. Shape
// mismatches are programmer errors (HUDDLE_CHECK): the graph's shape inference checks model data.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <vector>

namespace huddle::kernels {

// An activation fused into a conv (or run alone as an element-wise op).
enum class Activation : std::uint8_t {
  None,
  Relu,
  Clip,         // min(max(x, a), b)
  Sigmoid,      // 1 / (1 + e^-x)
  HardSigmoid,  // max(0, min(1, a·x + b))
  HardSwish,    // x · max(0, min(1, x/6 + 1/2))
  Silu,         // x · sigmoid(x)
};
struct ActivationSpec {
  Activation kind = Activation::None;
  float a = 0.0f;  // Clip: min; HardSigmoid: alpha
  float b = 0.0f;  // Clip: max; HardSigmoid: beta
};
const char* activation_name(Activation kind);

// A sliding window over H and W: kernel, stride, padding and dilation, as ONNX states them.
struct Window2d {
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false;  // pools: output size rounded up
};
// Output height / width for an input of in_h / in_w; <= 0 when the window does not fit.
std::int64_t window_out_h(const Window2d& w, std::int64_t in_h);
std::int64_t window_out_w(const Window2d& w, std::int64_t in_w);

struct RowBand {
  std::int64_t out_begin = 0, out_end = 0;  // output rows computed
  std::int64_t in_begin = 0;                // first whole-input row held by the input tensor
  std::int64_t in_height = 0;               // whole input's height
};
// The band for a whole image: all output rows, input holding all rows.
RowBand whole_band(std::int64_t in_height, std::int64_t out_height);
// The input rows [begin, end) (clipped to the image) that output rows [r0, r1) read.
struct RowSpan {
  std::int64_t begin = 0, end = 0;
};
RowSpan input_rows_for(const Window2d& w, std::int64_t r0, std::int64_t r1, std::int64_t in_height);

// y = act(conv(x, w) + bias).
//   x [N, C, Hx, W] (input rows of `band`), w [O, C/groups, kh, kw], bias [O] or null,
//   y [N, O, band.out_end - band.out_begin, Wout]. C and O divisible by groups.
// Fast path: depthwise (groups == C) as its own loop; 1x1 stride-1 unpadded as one GEMM per
// group; otherwise im2col in row chunks + OpenBLAS sgemm.
void conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Window2d& win,
            std::int64_t groups, const ActivationSpec& act, const RowBand& band, Tensor& y);

enum class PoolKind : std::uint8_t { Max, Average };
// x [N, C, Hx, W] (input rows of `band`) -> y [N, C, rows, Wout]. Average: divides by the window
// positions inside the image, or, with count_include_pad, inside the padded image.
void pool2d(const Tensor& x, PoolKind kind, const Window2d& win, bool count_include_pad,
            const RowBand& band, Tensor& y);

// x [N, C, H, W] -> y [N, C, 1, 1]: mean over H and W.
void global_avg_pool(const Tensor& x, Tensor& y);

// Resize over H and W of x [N, C, H, W] -> y [N, C, Ho, Wo] (y's shape gives Ho, Wo).
enum class ResizeMode : std::uint8_t { Nearest, Linear };
enum class CoordMode : std::uint8_t { HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric };
enum class NearestMode : std::uint8_t { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };
struct ResizeSpec {
  ResizeMode mode = ResizeMode::Nearest;
  CoordMode coord = CoordMode::HalfPixel;
  NearestMode nearest = NearestMode::RoundPreferFloor;
  float scale_h = 1.0f, scale_w = 1.0f;  // output / input, as ONNX's `scales` (or sizes / input)
};
void resize(const Tensor& x, const ResizeSpec& spec, Tensor& y);
// Output rows [band.out_begin, band.out_end) of an out_height-row resize, from x holding input
// rows [band.in_begin, +x.dim(2)) of band.in_height; y [N, C, band rows, Wo].
void resize(const Tensor& x, const ResizeSpec& spec, const RowBand& band, std::int64_t out_height,
            Tensor& y);
// The input rows [begin, end) that output rows [r0, r1) of such a resize sample.
RowSpan resize_input_rows(const ResizeSpec& spec, std::int64_t in_height, std::int64_t out_height,
                          std::int64_t r0, std::int64_t r1);

// Channels-last forms of conv2d, pool2d and global_avg_pool: x [N, Hx, W, C] (the input rows of
// `band`, as for the NCHW kernels) -> y [N, band rows, Wo, O]; the same arguments and math as the
// NCHW kernels. Pooling gives the NCHW kernels' bits (the same taps in the same order);
// convolution goes through oneDNN's channels-last kernels where it is built
// (channels_last_convs()), else through the NCHW path between two transposes.
// With `residual_act`, y holds a residual r on entry and leaves as
// residual_act(act(conv(x, w) + bias) + r) (a ResNet block's end, fused: onnx/fuse.h).
void conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, const Window2d& win,
                 std::int64_t groups, const ActivationSpec& act, const RowBand& band, Tensor& y,
                 const ActivationSpec* residual_act = nullptr);
void pool2d_nhwc(const Tensor& x, PoolKind kind, const Window2d& win, bool count_include_pad,
                 const RowBand& band, Tensor& y);
void global_avg_pool_nhwc(const Tensor& x, Tensor& y);
// Whether convolutions run faster channels-last than NCHW here: true where oneDNN is built (its
// kernels convolve channels-last or blocked; an NCHW tensor is reordered in and out of every
// conv), false on the im2col path.
bool channels_last_convs();
// How many convolutions the oneDNN path holds built (a primitive and the weights reordered into
// its layout), 0 without oneDNN: one per live weight tensor and band shape. An entry whose weight
// tensor is freed is dropped at the next build, so a worker serving session after session holds
// only the current session's copies.
std::size_t cached_convolutions();

// In place on n floats.
void apply_activation(const ActivationSpec& act, float* x, std::int64_t n);

}  // namespace huddle::kernels
