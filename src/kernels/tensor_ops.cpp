// N-D tensor kernels: broadcasting arithmetic, activations, concat, slice, transpose, softmax,
// batched matmul.
#include "kernels/tensor_ops.h"

#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/thread_pool.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace huddle::kernels {
namespace {

constexpr std::int64_t kGrain = 16384;

using Index = std::array<std::int64_t, kMaxRank>;

// Element strides of `s` seen through broadcast to rank `rank` (0 where the dim is broadcast).
Index broadcast_strides(const Shape& s, const Shape& out) {
  Index st{};
  const std::size_t rank = out.size();
  std::int64_t stride = 1;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const std::size_t d = s.size() - 1 - k;
    const std::size_t od = rank - 1 - k;
    st[od] = s[d] == 1 ? 0 : stride;
    stride *= s[d];
  }
  return st;
}

template <typename F>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& y, const F& f) {
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* py = y.f32();
  const std::int64_t n = y.numel();
  if (a.shape() == y.shape() && b.shape() == y.shape()) {
    parallel_for(
        0, n,
        [&](std::int64_t s, std::int64_t e) {
          for (std::int64_t i = s; i < e; ++i) py[i] = f(pa[i], pb[i]);
        },
        kGrain);
    return;
  }
  if (b.numel() == 1) {
    const float bv = pb[0];
    parallel_for(
        0, n,
        [&](std::int64_t s, std::int64_t e) {
          for (std::int64_t i = s; i < e; ++i) py[i] = f(pa[i], bv);
        },
        kGrain);
    return;
  }
  // General case: iterate over rows of the innermost dimension.
  const Shape& out = y.shape();
  const int rank = static_cast<int>(out.size());
  const Index sa = broadcast_strides(a.shape(), out);
  const Index sb = broadcast_strides(b.shape(), out);
  const std::int64_t inner = out[static_cast<std::size_t>(rank - 1)];
  const std::int64_t rows = n / std::max<std::int64_t>(inner, 1);
  const std::int64_t ia = sa[static_cast<std::size_t>(rank - 1)];
  const std::int64_t ib = sb[static_cast<std::size_t>(rank - 1)];
  parallel_for(
      0, rows,
      [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) {
          std::int64_t rem = r, oa = 0, ob = 0;
          for (int d = rank - 2; d >= 0; --d) {
            const std::int64_t idx = rem % out[static_cast<std::size_t>(d)];
            rem /= out[static_cast<std::size_t>(d)];
            oa += idx * sa[static_cast<std::size_t>(d)];
            ob += idx * sb[static_cast<std::size_t>(d)];
          }
          float* dst = py + r * inner;
          for (std::int64_t i = 0; i < inner; ++i) dst[i] = f(pa[oa + i * ia], pb[ob + i * ib]);
        }
      },
      std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(inner, 1)));
}

// A permutation that, with size-1 dimensions dropped and runs of dimensions kept together and in
// order merged, swaps the last two of [batch, rows, cols] (NCHW <-> NHWC, [.., 85, H·W] ->
// [.., H·W, 85]); batch is 1 for a plain 2-D transpose.
struct Batched2d {
  std::int64_t batch = 1, rows = 1, cols = 1;
};

std::optional<Batched2d> as_batched_2d(const Shape& x, const std::vector<std::int64_t>& perm) {
  // Input dims of size > 1, numbered in input order.
  std::vector<std::int64_t> compact(x.size(), -1), sizes;
  for (std::size_t d = 0; d < x.size(); ++d) {
    if (x[d] == 1) continue;
    compact[d] = static_cast<std::int64_t>(sizes.size());
    sizes.push_back(x[d]);
  }
  // Output order of those dims, merged into runs of consecutive input dims.
  struct Run {
    std::int64_t first = 0, last = 0, extent = 1;
  };
  std::vector<Run> runs;
  for (std::int64_t p : perm) {
    const std::int64_t c = compact[static_cast<std::size_t>(p)];
    if (c < 0) continue;
    const std::int64_t size = sizes[static_cast<std::size_t>(c)];
    if (!runs.empty() && c == runs.back().last + 1) {
      runs.back().last = c;
      runs.back().extent *= size;
    } else {
      runs.push_back({c, c, size});
    }
  }
  if (runs.size() == 2 && runs[0].first > runs[1].first)
    return Batched2d{1, runs[1].extent, runs[0].extent};
  if (runs.size() == 3 && runs[0].first < runs[2].first && runs[2].first < runs[1].first)
    return Batched2d{runs[0].extent, runs[2].extent, runs[1].extent};
  return std::nullopt;
}

