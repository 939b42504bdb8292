// PackedWeight (kernels/packed_weight.h): packing, the scalar kernels (the portable path and the
// reference of the vector ones), and linear() on packed weights.
#include "kernels/packed_weight.h"

#include "core/error.h"
#include "core/kquant.h"
#include "core/quant.h"
#include "kernels/packed_16bit.h"
#include "kernels/packed_quant.h"
#include "kernels/shapes.h"
#include "kernels/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

namespace huddle::kernels {
namespace {

constexpr std::int64_t kRows = PackedWeight::kGroupRows;
// Weight bytes per chunk of groups below which a thread is not worth waking (as linear_lowp.cpp).
constexpr std::int64_t kMinPackedChunkBytes = 1 << 19;
// Groups a thread takes at a time: their weights (16 x 16 rows) stay in L2 while every tile of
// tokens passes over them.
constexpr std::int64_t kChunkGroups = 16;

template <DType T>
void pack_group(const Tensor& w, std::int64_t g, std::int64_t group_bytes, std::byte* out) {
  using Block = std::conditional_t<T == DType::Q4_0, BlockQ4_0, BlockQ8_0>;
  constexpr int kChunks = T == DType::Q4_0 ? 4 : 8;
  const std::int64_t blocks = w.dim(1) / detail::kQBlock;
  const std::int64_t r0 = g * kRows;
  const std::int64_t rows = std::min(kRows, w.dim(0) - r0);
  const auto* base = static_cast<const std::byte*>(w.raw());
  std::memset(out, 0, static_cast<std::size_t>(group_bytes));
  for (std::int64_t j = 0; j < rows; ++j) {
    const auto* row =
        reinterpret_cast<const Block*>(base + dtype_bytes(T, (r0 + j) * w.row_stride()));
    for (std::int64_t b = 0; b < blocks; ++b) {
      std::memcpy(detail::packed_scales<T>(out, b) + 2 * j, &row[b].d, 2);
      std::byte* quants = detail::packed_quants<T>(out, b);
      for (int c = 0; c < kChunks; ++c) std::memcpy(quants + c * 64 + j * 4, row[b].q + 4 * c, 4);
    }
  }
}

// A packed block of 32 values (packed_quant.h): Q4_0's chunks of nibbles, and for the 5-bit types
// (Q5_0, Q5_K: `five`) a chunk of their high bits after them. Row j's values q (< 16, or < 32).
void pack_block_quants(const std::uint8_t q[32], bool five, int j, std::byte* quants) {
  for (int c = 0; c < 4; ++c) {
    for (int e = 0; e < 4; ++e) {
      const std::uint8_t lo = q[4 * c + e], hi = q[16 + 4 * c + e];
      quants[c * 64 + j * 4 + e] = static_cast<std::byte>((lo & 15) | (hi & 15) << 4);
      if (five) {
        quants[256 + j * 4 + e] |= static_cast<std::byte>((lo >> 4) << c | (hi >> 4) << (4 + c));
      }
    }
  }
}
void unpack_block_quants(const std::byte* quants, bool five, int j, std::uint8_t q[32]) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(quants);
  for (int c = 0; c < 4; ++c) {
    for (int e = 0; e < 4; ++e) {
      const std::uint8_t v = p[c * 64 + j * 4 + e], h = five ? p[256 + j * 4 + e] : 0;
      q[4 * c + e] = static_cast<std::uint8_t>((v & 15) | ((h >> c) & 1) << 4);
      q[16 + 4 * c + e] = static_cast<std::uint8_t>((v >> 4) | ((h >> (4 + c)) & 1) << 4);
    }
  }
}

// A Q5_0 or Q5_1 group (packed_quant.h): Q4_0's pairs, each block's quants its nibbles in Q4_0's
// chunks and a chunk of their high bits; Q5_1's offsets beside its scales.
template <DType T>
void pack_group_q5(const Tensor& w, std::int64_t g, std::int64_t group_bytes, std::byte* out) {
  using Block = std::conditional_t<T == DType::Q5_0, BlockQ5_0, BlockQ5_1>;
  const std::int64_t blocks = w.dim(1) / detail::kQBlock;
  const std::int64_t r0 = g * kRows;
  const std::int64_t rows = std::min(kRows, w.dim(0) - r0);
  const auto* base = static_cast<const std::byte*>(w.raw());
  std::memset(out, 0, static_cast<std::size_t>(group_bytes));
  for (std::int64_t j = 0; j < rows; ++j) {
    const std::byte* row = base + dtype_bytes(T, (r0 + j) * w.row_stride());
    for (std::int64_t b = 0; b < blocks; ++b) {
      Block block;
      std::memcpy(&block, row + b * static_cast<std::int64_t>(sizeof block), sizeof block);
      std::memcpy(detail::packed_scales<T>(out, b) + 2 * j, &block.d, 2);
      std::uint8_t q[32];
      if constexpr (T == DType::Q5_0) {
        q5_0_quants(block, q);
      } else {
        std::memcpy(detail::packed_mins<T>(out, b) + 2 * j, &block.m, 2);
        q5_1_quants(block, q);
      }
      pack_block_quants(q, true, static_cast<int>(j), detail::packed_quants<T>(out, b));
    }
  }
}

// The scalar Q5_0 kernel: packed_quant.h's operations, one output at a time.
void group_scalar_q5_0(const std::byte* group, std::int64_t blocks, int rows,
                       const detail::BlockQ8A* x, const std::int32_t* seeds,
                       std::int64_t x_row_blocks, int tokens, float* y, std::int64_t ldy) {
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < rows; ++j) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const detail::BlockQ8A& xb = x[t * x_row_blocks + b];
        std::uint8_t q[32];
        unpack_block_quants(detail::packed_quants<DType::Q5_0>(group, b), true, j, q);
        std::int32_t sum = seeds[t * x_row_blocks + b];
        for (int i = 0; i < 32; ++i) sum += q[i] * xb.q[i];
        std::uint16_t scale;
        std::memcpy(&scale, detail::packed_scales<DType::Q5_0>(group, b) + 2 * j, 2);
        acc = std::fma(f16_to_f32(scale) * xb.d, static_cast<float>(sum), acc);
      }
      y[t * ldy + j] = acc;
    }
  }
}

