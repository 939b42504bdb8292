// The x86-64 kernels of packed Q4_0 and Q8_0 weights (kernels/packed_weight.h,
// packed_quant.h), compiled per instruction set with __attribute__((target)) like qtile_x86.cpp
// and called only where the CPU has that set.
//
// A 32-bit lane is one weight row. For block b the group's quants are 64-byte chunks; chunk c
// holds bytes 4c .. 4c + 3 of every row, and meets one broadcast of the four matching activation
// bytes:
//   Q4_0: four chunks; the low nibbles are elements 4c .. 4c + 3, the high ones 16 + 4c ..
//         16 + 4c + 3. Nibbles q in [0, 15] are the unsigned operand; Σ (q - 8)·x = Σ q·x - 8·Σ x,
//         the second term the caller's seed.
//   Q8_0: eight chunks, elements 4c .. 4c + 3. VNNI: the activation shifted to x + 128 is the
//         unsigned operand and Σ (x + 128)·w - 128·Σ w = Σ x·w, the correction per row computed
//         once per block for all tokens; AVX2: |w| times x with w's sign (maddubs).
//   Q5_1: Q5_0's values without the offset, and an FMA of the offsets m by the seed S = Σ x;
//   Q5_0: four chunks as Q4_0's with each value's high bit or-ed in from a fifth chunk; its
//         offset of 16 the caller's seed, as Q4_0's of 8.
//   Q6_K: each block of 32 as a Q4_0 block's nibbles with the high 2 bits or-ed in from two more
//         chunks, the two halves' sums (offset by the seeds) times their int8 scales, exact;
//   Q4_K, Q5_K: each sub-block of 32 as a Q4_0 (Q5_0) block without the offset; its scale and min
//   vectors are
//         the rows' d and dmin times their 6-bit s_b and m_b (exact), and the min's term
//         multiplies the caller's seed S = Σ x (packed_quant.h).
// The integer block sum is exact on every path, so all give the scalar path's bits.
#include "kernels/packed_quant.h"

#if defined(__x86_64__)

#include "kernels/x86_simd.h"

#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

#define HUDDLE_UNROLL_ALL _Pragma("GCC unroll 16")

namespace huddle::kernels::detail {
namespace {

using x86::m128;
using x86::m256;

// Four activation bytes x[i .. i + 3] as one 32-bit value, for a broadcast.
inline std::int32_t four_bytes(const std::int8_t* x) {
  std::int32_t v;
  std::memcpy(&v, x, 4);
  return v;
}

// Bytes ahead of the block being multiplied that the kernels prefetch. Without it the hardware
// prefetchers kept one core at 13 GB/s of packed Q4_0 weights; with it 19-22 GB/s
// (bench_lowp_gemv, one thread, Zen 4; 1, 2 and 4 KB ahead within 10 % of each other).
// Q8_0 goes without: its single stream (twice the bytes per instruction) ran 24-26 GB/s against
// 17-20 with prefetches 2 or 4 KB ahead.
constexpr std::int64_t kAhead = 1024;
// Q4_K goes 2 KB ahead: its sub-blocks' quants sit between super-block headers, and at 1 KB one
// core streamed 13.6-17.8 GB/s of packed Q4_K against 18.4-21.3 at 2 KB (1.5 KB: 16.2-20.0,
// 4 KB: 17.5-19.7; bench_lowp_gemv, Zen 4).
constexpr std::int64_t kAheadQ4K = 2048;

// The `Lines` cache lines kAhead past a block's quants: a block's share of its pair, rounded up
// (Q4_0: 4.5 lines), so the prefetches keep pace with the stream.
template <int Lines, std::int64_t Ahead = kAhead>
inline void prefetch_lines(const std::byte* q) {
  HUDDLE_UNROLL_ALL
  for (int c = 0; c < Lines; ++c) {
    _mm_prefetch(reinterpret_cast<const char*>(q + Ahead + c * 64), _MM_HINT_T0);
  }
}

// ---- AVX-512 VNNI: the whole group, T tokens per pass over the blocks ----

template <int T>
HUDDLE_VNNI void q4_group_vnni(const std::byte* group, std::int64_t blocks, int rows,
                               const BlockQ8A* x, const std::int32_t* seeds,
                               std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  const __m512i low4 = _mm512_set1_epi8(15);
  __m512 acc[T];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* q = packed_quants<DType::Q4_0>(group, b);
    prefetch_lines<5>(q);
    __m512i lo[4], hi[4];
    HUDDLE_UNROLL_ALL
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_load_si512(q + c * 64);
      lo[c] = _mm512_and_si512(v, low4);
      hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_load_si256(m256(packed_scales<DType::Q4_0>(group, b))));
    HUDDLE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& xb = x[t * x_row_blocks + b];
      // Two chains of four multiply-adds instead of one of eight: half the latency.
      __m512i s0 = _mm512_set1_epi32(seeds[t * x_row_blocks + b]);
      __m512i s1 = _mm512_setzero_si512();
      HUDDLE_UNROLL_ALL
      for (int c = 0; c < 4; ++c) {
        s0 = _mm512_dpbusd_epi32(s0, lo[c], _mm512_set1_epi32(four_bytes(xb.q + 4 * c)));
        s1 = _mm512_dpbusd_epi32(s1, hi[c], _mm512_set1_epi32(four_bytes(xb.q + 16 + 4 * c)));
      }
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xb.d));
      acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[t]);
    }
  }
  const auto mask = static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

