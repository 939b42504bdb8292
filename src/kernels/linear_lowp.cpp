// linear() with 16-bit or block-quantised weights; activations F32.
//
// OutIn [N, K] weights, the layout of every decoder's projections:
//   Q8_0/Q4_0 where the active path has tile kernels (qtile.h: AVX2, AVX-512 VNNI): the
//     activation is quantised to int8 blocks and tiles of weight rows x tokens multiply blocks
//     as integers, at every T; each output gets the same bits whatever T, so a plan that splits
//     tokens differently from one device gives exactly its answer.
//   otherwise, T < kLowpGemmTokens (decode, short prompts): one dot product per output element
//     on the active path (qdot.h), threaded over output rows like the F32 GEMV; a weight row is
//     read once per call and reused from cache by every token;
//   otherwise, T >= kLowpGemmTokens (prefill): panels of weight rows are widened to F32 and
//     multiplied by OpenBLAS sgemm.
// For Q8_0/Q4_0 weights all of them read the activation quantised to int8 blocks (the GEMM path
// multiplies the values those blocks hold), so every T rounds the same way and results differ
// between them only by float reassociation.
// InOut [K, N] weights (GPT-2's Conv1D): panels of weight rows widened to F32 and accumulated by
// sgemm, activations unrounded, at every T.
#include "kernels/linear_lowp.h"

#include "core/error.h"
#include "core/quant.h"
#include "kernels/blas.h"
#include "kernels/qdot.h"
#include "kernels/qtile.h"
#include "kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace huddle::kernels::detail {
namespace {

// Weight bytes per chunk of the dot-product loop below which a thread is not worth waking.
constexpr std::int64_t kMinLowpChunkBytes = 1 << 19;
// See linear_out_in's dot products.
constexpr std::int64_t kOneRowDotMax = 4096;
// F32 bytes of one dequantised panel handed to sgemm.
constexpr std::int64_t kPanelBytes = 4 << 20;

std::atomic<std::int64_t> g_gemm_tokens{kLowpGemmTokens};
std::atomic<bool> g_qtiles{true};

// A 2-D weight in any dtype, row by row.
struct WeightRows {
  const std::byte* data;
  DType dtype;
  std::int64_t rows, cols, stride;  // stride in elements (whole blocks)
  const std::byte* row(std::int64_t r) const { return data + dtype_bytes(dtype, r * stride); }
};

WeightRows rows_of(const Tensor& w) {
  return {static_cast<const std::byte*>(w.raw()), w.dtype(), w.dim(0), w.dim(1), w.row_stride()};
}

// Widens rows [r0, r0 + count) of w into tile [count, w.cols], in parallel.
void dequantize_panel(const WeightRows& w, std::int64_t r0, std::int64_t count, float* tile) {
  parallel_for(
      0, count,
      [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t r = b; r < e; ++r) {
          dequantize_row(w.dtype, w.row(r0 + r), tile + r * w.cols, w.cols);
        }
      },
      std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(w.cols, 1)));
}

std::int64_t panel_rows(std::int64_t cols, std::int64_t total) {
  const std::int64_t p =
      std::max<std::int64_t>(16, kPanelBytes / (4 * std::max<std::int64_t>(cols, 1)));
  return std::min(p, total);
}

void add_bias(const float* bias, std::int64_t t, std::int64_t n, float* y, std::int64_t ldy) {
  if (bias == nullptr) return;
  for (std::int64_t r = 0; r < t; ++r) {
    for (std::int64_t c = 0; c < n; ++c) y[r * ldy + c] += bias[c];
  }
}

