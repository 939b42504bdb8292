// Path selection (kernels/lowp.h), activation quantisation and the scalar dot products: the
// portable path and the reference the vector paths are tested against.
#include "kernels/qdot.h"

#include "core/error.h"
#include "core/kquant.h"
#include "core/quant.h"

#include <algorithm>
#include <atomic>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cmath>
#include <cstring>
#include <type_traits>

namespace huddle::kernels {

std::string_view isa_name(Isa isa) {
  switch (isa) {
#define HUDDLE_ISA_NAME(e, name) \
  case Isa::e:                   \
    return name;
    HUDDLE_ISAS(HUDDLE_ISA_NAME)
#undef HUDDLE_ISA_NAME
  }
  return "?";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (isa_name(isa) == name) return isa;
  }
  return std::nullopt;
}

#if defined(__x86_64__)
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
static bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

bool isa_supported(Isa isa) {
  if (isa == Isa::Scalar) return true;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  switch (isa) {
    case Isa::Avx2:
      return avx2;
    case Isa::Avx512:
      return avx512;
    case Isa::Avx512Vnni:
      return avx512 && __builtin_cpu_supports("avx512vnni");
    case Isa::Scalar:
      break;
  }
#endif
  return false;
}

Isa best_isa() {
  static const Isa best = [] {
    Isa b = Isa::Scalar;
    for (Isa isa : kAllIsas) {
      if (isa_supported(isa)) b = isa;
    }
    return b;
  }();
  return best;
}

namespace {
// -1: not forced.
std::atomic<int> g_forced{-1};
}  // namespace

Isa active_isa() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<Isa>(forced) : best_isa();
}