// Q5_0's values of chunk c: the nibbles `v` with the high bit of each element, bit c (low
// nibbles) or bit 4 + c (high ones) of the high-bit chunk `h`, moved to bit 4 (16-bit shifts; the
// mask keeps each byte's own bit).
template <int C, bool High>
HUDDLE_VNNI inline __m512i q5_with_high_bit(__m512i v, __m512i h) {
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  const __m512i moved = High ? _mm512_srli_epi16(h, C) : _mm512_slli_epi16(h, 4 - C);
  return _mm512_or_si512(v, _mm512_and_si512(moved, bit4));
}

// A Q5_0 / Q5_1 / Q5_K block's quants at q: four nibble chunks and a high-bit chunk after them
// (packed_quant.h), as the 5-bit values of elements 4c .. 4c + 3 (lo[c]) and 16 + 4c .. (hi[c]).
HUDDLE_VNNI inline void unpack_q5_chunks(const std::byte* q, __m512i lo[4], __m512i hi[4]) {
  const __m512i low4 = _mm512_set1_epi8(15);
  const __m512i h = _mm512_load_si512(q + 256);
  const auto unpack = [&]<int C>(std::integral_constant<int, C>) {
    const __m512i v = _mm512_load_si512(q + C * 64);
    lo[C] = q5_with_high_bit<C, false>(_mm512_and_si512(v, low4), h);
    hi[C] = q5_with_high_bit<C, true>(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), h);
  };
  unpack(std::integral_constant<int, 0>{});
  unpack(std::integral_constant<int, 1>{});
  unpack(std::integral_constant<int, 2>{});
  unpack(std::integral_constant<int, 3>{});
}

template <int T>
HUDDLE_VNNI void q5_group_vnni(const std::byte* group, std::int64_t blocks, int rows,
                               const BlockQ8A* x, const std::int32_t* seeds,
                               std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  __m512 acc[T];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* q = packed_quants<DType::Q5_0>(group, b);
    prefetch_lines<6>(q);
    __m512i lo[4], hi[4];
    unpack_q5_chunks(q, lo, hi);
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_load_si256(m256(packed_scales<DType::Q5_0>(group, b))));
    HUDDLE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& xb = x[t * x_row_blocks + b];
      __m512i s0 = _mm512_set1_epi32(seeds[t * x_row_blocks + b]);
      __m512i s1 = _mm512_setzero_si512();
      HUDDLE_UNROLL_ALL
      for (int c = 0; c < 4; ++c) {
        s0 = _mm512_dpbusd_epi32(s0, lo[c], _mm512_set1_epi32(four_bytes(xb.q + 4 * c)));
        s1 = _mm512_dpbusd_epi32(s1, hi[c], _mm512_set1_epi32(four_bytes(xb.q + 16 + 4 * c)));
      }
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xb.d));
      acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[t]);
    }
  }
  const auto mask = static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

template <int T>
HUDDLE_VNNI void q5_1_group_vnni(const std::byte* group, std::int64_t blocks, int rows,
                                 const BlockQ8A* x, const std::int32_t* seeds,
                                 std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  __m512 acc[T];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* q = packed_quants<DType::Q5_1>(group, b);
    prefetch_lines<6>(q);
    __m512i lo[4], hi[4];
    unpack_q5_chunks(q, lo, hi);
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_load_si256(m256(packed_scales<DType::Q5_1>(group, b))));
    const __m512 mw = _mm512_cvtph_ps(_mm256_load_si256(m256(packed_mins<DType::Q5_1>(group, b))));
    HUDDLE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& xb = x[t * x_row_blocks + b];
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      HUDDLE_UNROLL_ALL
      for (int c = 0; c < 4; ++c) {
        s0 = _mm512_dpbusd_epi32(s0, lo[c], _mm512_set1_epi32(four_bytes(xb.q + 4 * c)));
        s1 = _mm512_dpbusd_epi32(s1, hi[c], _mm512_set1_epi32(four_bytes(xb.q + 16 + 4 * c)));
      }
      const __m512 dx = _mm512_set1_ps(xb.d);
      acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                               acc[t]);
      acc[t] =
          _mm512_fmadd_ps(_mm512_mul_ps(mw, dx),
                          _mm512_set1_ps(static_cast<float>(seeds[t * x_row_blocks + b])), acc[t]);
    }
  }
  const auto mask = static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

