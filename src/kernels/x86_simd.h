// Internal to the x86-64 kernel files (qdot_x86.cpp, qtile_x86.cpp): the instruction-set target
// attributes their functions are compiled with, and small helpers shared by them. Include only
// inside `#if defined(__x86_64__)`.
#pragma once

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which -Wuninitialized
// reports as uninitialised once inlined (a false positive, GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#define HUDDLE_AVX2 __attribute__((target("avx2,fma,f16c")))
#define HUDDLE_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define HUDDLE_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

namespace huddle::kernels::detail::x86 {

template <typename T>
const __m128i* m128(const T* p) {
  return reinterpret_cast<const __m128i*>(p);
}
template <typename T>
const __m256i* m256(const T* p) {
  return reinterpret_cast<const __m256i*>(p);
}

HUDDLE_AVX2 inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace huddle::kernels::detail::x86