void force_isa(std::optional<Isa> isa) {
  HUDDLE_CHECK(!isa || isa_supported(*isa), "path {} is not supported on this CPU", isa_name(*isa));
  g_forced.store(isa ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
}

namespace detail {

void quantize_activation(const float* x, BlockQ8A* out, std::int64_t k) {
  HUDDLE_CHECK(k % kQBlock == 0, "activation of {} elements is not whole blocks", k);
  for (std::int64_t b = 0; b < k / kQBlock; ++b, x += kQBlock) {
    float amax = 0.0f;
    for (std::int64_t i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = d;
    for (std::int64_t i = 0; i < kQBlock; ++i) {
      out[b].q[i] = static_cast<std::int8_t>(std::nearbyint(x[i] * id));
    }
  }
}

void dequantize_activation(const BlockQ8A* in, float* x, std::int64_t k) {
  for (std::int64_t b = 0; b < k / kQBlock; ++b, x += kQBlock) {
    for (std::int64_t i = 0; i < kQBlock; ++i) x[i] = in[b].d * static_cast<float>(in[b].q[i]);
  }
}

namespace {

float dot_f16(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const std::byte*>(w);
  const auto* xf = static_cast<const float*>(x);
  float acc = 0.0f;
  for (std::int64_t i = 0; i < k; ++i) {
    std::uint16_t h;
    std::memcpy(&h, wb + 2 * i, 2);  // rows of a safetensors view may be unaligned
    acc += f16_to_f32(h) * xf[i];
  }
  return acc;
}

float dot_bf16(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const std::byte*>(w);
  const auto* xf = static_cast<const float*>(x);
  float acc = 0.0f;
  for (std::int64_t i = 0; i < k; ++i) {
    std::uint16_t h;
    std::memcpy(&h, wb + 2 * i, 2);
    acc += bf16_to_f32(h) * xf[i];
  }
  return acc;
}

float dot_q8_0(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const BlockQ8_0*>(w);
  const auto* xb = static_cast<const BlockQ8A*>(x);
  float acc = 0.0f;
  for (std::int64_t b = 0; b < k / kQBlock; ++b) {
    std::int32_t sum = 0;
    for (std::int64_t i = 0; i < kQBlock; ++i) sum += wb[b].q[i] * xb[b].q[i];
    acc += f16_to_f32(wb[b].d) * xb[b].d * static_cast<float>(sum);
  }
  return acc;
}

float dot_q4_0(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const BlockQ4_0*>(w);
  const auto* xb = static_cast<const BlockQ8A*>(x);
  constexpr std::int64_t half = kQBlock / 2;
  float acc = 0.0f;
  for (std::int64_t b = 0; b < k / kQBlock; ++b) {
    std::int32_t sum = 0;
    for (std::int64_t i = 0; i < half; ++i) {
      sum += ((wb[b].q[i] & 15) - 8) * xb[b].q[i];
      sum += ((wb[b].q[i] >> 4) - 8) * xb[b].q[i + half];
    }
    acc += f16_to_f32(wb[b].d) * xb[b].d * static_cast<float>(sum);
  }
  return acc;
}

// The operations packed_quant.h states for Q5_0, so a row gets the packed kernels' bits.
float dot_q5_0(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const std::byte*>(w);
  const auto* xb = static_cast<const BlockQ8A*>(x);
  float acc = 0.0f;
  for (std::int64_t b = 0; b < k / kQBlock; ++b) {
    BlockQ5_0 block;
    std::memcpy(&block, wb + b * static_cast<std::int64_t>(sizeof block), sizeof block);
    std::uint8_t q[32];
    q5_0_quants(block, q);
    std::int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += (q[i] - 16) * xb[b].q[i];
    acc = std::fma(f16_to_f32(block.d) * xb[b].d, static_cast<float>(sum), acc);
  }
  return acc;
}

// The operations packed_quant.h states for Q5_1, so a row gets the packed kernels' bits.
float dot_q5_1(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const std::byte*>(w);
  const auto* xb = static_cast<const BlockQ8A*>(x);
  float acc = 0.0f;
  for (std::int64_t b = 0; b < k / kQBlock; ++b) {
    BlockQ5_1 block;
    std::memcpy(&block, wb + b * static_cast<std::int64_t>(sizeof block), sizeof block);
    std::uint8_t q[32];
    q5_1_quants(block, q);
    std::int32_t sum = 0, xsum = 0;
    for (int i = 0; i < 32; ++i) {
      sum += q[i] * xb[b].q[i];
      xsum += xb[b].q[i];
    }
    acc = std::fma(f16_to_f32(block.d) * xb[b].d, static_cast<float>(sum), acc);
    acc = std::fma(f16_to_f32(block.m) * xb[b].d, static_cast<float>(xsum), acc);
  }
  return acc;
}

// The operations packed_quant.h states for Q4_K and Q5_K, so a row gets the packed kernels' bits.
template <DType T>
float dot_kq(const void* w, const void* x, std::int64_t k) {
  using Block = std::conditional_t<T == DType::Q4_K, BlockQ4_K, BlockQ5_K>;
  const auto* wb = static_cast<const std::byte*>(w);
  const auto* xb = static_cast<const BlockQ8A*>(x);
  float acc = 0.0f;
  for (std::int64_t s = 0; s < k / kKQuantBlock; ++s) {
    Block block;
    std::memcpy(&block, wb + s * static_cast<std::int64_t>(sizeof block), sizeof block);
    const float d = f16_to_f32(block.d), dmin = f16_to_f32(block.dmin);
    for (int j = 0; j < 8; ++j) {
      const BlockQ8A& xj = xb[8 * s + j];
      int scale = 0, min = 0;
      kquant_scale_min(block.scales, j, scale, min);
      std::uint8_t q[32];
      if constexpr (T == DType::Q4_K) {
        q4_k_quants(block, j, q);
      } else {
        q5_k_quants(block, j, q);
      }
      std::int32_t sum = 0, xsum = 0;
      for (int i = 0; i < 32; ++i) {
        sum += q[i] * xj.q[i];
        xsum += xj.q[i];
      }
      const float step = d * static_cast<float>(scale);
      const float offset = dmin * static_cast<float>(min);
      acc = std::fma(step * xj.d, static_cast<float>(sum), acc);
      acc = std::fma(-(offset * xj.d), static_cast<float>(xsum), acc);
    }
  }
  return acc;
}

// The operations packed_quant.h states for Q6_K, so a row gets the packed kernels' bits.
float dot_q6_k(const void* w, const void* x, std::int64_t k) {
  const auto* wb = static_cast<const std::byte*>(w);
  const auto* xb = static_cast<const BlockQ8A*>(x);
  float acc = 0.0f;
  for (std::int64_t s = 0; s < k / kKQuantBlock; ++s) {
    BlockQ6_K block;
    std::memcpy(&block, wb + s * static_cast<std::int64_t>(sizeof block), sizeof block);
    const float d = f16_to_f32(block.d);
    std::uint8_t q[256];
    q6_k_quants(block, q);
    for (int j = 0; j < 8; ++j) {
      const BlockQ8A& xj = xb[8 * s + j];
      std::int32_t total = 0;
      for (int h = 0; h < 2; ++h) {
        std::int32_t sum = 0;
        for (int i = 16 * h; i < 16 * h + 16; ++i) sum += (q[32 * j + i] - 32) * xj.q[i];
        total += block.scales[2 * j + h] * sum;
      }
      acc = std::fma(d * xj.d, static_cast<float>(total), acc);
    }
  }
  return acc;
}

}  // namespace

DotFn scalar_dot(DType dtype) {
  switch (dtype) {
    case DType::F16:
      return &dot_f16;
    case DType::BF16:
      return &dot_bf16;
    case DType::Q8_0:
      return &dot_q8_0;
    case DType::Q4_0:
      return &dot_q4_0;
    case DType::Q5_0:
      return &dot_q5_0;
    case DType::Q5_1:
      return &dot_q5_1;
    case DType::Q4_K:
      return &dot_kq<DType::Q4_K>;
    case DType::Q5_K:
      return &dot_kq<DType::Q5_K>;
    case DType::Q6_K:
      return &dot_q6_k;
    default:
      return nullptr;
  }
}

#if !defined(__x86_64__)
DotFn avx2_dot(DType) {
  return nullptr;
}
DotFn avx512_dot(DType) {
  return nullptr;
}
DotFn avx512vnni_dot(DType) {
  return nullptr;
}
Dot2Fn avx512_dot2(DType) {
  return nullptr;
}
#endif

Dot2Fn dot2_fn(DType dtype, Isa isa) {
  return isa == Isa::Avx512 || isa == Isa::Avx512Vnni ? avx512_dot2(dtype) : nullptr;
}

DotFn dot_fn(DType dtype, Isa isa) {
  HUDDLE_CHECK(isa_supported(isa), "path {} is not supported on this CPU", isa_name(isa));
  DotFn fn = nullptr;
  switch (isa) {
    case Isa::Avx512Vnni:
      fn = avx512vnni_dot(dtype);
      if (fn != nullptr) break;
      [[fallthrough]];
    case Isa::Avx512:
      fn = avx512_dot(dtype);
      if (fn != nullptr) break;
      [[fallthrough]];
    case Isa::Avx2:
      fn = avx2_dot(dtype);
      if (fn != nullptr) break;
      [[fallthrough]];
    case Isa::Scalar:
      fn = scalar_dot(dtype);
      break;
  }
  HUDDLE_CHECK(fn != nullptr, "no dot product for {} weights", dtype_name(dtype));
  return fn;
}

}  // namespace detail
}  // namespace huddle::kernels