// Rows [r0, r1) x columns [c0, c1) of x (rows x cols) into y (cols x rows): by 4x4 blocks
// transposed in SSE registers (every x86-64 CPU has SSE) where a block is whole, element by
// element at the edges. Data movement only: the bits are x's.
void transpose_tile(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t r0,
                    std::int64_t r1, std::int64_t c0, std::int64_t c1, float* y) {
  std::int64_t r = r0;
#if defined(__SSE2__)
  for (; r + 4 <= r1; r += 4) {
    const float* xr = x + r * cols;
    std::int64_t c = c0;
    for (; c + 4 <= c1; c += 4) {
      __m128 a = _mm_loadu_ps(xr + c), b = _mm_loadu_ps(xr + cols + c);
      __m128 e = _mm_loadu_ps(xr + 2 * cols + c), f = _mm_loadu_ps(xr + 3 * cols + c);
      _MM_TRANSPOSE4_PS(a, b, e, f);
      _mm_storeu_ps(y + c * rows + r, a);
      _mm_storeu_ps(y + (c + 1) * rows + r, b);
      _mm_storeu_ps(y + (c + 2) * rows + r, e);
      _mm_storeu_ps(y + (c + 3) * rows + r, f);
    }
    for (; c < c1; ++c) {
      for (std::int64_t i = 0; i < 4; ++i) y[c * rows + r + i] = xr[i * cols + c];
    }
  }
#endif
  for (; r < r1; ++r) {
    for (std::int64_t c = c0; c < c1; ++c) y[c * rows + r] = x[r * cols + c];
  }
}

// y[b][c][r] = x[b][r][c] for [batch, rows, cols] x, in 32 x 32 tiles (both sides' cache lines
// stay in L1 while a tile is moved).
void transpose_2d_batched(const float* x, std::int64_t batch, std::int64_t rows, std::int64_t cols,
                          float* y) {
  constexpr std::int64_t kTile = 32;
  const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
  parallel_for(0, batch * row_tiles, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t b = t / row_tiles, r0 = (t % row_tiles) * kTile;
      const std::int64_t r1 = std::min(rows, r0 + kTile);
      for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
        transpose_tile(x + b * rows * cols, rows, cols, r0, r1, c0, std::min(cols, c0 + kTile),
                       y + b * rows * cols);
      }
    }
  });
}

}  // namespace

bool broadcast_shapes(const Shape& a, const Shape& b, Shape& out) {
  const std::size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (std::size_t k = 0; k < rank; ++k) {
    const std::int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    const std::int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) return false;
    out[rank - 1 - k] = da == 1 ? db : da;
  }
  return true;
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  Shape s;
  HUDDLE_CHECK(broadcast_shapes(a.shape(), b.shape(), s) && s == y.shape() &&
               y.rank() <= kMaxRank && a.contiguous() && b.contiguous());
  switch (op) {
    case BinaryOp::Add:
      return binary_loop(a, b, y, [](float u, float v) { return u + v; });
    case BinaryOp::Sub:
      return binary_loop(a, b, y, [](float u, float v) { return u - v; });
    case BinaryOp::Mul:
      return binary_loop(a, b, y, [](float u, float v) { return u * v; });
    case BinaryOp::Div:
      return binary_loop(a, b, y, [](float u, float v) { return u / v; });
  }
}

void unary(const ActivationSpec& act, const Tensor& x, Tensor& y) {
  HUDDLE_CHECK(x.numel() == y.numel() && x.contiguous() && y.contiguous());
  const float* px = x.f32();
  float* py = y.f32();
  parallel_for(
      0, x.numel(),
      [&](std::int64_t s, std::int64_t e) {
        if (py != px) std::memcpy(py + s, px + s, static_cast<std::size_t>(e - s) * sizeof(float));
        apply_activation(act, py + s, e - s);
      },
      kGrain);
}

void concat(const std::vector<const Tensor*>& inputs, int axis, Tensor& y) {
  const Shape& out = y.shape();
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out[static_cast<std::size_t>(d)];
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < out.size(); ++d) inner *= out[d];
  const std::int64_t out_row = out[static_cast<std::size_t>(axis)] * inner;
  std::int64_t offset = 0;
  for (const Tensor* t : inputs) {
    HUDDLE_CHECK(t->rank() == y.rank() && (t->contiguous() || (t->rank() == 2 && axis == 1)));
    const std::int64_t row = t->dim(axis) * inner;
    // A 2-D input joined along columns may be a column view (its row stride wider than a row).
    const std::int64_t src_row = t->rank() == 2 && axis == 1 ? t->row_stride() : row;
    const float* src = t->f32();
    float* dst = y.f32() + offset;
    for (std::int64_t o = 0; o < outer; ++o) {
      std::memcpy(dst + o * out_row, src + o * src_row,
                  static_cast<std::size_t>(row) * sizeof(float));
    }
    offset += row;
  }
  HUDDLE_CHECK(offset == out_row);
}