template <int T>
HUDDLE_VNNI void q8_group_vnni(const std::byte* group, std::int64_t blocks, int rows,
                               const BlockQ8A* x, const std::int32_t* /*seeds*/,
                               std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[T];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* q = packed_quants<DType::Q8_0>(group, b);
    __m512i w[8];
    __m512i sum0 = _mm512_setzero_si512(), sum1 = _mm512_setzero_si512();  // 128·Σ w
    HUDDLE_UNROLL_ALL
    for (int c = 0; c < 8; c += 2) {
      w[c] = _mm512_load_si512(q + c * 64);
      w[c + 1] = _mm512_load_si512(q + (c + 1) * 64);
      sum0 = _mm512_dpbusd_epi32(sum0, k128, w[c]);
      sum1 = _mm512_dpbusd_epi32(sum1, k128, w[c + 1]);
    }
    const __m512i seed = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_add_epi32(sum0, sum1));
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_load_si256(m256(packed_scales<DType::Q8_0>(group, b))));
    HUDDLE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& xb = x[t * x_row_blocks + b];
      __m512i s0 = seed, s1 = _mm512_setzero_si512();
      HUDDLE_UNROLL_ALL
      for (int c = 0; c < 8; c += 2) {
        const __m512i x0 = _mm512_xor_si512(_mm512_set1_epi32(four_bytes(xb.q + 4 * c)), k128);
        const __m512i x1 = _mm512_xor_si512(_mm512_set1_epi32(four_bytes(xb.q + 4 * c + 4)), k128);
        s0 = _mm512_dpbusd_epi32(s0, x0, w[c]);
        s1 = _mm512_dpbusd_epi32(s1, x1, w[c + 1]);
      }
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(xb.d));
      acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[t]);
    }
  }
  const auto mask = static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

// Q4_K and Q5_K (K): per sub-block Q4_0's (Q5_0's) unpacking without the offset, then
// packed_quant.h's two FMAs.
template <DType K, int T>
HUDDLE_VNNI void kq_group_vnni(const std::byte* group, std::int64_t blocks, int rows,
                               const BlockQ8A* x, const std::int32_t* seeds,
                               std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  const __m512i low4 = _mm512_set1_epi8(15);
  __m512 acc[T];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t s = 0; s < blocks / kQ4KSubBlocks; ++s) {
    const std::byte* super = packed_kq_super<K>(group, s);
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(m256(super)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(m256(super + 32)));
    for (int j = 0; j < kQ4KSubBlocks; ++j) {
      const std::byte* q = packed_kq_quants<K>(super, j);
      // A sub-block's quants and its share of the header.
      prefetch_lines<K == DType::Q5_K ? 6 : 5, kAheadQ4K>(q);
      __m512i lo[4], hi[4];
      if constexpr (K == DType::Q5_K) {
        unpack_q5_chunks(q, lo, hi);
      } else {
        HUDDLE_UNROLL_ALL
        for (int c = 0; c < 4; ++c) {
          const __m512i v = _mm512_load_si512(q + c * 64);
          lo[c] = _mm512_and_si512(v, low4);
          hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        }
      }
      const std::byte* sm = packed_kq_scales(super, j);
      const __m512 step =
          _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(m128(sm)))));
      const __m512 offset = _mm512_mul_ps(
          dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(m128(sm + 16)))));
      const std::int64_t b = s * kQ4KSubBlocks + j;
      HUDDLE_UNROLL_ALL
      for (int t = 0; t < T; ++t) {
        const BlockQ8A& xb = x[t * x_row_blocks + b];
        __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
        HUDDLE_UNROLL_ALL
        for (int c = 0; c < 4; ++c) {
          s0 = _mm512_dpbusd_epi32(s0, lo[c], _mm512_set1_epi32(four_bytes(xb.q + 4 * c)));
          s1 = _mm512_dpbusd_epi32(s1, hi[c], _mm512_set1_epi32(four_bytes(xb.q + 16 + 4 * c)));
        }
        const __m512 dx = _mm512_set1_ps(xb.d);
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(step, dx),
                                 _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[t]);
        acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(offset, dx),
                                  _mm512_set1_ps(static_cast<float>(seeds[t * x_row_blocks + b])),
                                  acc[t]);
      }
    }
  }
  const auto mask = static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

// Q6_K's 6-bit values of chunk c: the nibbles `v` (low or high ones already isolated) with bits
// 2c, 2c + 1 of the high-bit chunk `h` moved to bits 4, 5 (16-bit shifts; the mask keeps each
// byte's own bits).
template <int C>
HUDDLE_VNNI inline __m512i q6_with_high_bits(__m512i v, __m512i h) {
  const __m512i moved = C < 3 ? _mm512_slli_epi16(h, 4 - 2 * C) : _mm512_srli_epi16(h, 2);
  return _mm512_or_si512(v, _mm512_and_si512(moved, _mm512_set1_epi8(0x30)));
}