// Row j's d and m of block b of a packed Q5_1 group.
void q5_1_scale_min(const std::byte* group, std::int64_t b, int j, float& d, float& m) {
  std::uint16_t h;
  std::memcpy(&h, detail::packed_scales<DType::Q5_1>(group, b) + 2 * j, 2);
  d = f16_to_f32(h);
  std::memcpy(&h, detail::packed_mins<DType::Q5_1>(group, b) + 2 * j, 2);
  m = f16_to_f32(h);
}

// The scalar Q5_1 kernel: packed_quant.h's operations, one output at a time.
void group_scalar_q5_1(const std::byte* group, std::int64_t blocks, int rows,
                       const detail::BlockQ8A* x, const std::int32_t* seeds,
                       std::int64_t x_row_blocks, int tokens, float* y, std::int64_t ldy) {
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < rows; ++j) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const detail::BlockQ8A& xb = x[t * x_row_blocks + b];
        std::uint8_t q[32];
        unpack_block_quants(detail::packed_quants<DType::Q5_1>(group, b), true, j, q);
        std::int32_t sum = 0;
        for (int i = 0; i < 32; ++i) sum += q[i] * xb.q[i];
        float d = 0.0f, m = 0.0f;
        q5_1_scale_min(group, b, j, d, m);
        acc = std::fma(d * xb.d, static_cast<float>(sum), acc);
        acc = std::fma(m * xb.d, static_cast<float>(seeds[t * x_row_blocks + b]), acc);
      }
      y[t * ldy + j] = acc;
    }
  }
}

// A Q4_K or Q5_K group (packed_quant.h): per super-block the rows' d and dmin, their sub-block
// scales and mins as bytes, and each sub-block's quants laid out as a Q4_0 (Q5_0) block's.
template <DType T>
void pack_group_kq(const Tensor& w, std::int64_t g, std::int64_t group_bytes, std::byte* out) {
  using Block = std::conditional_t<T == DType::Q4_K, BlockQ4_K, BlockQ5_K>;
  const std::int64_t supers = w.dim(1) / kKQuantBlock;
  const std::int64_t r0 = g * kRows;
  const std::int64_t rows = std::min(kRows, w.dim(0) - r0);
  const auto* base = static_cast<const std::byte*>(w.raw());
  std::memset(out, 0, static_cast<std::size_t>(group_bytes));
  for (std::int64_t j = 0; j < rows; ++j) {
    const std::byte* row = base + dtype_bytes(T, (r0 + j) * w.row_stride());
    for (std::int64_t sb = 0; sb < supers; ++sb) {
      Block block;
      std::memcpy(&block, row + sb * static_cast<std::int64_t>(sizeof block), sizeof block);
      std::byte* super = detail::packed_kq_super<T>(out, sb);
      std::memcpy(super + 2 * j, &block.d, 2);
      std::memcpy(super + 32 + 2 * j, &block.dmin, 2);
      for (int sub = 0; sub < detail::kQ4KSubBlocks; ++sub) {
        int scale = 0, min = 0;
        kquant_scale_min(block.scales, sub, scale, min);
        std::byte* sm = detail::packed_kq_scales(super, sub);
        sm[j] = static_cast<std::byte>(scale);
        sm[16 + j] = static_cast<std::byte>(min);
        std::uint8_t q[32];
        if constexpr (T == DType::Q4_K) {
          q4_k_quants(block, sub, q);
        } else {
          q5_k_quants(block, sub, q);
        }
        pack_block_quants(q, T == DType::Q5_K, static_cast<int>(j),
                          detail::packed_kq_quants<T>(super, sub));
      }
    }
  }
}

