// The x86-64 tile kernels of kernels/qtile.h, compiled per instruction set with
// __attribute__((target)) like qdot_x86.cpp, and called only where the CPU has that set.
//
// Integer products without the sign trick where VNNI allows it: _mm512_dpbusd_epi32 multiplies
// unsigned by signed bytes, so
//   Q4_0: nibbles q in [0, 15] are the unsigned operand, and Σ (q - 8)·x = Σ q·x - 8·Σ x, the
//         correction -8·Σ x (per token and block, four elements a lane) seeding the accumulator;
//   Q8_0: the activation shifted to x + 128 in [1, 255] is the unsigned operand, and
//         Σ x·w = Σ (x + 128)·w - 128·Σ w, the correction per weight row and block.
// Each 32-bit lane then holds a four-element integer sum of one block, exact; the float
// accumulation is one FMA per lane and pair of blocks (AVX2: per block), then a reduction, the
// same for every output of every tile shape.
//
// Measured on a Zen 4 EPYC, one thread, CPU time (bench_lowp_gemv --cpu-time): prefill at T = 64
// 103-120 GFLOP/s against 53-66 for sgemm on widened panels; decode (T = 1, one row a tile:
// several rows a tile interleave DRAM streams and halve the bandwidth there) Q4_0 12-13 GB/s
// against 10.6-11.2 for the dot products, Q8_0 equal (22-25 GB/s, DRAM-bound).
#include "kernels/qtile.h"

#if defined(__x86_64__)

#include "core/quant.h"
#include "kernels/x86_simd.h"

#include <array>

// The loops over a tile's rows and tokens are unrolled so that its accumulators live in registers.
#define HUDDLE_UNROLL _Pragma("GCC unroll 8")

namespace huddle::kernels::detail {
namespace {

using x86::hsum256;
using x86::m128;
using x86::m256;

// The 32 nibbles of a Q4_0 block as unsigned bytes in [0, 15], in element order.
HUDDLE_AVX2 inline __m256i nibbles_avx2(const std::uint8_t* q) {
  const __m128i packed = _mm_loadu_si128(m128(q));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                          _mm256_set1_epi8(15));
}

// ---- AVX2: one block per step ----

// Per weight dtype: the weight block as loaded once per tile row, and the four-element integer
// sums (eight lanes) of one weight block with one activation block.
struct Q8Avx2 {
  using Block = BlockQ8_0;
  struct Row {
    __m256i w, abs_w;
  };
  struct Token {
    __m256i x;
  };
  HUDDLE_AVX2 static Row row(const Block& b) {
    const __m256i w = _mm256_loadu_si256(m256(b.q));
    return {w, _mm256_sign_epi8(w, w)};
  }
  HUDDLE_AVX2 static Token token(__m256i x) { return {x}; }
  HUDDLE_AVX2 static __m256i sums(const Row& r, const Token& t) {
    const __m256i dot16 = _mm256_maddubs_epi16(r.abs_w, _mm256_sign_epi8(t.x, r.w));
    return _mm256_madd_epi16(dot16, _mm256_set1_epi16(1));
  }
};

struct Q4Avx2 {
  using Block = BlockQ4_0;
  struct Row {
    __m256i q;  // nibbles in [0, 15]
  };
  struct Token {
    __m256i x, eight_x;  // x, and 8·x summed in pairs (16-bit)
  };
  HUDDLE_AVX2 static Row row(const Block& b) { return {nibbles_avx2(b.q)}; }
  HUDDLE_AVX2 static Token token(__m256i x) {
    return {x, _mm256_maddubs_epi16(_mm256_set1_epi8(8), x)};
  }
  // Pairs of (q - 8)·x stay within ±2032 in 16 bits.
  HUDDLE_AVX2 static __m256i sums(const Row& r, const Token& t) {
    const __m256i dot16 = _mm256_sub_epi16(_mm256_maddubs_epi16(r.q, t.x), t.eight_x);
    return _mm256_madd_epi16(dot16, _mm256_set1_epi16(1));
  }
};

// R rows x T tokens over every block, as qdot_x86.cpp's dot_q*_avx2 per output.
template <class Q, int R, int T>
HUDDLE_AVX2 void tile_avx2(const std::byte* w, std::int64_t w_row_bytes, const BlockQ8A* x,
                           std::int64_t x_row_blocks, std::int64_t blocks, float* y,
                           std::int64_t ldy) {
  using Block = typename Q::Block;
  __m256 acc[R][T];
  HUDDLE_UNROLL
  for (int r = 0; r < R; ++r) {
    HUDDLE_UNROLL
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (std::int64_t b = 0; b < blocks; ++b) {
    typename Q::Row rows[R];
    float dw[R];
    HUDDLE_UNROLL
    for (int r = 0; r < R; ++r) {
      const Block& blk = reinterpret_cast<const Block*>(w + r * w_row_bytes)[b];
      rows[r] = Q::row(blk);
      dw[r] = _cvtsh_ss(blk.d);
    }
    HUDDLE_UNROLL
    for (int t = 0; t < T; ++t) {
      const BlockQ8A& xb = x[t * x_row_blocks + b];
      const typename Q::Token tok = Q::token(_mm256_loadu_si256(m256(xb.q)));
      HUDDLE_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m256 d = _mm256_set1_ps(dw[r] * xb.d);
        acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(Q::sums(rows[r], tok)), acc[r][t]);
      }
    }
  }
  HUDDLE_UNROLL
  for (int t = 0; t < T; ++t) {
    HUDDLE_UNROLL
    for (int r = 0; r < R; ++r) y[t * ldy + r] = hsum256(acc[r][t]);
  }
}