template <int T>
HUDDLE_VNNI void q6k_group_vnni(const std::byte* group, std::int64_t blocks, int rows,
                                const BlockQ8A* x, const std::int32_t* seeds,
                                std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  const __m512i low4 = _mm512_set1_epi8(15);
  __m512 acc[T];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t s = 0; s < blocks / 8; ++s) {
    const std::byte* super = packed_q6k_super(group, s);
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(m256(super)));
    for (int j = 0; j < 8; ++j) {
      const std::byte* q = packed_q6k_quants(super, j);
      prefetch_lines<6>(q);  // Q6_K: 1 KB ahead (2 KB: 14-16.5 GB/s, 1 KB: 17-19)
      const __m512i h0 = _mm512_load_si512(q + 256), h1 = _mm512_load_si512(q + 320);
      __m512i lo[4], hi[4];
      const auto unpack = [&]<int C>(std::integral_constant<int, C>) {
        const __m512i v = _mm512_load_si512(q + C * 64);
        lo[C] = q6_with_high_bits<C>(_mm512_and_si512(v, low4), h0);
        hi[C] = q6_with_high_bits<C>(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), h1);
      };
      unpack(std::integral_constant<int, 0>{});
      unpack(std::integral_constant<int, 1>{});
      unpack(std::integral_constant<int, 2>{});
      unpack(std::integral_constant<int, 3>{});
      const __m512i sc0 =
          _mm512_cvtepi8_epi32(_mm_load_si128(m128(packed_q6k_scales(super, 2 * j))));
      const __m512i sc1 =
          _mm512_cvtepi8_epi32(_mm_load_si128(m128(packed_q6k_scales(super, 2 * j + 1))));
      const std::int64_t b = s * 8 + j;
      HUDDLE_UNROLL_ALL
      for (int t = 0; t < T; ++t) {
        const BlockQ8A& xb = x[t * x_row_blocks + b];
        const std::int32_t* seed = seeds + 2 * (t * x_row_blocks + b);
        __m512i s0 = _mm512_set1_epi32(seed[0]), s1 = _mm512_set1_epi32(seed[1]);
        HUDDLE_UNROLL_ALL
        for (int c = 0; c < 4; ++c) {
          s0 = _mm512_dpbusd_epi32(s0, lo[c], _mm512_set1_epi32(four_bytes(xb.q + 4 * c)));
          s1 = _mm512_dpbusd_epi32(s1, hi[c], _mm512_set1_epi32(four_bytes(xb.q + 16 + 4 * c)));
        }
        const __m512i total =
            _mm512_add_epi32(_mm512_mullo_epi32(s0, sc0), _mm512_mullo_epi32(s1, sc1));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xb.d)), _mm512_cvtepi32_ps(total),
                                 acc[t]);
      }
    }
  }
  const auto mask = static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

// ---- AVX2: eight rows (half a group) at a time, T <= 2 tokens per pass ----

// The eight four-element sums of rows [8·half, 8·half + 8) for one token, per dtype.
struct Q4Avx2Sums {
  static constexpr DType kType = DType::Q4_0;
  static constexpr int kLines = 5;
  // Pairs q·x are within ±3840 and eight of them within ±30720: 16-bit sums cannot overflow.
  HUDDLE_AVX2 static __m256i sums(const std::byte* q, const std::int8_t* xq, std::int32_t seed) {
    const __m256i low4 = _mm256_set1_epi8(15);
    __m256i s16 = _mm256_setzero_si256();
    HUDDLE_UNROLL_ALL
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_load_si256(m256(q + c * 64));
      const __m256i lo = _mm256_and_si256(v, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      s16 = _mm256_add_epi16(s16,
                             _mm256_maddubs_epi16(lo, _mm256_set1_epi32(four_bytes(xq + 4 * c))));
      s16 = _mm256_add_epi16(
          s16, _mm256_maddubs_epi16(hi, _mm256_set1_epi32(four_bytes(xq + 16 + 4 * c))));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(s16, _mm256_set1_epi16(1)), _mm256_set1_epi32(seed));
  }
};

// The AVX2 form of q5_with_high_bit.
template <int C, bool High>
HUDDLE_AVX2 inline __m256i q5_with_high_bit_avx2(__m256i v, __m256i h) {
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  const __m256i moved = High ? _mm256_srli_epi16(h, C) : _mm256_slli_epi16(h, 4 - C);
  return _mm256_or_si256(v, _mm256_and_si256(moved, bit4));
}

struct Q5Avx2Sums {
  static constexpr DType kType = DType::Q5_0;
  static constexpr int kLines = 6;
  // Pairs q·x are within ±7936, four of them within ±31744: 16 bits for two chunks, then 32.
  HUDDLE_AVX2 static __m256i sums(const std::byte* q, const std::int8_t* xq, std::int32_t seed) {
    const __m256i low4 = _mm256_set1_epi8(15);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i h = _mm256_load_si256(m256(q + 256));
    __m256i pairs[4];
    const auto chunk = [&]<int C>(std::integral_constant<int, C>) {
      const __m256i v = _mm256_load_si256(m256(q + C * 64));
      const __m256i lo = q5_with_high_bit_avx2<C, false>(_mm256_and_si256(v, low4), h);
      const __m256i hi =
          q5_with_high_bit_avx2<C, true>(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), h);
      pairs[C] = _mm256_add_epi16(
          _mm256_maddubs_epi16(lo, _mm256_set1_epi32(four_bytes(xq + 4 * C))),
          _mm256_maddubs_epi16(hi, _mm256_set1_epi32(four_bytes(xq + 16 + 4 * C))));
    };
    chunk(std::integral_constant<int, 0>{});
    chunk(std::integral_constant<int, 1>{});
    chunk(std::integral_constant<int, 2>{});
    chunk(std::integral_constant<int, 3>{});
    const __m256i s01 = _mm256_madd_epi16(_mm256_add_epi16(pairs[0], pairs[1]), ones);
    const __m256i s23 = _mm256_madd_epi16(_mm256_add_epi16(pairs[2], pairs[3]), ones);
    return _mm256_add_epi32(_mm256_add_epi32(s01, s23), _mm256_set1_epi32(seed));
  }
};