// Row j's d · s_b and dmin · m_b for sub-block `sub` of a packed k-quant super-block (exact in
// f32).
void kq_step_offset(const std::byte* super, int sub, int j, float& step, float& offset) {
  std::uint16_t d, dmin;
  std::memcpy(&d, super + 2 * j, 2);
  std::memcpy(&dmin, super + 32 + 2 * j, 2);
  const auto* sm = reinterpret_cast<const std::uint8_t*>(detail::packed_kq_scales(super, sub));
  step = f16_to_f32(d) * static_cast<float>(sm[j]);
  offset = f16_to_f32(dmin) * static_cast<float>(sm[16 + j]);
}

// Row j's values of block b (a sub-block of 32) of a packed Q4_K or Q5_K group, with its step
// and offset.
template <DType T>
void kq_block(const std::byte* group, std::int64_t b, int j, std::uint8_t q[32], float& step,
              float& offset) {
  const std::byte* super = detail::packed_kq_super<T>(group, b / detail::kQ4KSubBlocks);
  const auto sub = static_cast<int>(b % detail::kQ4KSubBlocks);
  unpack_block_quants(detail::packed_kq_quants<T>(super, sub), T == DType::Q5_K, j, q);
  kq_step_offset(super, sub, j, step, offset);
}

// The scalar Q4_K / Q5_K kernel: packed_quant.h's operations, one output at a time.
template <DType T>
void group_scalar_kq(const std::byte* group, std::int64_t blocks, int rows,
                     const detail::BlockQ8A* x, const std::int32_t* seeds,
                     std::int64_t x_row_blocks, int tokens, float* y, std::int64_t ldy) {
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < rows; ++j) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const detail::BlockQ8A& xb = x[t * x_row_blocks + b];
        std::uint8_t q[32];
        float step = 0.0f, offset = 0.0f;
        kq_block<T>(group, b, j, q, step, offset);
        std::int32_t sum = 0;
        for (int i = 0; i < 32; ++i) sum += q[i] * xb.q[i];
        acc = std::fma(step * xb.d, static_cast<float>(sum), acc);
        acc = std::fma(-(offset * xb.d), static_cast<float>(seeds[t * x_row_blocks + b]), acc);
      }
      y[t * ldy + j] = acc;
    }
  }
}

// A Q6_K group (packed_quant.h): per super-block the rows' d, their sub-block scales, and each
// block of 32's values as a Q4_0 block's nibbles plus two chunks of their high 2 bits.
void pack_group_q6k(const Tensor& w, std::int64_t g, std::int64_t group_bytes, std::byte* out) {
  const std::int64_t supers = w.dim(1) / kKQuantBlock;
  const std::int64_t r0 = g * kRows;
  const std::int64_t rows = std::min(kRows, w.dim(0) - r0);
  const auto* base = static_cast<const std::byte*>(w.raw());
  std::memset(out, 0, static_cast<std::size_t>(group_bytes));
  for (std::int64_t j = 0; j < rows; ++j) {
    const std::byte* row = base + dtype_bytes(DType::Q6_K, (r0 + j) * w.row_stride());
    for (std::int64_t sb = 0; sb < supers; ++sb) {
      BlockQ6_K block;
      std::memcpy(&block, row + sb * static_cast<std::int64_t>(sizeof block), sizeof block);
      std::byte* super = detail::packed_q6k_super(out, sb);
      std::memcpy(super + 2 * j, &block.d, 2);
      for (int k = 0; k < 16; ++k) {
        detail::packed_q6k_scales(super, k)[j] = static_cast<std::byte>(block.scales[k]);
      }
      std::uint8_t q[256];
      q6_k_quants(block, q);
      for (int b = 0; b < 8; ++b) {
        const std::uint8_t* qb = q + 32 * b;
        std::byte* quants = detail::packed_q6k_quants(super, b);
        for (int c = 0; c < 4; ++c) {
          for (int e = 0; e < 4; ++e) {
            const std::uint8_t lo = qb[4 * c + e], hi = qb[16 + 4 * c + e];
            quants[c * 64 + j * 4 + e] = static_cast<std::byte>((lo & 15) | (hi & 15) << 4);
            quants[256 + j * 4 + e] |= static_cast<std::byte>((lo >> 4) << (2 * c));
            quants[320 + j * 4 + e] |= static_cast<std::byte>((hi >> 4) << (2 * c));
          }
        }
      }
    }
  }
}

