// Internal: small vectorisable building blocks for the fast kernels.
//
// Written by hand because the compiler vectorises a float reduction only under -ffast-math, and
// glibc's vector math library (libmvec) is only reachable under -ffast-math too, which would also
// license reassociation and drop NaN/Inf semantics everywhere else in a file. The loops below
// keep a fixed number of independent partial sums (so the compiler may use SIMD lanes without
// reordering anything) and a branch-free exp.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace huddle::kernels::detail {

// Partial sums per reduction: four 512-bit (or eight 256-bit) registers' worth.
inline constexpr int kLanes = 32;

// Σ a[i]·b[i], i < n.
inline float dot(const float* __restrict a, const float* __restrict b, std::int64_t n) {
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0] + tail;
}

// Σ a[i], i < n.
inline float sum(const float* __restrict a, std::int64_t n) {
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i];
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0] + tail;
}

// Σ (a[i] - c)², i < n.
inline float sum_sq_dev(const float* __restrict a, float c, std::int64_t n) {
  float acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float d = a[i + j] - c;
      acc[j] += d * d;
    }
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += (a[i] - c) * (a[i] - c);
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return acc[0] + tail;
}

// max a[i], i < n (n >= 1).
inline float max_of(const float* __restrict a, std::int64_t n) {
  float acc[kLanes];
  std::fill(acc, acc + kLanes, a[0]);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = a[i + j] > acc[j] ? a[i + j] : acc[j];
  }
  float m = a[0];
  for (; i < n; ++i) m = std::max(m, a[i]);
  for (int j = 0; j < kLanes; ++j) m = std::max(m, acc[j]);
  return m;
}

// e^x for float, branch-free (Cephes expf: range reduction by ln 2 in two parts, degree-7
// polynomial, exponent by bit assembly). Relative error about 2 ulp for x in [-87.3, 88.3];
// inputs outside are clamped (results ~1e-38 and ~3e38). NaN in gives an unspecified finite value.
inline float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  x = std::clamp(x, -87.3f, 88.3f);
  const float n = std::nearbyint(x * kLog2e);  // vectorises; std::floor does not
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

}  // namespace huddle::kernels::detail
