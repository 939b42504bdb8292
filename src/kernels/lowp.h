// Weights kept in 16-bit (F16, BF16) or block-quantised (Q8_0, Q4_0) dtypes: which instruction
// set the kernels use for them.
//
// linear() and embedding() (kernels.h) accept such weights; activations stay F32. The dot
// products behind linear() have one path per instruction set, chosen once from the CPU's features
// (__builtin_cpu_supports) and compiled with __attribute__((target)), so one binary runs the best
// path the CPU has whatever -march it was built with, and a portable scalar path everywhere:
//   scalar      plain C++ (every CPU; the reference the others are tested against)
//   avx2        AVX2 + FMA + F16C: F16 via _mm256_cvtph_ps, BF16 via shifts, Q8_0/Q4_0 via
//               _mm256_maddubs_epi16 / _mm256_madd_epi16 on int8 blocks
//   avx512      AVX-512 F/BW/VL: two blocks or 16 floats per instruction
//   avx512vnni  AVX-512 VNNI: Q8_0/Q4_0 via _mm512_dpbusd_epi32 (F16/BF16 as avx512)
// Weights in Q8_0/Q4_0 are multiplied with the activation row quantised to int8 blocks of 32
// (f32 scale per block, as llama.cpp does): products of blocks are exact integer sums, so the
// only error beyond the weights' own is the activation's rounding (about 0.4% of a block's
// largest value per element). Every T uses that same activation rounding (see linear_lowp.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace huddle::kernels {

// X(enum, name)
#define HUDDLE_ISAS(X) \
  X(Scalar, "scalar")  \
  X(Avx2, "avx2")      \
  X(Avx512, "avx512")  \
  X(Avx512Vnni, "avx512vnni")

enum class Isa : std::uint8_t {
#define HUDDLE_ISA_ENUM(e, name) e,
  HUDDLE_ISAS(HUDDLE_ISA_ENUM)
#undef HUDDLE_ISA_ENUM
};

inline constexpr Isa kAllIsas[] = {
#define HUDDLE_ISA_LIST(e, name) Isa::e,
    HUDDLE_ISAS(HUDDLE_ISA_LIST)
#undef HUDDLE_ISA_LIST
};

std::string_view isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);

// Whether this CPU (and this build: x86-64 only for the vector paths) can run `isa`.
bool isa_supported(Isa isa);
// The best supported path (detected once).
Isa best_isa();
// The path the kernels use now: best_isa() unless forced. Tests and benchmarks force each
// supported path in turn; forcing an unsupported one is a programmer error. Process-wide; not to
// be changed while kernels run on other threads.
Isa active_isa();
void force_isa(std::optional<Isa> isa);

}  // namespace huddle::kernels