// Row j's 32 values q (in [0, 63]) of block b of a packed Q6_K group.
void q6k_block_quants(const std::byte* group, std::int64_t b, int j, std::uint8_t q[32]) {
  const std::byte* super = detail::packed_q6k_super(group, b / 8);
  const auto* p = reinterpret_cast<const std::uint8_t*>(detail::packed_q6k_quants(super, b % 8));
  for (int c = 0; c < 4; ++c) {
    for (int e = 0; e < 4; ++e) {
      const std::uint8_t v = p[c * 64 + j * 4 + e];
      q[4 * c + e] =
          static_cast<std::uint8_t>((v & 15) | ((p[256 + j * 4 + e] >> (2 * c)) & 3) << 4);
      q[16 + 4 * c + e] =
          static_cast<std::uint8_t>((v >> 4) | ((p[320 + j * 4 + e] >> (2 * c)) & 3) << 4);
    }
  }
}

// Row j's d and the scales of sub-blocks 2·(b % 8) and 2·(b % 8) + 1 of a packed Q6_K group.
void q6k_block_scales(const std::byte* group, std::int64_t b, int j, float& d, int scale[2]) {
  const std::byte* super = detail::packed_q6k_super(group, b / 8);
  std::uint16_t h;
  std::memcpy(&h, super + 2 * j, 2);
  d = f16_to_f32(h);
  for (int i = 0; i < 2; ++i) {
    scale[i] = static_cast<std::int8_t>(detail::packed_q6k_scales(super, 2 * (b % 8) + i)[j]);
  }
}

// The scalar Q6_K kernel: packed_quant.h's operations, one output at a time.
void group_scalar_q6k(const std::byte* group, std::int64_t blocks, int rows,
                      const detail::BlockQ8A* x, const std::int32_t* seeds,
                      std::int64_t x_row_blocks, int tokens, float* y, std::int64_t ldy) {
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < rows; ++j) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const detail::BlockQ8A& xb = x[t * x_row_blocks + b];
        std::uint8_t q[32];
        q6k_block_quants(group, b, j, q);
        float d = 0.0f;
        int scale[2];
        q6k_block_scales(group, b, j, d, scale);
        std::int32_t total = 0;
        for (int h = 0; h < 2; ++h) {
          std::int32_t sum = seeds[2 * (t * x_row_blocks + b) + h];
          for (int i = 0; i < 16; ++i) sum += q[16 * h + i] * xb.q[16 * h + i];
          total += scale[h] * sum;
        }
        acc = std::fma(d * xb.d, static_cast<float>(total), acc);
      }
      y[t * ldy + j] = acc;
    }
  }
}

// The scalar kernels: the operations packed_quant.h states, one output at a time.
template <DType T>
void group_scalar(const std::byte* group, std::int64_t blocks, int rows, const detail::BlockQ8A* x,
                  const std::int32_t* seeds, std::int64_t x_row_blocks, int tokens, float* y,
                  std::int64_t ldy) {
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < rows; ++j) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const detail::BlockQ8A& xb = x[t * x_row_blocks + b];
        const auto* q = reinterpret_cast<const std::uint8_t*>(detail::packed_quants<T>(group, b));
        std::int32_t sum = 0;
        if constexpr (T == DType::Q4_0) {
          sum = seeds[t * x_row_blocks + b];
          for (int c = 0; c < 4; ++c) {
            for (int e = 0; e < 4; ++e) {
              const std::uint8_t v = q[c * 64 + j * 4 + e];
              sum += (v & 15) * xb.q[4 * c + e] + (v >> 4) * xb.q[16 + 4 * c + e];
            }
          }
        } else {
          for (int c = 0; c < 8; ++c) {
            for (int e = 0; e < 4; ++e) {
              sum += static_cast<std::int8_t>(q[c * 64 + j * 4 + e]) * xb.q[4 * c + e];
            }
          }
        }
        std::uint16_t scale;
        std::memcpy(&scale, detail::packed_scales<T>(group, b) + 2 * j, 2);
        acc = std::fma(f16_to_f32(scale) * xb.d, static_cast<float>(sum), acc);
      }
      y[t * ldy + j] = acc;
    }
  }
}