struct Q8Avx2Sums {
  static constexpr DType kType = DType::Q8_0;
  static constexpr int kLines = 0;  // see q8_group_vnni
  // |w|·x pairs are within ±32258: 16 bits for one chunk, 32 from there on.
  HUDDLE_AVX2 static __m256i sums(const std::byte* q, const std::int8_t* xq, std::int32_t) {
    __m256i s = _mm256_setzero_si256();
    HUDDLE_UNROLL_ALL
    for (int c = 0; c < 8; ++c) {
      const __m256i w = _mm256_load_si256(m256(q + c * 64));
      const __m256i xv = _mm256_set1_epi32(four_bytes(xq + 4 * c));
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
    }
    return s;
  }
};

// A value per row of the group in f32: rows 0-7 ([0]) and 8-15 ([1]). (A struct: std::array
// would drop __m256's alignment attribute.)
struct RowsF32 {
  __m256 half[2];
  const __m256& operator[](int i) const { return half[i]; }
};

// 16 f16 values, one per row of the group, in f32.
HUDDLE_AVX2 inline RowsF32 f16_rows_avx2(__m256i halves) {
  return {_mm256_cvtph_ps(_mm256_castsi256_si128(halves)),
          _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1))};
}

// Writes each token's accumulators (rows 0-7, 8-15) to its first `rows` outputs.
template <int T>
HUDDLE_AVX2 inline void store_rows_avx2(const __m256 (&acc)[T][2], int rows, float* y,
                                        std::int64_t ldy) {
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) {
    float out[16];
    _mm256_storeu_ps(out, acc[t][0]);
    _mm256_storeu_ps(out + 8, acc[t][1]);
    std::memcpy(y + t * ldy, out, static_cast<std::size_t>(rows) * sizeof(float));
  }
}

// The AVX2 kernels take tokens two at a time, then an odd last one: pass(T, t) for a pass of
// T = std::integral_constant<int, 2 or 1> tokens from token t.
template <class Pass>
inline void in_token_pairs(int tokens, Pass pass) {
  int t = 0;
  for (; t + 2 <= tokens; t += 2) pass(std::integral_constant<int, 2>{}, t);
  if (t < tokens) pass(std::integral_constant<int, 1>{}, t);
}

// Both halves of the group per block, so each block's bytes are read once while in L1 (a Q8_0
// group at K = 2048 is 34 KB: half by half, the second half came from L2).
template <class Q, int T>
HUDDLE_AVX2 void tokens_avx2(const std::byte* group, std::int64_t blocks, int rows,
                             const BlockQ8A* x, const std::int32_t* seeds,
                             std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  __m256 acc[T][2];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* q = packed_quants<Q::kType>(group, b);
    if constexpr (Q::kLines > 0) prefetch_lines<Q::kLines>(q);
    const __m256i scales = _mm256_load_si256(m256(packed_scales<Q::kType>(group, b)));
    const RowsF32 dw = f16_rows_avx2(scales);
    HUDDLE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& xb = x[t * x_row_blocks + b];
      const std::int32_t seed = seeds != nullptr ? seeds[t * x_row_blocks + b] : 0;
      const __m256 dx = _mm256_set1_ps(xb.d);
      HUDDLE_UNROLL_ALL
      for (int half = 0; half < 2; ++half) {
        const __m256i s = Q::sums(q + half * 32, xb.q, seed);
        acc[t][half] =
            _mm256_fmadd_ps(_mm256_mul_ps(dw[half], dx), _mm256_cvtepi32_ps(s), acc[t][half]);
      }
    }
  }
  store_rows_avx2<T>(acc, rows, y, ldy);
}

template <class Q>
HUDDLE_AVX2 void group_avx2(const std::byte* group, std::int64_t blocks, int rows,
                            const BlockQ8A* x, const std::int32_t* seeds, std::int64_t x_row_blocks,
                            int tokens, float* y, std::int64_t ldy) {
  in_token_pairs(tokens, [&](auto n, int t) {
    tokens_avx2<Q, decltype(n)::value>(group, blocks, rows, x + t * x_row_blocks,
                                       seeds != nullptr ? seeds + t * x_row_blocks : nullptr,
                                       x_row_blocks, y + t * ldy, ldy);
  });
}

