// The x86-64 vector paths of the dot products (kernels/qdot.h). Each function is compiled for
// its instruction set with __attribute__((target)), whatever -march the build uses; qdot.cpp
// calls one only when the CPU has it (isa_supported). Q8_0 and Q4_0 follow llama.cpp's scheme:
// |w| as unsigned bytes times x with w's sign, summed in pairs (maddubs, madd) or quads (dpbusd).
#include "kernels/qdot.h"

#if defined(__x86_64__)

#include "core/quant.h"
#include "kernels/x86_simd.h"

#include <cstring>

namespace huddle::kernels::detail {
namespace {

using x86::hsum256;
using x86::m128;
using x86::m256;

// ---- AVX2 ----

HUDDLE_AVX2 inline float f16_scalar(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

HUDDLE_AVX2 float dot_f16_avx2(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const std::byte*>(w);
  const auto* xf = static_cast<const float*>(x);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(m128(wb + 2 * i))),
                         _mm256_loadu_ps(xf + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(m128(wb + 2 * i + 16))),
                         _mm256_loadu_ps(xf + i + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(m128(wb + 2 * i + 32))),
                         _mm256_loadu_ps(xf + i + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(m128(wb + 2 * i + 48))),
                         _mm256_loadu_ps(xf + i + 24), a3);
  }
  for (; i + 8 <= k; i += 8) {
    a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(m128(wb + 2 * i))),
                         _mm256_loadu_ps(xf + i), a0);
  }
  float acc = hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < k; ++i) acc += f16_scalar(wb + 2 * i) * xf[i];
  return acc;
}

HUDDLE_AVX2 inline __m256 bf16x8(const std::byte* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(m128(p))), 16));
}

HUDDLE_AVX2 float dot_bf16_avx2(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const std::byte*>(w);
  const auto* xf = static_cast<const float*>(x);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    a0 = _mm256_fmadd_ps(bf16x8(wb + 2 * i), _mm256_loadu_ps(xf + i), a0);
    a1 = _mm256_fmadd_ps(bf16x8(wb + 2 * i + 16), _mm256_loadu_ps(xf + i + 8), a1);
    a2 = _mm256_fmadd_ps(bf16x8(wb + 2 * i + 32), _mm256_loadu_ps(xf + i + 16), a2);
    a3 = _mm256_fmadd_ps(bf16x8(wb + 2 * i + 48), _mm256_loadu_ps(xf + i + 24), a3);
  }
  for (; i + 8 <= k; i += 8) a0 = _mm256_fmadd_ps(bf16x8(wb + 2 * i), _mm256_loadu_ps(xf + i), a0);
  float acc = hsum256(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < k; ++i) {
    std::uint16_t h;
    std::memcpy(&h, wb + 2 * i, 2);
    acc += bf16_to_f32(h) * xf[i];
  }
  return acc;
}

// Σ of w[i]·x[i] per group of 4 bytes as 8 floats, for int8 w, x in [-127, 127].
HUDDLE_AVX2 inline __m256 mul_sum_i8_avx2(__m256i w, __m256i x) {
  const __m256i aw = _mm256_sign_epi8(w, w);
  const __m256i sx = _mm256_sign_epi8(x, w);
  const __m256i dot16 = _mm256_maddubs_epi16(aw, sx);  // at most 2·127·127: no saturation
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(dot16, _mm256_set1_epi16(1)));
}

// The 32 elements of a Q4_0 block as int8 in [-8, 7], in element order.
HUDDLE_AVX2 inline __m256i unpack_q4_avx2(const std::uint8_t* q) {
  const __m128i packed = _mm_loadu_si128(m128(q));
  const __m256i nibbles =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(15));
  return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));
}

HUDDLE_AVX2 float dot_q8_0_avx2(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* xb = static_cast<const BlockQ8A*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < k / kQBlock; ++b) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(wb[b].d) * xb[b].d);
    acc = _mm256_fmadd_ps(
        d, mul_sum_i8_avx2(_mm256_loadu_si256(m256(wb[b].q)), _mm256_loadu_si256(m256(xb[b].q))),
        acc);
  }
  return hsum256(acc);
}

HUDDLE_AVX2 float dot_q4_0_avx2(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* xb = static_cast<const BlockQ8A*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < k / kQBlock; ++b) {
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(wb[b].d) * xb[b].d);
    acc = _mm256_fmadd_ps(
        d, mul_sum_i8_avx2(unpack_q4_avx2(wb[b].q), _mm256_loadu_si256(m256(xb[b].q))), acc);
  }
  return hsum256(acc);
}