// ---- AVX-512 VNNI: two blocks per step ----

HUDDLE_VNNI inline __m512i join_halves(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// A value per block of a pair: v1 in the lanes of `second` (block b + 1's), v0 in the others.
HUDDLE_VNNI inline __m512 two(__mmask16 second, float v0, float v1) {
  return _mm512_mask_blend_ps(second, _mm512_set1_ps(v0), _mm512_set1_ps(v1));
}

// Two f16 scales widened, laid out as two().
HUDDLE_VNNI inline __m512 two_f16(__mmask16 second, std::uint16_t h0, std::uint16_t h1) {
  return _mm512_cvtph_ps(_mm256_mask_blend_epi16(second, _mm256_set1_epi16(static_cast<short>(h0)),
                                                 _mm256_set1_epi16(static_cast<short>(h1))));
}

struct Q8Vnni {
  using Block = BlockQ8_0;
  using Avx2 = Q8Avx2;
  static constexpr __mmask16 kSecondBlockLanes = 0xFF00;  // element order
  struct Row {
    __m512i w, seed;  // seed: -128·Σ w, four elements a lane
  };
  struct Token {
    __m512i x_biased;  // x + 128 as unsigned bytes
  };
  HUDDLE_VNNI static Row row(const Block* b) {
    const __m512i w =
        join_halves(_mm256_loadu_si256(m256(b[0].q)), _mm256_loadu_si256(m256(b[1].q)));
    const __m512i sum128 =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), w);
    return {w, _mm512_sub_epi32(_mm512_setzero_si512(), sum128)};
  }
  HUDDLE_VNNI static Token token(__m512i x) {
    return {_mm512_xor_si512(x, _mm512_set1_epi8(static_cast<char>(0x80)))};
  }
  HUDDLE_VNNI static __m512i sums(const Row& r, const Token& t) {
    return _mm512_dpbusd_epi32(r.seed, t.x_biased, r.w);
  }
};