bool is_16bit(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

// A 16-bit group: element i of row j at byte 32 · i + 2 · j (packed_16bit.h).
void pack_group16(const Tensor& w, std::int64_t g, std::int64_t group_bytes, std::byte* out) {
  const std::int64_t r0 = g * kRows;
  const std::int64_t rows = std::min(kRows, w.dim(0) - r0);
  const auto* base = static_cast<const std::byte*>(w.raw());
  std::memset(out, 0, static_cast<std::size_t>(group_bytes));
  for (std::int64_t j = 0; j < rows; ++j) {
    const std::byte* row = base + 2 * (r0 + j) * w.row_stride();
    for (std::int64_t i = 0; i < w.dim(1); ++i) std::memcpy(out + 32 * i + 2 * j, row + 2 * i, 2);
  }
}

// The scalar 16-bit kernels: the operations packed_16bit.h states, one output at a time.
template <DType T>
void group16_scalar(const std::byte* group, std::int64_t cols, int rows, const float* x,
                    std::int64_t ldx, int tokens, float* y, std::int64_t ldy) {
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < rows; ++j) {
      float chain[2] = {0.0f, 0.0f};
      for (std::int64_t i = 0; i < cols; ++i) {
        std::uint16_t h;
        std::memcpy(&h, group + 32 * i + 2 * j, 2);
        const float wv = T == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
        chain[i % 2] = std::fma(wv, x[t * ldx + i], chain[i % 2]);
      }
      y[t * ldy + j] = chain[0] + chain[1];
    }
  }
}

// y = x · wᵀ (+ bias) on 16-bit packed groups. Threads take runs of groups; each group stays in
// L2 (32 KB per 1024 inputs) while every tile of tokens passes over it.
void linear_packed16(const Tensor& x, const PackedWeight& w, const float* bias, Tensor& y) {
  const std::int64_t t = x.dim(0), k = x.dim(1), n = w.rows();
  const detail::Packed16Fn fn = detail::packed16_fn(w.dtype(), active_isa());
  const float* xd = x.f32();
  const std::int64_t ldx = x.row_stride();
  float* yd = y.f32();
  const std::int64_t ldy = y.row_stride();
  parallel_for(
      0, w.groups(),
      [&](std::int64_t gb, std::int64_t ge) {
        for (std::int64_t g = gb; g < ge; ++g) {
          const int rows = static_cast<int>(std::min(kRows, n - g * kRows));
          for (std::int64_t t0 = 0; t0 < t; t0 += detail::kPacked16Tokens) {
            const int tokens =
                static_cast<int>(std::min<std::int64_t>(detail::kPacked16Tokens, t - t0));
            fn(w.group(g), k, rows, xd + t0 * ldx, ldx, tokens, yd + t0 * ldy + g * kRows, ldy);
          }
        }
        if (bias != nullptr) {
          for (std::int64_t r = 0; r < t; ++r) {
            for (std::int64_t col = gb * kRows; col < std::min(n, ge * kRows); ++col) {
              yd[r * ldy + col] += bias[col];
            }
          }
        }
      },
      std::max<std::int64_t>(1, kMinPackedChunkBytes / w.group_bytes()));
}