// ---- AVX-512 (two blocks, or 16 floats, per instruction) ----

// R rows of F16 weights against one activation: every row accumulated exactly as a one-row
// dot product (the same four partial sums, tail and reduction), so R changes no bit, only how
// often x is loaded: once per R rows.
template <int R>
HUDDLE_AVX512 void f16_rows_avx512(const std::byte* const* w, const float* xf, std::int64_t k,
                                   float* out) {
  __m512 a[R][4];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < 4; ++j) a[r][j] = _mm512_setzero_ps();
  }
  std::int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    __m512 xv[4];
    for (int j = 0; j < 4; ++j) xv[j] = _mm512_loadu_ps(xf + i + 16 * j);
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 4; ++j) {
        a[r][j] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(m256(w[r] + 2 * i + 32 * j))),
                                  xv[j], a[r][j]);
      }
    }
  }
  for (; i + 16 <= k; i += 16) {
    const __m512 xv = _mm512_loadu_ps(xf + i);
    for (int r = 0; r < R; ++r) {
      a[r][0] =
          _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(m256(w[r] + 2 * i))), xv, a[r][0]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float acc = _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(a[r][0], a[r][1]), _mm512_add_ps(a[r][2], a[r][3])));
    for (std::int64_t e = i; e < k; ++e) acc += f16_scalar(w[r] + 2 * e) * xf[e];
    out[r] = acc;
  }
}

HUDDLE_AVX512 float dot_f16_avx512(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const std::byte*>(w);
  float out;
  f16_rows_avx512<1>(&wb, static_cast<const float*>(x), k, &out);
  return out;
}

HUDDLE_AVX512 void dot2_f16_avx512(const void* w0, const void* w1, const void* x, std::int64_t k,
                                   float* out) {
  const std::byte* w[2] = {static_cast<const std::byte*>(w0), static_cast<const std::byte*>(w1)};
  f16_rows_avx512<2>(w, static_cast<const float*>(x), k, out);
}

HUDDLE_AVX512 inline __m512 bf16x16(const std::byte* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(m256(p))), 16));
}

HUDDLE_AVX512 float dot_bf16_avx512(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const std::byte*>(w);
  const auto* xf = static_cast<const float*>(x);
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    a0 = _mm512_fmadd_ps(bf16x16(wb + 2 * i), _mm512_loadu_ps(xf + i), a0);
    a1 = _mm512_fmadd_ps(bf16x16(wb + 2 * i + 32), _mm512_loadu_ps(xf + i + 16), a1);
    a2 = _mm512_fmadd_ps(bf16x16(wb + 2 * i + 64), _mm512_loadu_ps(xf + i + 32), a2);
    a3 = _mm512_fmadd_ps(bf16x16(wb + 2 * i + 96), _mm512_loadu_ps(xf + i + 48), a3);
  }
  for (; i + 16 <= k; i += 16)
    a0 = _mm512_fmadd_ps(bf16x16(wb + 2 * i), _mm512_loadu_ps(xf + i), a0);
  float acc = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  for (; i < k; ++i) {
    std::uint16_t h;
    std::memcpy(&h, wb + 2 * i, 2);
    acc += bf16_to_f32(h) * xf[i];
  }
  return acc;
}

HUDDLE_AVX512 inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Lanes 0-7 scale block b, lanes 8-15 block b + 1.
HUDDLE_AVX512 inline __m512 two_scales(float d0, float d1) {
  return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(d0), _mm512_set1_ps(d1));
}

// |w| as unsigned bytes, and x with w's sign.
HUDDLE_AVX512 inline void sign_split_512(__m512i w, __m512i x, __m512i& aw, __m512i& sx) {
  aw = _mm512_abs_epi8(w);
  sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
}

HUDDLE_AVX512 inline __m512 mul_sum_i8_avx512(__m512i w, __m512i x) {
  __m512i aw, sx;
  sign_split_512(w, x, aw, sx);
  return _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_maddubs_epi16(aw, sx), _mm512_set1_epi16(1)));
}

HUDDLE_VNNI inline __m512 mul_sum_i8_vnni(__m512i w, __m512i x) {
  __m512i aw, sx;
  sign_split_512(w, x, aw, sx);
  return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sx));
}