// Q4_0 keeps a pair of blocks' nibbles in the order they are packed, [low nibbles of block b,
// of block b + 1, high nibbles of b, of b + 1] (five instructions instead of unpacking each
// block into element order), and permutes the activation once per token to match.
struct Q4Vnni {
  using Block = BlockQ4_0;
  using Avx2 = Q4Avx2;
  static constexpr __mmask16 kSecondBlockLanes = 0xF0F0;
  struct Row {
    __m512i q;  // nibbles in [0, 15]
  };
  struct Token {
    __m512i x, seed;  // seed: -8·Σ x, four elements a lane
  };
  HUDDLE_VNNI static Row row(const Block* b) {
    const __m256i packed = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(m128(b[0].q))), _mm_loadu_si128(m128(b[1].q)), 1);
    const __m512i both =
        _mm512_inserti64x4(_mm512_castsi256_si512(packed), _mm256_srli_epi16(packed, 4), 1);
    return {_mm512_and_si512(both, _mm512_set1_epi8(15))};
  }
  // x: [block b, block b + 1] in element order.
  HUDDLE_VNNI static Token token(__m512i x) {
    const __m512i order = _mm512_set_epi64(7, 6, 3, 2, 5, 4, 1, 0);
    const __m512i xp = _mm512_permutexvar_epi64(order, x);
    const __m512i sum8 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), xp);
    return {xp, _mm512_sub_epi32(_mm512_setzero_si512(), sum8)};
  }
  HUDDLE_VNNI static __m512i sums(const Row& r, const Token& t) {
    return _mm512_dpbusd_epi32(t.seed, r.q, t.x);
  }
};

// R rows x T tokens over every block, as qdot_x86.cpp's dot_q*_vnni per output (pairs of blocks,
// then an odd last block on the AVX2 sums).
template <class Q, int R, int T>
HUDDLE_VNNI void tile_vnni(const std::byte* w, std::int64_t w_row_bytes, const BlockQ8A* x,
                           std::int64_t x_row_blocks, std::int64_t blocks, float* y,
                           std::int64_t ldy) {
  using Block = typename Q::Block;
  auto row_blocks = [&](int r) { return reinterpret_cast<const Block*>(w + r * w_row_bytes); };
  __m512 acc[R][T];
  HUDDLE_UNROLL
  for (int r = 0; r < R; ++r) {
    HUDDLE_UNROLL
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  std::int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    typename Q::Row rows[R];
    __m512 dw[R];
    HUDDLE_UNROLL
    for (int r = 0; r < R; ++r) {
      const Block* blk = row_blocks(r) + b;
      rows[r] = Q::row(blk);
      dw[r] = two_f16(Q::kSecondBlockLanes, blk[0].d, blk[1].d);
    }
    HUDDLE_UNROLL
    for (int t = 0; t < T; ++t) {
      const BlockQ8A* xb = x + t * x_row_blocks + b;
      const typename Q::Token tok = Q::token(
          join_halves(_mm256_loadu_si256(m256(xb[0].q)), _mm256_loadu_si256(m256(xb[1].q))));
      const __m512 dx = two(Q::kSecondBlockLanes, xb[0].d, xb[1].d);
      HUDDLE_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512 d = _mm512_mul_ps(dw[r], dx);  // d_w·d_x per block
        acc[r][t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(Q::sums(rows[r], tok)), acc[r][t]);
      }
    }
  }
  HUDDLE_UNROLL
  for (int t = 0; t < T; ++t) {
    HUDDLE_UNROLL
    for (int r = 0; r < R; ++r) {
      float sum = _mm512_reduce_add_ps(acc[r][t]);
      if (b < blocks) {
        const Block& blk = row_blocks(r)[b];
        const BlockQ8A& xb = x[t * x_row_blocks + b];
        const auto tok = Q::Avx2::token(_mm256_loadu_si256(m256(xb.q)));
        const __m256i sums = Q::Avx2::sums(Q::Avx2::row(blk), tok);
        sum += hsum256(
            _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(blk.d) * xb.d), _mm256_cvtepi32_ps(sums)));
      }
      y[t * ldy + r] = sum;
    }
  }
}

// ---- dispatch on the tile's shape ----

using FixedTile = void (*)(const std::byte*, std::int64_t, const BlockQ8A*, std::int64_t,
                           std::int64_t, float*, std::int64_t);
