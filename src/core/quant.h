// Block quantisation, bit-compatible with GGUF/ggml's Q8_0 and Q4_0 blocks, and conversion of
// any weight dtype's row to f32.
//
// A row of n elements (n a multiple of 32) is n/32 blocks; block b covers elements [32b, 32b+32):
//   Q8_0: { f16 d; int8 q[32]; }  x[i] = d * q[i]
//   Q4_0: { f16 d; uint8 q[16]; } x[i] = d * ((q[i] & 15) - 8), x[i+16] = d * ((q[i] >> 4) - 8)
// The quantisers follow ggml's reference rounding (quantize_row_q8_0_ref, quantize_row_q4_0_ref),
// so a tensor quantised here and by llama.cpp from the same f32 values has the same bytes.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"

#include <cstddef>
#include <cstdint>
#include <random>

namespace huddle {

inline constexpr std::int64_t kQuantBlock = 32;

// Dtypes a matrix weight (linear weight, embedding table) may have: F32, F16, BF16, Q8_0, Q4_0,
// every block type.
constexpr bool is_weight_dtype(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 ||
         dtype_is_quantized(t);
}

struct BlockQ8_0 {
  std::uint16_t d;  // f16 scale
  std::int8_t q[kQuantBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Read from GGUF files only (llama.cpp writes it where a k-quant does not fit a row):
//   Q5_0: { f16 d; uint32 qh; uint8 q[16]; } x[i] = d * ((q[i] & 15 | bit i of qh << 4) - 16),
//         x[i+16] = d * ((q[i] >> 4 | bit i + 16 of qh << 4) - 16)
struct BlockQ5_0 {
  std::uint16_t d;                  // f16 scale
  std::uint8_t qh[4];               // the high bits, element i at bit i (little-endian)
  std::uint8_t q[kQuantBlock / 2];  // the low 4 bits, as Q4_0's
};
static_assert(sizeof(BlockQ5_0) == 22);

// Block b's 32 values q in [0, 31] (an element is d · (q - 16)).
void q5_0_quants(const BlockQ5_0& b, std::uint8_t out[32]);

//   Q5_1: { f16 d; f16 m; uint32 qh; uint8 q[16]; } x[i] = d * q5[i] + m, q5 as Q5_0's (where
//         llama.cpp's Q5_K_M meets rows that are not whole super-blocks)
struct BlockQ5_1 {
  std::uint16_t d, m;  // f16 scale and offset
  std::uint8_t qh[4];
  std::uint8_t q[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);
void q5_1_quants(const BlockQ5_1& b, std::uint8_t out[32]);

struct BlockQ4_0 {
  std::uint16_t d;                  // f16 scale
  std::uint8_t q[kQuantBlock / 2];  // element i in the low nibble of q[i], element i+16 in the high
};
static_assert(sizeof(BlockQ4_0) == 18);

// x[n] -> dtype_bytes(dtype, n) bytes at out. dtype: F32, F16, BF16, Q8_0 or Q4_0; n must be a
// multiple of the dtype's block.
void quantize_row(DType dtype, const float* x, void* out, std::int64_t n);

// dtype_bytes(dtype, n) bytes at in -> x[n]; the dtypes of quantize_row, Q5_0 and the k-quants
// (kquant.h).
void dequantize_row(DType dtype, const void* in, float* x, std::int64_t n);

// Whether quantize_row writes `t` (F32, F16, BF16, Q8_0, Q4_0); the other block types are read
// from GGUF files only.
constexpr bool can_quantize(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 ||
         t == DType::Q4_0;
}

// [rows, cols] blocks of a dtype Huddle reads but does not write (Q5_0, Q5_1, k-quants): random
// quants, scales (and mins), each block's scales drawn so that its values lie within about
// ±magnitude. The tests, the profiler and the benchmarks multiply these.
Tensor random_blocks(std::mt19937& rng, DType type, std::int64_t rows, std::int64_t cols,
                     float magnitude = 1.0f);

// Whole tensors, row by row (rank >= 1; strided 2-D views allowed), into new contiguous storage:
// `t` in any of the dtypes above -> F32, and F32 -> `dtype` (the last dimension must be whole
// blocks of it). Converting to the dtype a tensor already has returns a copy.
Tensor dequantize(const Tensor& t);
Tensor quantize(const Tensor& t, DType dtype);

}  // namespace huddle