void linear_packed(const Tensor& x, const PackedWeight& w, const float* bias, Tensor& y) {
  const std::int64_t t = x.dim(0), k = x.dim(1), n = w.rows();
  const std::int64_t blocks = k / detail::kQBlock;
  thread_local std::vector<detail::BlockQ8A> xq;
  thread_local std::vector<std::int32_t> seeds;
  xq.resize(static_cast<std::size_t>(t * blocks));
  seeds.resize(2 * xq.size());
  for (std::int64_t r = 0; r < t; ++r) {
    detail::quantize_activation(x.f32() + r * x.row_stride(), xq.data() + r * blocks, k);
  }
  // Q4_0's offset of 8, Q5_0's of 16 and Q4_K's and Q5_K's mins multiply the activation block's
  // sum, Q6_K's offset of 32 each half's (packed_quant.h).
  const DType dtype = w.dtype();
  const bool seeded = dtype != DType::Q8_0;
  for (std::size_t i = 0; seeded && i < xq.size(); ++i) {
    std::int32_t half[2] = {0, 0};
    for (int e = 0; e < detail::kQBlock; ++e) half[e / 16] += xq[i].q[e];
    if (dtype == DType::Q6_K) {
      seeds[2 * i] = -32 * half[0];
      seeds[2 * i + 1] = -32 * half[1];
    } else {
      const std::int32_t sum = half[0] + half[1];
      seeds[i] = dtype == DType::Q4_0   ? -8 * sum
                 : dtype == DType::Q5_0 ? -16 * sum
                                        : sum;  // Q5_1, Q4_K, Q5_K: S
    }
  }
  const detail::PackedFn fn = detail::packed_fn(w.dtype(), active_isa());
  const std::int64_t seeds_per_block = dtype == DType::Q6_K ? 2 : 1;
  // Pointers taken here: inside the loop, on a pool thread, the thread_locals are that thread's.
  const detail::BlockQ8A* xqd = xq.data();
  const std::int32_t* seedd = seeded ? seeds.data() : nullptr;
  float* yd = y.f32();
  const std::int64_t ldy = y.row_stride();
  const std::int64_t chunks = (w.groups() + kChunkGroups - 1) / kChunkGroups;
  parallel_for(
      0, chunks,
      [&](std::int64_t cb, std::int64_t ce) {
        for (std::int64_t c = cb; c < ce; ++c) {
          const std::int64_t g_end = std::min(w.groups(), (c + 1) * kChunkGroups);
          for (std::int64_t t0 = 0; t0 < t; t0 += detail::kPackedTokens) {
            const int tokens =
                static_cast<int>(std::min<std::int64_t>(detail::kPackedTokens, t - t0));
            for (std::int64_t g = c * kChunkGroups; g < g_end; ++g) {
              const int rows = static_cast<int>(std::min(kRows, n - g * kRows));
              fn(w.group(g), blocks, rows, xqd + t0 * blocks,
                 seedd != nullptr ? seedd + t0 * blocks * seeds_per_block : nullptr, blocks, tokens,
                 yd + t0 * ldy + g * kRows, ldy);
            }
          }
          if (bias != nullptr) {
            for (std::int64_t r = 0; r < t; ++r) {
              for (std::int64_t col = c * kChunkGroups * kRows; col < std::min(n, g_end * kRows);
                   ++col) {
                yd[r * ldy + col] += bias[col];
              }
            }
          }
        }
      },
      std::max<std::int64_t>(
          1, kMinPackedChunkBytes / std::max<std::int64_t>(1, kChunkGroups * w.group_bytes())));
}

}  // namespace

std::int64_t PackedWeight::group_bytes() const {
  if (is_16bit(dtype_)) return detail::packed16_group_bytes(cols_);
  if (dtype_ == DType::Q4_K || dtype_ == DType::Q5_K) {
    return blocks_ / detail::kQ4KSubBlocks * detail::packed_kq_super_bytes(dtype_);
  }
  if (dtype_ == DType::Q6_K) return blocks_ / 8 * detail::kPackedQ6KSuperBytes;
  return (blocks_ + 1) / 2 * detail::packed_pair_bytes(dtype_);
}

