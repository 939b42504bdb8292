#include "kernels/gemv.h"

#include "kernels/thread_pool.h"
#include "kernels/vec_math.h"

#include <algorithm>

namespace huddle::kernels::detail {
namespace {

// Below this many weight bytes per chunk, waking a thread costs more than it saves.
constexpr std::int64_t kMinChunkBytes = 64 * 1024;

// Four rows at a time so that each load of x feeds four multiply-adds.
void dot4(const float* __restrict x, const float* __restrict w0, const float* __restrict w1,
          const float* __restrict w2, const float* __restrict w3, std::int64_t k, float* out) {
  constexpr int kW = 16;
  float a0[kW] = {}, a1[kW] = {}, a2[kW] = {}, a3[kW] = {};
  std::int64_t i = 0;
  for (; i + kW <= k; i += kW) {
    for (int j = 0; j < kW; ++j) {
      const float xv = x[i + j];
      a0[j] += w0[i + j] * xv;
      a1[j] += w1[i + j] * xv;
      a2[j] += w2[i + j] * xv;
      a3[j] += w3[i + j] * xv;
    }
  }
  float t0 = 0, t1 = 0, t2 = 0, t3 = 0;
  for (; i < k; ++i) {
    t0 += w0[i] * x[i];
    t1 += w1[i] * x[i];
    t2 += w2[i] * x[i];
    t3 += w3[i] * x[i];
  }
  for (int w = kW / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) {
      a0[j] += a0[j + w];
      a1[j] += a1[j + w];
      a2[j] += a2[j + w];
      a3[j] += a3[j + w];
    }
  }
  out[0] = a0[0] + t0;
  out[1] = a1[0] + t1;
  out[2] = a2[0] + t2;
  out[3] = a3[0] + t3;
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
          dot4(x, w.row(n), w.row(n + 1), w.row(n + 2), w.row(n + 3), w.cols, y + n);
        }
        for (; n < e; ++n) y[n] = dot(x, w.row(n), w.cols);
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