// The Q8_0 and Q4_0 loops, two blocks per iteration; MulSum is the int8 product of the path.
#define HUDDLE_Q_LOOP(ATTR, NAME, MULSUM, WLOAD2, WLOAD1)                                        \
  ATTR float NAME(const void* w, const void* x, std::int64_t k) {                                \
    const auto* wb = static_cast<const WBLOCK*>(w);                                              \
    const auto* xb = static_cast<const BlockQ8A*>(x);                                            \
    const std::int64_t blocks = k / kQBlock;                                                     \
    __m512 acc = _mm512_setzero_ps();                                                            \
    std::int64_t b = 0;                                                                          \
    for (; b + 2 <= blocks; b += 2) {                                                            \
      const __m512 d =                                                                           \
          two_scales(_cvtsh_ss(wb[b].d) * xb[b].d, _cvtsh_ss(wb[b + 1].d) * xb[b + 1].d);        \
      const __m512i xq =                                                                         \
          join(_mm256_loadu_si256(m256(xb[b].q)), _mm256_loadu_si256(m256(xb[b + 1].q)));        \
      acc = _mm512_fmadd_ps(d, MULSUM(WLOAD2, xq), acc);                                         \
    }                                                                                            \
    float sum = _mm512_reduce_add_ps(acc);                                                       \
    if (b < blocks) {                                                                            \
      sum += hsum256(_mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(wb[b].d) * xb[b].d),                 \
                                   mul_sum_i8_avx2(WLOAD1, _mm256_loadu_si256(m256(xb[b].q))))); \
    }                                                                                            \
    return sum;                                                                                  \
  }

#define WBLOCK BlockQ8_0
HUDDLE_Q_LOOP(HUDDLE_AVX512, dot_q8_0_avx512, mul_sum_i8_avx512,
              join(_mm256_loadu_si256(m256(wb[b].q)), _mm256_loadu_si256(m256(wb[b + 1].q))),
              _mm256_loadu_si256(m256(wb[b].q)))
HUDDLE_Q_LOOP(HUDDLE_VNNI, dot_q8_0_vnni, mul_sum_i8_vnni,
              join(_mm256_loadu_si256(m256(wb[b].q)), _mm256_loadu_si256(m256(wb[b + 1].q))),
              _mm256_loadu_si256(m256(wb[b].q)))
#undef WBLOCK
#define WBLOCK BlockQ4_0
HUDDLE_Q_LOOP(HUDDLE_AVX512, dot_q4_0_avx512, mul_sum_i8_avx512,
              join(unpack_q4_avx2(wb[b].q), unpack_q4_avx2(wb[b + 1].q)), unpack_q4_avx2(wb[b].q))
HUDDLE_Q_LOOP(HUDDLE_VNNI, dot_q4_0_vnni, mul_sum_i8_vnni,
              join(unpack_q4_avx2(wb[b].q), unpack_q4_avx2(wb[b + 1].q)), unpack_q4_avx2(wb[b].q))
#undef WBLOCK
#undef HUDDLE_Q_LOOP

}  // namespace

DotFn avx2_dot(DType dtype) {
  switch (dtype) {
    case DType::F16:
      return &dot_f16_avx2;
    case DType::BF16:
      return &dot_bf16_avx2;
    case DType::Q8_0:
      return &dot_q8_0_avx2;
    case DType::Q4_0:
      return &dot_q4_0_avx2;
    default:
      return nullptr;
  }
}

DotFn avx512_dot(DType dtype) {
  switch (dtype) {
    case DType::F16:
      return &dot_f16_avx512;
    case DType::BF16:
      return &dot_bf16_avx512;
    case DType::Q8_0:
      return &dot_q8_0_avx512;
    case DType::Q4_0:
      return &dot_q4_0_avx512;
    default:
      return nullptr;
  }
}

Dot2Fn avx512_dot2(DType dtype) {
  return dtype == DType::F16 ? &dot2_f16_avx512 : nullptr;
}

DotFn avx512vnni_dot(DType dtype) {
  switch (dtype) {
    case DType::Q8_0:
      return &dot_q8_0_vnni;
    case DType::Q4_0:
      return &dot_q4_0_vnni;
    default:
      return nullptr;  // F16, BF16: the avx512 loops
  }
}

}  // namespace huddle::kernels::detail

#endif  // __x86_64__