void PackedWeight::unpack_row(std::int64_t r, float* out) const {
  HUDDLE_CHECK(r >= 0 && r < rows_, "row {} of a packed weight of {} rows", r, rows_);
  const std::byte* g = group(r / kRows);
  const auto j = static_cast<int>(r % kRows);
  if (is_16bit(dtype_)) {
    for (std::int64_t i = 0; i < cols_; ++i) {
      std::uint16_t h;
      std::memcpy(&h, g + 32 * i + 2 * j, 2);
      out[i] = dtype_ == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    return;
  }
  if (dtype_ == DType::Q5_1) {  // as dequantize_row: d · q + m
    for (std::int64_t b = 0; b < blocks_; ++b, out += detail::kQBlock) {
      std::uint8_t q[32];
      unpack_block_quants(detail::packed_quants<DType::Q5_1>(g, b), true, j, q);
      float d = 0.0f, m = 0.0f;
      q5_1_scale_min(g, b, j, d, m);
      for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q[i]) + m;
    }
    return;
  }
  if (dtype_ == DType::Q5_0) {  // as dequantize_row: d · (q - 16)
    for (std::int64_t b = 0; b < blocks_; ++b, out += detail::kQBlock) {
      std::uint8_t q[32];
      unpack_block_quants(detail::packed_quants<DType::Q5_0>(g, b), true, j, q);
      std::uint16_t scale;
      std::memcpy(&scale, detail::packed_scales<DType::Q5_0>(g, b) + 2 * j, 2);
      const float d = f16_to_f32(scale);
      for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q[i] - 16);
    }
    return;
  }
  if (dtype_ == DType::Q6_K) {  // as dequantize_row: d · scale · (q - 32)
    for (std::int64_t b = 0; b < blocks_; ++b, out += detail::kQBlock) {
      std::uint8_t q[32];
      q6k_block_quants(g, b, j, q);
      float d = 0.0f;
      int scale[2];
      q6k_block_scales(g, b, j, d, scale);
      for (int i = 0; i < 32; ++i) {
        out[i] = d * static_cast<float>(scale[i / 16]) * static_cast<float>(q[i] - 32);
      }
    }
    return;
  }
  if (dtype_ == DType::Q4_K || dtype_ == DType::Q5_K) {  // as dequantize_row: d·s · q - dmin·m
    for (std::int64_t b = 0; b < blocks_; ++b, out += detail::kQBlock) {
      std::uint8_t q[32];
      float step = 0.0f, offset = 0.0f;
      if (dtype_ == DType::Q4_K) {
        kq_block<DType::Q4_K>(g, b, j, q, step, offset);
      } else {
        kq_block<DType::Q5_K>(g, b, j, q, step, offset);
      }
      for (int i = 0; i < 32; ++i) out[i] = step * static_cast<float>(q[i]) - offset;
    }
    return;
  }
  const bool q4 = dtype_ == DType::Q4_0;
  for (std::int64_t b = 0; b < blocks_; ++b, out += detail::kQBlock) {
    std::uint16_t scale;
    std::memcpy(
        &scale,
        (q4 ? detail::packed_scales<DType::Q4_0>(g, b) : detail::packed_scales<DType::Q8_0>(g, b)) +
            2 * j,
        2);
    const float d = f16_to_f32(scale);
    const auto* q = reinterpret_cast<const std::uint8_t*>(
        q4 ? detail::packed_quants<DType::Q4_0>(g, b) : detail::packed_quants<DType::Q8_0>(g, b));
    for (int c = 0; c < (q4 ? 4 : 8); ++c) {
      for (int e = 0; e < 4; ++e) {
        const std::uint8_t v = q[c * 64 + j * 4 + e];
        if (q4) {  // as dequantize_q4_0
          out[4 * c + e] = d * static_cast<float>((v & 15) - 8);
          out[16 + 4 * c + e] = d * static_cast<float>((v >> 4) - 8);
        } else {  // as dequantize_q8_0
          out[4 * c + e] = d * static_cast<float>(static_cast<std::int8_t>(v));
        }
      }
    }
  }
}

void embedding(std::span<const std::int32_t> ids, const PackedWeight& table, Tensor& y) {
  HUDDLE_CHECK(y.dtype() == DType::F32 && y.rank() == 2 &&
                   y.dim(0) == static_cast<std::int64_t>(ids.size()) && y.dim(1) == table.cols(),
               "embedding: output {} for {} ids and a packed table of {} columns",
               shape_str(y.shape()), ids.size(), table.cols());
  detail::check_token_ids(ids, table.rows());
  for (std::size_t t = 0; t < ids.size(); ++t) {
    table.unpack_row(ids[t], y.f32() + static_cast<std::int64_t>(t) * y.row_stride());
  }
}

void PackedWeight::Free::operator()(std::byte* p) const {
  ::operator delete[](p, std::align_val_t{64});
}