using TileTable = std::array<std::array<FixedTile, kTileTokens>, kTileRows>;

template <template <class, int, int> class Kernel, class Q, int R, int... Ts>
constexpr std::array<FixedTile, kTileTokens> token_row(std::integer_sequence<int, Ts...>) {
  return {&Kernel<Q, R, Ts + 1>::run...};
}
template <template <class, int, int> class Kernel, class Q, int... Rs>
constexpr TileTable make_table(std::integer_sequence<int, Rs...>) {
  return {token_row<Kernel, Q, Rs + 1>(std::make_integer_sequence<int, kTileTokens>{})...};
}
template <template <class, int, int> class Kernel, class Q>
constexpr TileTable kTable = make_table<Kernel, Q>(std::make_integer_sequence<int, kTileRows>{});

// AVX2 has 16 vector registers: tokens go two at a time so the accumulators stay in them.
template <class Q, int R, int T>
struct Avx2Tile {
  static void run(const std::byte* w, std::int64_t w_row_bytes, const BlockQ8A* x,
                  std::int64_t x_row_blocks, std::int64_t blocks, float* y, std::int64_t ldy) {
    tile_avx2<Q, R, (T < 2 ? T : 2)>(w, w_row_bytes, x, x_row_blocks, blocks, y, ldy);
    if constexpr (T > 2) {
      Avx2Tile<Q, R, T - 2>::run(w, w_row_bytes, x + 2 * x_row_blocks, x_row_blocks, blocks,
                                 y + 2 * ldy, ldy);
    }
  }
};
template <class Q, int R, int T>
struct VnniTile {
  static void run(const std::byte* w, std::int64_t w_row_bytes, const BlockQ8A* x,
                  std::int64_t x_row_blocks, std::int64_t blocks, float* y, std::int64_t ldy) {
    tile_vnni<Q, R, T>(w, w_row_bytes, x, x_row_blocks, blocks, y, ldy);
  }
};

template <const TileTable& table>
void dispatch(const std::byte* w, std::int64_t w_row_bytes, int rows, const BlockQ8A* x,
              std::int64_t x_row_blocks, int tokens, std::int64_t blocks, float* y,
              std::int64_t ldy) {
  table[static_cast<std::size_t>(rows - 1)][static_cast<std::size_t>(tokens - 1)](
      w, w_row_bytes, x, x_row_blocks, blocks, y, ldy);
}

}  // namespace

QTileFn avx2_qtile(DType dtype) {
  switch (dtype) {
    case DType::Q8_0:
      return &dispatch<kTable<Avx2Tile, Q8Avx2>>;
    case DType::Q4_0:
      return &dispatch<kTable<Avx2Tile, Q4Avx2>>;
    default:
      return nullptr;
  }
}

QTileFn avx512vnni_qtile(DType dtype) {
  switch (dtype) {
    case DType::Q8_0:
      return &dispatch<kTable<VnniTile, Q8Vnni>>;
    case DType::Q4_0:
      return &dispatch<kTable<VnniTile, Q4Vnni>>;
    default:
      return nullptr;
  }
}

}  // namespace huddle::kernels::detail

#else  // not x86-64: no tiles; linear() uses the dot products

namespace huddle::kernels::detail {
QTileFn avx2_qtile(DType) {
  return nullptr;
}
QTileFn avx512vnni_qtile(DType) {
  return nullptr;
}
}  // namespace huddle::kernels::detail

#endif

namespace huddle::kernels::detail {

QTileFn qtile_fn(DType dtype, Isa isa) {
  switch (isa) {
    case Isa::Avx512Vnni:
      return avx512vnni_qtile(dtype);
    case Isa::Avx2:
      return avx2_qtile(dtype);
    case Isa::Avx512:  // no AVX-512 tile without VNNI: the dot products
    case Isa::Scalar:
      return nullptr;
  }
  return nullptr;
}

}  // namespace huddle::kernels::detail
