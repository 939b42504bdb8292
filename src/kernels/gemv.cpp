#include "kernels/gemv.h"

#include "kernels/thread_pool.h"

#include <algorithm>

namespace huddle::kernels::detail {
namespace {

// Below this many weight bytes per chunk (~30 µs of streaming), waking a thread costs about as
// much as it saves.
constexpr std::int64_t kMinChunkBytes = 1 << 20;

// out[r] = Σ_k w_r[k]·x[k] for R rows at once, so that each load of x feeds R multiply-adds. The
// arithmetic of a row does not depend on R, so results do not depend on how rows are grouped
// or split across threads.
template <int R>
void dot_rows(const float* __restrict x, const float* const* w, std::int64_t k, float* out) {
  constexpr int kW = 16;
  float acc[R][kW] = {};
  std::int64_t i = 0;
  for (; i + kW <= k; i += kW) {
    for (int j = 0; j < kW; ++j) {
      const float xv = x[i + j];
      for (int r = 0; r < R; ++r) acc[r][j] += w[r][i + j] * xv;
    }
  }
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    for (std::int64_t t = i; t < k; ++t) tail += w[r][t] * x[t];
    for (int width = kW / 2; width > 0; width /= 2) {
      for (int j = 0; j < width; ++j) acc[r][j] += acc[r][j + width];
    }
    out[r] = acc[r][0] + tail;
  }
}

}  // namespace

void gemv_out_in(const float* x, ConstMat w, const float* bias, float* y) {
  const std::int64_t row_bytes = std::max<std::int64_t>(w.cols * 4, 1);
  const std::int64_t grain = std::max<std::int64_t>(4, kMinChunkBytes / row_bytes);
  parallel_for(
      0, w.rows,
      [&](std::int64_t b, std::int64_t e) {
        std::int64_t n = b;
        for (; n + 4 <= e; n += 4) {
          const float* rows[4] = {w.row(n), w.row(n + 1), w.row(n + 2), w.row(n + 3)};
          dot_rows<4>(x, rows, w.cols, y + n);
        }
        for (; n < e; ++n) {
          const float* row = w.row(n);
          dot_rows<1>(x, &row, w.cols, y + n);
        }
        if (bias != nullptr) {
          for (n = b; n < e; ++n) y[n] += bias[n];
        }
      },
      grain);
}

void gemv_in_out(const float* x, ConstMat w, const float* bias, float* y) {
  // Columns are processed in tiles that stay in L1 while every weight row streams past.
  constexpr std::int64_t kTile = 1024;
  const std::int64_t col_bytes = std::max<std::int64_t>(w.rows * 4, 1);
  const std::int64_t grain = std::max<std::int64_t>(64, kMinChunkBytes / col_bytes);
  parallel_for(
      0, w.cols,
      [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t c0 = b; c0 < e; c0 += kTile) {
          const std::int64_t c1 = std::min(e, c0 + kTile);
          float* __restrict out = y + c0;
          const std::int64_t width = c1 - c0;
          for (std::int64_t c = 0; c < width; ++c) out[c] = bias != nullptr ? bias[c0 + c] : 0.0f;
          std::int64_t k = 0;
          for (; k + 4 <= w.rows; k += 4) {
            const float x0 = x[k], x1 = x[k + 1], x2 = x[k + 2], x3 = x[k + 3];
            const float* __restrict w0 = w.row(k) + c0;
            const float* __restrict w1 = w.row(k + 1) + c0;
            const float* __restrict w2 = w.row(k + 2) + c0;
            const float* __restrict w3 = w.row(k + 3) + c0;
            for (std::int64_t c = 0; c < width; ++c) {
              out[c] += x0 * w0[c] + x1 * w1[c] + x2 * w2[c] + x3 * w3[c];
            }
          }
          for (; k < w.rows; ++k) {
            const float xk = x[k];
            const float* __restrict wk = w.row(k) + c0;
            for (std::int64_t c = 0; c < width; ++c) out[c] += xk * wk[c];
          }
        }
      },
      grain);
}

}  // namespace huddle::kernels::detail