// y[T, N] from Q8_0/Q4_0 rows on tile kernels (qtile.h), at every T. Threads take chunks of
// kChunkRows weight rows (about 150 KB of Q8_0 at K = 2048, kept in L2); within a chunk each
// tile of tokens is reused, from L1, by every tile of rows. One token (decode) goes one row a
// tile: the weights then stream from DRAM in one sequential pass (measured: tiles of four rows
// reach half the bandwidth there, though they are faster on weights in cache).
void linear_tiled(QTileFn tile, const WeightRows& w, const BlockQ8A* xq, std::int64_t t,
                  std::int64_t blocks, const float* bias, float* y, std::int64_t ldy) {
  constexpr std::int64_t kChunkRows = 16 * kTileRows;
  const std::int64_t n = w.rows;
  const auto row_bytes = static_cast<std::int64_t>(dtype_bytes(w.dtype, w.stride));
  const std::int64_t chunks = (n + kChunkRows - 1) / kChunkRows;
  const std::int64_t tile_rows = t == 1 ? 1 : kTileRows;
  const std::int64_t chunk_bytes = std::max<std::int64_t>(1, kChunkRows * row_bytes);
  parallel_for(
      0, chunks,
      [&](std::int64_t cb, std::int64_t ce) {
        for (std::int64_t c = cb; c < ce; ++c) {
          const std::int64_t r_end = std::min(n, (c + 1) * kChunkRows);
          for (std::int64_t t0 = 0; t0 < t; t0 += kTileTokens) {
            const int tokens = static_cast<int>(std::min<std::int64_t>(kTileTokens, t - t0));
            for (std::int64_t r0 = c * kChunkRows; r0 < r_end; r0 += tile_rows) {
              const int rows = static_cast<int>(std::min<std::int64_t>(tile_rows, r_end - r0));
              tile(w.row(r0), row_bytes, rows, xq + t0 * blocks, blocks, tokens, blocks,
                   y + t0 * ldy + r0, ldy);
            }
          }
          if (bias != nullptr) {
            for (std::int64_t r = 0; r < t; ++r) {
              for (std::int64_t col = c * kChunkRows; col < r_end; ++col) {
                y[r * ldy + col] += bias[col];
              }
            }
          }
        }
      },
      std::max<std::int64_t>(1, kMinLowpChunkBytes / chunk_bytes));
}

void linear_out_in(const Tensor& x, const WeightRows& w, const float* bias, Tensor& y) {
  const std::int64_t t = x.dim(0), k = x.dim(1), n = w.rows;
  const bool quantized = quantizes_activation(w.dtype);
  thread_local std::vector<BlockQ8A> xq;
  if (quantized) {
    const std::int64_t blocks = k / kQBlock;
    xq.resize(static_cast<std::size_t>(t * blocks));
    for (std::int64_t r = 0; r < t; ++r) {
      quantize_activation(x.f32() + r * x.row_stride(), xq.data() + r * blocks, k);
    }
  }
  float* yd = y.f32();
  const std::int64_t ldy = y.row_stride();

  if (const QTileFn tile =
          quantized && qtiles_enabled() ? qtile_fn(w.dtype, active_isa()) : nullptr) {
    linear_tiled(tile, w, xq.data(), t, k / kQBlock, bias, yd, ldy);
    return;
  }
  if (t < lowp_gemm_tokens()) {
    const DotFn dot = dot_fn(w.dtype, active_isa());
    // Rows of an activation longer than kOneRowDotMax elements go two per load of x where the
    // path can (F16 on AVX-512): x then no longer fits L1 beside the weight stream and is read
    // from L2 for every row. Shorter rows go one at a time, a single DRAM stream: two rows at
    // once ran 13.5 GB/s there against 21-22 (bench_lowp_gemv, one Zen 4 core); on the 2048 x
    // 8192 down projection two rows ran 14.9 GB/s against 11.3.
    const Dot2Fn dot2 = quantized || k <= kOneRowDotMax ? nullptr : dot2_fn(w.dtype, active_isa());
    const std::int64_t blocks = k / kQBlock;
    const BlockQ8A* xqd = xq.data();
    const float* xd = x.f32();
    const std::int64_t ldx = x.row_stride();
    const std::int64_t row_bytes =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(dtype_bytes(w.dtype, k)));
    parallel_for(
        0, n,
        [&](std::int64_t b, std::int64_t e) {
          std::int64_t c = b;
          if (dot2 != nullptr) {
            for (; c + 2 <= e; c += 2) {
              for (std::int64_t r = 0; r < t; ++r) {
                float* out = yd + r * ldy + c;
                dot2(w.row(c), w.row(c + 1), xd + r * ldx, k, out);
                if (bias != nullptr) {
                  out[0] += bias[c];
                  out[1] += bias[c + 1];
                }
              }
            }
          }
          for (; c < e; ++c) {
            const std::byte* wr = w.row(c);
            const float bc = bias != nullptr ? bias[c] : 0.0f;
            for (std::int64_t r = 0; r < t; ++r) {
              const void* xr = quantized ? static_cast<const void*>(xqd + r * blocks)
                                         : static_cast<const void*>(xd + r * ldx);
              yd[r * ldy + c] = dot(wr, xr, k) + bc;
            }
          }
        },
        std::max<std::int64_t>(4, kMinLowpChunkBytes / row_bytes));
    return;
  }

  // GEMM: x (or the values its blocks hold) times panels of widened weight rows.
  thread_local std::vector<float> xs;
  const float* xd = x.f32();
  std::int64_t ldx = x.row_stride();
  if (quantized) {
    xs.resize(static_cast<std::size_t>(t * k));
    const std::int64_t blocks = k / kQBlock;
    for (std::int64_t r = 0; r < t; ++r) {
      dequantize_activation(xq.data() + r * blocks, xs.data() + r * k, k);
    }
    xd = xs.data();
    ldx = k;
  }
  thread_local std::vector<float> tile;
  const std::int64_t p = panel_rows(k, n);
  tile.resize(static_cast<std::size_t>(p * k));
  for (std::int64_t n0 = 0; n0 < n; n0 += p) {
    const std::int64_t rows = std::min(p, n - n0);
    dequantize_panel(w, n0, rows, tile.data());
    raw_sgemm(Trans::No, Trans::Yes, t, rows, k, 1.0f, xd, ldx, tile.data(), k, 0.0f, yd + n0, ldy);
  }
  add_bias(bias, t, n, yd, ldy);
}