void slice(const Tensor& x, const std::vector<std::int64_t>& starts,
           const std::vector<std::int64_t>& steps, Tensor& y) {
  const int rank = x.rank();
  HUDDLE_CHECK(y.rank() == rank && static_cast<int>(starts.size()) == rank &&
               static_cast<int>(steps.size()) == rank && rank <= kMaxRank && rank >= 1);
  Index xs{};
  std::int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    xs[static_cast<std::size_t>(d)] = stride;
    stride *= x.dim(d);
  }
  const std::int64_t inner = y.dim(rank - 1);
  const std::int64_t rows = inner > 0 ? y.numel() / inner : 0;
  const auto last = static_cast<std::size_t>(rank - 1);
  parallel_for(
      0, rows,
      [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r) {
          std::int64_t rem = r, off = starts[last] * xs[last];
          for (int d = rank - 2; d >= 0; --d) {
            const auto du = static_cast<std::size_t>(d);
            const std::int64_t idx = rem % y.dim(d);
            rem /= y.dim(d);
            off += (starts[du] + idx * steps[du]) * xs[du];
          }
          const float* src = x.f32() + off;
          float* dst = y.f32() + r * inner;
          const std::int64_t st = steps[last];
          for (std::int64_t i = 0; i < inner; ++i) dst[i] = src[i * st];
        }
      },
      std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(inner, 1)));
}

void transpose(const Tensor& x, const std::vector<std::int64_t>& perm, Tensor& y) {
  const int rank = x.rank();
  HUDDLE_CHECK(y.rank() == rank && static_cast<int>(perm.size()) == rank && rank <= kMaxRank);
  if (const auto t = as_batched_2d(x.shape(), perm)) {
    transpose_2d_batched(x.f32(), t->batch, t->rows, t->cols, y.f32());
    return;
  }
  Index xs{};
  std::int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    xs[static_cast<std::size_t>(d)] = stride;
    stride *= x.dim(d);
  }
  // y[i] = x[permuted i]: the input read with permuted strides.
  const std::int64_t n = y.numel();
  parallel_for(
      0, n,
      [&](std::int64_t s, std::int64_t e) {
        for (std::int64_t i = s; i < e; ++i) {
          std::int64_t rem = i, off = 0;
          for (int d = rank - 1; d >= 0; --d) {
            const std::int64_t idx = rem % y.dim(d);
            rem /= y.dim(d);
            off += idx * xs[static_cast<std::size_t>(perm[static_cast<std::size_t>(d)])];
          }
          y.f32()[i] = x.f32()[off];
        }
      },
      kGrain);
}

void softmax_axis(const Tensor& x, std::int64_t outer, std::int64_t len, std::int64_t inner,
                  Tensor& y) {
  HUDDLE_CHECK(x.numel() == outer * len * inner && y.numel() == x.numel());
  parallel_for(0, outer * inner, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t k = s; k < e; ++k) {
      const std::int64_t o = k / inner, i = k % inner;
      const float* src = x.f32() + o * len * inner + i;
      float* dst = y.f32() + o * len * inner + i;
      float m = src[0];
      for (std::int64_t j = 1; j < len; ++j) m = std::max(m, src[j * inner]);
      float sum = 0.0f;
      for (std::int64_t j = 0; j < len; ++j) {
        dst[j * inner] = std::exp(src[j * inner] - m);
        sum += dst[j * inner];
      }
      for (std::int64_t j = 0; j < len; ++j) dst[j * inner] /= sum;
    }
  });
}

void matmul(const Tensor& a, const Tensor& b, Tensor& y) {
  HUDDLE_CHECK(a.rank() >= 2 && b.rank() >= 2 && y.rank() >= 2);
  const std::int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  HUDDLE_CHECK(b.dim(-2) == k && y.dim(-2) == m && y.dim(-1) == n);
  const Shape ab(a.shape().begin(), a.shape().end() - 2);
  const Shape bb(b.shape().begin(), b.shape().end() - 2);
  const Shape yb(y.shape().begin(), y.shape().end() - 2);
  const Index sa = broadcast_strides(ab, yb), sb = broadcast_strides(bb, yb);
  const std::int64_t batches = shape_numel(yb);
  for (std::int64_t bi = 0; bi < batches; ++bi) {
    std::int64_t rem = bi, oa = 0, ob = 0;
    for (int d = static_cast<int>(yb.size()) - 1; d >= 0; --d) {
      const std::int64_t idx = rem % yb[static_cast<std::size_t>(d)];
      rem /= yb[static_cast<std::size_t>(d)];
      oa += idx * sa[static_cast<std::size_t>(d)];
      ob += idx * sb[static_cast<std::size_t>(d)];
    }
    raw_sgemm(Trans::No, Trans::No, m, n, k, 1.0f, a.f32() + oa * m * k, k, b.f32() + ob * k * n, n,
              0.0f, y.f32() + bi * m * n, n);
  }
}

}  // namespace huddle::kernels
