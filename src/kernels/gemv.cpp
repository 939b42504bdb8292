#include "kernels/gemv.h"

#include "kernels/thread_pool.h"

#include <algorithm>
#include <vector>

namespace huddle::kernels::detail {
namespace {

// Below this many weight bytes per chunk (~30 µs of streaming), waking a thread costs about as
// much as it saves.
constexpr std::int64_t kMinChunkBytes = 1 << 20;

// Σ_k w[k]·x[k] with 16 partial sums. One row at a time measured faster than 2, 4 or 8 rows
// sharing each load of x (768x50257, one thread, shared machine: median 21-22 GB/s against 15 for
// four rows, 4 for two, and 16-19 for cblas_sgemv).
float row_dot(const float* __restrict x, const float* __restrict w, std::int64_t k) {
  constexpr int kW = 16;
  float acc[kW] = {};
  std::int64_t i = 0;
  for (; i + kW <= k; i += kW) {
    for (int j = 0; j < kW; ++j) acc[j] += w[i + j] * x[i + j];
  }
  float tail = 0.0f;
  for (; i < k; ++i) tail += w[i] * x[i];
  for (int width = kW / 2; width > 0; width /= 2) {
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  }
  return acc[0] + tail;
}

}  // namespace

void gemv_out_in(const float* x, ConstMat w, const float* bias, float* y) {
  const std::int64_t row_bytes = std::max<std::int64_t>(w.cols * 4, 1);
  const std::int64_t grain = std::max<std::int64_t>(4, kMinChunkBytes / row_bytes);
  parallel_for(
      0, w.rows,
      [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t n = b; n < e; ++n) y[n] = row_dot(x, w.row(n), w.cols);
        if (bias != nullptr) {
          for (std::int64_t n = b; n < e; ++n) y[n] += bias[n];
        }
      },
      grain);
}

void gemv_in_out(const float* x, ConstMat w, const float* bias, float* y) {
  // Split over K in fixed blocks of whole rows: each block streams contiguous rows and writes a
  // partial sum of y, and the partials are added in block order. Splitting over columns instead
  // makes every thread read a short piece of each row (measured 2 threads, 768x2304: 22.5 vs
  // 27 GB/s). Block boundaries depend only on K, so results do not depend on the thread count.
  constexpr std::int64_t kBlockRows = 128;
  constexpr std::int64_t kTile = 2048;  // columns of a partial kept in L1 while rows stream
  const std::int64_t k_count = w.rows;
  const std::int64_t n = w.cols;
  const std::int64_t blocks = std::max<std::int64_t>(1, (k_count + kBlockRows - 1) / kBlockRows);
  thread_local std::vector<float> partials;
  if (blocks > 1) partials.resize(static_cast<std::size_t>(blocks * n));
  float* const part = blocks > 1 ? partials.data() : y;
  const std::int64_t block_bytes = kBlockRows * n * 4;
  parallel_for(
      0, blocks,
      [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t blk = b0; blk < b1; ++blk) {
          const std::int64_t k0 = blk * kBlockRows;
          const std::int64_t k1 = std::min(k_count, k0 + kBlockRows);
          for (std::int64_t c0 = 0; c0 < n; c0 += kTile) {
            const std::int64_t width = std::min(kTile, n - c0);
            float* __restrict out = part + blk * n + c0;
            std::fill(out, out + width, 0.0f);
            std::int64_t k = k0;
            for (; k + 4 <= k1; k += 4) {
              const float x0 = x[k], x1 = x[k + 1], x2 = x[k + 2], x3 = x[k + 3];
              const float* __restrict w0 = w.row(k) + c0;
              const float* __restrict w1 = w.row(k + 1) + c0;
              const float* __restrict w2 = w.row(k + 2) + c0;
              const float* __restrict w3 = w.row(k + 3) + c0;
              for (std::int64_t c = 0; c < width; ++c) {
                out[c] += x0 * w0[c] + x1 * w1[c] + x2 * w2[c] + x3 * w3[c];
              }
            }
            for (; k < k1; ++k) {
              const float xk = x[k];
              const float* __restrict wk = w.row(k) + c0;
              for (std::int64_t c = 0; c < width; ++c) out[c] += xk * wk[c];
            }
          }
        }
      },
      std::max<std::int64_t>(1, kMinChunkBytes / std::max<std::int64_t>(block_bytes, 1)));
  if (blocks > 1) std::copy(part, part + n, y);
  for (std::int64_t blk = 1; blk < blocks; ++blk) {
    const float* __restrict p = part + blk * n;
    for (std::int64_t c = 0; c < n; ++c) y[c] += p[c];
  }
  if (bias != nullptr) {
    for (std::int64_t c = 0; c < n; ++c) y[c] += bias[c];
  }
}

}  // namespace huddle::kernels::detail
