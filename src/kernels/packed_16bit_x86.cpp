// The x86-64 kernels of packed F16 and BF16 weights (kernels/packed_weight.h, packed_16bit.h),
// compiled per instruction set with __attribute__((target)) like qdot_x86.cpp and called only
// where the CPU has that set.
//
// One vector lane is one weight row: input i of the sixteen rows is one 32-byte load, widened to
// F32 (F16C's vcvtph2ps; BF16 by a 16-bit shift, exact), and multiplied by one broadcast of x[i].
// Each output keeps two FMA chains (even and odd i), summed at the end: the scalar kernel's
// operations lane by lane, so every path gives its bits.
#include "kernels/packed_16bit.h"

#if defined(__x86_64__)

#include "kernels/x86_simd.h"

#include <array>
#include <cstring>
#include <utility>

#define HUDDLE_UNROLL_TOKENS _Pragma("GCC unroll 8")

namespace huddle::kernels::detail {
namespace {

using x86::m128;
using x86::m256;

// ---- AVX-512: the whole group in one vector, T tokens per pass ----

template <DType D>
HUDDLE_AVX512 inline __m512 widen_16rows(const std::byte* p) {
  const __m256i h = _mm256_load_si256(m256(p));
  if constexpr (D == DType::F16) {
    return _mm512_cvtph_ps(h);
  } else {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <DType D, int T>
HUDDLE_AVX512 void group16_avx512(const std::byte* group, std::int64_t cols, int rows,
                                  const float* x, std::int64_t ldx, float* y, std::int64_t ldy) {
  __m512 even[T], odd[T];
  HUDDLE_UNROLL_TOKENS
  for (int t = 0; t < T; ++t) even[t] = odd[t] = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 2 <= cols; i += 2) {
    const __m512 w0 = widen_16rows<D>(group + i * 32);
    const __m512 w1 = widen_16rows<D>(group + i * 32 + 32);
    HUDDLE_UNROLL_TOKENS
    for (int t = 0; t < T; ++t) {
      even[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[t * ldx + i]), even[t]);
      odd[t] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[t * ldx + i + 1]), odd[t]);
    }
  }
  if (i < cols) {
    const __m512 w0 = widen_16rows<D>(group + i * 32);
    HUDDLE_UNROLL_TOKENS
    for (int t = 0; t < T; ++t) {
      even[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[t * ldx + i]), even[t]);
    }
  }
  const auto mask = static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
  HUDDLE_UNROLL_TOKENS
  for (int t = 0; t < T; ++t)
    _mm512_mask_storeu_ps(y + t * ldy, mask, _mm512_add_ps(even[t], odd[t]));
}

// ---- AVX2: two vectors of eight rows, T <= 2 tokens per pass ----

template <DType D>
HUDDLE_AVX2 inline __m256 widen_8rows(const std::byte* p) {
  const __m128i h = _mm_load_si128(m128(p));
  if constexpr (D == DType::F16) {
    return _mm256_cvtph_ps(h);
  } else {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// Input i of the sixteen rows into FMA chain `chain` of every token.
template <DType D, int T>
HUDDLE_AVX2 inline void step16_avx2(const std::byte* group, std::int64_t i, const float* x,
                                    std::int64_t ldx, __m256 (&acc)[T][2][2], int chain) {
  const __m256 lo = widen_8rows<D>(group + i * 32);
  const __m256 hi = widen_8rows<D>(group + i * 32 + 16);
  HUDDLE_UNROLL_TOKENS
  for (int t = 0; t < T; ++t) {
    const __m256 xv = _mm256_set1_ps(x[t * ldx + i]);
    acc[t][0][chain] = _mm256_fmadd_ps(lo, xv, acc[t][0][chain]);
    acc[t][1][chain] = _mm256_fmadd_ps(hi, xv, acc[t][1][chain]);
  }
}

template <DType D, int T>
HUDDLE_AVX2 void tokens16_avx2(const std::byte* group, std::int64_t cols, int rows, const float* x,
                               std::int64_t ldx, float* y, std::int64_t ldy) {
  __m256 acc[T][2][2];  // [token][rows 0-7, 8-15][even, odd]
  HUDDLE_UNROLL_TOKENS
  for (int t = 0; t < T; ++t) {
    acc[t][0][0] = acc[t][0][1] = acc[t][1][0] = acc[t][1][1] = _mm256_setzero_ps();
  }
  std::int64_t i = 0;
  for (; i + 2 <= cols; i += 2) {
    step16_avx2<D, T>(group, i, x, ldx, acc, 0);
    step16_avx2<D, T>(group, i + 1, x, ldx, acc, 1);
  }
  if (i < cols) step16_avx2<D, T>(group, i, x, ldx, acc, 0);
  HUDDLE_UNROLL_TOKENS
  for (int t = 0; t < T; ++t) {
    float out[16];
    _mm256_storeu_ps(out, _mm256_add_ps(acc[t][0][0], acc[t][0][1]));
    _mm256_storeu_ps(out + 8, _mm256_add_ps(acc[t][1][0], acc[t][1][1]));
    std::memcpy(y + t * ldy, out, static_cast<std::size_t>(rows) * sizeof(float));
  }
}

template <DType D>
HUDDLE_AVX2 void group16_avx2(const std::byte* group, std::int64_t cols, int rows, const float* x,
                              std::int64_t ldx, int tokens, float* y, std::int64_t ldy) {
  int t = 0;
  for (; t + 2 <= tokens; t += 2) {
    tokens16_avx2<D, 2>(group, cols, rows, x + t * ldx, ldx, y + t * ldy, ldy);
  }
  if (t < tokens) tokens16_avx2<D, 1>(group, cols, rows, x + t * ldx, ldx, y + t * ldy, ldy);
}

// ---- dispatch on the token count ----

using Fixed16Group = void (*)(const std::byte*, std::int64_t, int, const float*, std::int64_t,
                              float*, std::int64_t);
using Group16Table = std::array<Fixed16Group, kPacked16Tokens>;

template <DType D, int... Ts>
constexpr Group16Table avx512_table16(std::integer_sequence<int, Ts...>) {
  return {&group16_avx512<D, Ts + 1>...};
}
constexpr Group16Table kF16Avx512 =
    avx512_table16<DType::F16>(std::make_integer_sequence<int, kPacked16Tokens>{});
constexpr Group16Table kBF16Avx512 =
    avx512_table16<DType::BF16>(std::make_integer_sequence<int, kPacked16Tokens>{});

template <const Group16Table& table>
void avx512_any16(const std::byte* group, std::int64_t cols, int rows, const float* x,
                  std::int64_t ldx, int tokens, float* y, std::int64_t ldy) {
  table[static_cast<std::size_t>(tokens - 1)](group, cols, rows, x, ldx, y, ldy);
}

}  // namespace

Packed16Fn avx2_packed16(DType dtype) {
  switch (dtype) {
    case DType::F16:
      return &group16_avx2<DType::F16>;
    case DType::BF16:
      return &group16_avx2<DType::BF16>;
    default:
      return nullptr;
  }
}

Packed16Fn avx512_packed16(DType dtype) {
  switch (dtype) {
    case DType::F16:
      return &avx512_any16<kF16Avx512>;
    case DType::BF16:
      return &avx512_any16<kBF16Avx512>;
    default:
      return nullptr;
  }
}

}  // namespace huddle::kernels::detail

#else  // not x86-64: the scalar kernels only

namespace huddle::kernels::detail {
Packed16Fn avx2_packed16(DType) {
  return nullptr;
}
Packed16Fn avx512_packed16(DType) {
  return nullptr;
}
}  // namespace huddle::kernels::detail

#endif
