// Internal: register-tiled products of block-quantised weight rows (Q8_0, Q4_0) with activation
// rows quantised to int8 blocks (BlockQ8A), per instruction set. linear_lowp.cpp uses them for
// every token count when the active path has them, in place of one dot product per output
// (decode) or sgemm on widened weight panels (prefill).
//
// Why a tile: a dot product per (weight row, token) reloads and re-signs the activation for every
// row and ends in a horizontal sum per output; a tile of rows x tokens loads each weight block and
// each activation block once per tile and keeps rows x tokens accumulators in registers, so the
// integer multiply-adds dominate. Prefill no longer widens every weight to F32 (4.4 GB of writes
// per 32-token prompt of a 1B model).
//
// Every output y[t][r] is accumulated by the same sequence of operations whatever the tile's shape
// or the call's token count, so a step of T tokens gives each token exactly the bits it gets alone
// (plans that split tokens differently agree exactly). Against the path's dot products (qdot.h)
// they differ by float reassociation only: the integer sums per four elements are the same.
#pragma once

#include "core/dtype.h"
#include "kernels/lowp.h"
#include "kernels/qdot.h"

#include <cstddef>
#include <cstdint>

namespace huddle::kernels::detail {

// The largest tile a QTileFn takes.
inline constexpr int kTileRows = 4;
inline constexpr int kTileTokens = 4;

// y[t * ldy + r] = Σ_{k < 32·blocks} w_r[k] · x_t[k] for r < rows, t < tokens, where row r of the
// weight starts at w + r · w_row_bytes (in its dtype) and token t's blocks at x + t · x_row_blocks.
// 1 <= rows <= kTileRows, 1 <= tokens <= kTileTokens.
using QTileFn = void (*)(const std::byte* w, std::int64_t w_row_bytes, int rows, const BlockQ8A* x,
                         std::int64_t x_row_blocks, int tokens, std::int64_t blocks, float* y,
                         std::int64_t ldy);

// The tile kernel for weights of `dtype` on path `isa`, or null where that path has none (the
// caller then uses the dot products). isa_supported(isa) must hold.
QTileFn qtile_fn(DType dtype, Isa isa);

// Per-path tables (qtile_x86.cpp); null where a path has no tile for `dtype`.
QTileFn avx2_qtile(DType dtype);
QTileFn avx512vnni_qtile(DType dtype);

}  // namespace huddle::kernels::detail