// Q5_1 on AVX2: Q5_0's sums without the seed, then packed_quant.h's two FMAs per block.
template <int T>
HUDDLE_AVX2 void q5_1_tokens_avx2(const std::byte* group, std::int64_t blocks, int rows,
                                  const BlockQ8A* x, const std::int32_t* seeds,
                                  std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  __m256 acc[T][2];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* q = packed_quants<DType::Q5_1>(group, b);
    prefetch_lines<6>(q);
    const __m256i dh = _mm256_load_si256(m256(packed_scales<DType::Q5_1>(group, b)));
    const __m256i mh = _mm256_load_si256(m256(packed_mins<DType::Q5_1>(group, b)));
    const RowsF32 dw = f16_rows_avx2(dh);
    const RowsF32 mw = f16_rows_avx2(mh);
    HUDDLE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& xb = x[t * x_row_blocks + b];
      const __m256 dx = _mm256_set1_ps(xb.d);
      const __m256 xsum = _mm256_set1_ps(static_cast<float>(seeds[t * x_row_blocks + b]));
      HUDDLE_UNROLL_ALL
      for (int half = 0; half < 2; ++half) {
        const __m256i sum = Q5Avx2Sums::sums(q + half * 32, xb.q, 0);
        acc[t][half] =
            _mm256_fmadd_ps(_mm256_mul_ps(dw[half], dx), _mm256_cvtepi32_ps(sum), acc[t][half]);
        acc[t][half] = _mm256_fmadd_ps(_mm256_mul_ps(mw[half], dx), xsum, acc[t][half]);
      }
    }
  }
  store_rows_avx2<T>(acc, rows, y, ldy);
}

HUDDLE_AVX2 void q5_1_group_avx2(const std::byte* group, std::int64_t blocks, int rows,
                                 const BlockQ8A* x, const std::int32_t* seeds,
                                 std::int64_t x_row_blocks, int tokens, float* y,
                                 std::int64_t ldy) {
  in_token_pairs(tokens, [&](auto n, int t) {
    q5_1_tokens_avx2<decltype(n)::value>(group, blocks, rows, x + t * x_row_blocks,
                                         seeds + t * x_row_blocks, x_row_blocks, y + t * ldy, ldy);
  });
}

// Q4_K and Q5_K (K) on AVX2: Q4_0's (Q5_0's) sums without the seed, then packed_quant.h's two
// FMAs per sub-block.
template <DType K, int T>
HUDDLE_AVX2 void kq_tokens_avx2(const std::byte* group, std::int64_t blocks, int rows,
                                const BlockQ8A* x, const std::int32_t* seeds,
                                std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  using Sums = std::conditional_t<K == DType::Q4_K, Q4Avx2Sums, Q5Avx2Sums>;
  __m256 acc[T][2];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (std::int64_t s = 0; s < blocks / kQ4KSubBlocks; ++s) {
    const std::byte* super = packed_kq_super<K>(group, s);
    const __m256i dh = _mm256_load_si256(m256(super));
    const __m256i mh = _mm256_load_si256(m256(super + 32));
    const RowsF32 d = f16_rows_avx2(dh);
    const RowsF32 dmin = f16_rows_avx2(mh);
    for (int j = 0; j < kQ4KSubBlocks; ++j) {
      const std::byte* q = packed_kq_quants<K>(super, j);
      prefetch_lines<K == DType::Q5_K ? 6 : 5, kAheadQ4K>(q);
      const std::byte* sm = packed_kq_scales(super, j);
      const __m128i sc = _mm_load_si128(m128(sm));
      const __m128i mn = _mm_load_si128(m128(sm + 16));
      const __m256 step[2] = {
          _mm256_mul_ps(d[0], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))),
          _mm256_mul_ps(d[1], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sc, 8))))};
      const __m256 offset[2] = {
          _mm256_mul_ps(dmin[0], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn))),
          _mm256_mul_ps(dmin[1], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(mn, 8))))};
      const std::int64_t b = s * kQ4KSubBlocks + j;
      HUDDLE_UNROLL_ALL
      for (int t = 0; t < T; ++t) {
        const BlockQ8A& xb = x[t * x_row_blocks + b];
        const __m256 dx = _mm256_set1_ps(xb.d);
        const __m256 xsum = _mm256_set1_ps(static_cast<float>(seeds[t * x_row_blocks + b]));
        HUDDLE_UNROLL_ALL
        for (int half = 0; half < 2; ++half) {
          const __m256i sum = Sums::sums(q + half * 32, xb.q, 0);
          acc[t][half] =
              _mm256_fmadd_ps(_mm256_mul_ps(step[half], dx), _mm256_cvtepi32_ps(sum), acc[t][half]);
          acc[t][half] = _mm256_fnmadd_ps(_mm256_mul_ps(offset[half], dx), xsum, acc[t][half]);
        }
      }
    }
  }
  store_rows_avx2<T>(acc, rows, y, ldy);
}

