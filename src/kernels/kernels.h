// Compute kernels on f32 tensors: the fast path (BLAS GEMM/GEMV, vectorised loops, threads).
//
// Every function here has a plain twin with the same signature in kernels/reference.h;
// tests/kernels compares the two over odd shapes. Shapes are stated per function as [rows, cols]
// (T = tokens, C = channels). 2-D inputs may be strided views (row_stride() >= cols); outputs are
// caller-allocated, of the stated shape, and may be strided views too (e.g. one head's columns).
//
// Threads: large calls are split over the kernels' thread pool, OpenBLAS and oneDNN
// (set_num_threads). Except where a library computes the result (F32 linear at T > 1: oneDNN's
// matmul where built, else OpenBLAS; attention at T > 4), every output element is
// computed the same way whatever the thread count, so results are reproducible bit for bit. The
// functions may be called from several threads at once.
//
// Errors: shape mismatches are programmer errors (HUDDLE_CHECK). Data that comes from users (token
// ids) is checked and reported with InputError.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <span>

namespace huddle::kernels {

// How a linear layer's weight is stored in the checkpoint.
enum class WeightLayout : std::uint8_t {
  OutIn,  // [N, K]: torch.nn.Linear (Llama, BERT); y = x · Wᵀ
  InOut,  // [K, N]: GPT-2 Conv1D; y = x · W
};

// Threads used by the fast kernels and the BLAS library; n >= 1. Process-wide.
void set_num_threads(int n);
int num_threads();

// y[T,N] = x[T,K] · W (+ bias[N]); W is [N,K] (OutIn) or [K,N] (InOut). T == 1 takes a GEMV path;
// F32 at T > 1 oneDNN's matmul (matmul_dnnl.h) where built, else OpenBLAS's sgemm.
void linear(const Tensor& x, const Tensor& w, WeightLayout layout, const Tensor* bias, Tensor& y);
// Whether linear() multiplies F32 inputs of K columns by a weight of N outputs in `layout`
// through oneDNN (at T > 1): false in builds without it, or for a shape it only has a slow
// reference implementation for.
bool linear_uses_onednn(std::int64_t k, std::int64_t n, WeightLayout layout);

// y[T,C] = (x - mean) / sqrt(var + eps) * w[C] + b[C], per row.
void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, Tensor& y);

// y[T,C] = x / sqrt(mean(x²) + eps) * w[C], per row.
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& y);

// Element-wise activations; y has x's shape and may alias it.
void gelu_tanh(const Tensor& x, Tensor& y);  // GPT-2 gelu_new
void gelu_erf(const Tensor& x, Tensor& y);   // exact GELU (BERT)
void silu(const Tensor& x, Tensor& y);

// y = a + b, y = a * b; equal shapes; y may alias a or b.
void add(const Tensor& a, const Tensor& b, Tensor& y);
void mul(const Tensor& a, const Tensor& b, Tensor& y);

// In place: softmax over each row of x[R, C].
void softmax_rows(Tensor& x);

// y[T,C] = table[ids[t], :] for table [V, C]. Throws InputError if an id is outside [0, V).
void embedding(std::span<const std::int32_t> ids, const Tensor& table, Tensor& y);

// How RoPE frequencies are rescaled (Hugging Face `rope_scaling.rope_type`).
enum class RopeScaling : std::uint8_t {
  None,     // inv_freq_i = theta^(-2i/head_dim)
  Linear,   // inv_freq_i / factor (positions interpolated by `factor`)
  Dynamic,  // NTK: a token at position p uses base theta·(factor·n/orig - (factor-1))^(d/(d-2)),
            // n = max(p + 1, orig): unscaled inside the original context, per position beyond it
  Llama3,   // by wavelength λ_i = 2π/inv_freq_i: λ > orig/low_freq_factor -> inv_freq/factor,
            // λ < orig/high_freq_factor -> unchanged, in between a smooth blend
};

// RoPE parameters of one model (attrs of a rope op).
struct RopeSpec {
  float theta = 10000.0f;
  RopeScaling scaling = RopeScaling::None;
  float factor = 1.0f;                      // Linear, Dynamic, Llama3
  float low_freq_factor = 1.0f;             // Llama3
  float high_freq_factor = 4.0f;            // Llama3
  std::int64_t original_max_positions = 0;  // Dynamic, Llama3 (orig above)
};

// The head_dim/2 inverse frequencies of `spec` for a token at `position` (out.size() ==
// head_dim/2); only Dynamic depends on the position. Computed in double.
void rope_inv_freq(const RopeSpec& spec, int head_dim, std::int64_t position,
                   std::span<double> out);

// In place on x[T, heads·head_dim]: rotate-half RoPE (Hugging Face Llama convention) at absolute
// positions[T], pair i of a head rotated by positions[t]·rope_inv_freq(spec, ...)[i].
void rope(Tensor& x, std::span<const std::int32_t> positions, int heads, int head_dim,
          const RopeSpec& spec);

// Scaled dot-product attention with grouped-query heads, scale 1/sqrt(D).
//   q [T, H·D]; k, v [S, Hkv·D]: keys/values of absolute positions 0..S-1; out [T, H·D].
//   Query t sits at absolute position p = q_pos0 + t. Causal: it attends to keys 0..p; with a
//   sliding window W > 0 (causal only) to keys in (p - W, p]; not causal: to all S.
//   Query head h reads kv head h / (H / Hkv).
void attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int kv_heads,
               int head_dim, std::int64_t q_pos0, bool causal, Tensor& out,
               std::int64_t window = 0);

}  // namespace huddle::kernels
