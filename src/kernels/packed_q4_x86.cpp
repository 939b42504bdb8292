// The x86-64 kernels of packed Q4_0 weights (kernels/packed_weight.h, packed_q4.h), compiled per
// instruction set with __attribute__((target)) like qtile_x86.cpp and called only where the CPU
// has that set.
//
// A 32-bit lane is one weight row. For block b the group's nibbles are four 64-byte chunks; chunk
// c holds bytes 4c .. 4c + 3 of every row, so its low nibbles are elements 4c .. 4c + 3 and its
// high nibbles elements 16 + 4c .. 16 + 4c + 3, and each meets one broadcast of the four matching
// activation bytes. Nibbles q in [0, 15] are the unsigned operand; Σ (q - 8)·x = Σ q·x - 8·Σ x,
// the second term the caller's seed. The integer block sum is exact on both paths.
#include "kernels/packed_q4.h"

#if defined(__x86_64__)

#include "kernels/x86_simd.h"

#include <array>
#include <cstring>
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
// prefetchers kept one core at 13 GB/s of packed weights; with it 19-22 GB/s (bench_lowp_gemv,
// one thread, Zen 4; 1, 2 and 4 KB ahead within 10 % of each other).
constexpr std::int64_t kAhead = 1024;

// The five lines ahead of a block's nibbles: a pair of blocks is nine lines, so four per block
// would fall behind by the scales' line.
inline void prefetch_block(const std::byte* q) {
  HUDDLE_UNROLL_ALL
  for (int c = 0; c < 5; ++c) {
    _mm_prefetch(reinterpret_cast<const char*>(q + kAhead + c * 64), _MM_HINT_T0);
  }
}

// ---- AVX-512 VNNI: the whole group, T tokens per pass over the blocks ----

template <int T>
HUDDLE_VNNI void group_vnni(const std::byte* group, std::int64_t blocks, int rows,
                            const BlockQ8A* x, const std::int32_t* seeds, std::int64_t x_row_blocks,
                            float* y, std::int64_t ldy) {
  const __m512i low4 = _mm512_set1_epi8(15);
  __m512 acc[T];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* q = packed_nibbles(group, b);
    prefetch_block(q);
    __m512i lo[4], hi[4];
    HUDDLE_UNROLL_ALL
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_load_si512(q + c * 64);
      lo[c] = _mm512_and_si512(v, low4);
      hi[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(m256(packed_scales(group, b))));
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

// ---- AVX2: eight rows (half a group) at a time, T <= 2 tokens per pass ----

template <int T>
HUDDLE_AVX2 void half_group_avx2(const std::byte* group, std::int64_t blocks, int half, int rows,
                                 const BlockQ8A* x, const std::int32_t* seeds,
                                 std::int64_t x_row_blocks, float* y, std::int64_t ldy) {
  const __m256i low4 = _mm256_set1_epi8(15);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* q = packed_nibbles(group, b) + half * 32;
    if (half == 0) prefetch_block(q);
    __m256i lo[4], hi[4];
    HUDDLE_UNROLL_ALL
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_load_si256(m256(q + c * 64));
      lo[c] = _mm256_and_si256(v, low4);
      hi[c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(m128(packed_scales(group, b) + half * 16)));
    HUDDLE_UNROLL_ALL
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& xb = x[t * x_row_blocks + b];
      // Pairs q·x are within ±3840 and eight of them within ±30720: 16-bit sums cannot overflow.
      __m256i s16 = _mm256_setzero_si256();
      HUDDLE_UNROLL_ALL
      for (int c = 0; c < 4; ++c) {
        s16 = _mm256_add_epi16(
            s16, _mm256_maddubs_epi16(lo[c], _mm256_set1_epi32(four_bytes(xb.q + 4 * c))));
        s16 = _mm256_add_epi16(
            s16, _mm256_maddubs_epi16(hi[c], _mm256_set1_epi32(four_bytes(xb.q + 16 + 4 * c))));
      }
      const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(s16, ones),
                                         _mm256_set1_epi32(seeds[t * x_row_blocks + b]));
      const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(xb.d));
      acc[t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc[t]);
    }
  }
  const int n = rows - half * 8 < 8 ? rows - half * 8 : 8;
  HUDDLE_UNROLL_ALL
  for (int t = 0; t < T; ++t) {
    float out[8];
    _mm256_storeu_ps(out, acc[t]);
    std::memcpy(y + t * ldy + half * 8, out, static_cast<std::size_t>(n) * sizeof(float));
  }
}

HUDDLE_AVX2 void group_avx2(const std::byte* group, std::int64_t blocks, int rows,
                            const BlockQ8A* x, const std::int32_t* seeds, std::int64_t x_row_blocks,
                            int tokens, float* y, std::int64_t ldy) {
  for (int half = 0; half * 8 < rows; ++half) {
    int t = 0;
    for (; t + 2 <= tokens; t += 2) {
      half_group_avx2<2>(group, blocks, half, rows, x + t * x_row_blocks, seeds + t * x_row_blocks,
                         x_row_blocks, y + t * ldy, ldy);
    }
    if (t < tokens) {
      half_group_avx2<1>(group, blocks, half, rows, x + t * x_row_blocks, seeds + t * x_row_blocks,
                         x_row_blocks, y + t * ldy, ldy);
    }
  }
}

using FixedGroup = void (*)(const std::byte*, std::int64_t, int, const BlockQ8A*,
                            const std::int32_t*, std::int64_t, float*, std::int64_t);

template <int... Ts>
constexpr std::array<FixedGroup, kPackedTokens> vnni_table(std::integer_sequence<int, Ts...>) {
  return {&group_vnni<Ts + 1>...};
}
constexpr std::array<FixedGroup, kPackedTokens> kVnniGroups =
    vnni_table(std::make_integer_sequence<int, kPackedTokens>{});

void group_vnni_any(const std::byte* group, std::int64_t blocks, int rows, const BlockQ8A* x,
                    const std::int32_t* seeds, std::int64_t x_row_blocks, int tokens, float* y,
                    std::int64_t ldy) {
  kVnniGroups[static_cast<std::size_t>(tokens - 1)](group, blocks, rows, x, seeds, x_row_blocks, y,
                                                    ldy);
}

}  // namespace

PackedQ4Fn avx2_packed_q4() {
  return &group_avx2;
}
PackedQ4Fn avx512vnni_packed_q4() {
  return &group_vnni_any;
}

}  // namespace huddle::kernels::detail

#else  // not x86-64: the scalar kernel only

namespace huddle::kernels::detail {
PackedQ4Fn avx2_packed_q4() {
  return nullptr;
}
PackedQ4Fn avx512vnni_packed_q4() {
  return nullptr;
}
}  // namespace huddle::kernels::detail

#endif