template <DType K>
HUDDLE_AVX2 void kq_group_avx2(const std::byte* group, std::int64_t blocks, int rows,
                               const BlockQ8A* x, const std::int32_t* seeds,
                               std::int64_t x_row_blocks, int tokens, float* y, std::int64_t ldy) {
  in_token_pairs(tokens, [&](auto n, int t) {
    kq_tokens_avx2<K, decltype(n)::value>(group, blocks, rows, x + t * x_row_blocks,
                                          seeds + t * x_row_blocks, x_row_blocks, y + t * ldy, ldy);
  });
}

// The AVX2 form of q6_with_high_bits.
template <int C>
HUDDLE_AVX2 inline __m256i q6_with_high_bits_avx2(__m256i v, __m256i h) {
  const __m256i moved = C < 3 ? _mm256_slli_epi16(h, 4 - 2 * C) : _mm256_srli_epi16(h, 2);
  return _mm256_or_si256(v, _mm256_and_si256(moved, _mm256_set1_epi8(0x30)));
}

// Q6_K on AVX2: per half of a block, the 6-bit values times x by maddubs (pairs within ±16002,
// two chunks' pairs within ±32004: 16 bits), widened to 32 bits, then packed_quant.h's integer.
template <int T>
HUDDLE_AVX2 void q6k_tokens_avx2(const std::byte* group, std::int64_t blocks, int rows,
                                 const BlockQ8A* x, const std::int32_t* seeds,
                                 std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T][2];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  for (std::int64_t s = 0; s < blocks / 8; ++s) {
    const std::byte* super = packed_q6k_super(group, s);
    const __m256i dh = _mm256_load_si256(m256(super));
    const RowsF32 d = f16_rows_avx2(dh);
    for (int j = 0; j < 8; ++j) {
      const std::byte* q = packed_q6k_quants(super, j);
      prefetch_lines<6>(q);
      const __m128i scb0 = _mm_load_si128(m128(packed_q6k_scales(super, 2 * j)));
      const __m128i scb1 = _mm_load_si128(m128(packed_q6k_scales(super, 2 * j + 1)));
      const std::int64_t b = s * 8 + j;
      HUDDLE_UNROLL_ALL
      for (int half = 0; half < 2; ++half) {
        const std::byte* qh = q + half * 32;
        const __m256i h0 = _mm256_load_si256(m256(qh + 256));
        const __m256i h1 = _mm256_load_si256(m256(qh + 320));
        __m256i lo[4], hi[4];
        const auto unpack = [&]<int C>(std::integral_constant<int, C>) {
          const __m256i v = _mm256_load_si256(m256(qh + C * 64));
          lo[C] = q6_with_high_bits_avx2<C>(_mm256_and_si256(v, low4), h0);
          hi[C] = q6_with_high_bits_avx2<C>(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), h1);
        };
        unpack(std::integral_constant<int, 0>{});
        unpack(std::integral_constant<int, 1>{});
        unpack(std::integral_constant<int, 2>{});
        unpack(std::integral_constant<int, 3>{});
        const __m256i sc0 = _mm256_cvtepi8_epi32(half == 0 ? scb0 : _mm_srli_si128(scb0, 8));
        const __m256i sc1 = _mm256_cvtepi8_epi32(half == 0 ? scb1 : _mm_srli_si128(scb1, 8));
        HUDDLE_UNROLL_ALL
        for (int t = 0; t < T; ++t) {
          const BlockQ8A& xb = x[t * x_row_blocks + b];
          const std::int32_t* seed = seeds + 2 * (t * x_row_blocks + b);
          __m256i sum[2];
          HUDDLE_UNROLL_ALL
          for (int part = 0; part < 2; ++part) {  // elements 0..15 (lo), 16..31 (hi)
            const __m256i* w = part == 0 ? lo : hi;
            const std::int8_t* xq = xb.q + 16 * part;
            const __m256i p01 =
                _mm256_add_epi16(_mm256_maddubs_epi16(w[0], _mm256_set1_epi32(four_bytes(xq))),
                                 _mm256_maddubs_epi16(w[1], _mm256_set1_epi32(four_bytes(xq + 4))));
            const __m256i p23 = _mm256_add_epi16(
                _mm256_maddubs_epi16(w[2], _mm256_set1_epi32(four_bytes(xq + 8))),
                _mm256_maddubs_epi16(w[3], _mm256_set1_epi32(four_bytes(xq + 12))));
            sum[part] = _mm256_add_epi32(
                _mm256_add_epi32(_mm256_madd_epi16(p01, ones), _mm256_madd_epi16(p23, ones)),
                _mm256_set1_epi32(seed[part]));
          }
          const __m256i total =
              _mm256_add_epi32(_mm256_mullo_epi32(sum[0], sc0), _mm256_mullo_epi32(sum[1], sc1));
          acc[t][half] = _mm256_fmadd_ps(_mm256_mul_ps(d[half], _mm256_set1_ps(xb.d)),
                                         _mm256_cvtepi32_ps(total), acc[t][half]);
        }
      }
    }
  }
  store_rows_avx2<T>(acc, rows, y, ldy);
}