void linear_in_out(const Tensor& x, const WeightRows& w, const float* bias, Tensor& y) {
  const std::int64_t t = x.dim(0), k = w.rows, n = w.cols;
  thread_local std::vector<float> tile;
  const std::int64_t p = panel_rows(n, k);
  tile.resize(static_cast<std::size_t>(p * n));
  for (std::int64_t k0 = 0; k0 < k; k0 += p) {
    const std::int64_t rows = std::min(p, k - k0);
    dequantize_panel(w, k0, rows, tile.data());
    raw_sgemm(Trans::No, Trans::No, t, n, rows, 1.0f, x.f32() + k0, x.row_stride(), tile.data(), n,
              k0 == 0 ? 0.0f : 1.0f, y.f32(), y.row_stride());
  }
  add_bias(bias, t, n, y.f32(), y.row_stride());
}

}  // namespace

std::int64_t lowp_gemm_tokens() {
  return g_gemm_tokens.load(std::memory_order_relaxed);
}
bool qtiles_enabled() {
  return g_qtiles.load(std::memory_order_relaxed);
}
void set_qtiles_enabled(bool enabled) {
  g_qtiles.store(enabled, std::memory_order_relaxed);
}
void set_lowp_gemm_tokens(std::int64_t t) {
  g_gemm_tokens.store(std::max<std::int64_t>(1, t), std::memory_order_relaxed);
}

void linear_lowp(const Tensor& x, const Tensor& w, WeightLayout layout, const float* bias,
                 Tensor& y) {
  const WeightRows wr = rows_of(w);
  const std::int64_t k = x.dim(1);
  if (k == 0) {
    for (std::int64_t r = 0; r < y.dim(0); ++r) {
      for (std::int64_t c = 0; c < y.dim(1); ++c) {
        y.f32()[r * y.row_stride() + c] = bias != nullptr ? bias[c] : 0.0f;
      }
    }
    return;
  }
  if (layout == WeightLayout::OutIn) {
    linear_out_in(x, wr, bias, y);
  } else {
    linear_in_out(x, wr, bias, y);
  }
}

}  // namespace huddle::kernels::detail