std::shared_ptr<const PackedWeight> PackedWeight::pack(const Tensor& w, WeightLayout layout,
                                                       const Consumed& consumed) {
  const DType t = w.dtype();
  if ((!dtype_is_quantized(t) && !is_16bit(t)) || layout != WeightLayout::OutIn || w.rank() != 2) {
    return nullptr;
  }
  auto p = std::make_shared<PackedWeight>();
  p->dtype_ = t;
  p->rows_ = w.dim(0);
  p->cols_ = w.dim(1);
  p->blocks_ = is_16bit(t) ? 0 : p->cols_ / detail::kQBlock;
  p->data_.reset(static_cast<std::byte*>(
      ::operator new[](std::max<std::size_t>(p->nbytes(), 64), std::align_val_t{64})));
  const auto pack = is_16bit(t)        ? &pack_group16
                    : t == DType::Q4_K ? &pack_group_kq<DType::Q4_K>
                    : t == DType::Q5_K ? &pack_group_kq<DType::Q5_K>
                    : t == DType::Q6_K ? &pack_group_q6k
                    : t == DType::Q5_0 ? &pack_group_q5<DType::Q5_0>
                    : t == DType::Q5_1 ? &pack_group_q5<DType::Q5_1>
                    : t == DType::Q4_0 ? &pack_group<DType::Q4_0>
                                       : &pack_group<DType::Q8_0>;
  // Runs of groups of about 16 MB of rows, each packed in parallel, then reported consumed.
  const auto row_bytes = static_cast<std::int64_t>(dtype_bytes(t, w.row_stride()));
  const std::int64_t run = std::max<std::int64_t>(
      1, (std::int64_t{16} << 20) / std::max<std::int64_t>(1, kRows * row_bytes));
  for (std::int64_t g0 = 0; g0 < p->groups(); g0 += run) {
    const std::int64_t g1 = std::min(p->groups(), g0 + run);
    parallel_for(g0, g1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t g = b; g < e; ++g) {
        pack(w, g, p->group_bytes(), p->data_.get() + g * p->group_bytes());
      }
    });
    if (consumed) {
      const std::int64_t r0 = g0 * kRows, r1 = std::min(p->rows_, g1 * kRows);
      consumed(static_cast<const std::byte*>(w.raw()) + r0 * row_bytes,
               static_cast<std::size_t>((r1 - r0) * row_bytes));
    }
  }
  return p;
}

void linear(const Tensor& x, const Tensor& w, const PackedWeight* packed, WeightLayout layout,
            const Tensor* bias, Tensor& y) {
  if (packed == nullptr) {
    linear(x, w, layout, bias, y);
    return;
  }
  const auto [t, k, n] = detail::check_linear(x, w, layout, bias, y);
  HUDDLE_CHECK(packed->rows() == n && packed->cols() == k,
               "packed weight [{}, {}] for a linear of {} outputs and {} inputs", packed->rows(),
               packed->cols(), n, k);
  if (t == 0 || n == 0) return;
  if (k == 0) {
    linear(x, w, layout, bias, y);
    return;
  }
  const float* b = bias != nullptr ? bias->f32() : nullptr;
  if (is_16bit(packed->dtype())) {
    linear_packed16(x, *packed, b, y);
  } else {
    linear_packed(x, *packed, b, y);
  }
}

namespace detail {

PackedFn packed_fn(DType dtype, Isa isa) {
  HUDDLE_CHECK(isa_supported(isa), "path {} is not supported on this CPU", isa_name(isa));
  HUDDLE_CHECK(dtype_is_quantized(dtype), "no packed kernel for {} weights", dtype_name(dtype));
  PackedFn fn = nullptr;
  switch (isa) {
    case Isa::Avx512Vnni:
      fn = avx512vnni_packed(dtype);
      break;
    case Isa::Avx512:
    case Isa::Avx2:
      fn = avx2_packed(dtype);
      break;
    case Isa::Scalar:
      break;
  }
  if (fn != nullptr) return fn;
  if (dtype == DType::Q4_K) return &group_scalar_kq<DType::Q4_K>;
  if (dtype == DType::Q5_K) return &group_scalar_kq<DType::Q5_K>;
  if (dtype == DType::Q6_K) return &group_scalar_q6k;
  if (dtype == DType::Q5_0) return &group_scalar_q5_0;
  if (dtype == DType::Q5_1) return &group_scalar_q5_1;
  return dtype == DType::Q4_0 ? &group_scalar<DType::Q4_0> : &group_scalar<DType::Q8_0>;
}

Packed16Fn packed16_fn(DType dtype, Isa isa) {
  HUDDLE_CHECK(isa_supported(isa), "path {} is not supported on this CPU", isa_name(isa));
  HUDDLE_CHECK(is_16bit(dtype), "no packed 16-bit kernel for {} weights", dtype_name(dtype));
  Packed16Fn fn = nullptr;
  switch (isa) {
    case Isa::Avx512Vnni:
    case Isa::Avx512:
      fn = avx512_packed16(dtype);
      break;
    case Isa::Avx2:
      fn = avx2_packed16(dtype);
      break;
    case Isa::Scalar:
      break;
  }
  if (fn != nullptr) return fn;
  return dtype == DType::F16 ? &group16_scalar<DType::F16> : &group16_scalar<DType::BF16>;
}

}  // namespace detail
}  // namespace huddle::kernels