HUDDLE_AVX2 void q6k_group_avx2(const std::byte* group, std::int64_t blocks, int rows,
                                const BlockQ8A* x, const std::int32_t* seeds,
                                std::int64_t x_row_blocks, int tokens, float* y, std::int64_t ldy) {
  in_token_pairs(tokens, [&](auto n, int t) {  // two seeds per block: one per half
    q6k_tokens_avx2<decltype(n)::value>(group, blocks, rows, x + t * x_row_blocks,
                                        seeds + 2 * t * x_row_blocks, x_row_blocks, y + t * ldy,
                                        ldy);
  });
}

// ---- dispatch on the token count ----

using FixedGroup = void (*)(const std::byte*, std::int64_t, int, const BlockQ8A*,
                            const std::int32_t*, std::int64_t, float*, std::int64_t);
using GroupTable = std::array<FixedGroup, kPackedTokens>;

template <template <int> class Kernel, int... Ts>
constexpr GroupTable token_table(std::integer_sequence<int, Ts...>) {
  return {Kernel<Ts + 1>::run...};
}
template <int T>
struct Q4PackedVnni {
  static constexpr FixedGroup run = &q4_group_vnni<T>;
};
template <int T>
struct Q8PackedVnni {
  static constexpr FixedGroup run = &q8_group_vnni<T>;
};
template <int T>
struct Q51PackedVnni {
  static constexpr FixedGroup run = &q5_1_group_vnni<T>;
};
constexpr GroupTable kQ51PackedVnni =
    token_table<Q51PackedVnni>(std::make_integer_sequence<int, kPackedTokens>{});
template <int T>
struct Q5PackedVnni {
  static constexpr FixedGroup run = &q5_group_vnni<T>;
};
constexpr GroupTable kQ5PackedVnni =
    token_table<Q5PackedVnni>(std::make_integer_sequence<int, kPackedTokens>{});
template <int T>
struct Q6KPackedVnni {
  static constexpr FixedGroup run = &q6k_group_vnni<T>;
};
constexpr GroupTable kQ6KPackedVnni =
    token_table<Q6KPackedVnni>(std::make_integer_sequence<int, kPackedTokens>{});
template <int T>
struct Q4KPackedVnni {
  static constexpr FixedGroup run = &kq_group_vnni<DType::Q4_K, T>;
};
constexpr GroupTable kQ4KPackedVnni =
    token_table<Q4KPackedVnni>(std::make_integer_sequence<int, kPackedTokens>{});
template <int T>
struct Q5KPackedVnni {
  static constexpr FixedGroup run = &kq_group_vnni<DType::Q5_K, T>;
};
constexpr GroupTable kQ5KPackedVnni =
    token_table<Q5KPackedVnni>(std::make_integer_sequence<int, kPackedTokens>{});
constexpr GroupTable kQ4PackedVnni =
    token_table<Q4PackedVnni>(std::make_integer_sequence<int, kPackedTokens>{});
constexpr GroupTable kQ8PackedVnni =
    token_table<Q8PackedVnni>(std::make_integer_sequence<int, kPackedTokens>{});

template <const GroupTable& table>
void vnni_any(const std::byte* group, std::int64_t blocks, int rows, const BlockQ8A* x,
              const std::int32_t* seeds, std::int64_t x_row_blocks, int tokens, float* y,
              std::int64_t ldy) {
  table[static_cast<std::size_t>(tokens - 1)](group, blocks, rows, x, seeds, x_row_blocks, y, ldy);
}

}  // namespace

PackedFn avx2_packed(DType dtype) {
  switch (dtype) {
    case DType::Q4_0:
      return &group_avx2<Q4Avx2Sums>;
    case DType::Q5_0:
      return &group_avx2<Q5Avx2Sums>;
    case DType::Q5_1:
      return &q5_1_group_avx2;
    case DType::Q8_0:
      return &group_avx2<Q8Avx2Sums>;
    case DType::Q4_K:
      return &kq_group_avx2<DType::Q4_K>;
    case DType::Q5_K:
      return &kq_group_avx2<DType::Q5_K>;
    case DType::Q6_K:
      return &q6k_group_avx2;
    default:
      return nullptr;
  }
}

PackedFn avx512vnni_packed(DType dtype) {
  switch (dtype) {
    case DType::Q4_0:
      return &vnni_any<kQ4PackedVnni>;
    case DType::Q5_0:
      return &vnni_any<kQ5PackedVnni>;
    case DType::Q5_1:
      return &vnni_any<kQ51PackedVnni>;
    case DType::Q8_0:
      return &vnni_any<kQ8PackedVnni>;
    case DType::Q4_K:
      return &vnni_any<kQ4KPackedVnni>;
    case DType::Q5_K:
      return &vnni_any<kQ5KPackedVnni>;
    case DType::Q6_K:
      return &vnni_any<kQ6KPackedVnni>;
    default:
      return nullptr;
  }
}

}  // namespace huddle::kernels::detail

#else  // not x86-64: the scalar kernels only

namespace huddle::kernels::detail {
PackedFn avx2_packed(DType) {
  return nullptr;
}
PackedFn avx512vnni_packed(DType) {
  return nullptr;
}
}  // namespace huddle::kernels::detail

#endif
