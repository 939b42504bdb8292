// Scaled dot-product attention, two strategies:
//  - few queries (decode): a direct loop per (head, query) — dot products, softmax, weighted sum;
//  - many queries (prompt): per head and block of queries, scores = q·kᵀ and out = p·v by sgemm
//    on strided views of q, k, v and out over the keys the block reads (a sliding window skips
//    the keys before it); the softmax and the causal / window mask run between the two.
// Work items are spread over the thread pool.
#include "kernels/blas.h"
#include "kernels/kernels.h"
#include "kernels/mat_view.h"
#include "kernels/shapes.h"
#include "kernels/thread_pool.h"
#include "kernels/vec_math.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace huddle::kernels {
namespace {

// Up to this many queries take the direct loop.
constexpr std::int64_t kDirectMaxQueries = 4;
// Queries per sgemm block: bounds the score buffer to kBlockQueries × S floats per thread and
// limits the masked-out work computed on the causal diagonal.
constexpr std::int64_t kBlockQueries = 64;

struct Problem {
  detail::ConstMat q, k, v;
  detail::Mat out;
  int group;  // query heads per kv head
  int head_dim;
  std::int64_t keys;  // S
  std::int64_t q_pos0;
  bool causal;
  std::int64_t window;  // > 0: sliding window (causal)
  float scale;

  // Query t attends keys [first_key(t), keys_for(t)).
  std::int64_t keys_for(std::int64_t t) const { return causal ? q_pos0 + t + 1 : keys; }
  std::int64_t first_key(std::int64_t t) const {
    return window > 0 ? std::max<std::int64_t>(0, keys_for(t) - window) : 0;
  }
};

// Softmax of p[0, n) in place, so that the row sums to 1.
void softmax_span(float* p, std::int64_t n) {
  const float mx = detail::max_of(p, n);
  for (std::int64_t i = 0; i < n; ++i) p[i] = detail::exp_approx(p[i] - mx);
  const float inv = 1.0f / detail::sum(p, n);
  for (std::int64_t i = 0; i < n; ++i) p[i] *= inv;
}

void direct(const Problem& pb, int h, std::int64_t t, std::vector<float>& scores) {
  const std::int64_t first = pb.first_key(t);
  const std::int64_t n = pb.keys_for(t) - first;
  const int d = pb.head_dim;
  const std::int64_t qo = static_cast<std::int64_t>(h) * d;
  const std::int64_t ko = static_cast<std::int64_t>(h / pb.group) * d;
  scores.resize(static_cast<std::size_t>(n));
  float* p = scores.data();
  const float* qv = pb.q.row(t) + qo;
  for (std::int64_t s = 0; s < n; ++s) {
    p[s] = detail::dot(qv, pb.k.row(first + s) + ko, d) * pb.scale;
  }
  softmax_span(p, n);
  float* __restrict out = pb.out.row(t) + qo;
  std::fill(out, out + d, 0.0f);
  for (std::int64_t s = 0; s < n; ++s) {
    const float ps = p[s];
    const float* __restrict vs = pb.v.row(first + s) + ko;
    for (int i = 0; i < d; ++i) out[i] += ps * vs[i];
  }
}

void blocked(const Problem& pb, int h, std::int64_t t0, std::int64_t t1,
             std::vector<float>& scores) {
  const int d = pb.head_dim;
  const std::int64_t qo = static_cast<std::int64_t>(h) * d;
  const std::int64_t ko = static_cast<std::int64_t>(h / pb.group) * d;
  const std::int64_t rows = t1 - t0;
  // Scores for the keys any row of the block reads: [first, first + n).
  const std::int64_t first = pb.first_key(t0);
  const std::int64_t n = pb.keys_for(t1 - 1) - first;
  scores.resize(static_cast<std::size_t>(rows * n));
  float* p = scores.data();
  raw_sgemm(Trans::No, Trans::Yes, rows, n, d, pb.scale, pb.q.row(t0) + qo, pb.q.stride,
            pb.k.row(first) + ko, pb.k.stride, 0.0f, p, n);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = p + r * n;
    const std::int64_t lo = pb.first_key(t0 + r) - first;
    const std::int64_t hi = pb.keys_for(t0 + r) - first;
    std::fill(row, row + lo, 0.0f);
    softmax_span(row + lo, hi - lo);
    std::fill(row + hi, row + n, 0.0f);
  }
  raw_sgemm(Trans::No, Trans::No, rows, d, n, 1.0f, p, n, pb.v.row(first) + ko, pb.v.stride, 0.0f,
            pb.out.row(t0) + qo, pb.out.stride);
}

}  // namespace

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int kv_heads,
               int head_dim, std::int64_t q_pos0, bool causal, Tensor& out, std::int64_t window) {
  const std::int64_t s =
      detail::check_attention(q, k, v, heads, kv_heads, head_dim, q_pos0, causal, out, window);
  const std::int64_t t = q.dim(0);
  if (t == 0) return;
  const Problem pb{detail::as_mat(q),
                   detail::as_mat(k),
                   detail::as_mat(v),
                   detail::as_mat(out),
                   heads / kv_heads,
                   head_dim,
                   s,
                   q_pos0,
                   causal,
                   window,
                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)))};

  if (t <= kDirectMaxQueries) {
    parallel_for(0, heads * t, [&](std::int64_t i0, std::int64_t i1) {
      std::vector<float> scores;
      for (std::int64_t i = i0; i < i1; ++i) {
        direct(pb, static_cast<int>(i / t), i % t, scores);
      }
    });
    return;
  }
  const std::int64_t blocks = (t + kBlockQueries - 1) / kBlockQueries;
  // The blocks run in parallel on the pool, so each sgemm must stay on its own thread.
  std::optional<BlasSerialScope> serial;
  if (num_threads() > 1) serial.emplace();
  parallel_for(0, heads * blocks, [&](std::int64_t i0, std::int64_t i1) {
    std::vector<float> scores;
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::int64_t b = i % blocks;
      blocked(pb, static_cast<int>(i / blocks), b * kBlockQueries,
              std::min(t, (b + 1) * kBlockQueries), scores);
    }
  });
}

}  // namespace huddle::kernels
