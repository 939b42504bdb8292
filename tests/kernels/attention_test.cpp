// attention(): fast path (direct loop for few queries, blocked sgemm otherwise) against the
// reference: GQA ratios, causal with cached positions, sequence-parallel key ranges,
// bidirectional, strided q/k/v views of a packed QKV matrix.
#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

namespace huddle::kernels {
namespace {

using testing::close;

struct AttnCase {
  int heads, kv_heads, head_dim;
  std::int64_t t, s, q_pos0;
  bool causal;
  bool packed;  // q, k, v as column views of one [rows, (H + 2 Hkv)·D] matrix
};

// window > 0: sliding-window attention (causal cases only).
void check_attention(const AttnCase& c, std::uint32_t seed, std::int64_t window = 0) {
  std::mt19937 rng(seed);
  const std::int64_t qw = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::int64_t kw = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  Tensor q, k, v;
  if (c.packed) {
    // Rows for keys and queries both come from the packed matrix; queries use its last T rows.
    const std::int64_t rows = std::max(c.s, c.t);
    const Tensor qkv = testing::random_tensor(rng, {rows, qw + 2 * kw}, -2.0f, 2.0f);
    q = qkv.cols(0, qw).rows(rows - c.t, rows);
    k = qkv.cols(qw, qw + kw).rows(0, c.s);
    v = qkv.cols(qw + kw, qw + 2 * kw).rows(0, c.s);
  } else {
    q = testing::random_tensor(rng, {c.t, qw}, -2.0f, 2.0f);
    k = testing::random_tensor(rng, {c.s, kw}, -2.0f, 2.0f);
    v = testing::random_tensor(rng, {c.s, kw}, -2.0f, 2.0f);
  }
  Tensor ref = testing::nan_like(Tensor::empty(DType::F32, {c.t, qw}));
  Tensor fast = testing::nan_like(ref);
  reference::attention(q, k, v, c.heads, c.kv_heads, c.head_dim, c.q_pos0, c.causal, ref, window);
  attention(q, k, v, c.heads, c.kv_heads, c.head_dim, c.q_pos0, c.causal, fast, window);
  EXPECT_TRUE(close(fast, ref)) << "H=" << c.heads << " Hkv=" << c.kv_heads << " D=" << c.head_dim
                                << " T=" << c.t << " S=" << c.s << " q_pos0=" << c.q_pos0
                                << " causal=" << c.causal << " packed=" << c.packed
                                << " window=" << window;
}

struct HeadConfig {
  int heads, kv_heads;
};
constexpr HeadConfig kHeadConfigs[] = {{4, 2}, {6, 1}, {3, 3}};

TEST(Attention, CausalMatchesReference) {
  std::uint32_t seed = 1;
  for (const HeadConfig& hc : kHeadConfigs) {
    for (int d : {8, 64}) {
      for (std::int64_t t : {1, 3, 13, 127, 130}) {
        for (std::int64_t q_pos0 : {0, 5}) {
          for (bool packed : {false, true}) {
            // Exactly the keys needed, and extra later keys (a sequence-parallel slice).
            check_attention({hc.heads, hc.kv_heads, d, t, q_pos0 + t, q_pos0, true, packed},
                            seed++);
            check_attention({hc.heads, hc.kv_heads, d, t, q_pos0 + t + 7, q_pos0, true, packed},
                            seed++);
          }
        }
      }
    }
  }
}

// Sliding windows narrower than, equal to and wider than the keys, in prompts (blocked sgemm
// over each block's keys), after cached positions and in decode (direct loop).
TEST(Attention, SlidingWindowMatchesReference) {
  std::uint32_t seed = 2000;
  for (const HeadConfig& hc : kHeadConfigs) {
    for (std::int64_t window : {1, 5, 64, 1000}) {
      for (std::int64_t t : {1, 3, 13, 127, 130}) {
        for (std::int64_t q_pos0 : {0, 5, 100}) {
          check_attention({hc.heads, hc.kv_heads, 16, t, q_pos0 + t, q_pos0, true, t % 2 == 0},
                          seed++, window);
          check_attention({hc.heads, hc.kv_heads, 16, t, q_pos0 + t + 7, q_pos0, true, false},
                          seed++, window);
        }
      }
    }
  }
}

// The reference's window against its plain causal form over only the window's keys: query p
// sees exactly keys (p - W, p].
TEST(Attention, SlidingWindowIsTheLastWKeys) {
  std::mt19937 rng(77);
  const std::int64_t t = 20, window = 6;
  const Tensor q = testing::random_tensor(rng, {t, 2 * 8}, -2.0f, 2.0f);
  const Tensor k = testing::random_tensor(rng, {t, 8}, -2.0f, 2.0f);
  const Tensor v = testing::random_tensor(rng, {t, 8}, -2.0f, 2.0f);
  Tensor out = Tensor::empty(DType::F32, {t, 16});
  reference::attention(q, k, v, 2, 1, 8, 0, true, out, window);
  for (std::int64_t p = 0; p < t; ++p) {
    const std::int64_t lo = std::max<std::int64_t>(0, p - window + 1);
    Tensor one = Tensor::empty(DType::F32, {1, 16});
    reference::attention(q.rows(p, p + 1), k.rows(lo, p + 1), v.rows(lo, p + 1), 2, 1, 8, 0, false,
                         one);
    EXPECT_TRUE(close(out.rows(p, p + 1), one, 1e-6)) << "query " << p;
  }
  // And the window changes the answer once it cuts (the test above is not vacuous).
  Tensor full = Tensor::empty(DType::F32, {t, 16});
  reference::attention(q, k, v, 2, 1, 8, 0, true, full);
  EXPECT_FALSE(close(out.rows(t - 1, t), full.rows(t - 1, t), 1e-3));
}

TEST(Attention, DecodeAfterLongCache) {
  std::uint32_t seed = 500;
  for (const HeadConfig& hc : kHeadConfigs) {
    for (std::int64_t t : {1, 2, 5}) {
      check_attention({hc.heads, hc.kv_heads, 64, t, 300 + t, 300, true, false}, seed++);
    }
  }
}

TEST(Attention, BidirectionalMatchesReference) {
  std::uint32_t seed = 1000;
  for (const HeadConfig& hc : kHeadConfigs) {
    for (int d : {1, 13, 64}) {
      for (std::int64_t t : {1, 3, 13, 127, 130}) {
        for (std::int64_t s : {1, 13, 130}) {
          check_attention({hc.heads, hc.kv_heads, d, t, s, 0, false, t % 2 == 1}, seed++);
        }
      }
    }
  }
}

TEST(Attention, WritesIntoStridedOutputView) {
  std::mt19937 rng(31);
  for (std::int64_t t : {2, 40}) {  // direct loop and sgemm path
    const Tensor q = testing::random_tensor(rng, {t, 4 * 16});
    const Tensor k = testing::random_tensor(rng, {t + 3, 2 * 16});
    const Tensor v = testing::random_tensor(rng, {t + 3, 2 * 16});
    Tensor wide = testing::nan_like(Tensor::empty(DType::F32, {t, 4 * 16 + 9}));
    Tensor view = wide.cols(4, 4 + 4 * 16);
    Tensor ref = Tensor::empty(DType::F32, {t, 4 * 16});
    attention(q, k, v, 4, 2, 16, 3, true, view);
    reference::attention(q, k, v, 4, 2, 16, 3, true, ref);
    EXPECT_TRUE(close(view, ref)) << "T=" << t;
    EXPECT_TRUE(std::isnan(wide.f32()[3]));
    EXPECT_TRUE(std::isnan(wide.f32()[4 + 4 * 16]));
  }
}

TEST(Attention, OneAndTwoThreadsAgree) {
  const int saved = num_threads();
  std::mt19937 rng(77);
  for (std::int64_t t : {1, 100}) {
    const Tensor q = testing::random_tensor(rng, {t, 8 * 32});
    const Tensor k = testing::random_tensor(rng, {t + 10, 2 * 32});
    const Tensor v = testing::random_tensor(rng, {t + 10, 2 * 32});
    Tensor one = Tensor::empty(DType::F32, {t, 8 * 32});
    Tensor two = Tensor::empty(DType::F32, {t, 8 * 32});
    set_num_threads(1);
    attention(q, k, v, 8, 2, 32, 10, true, one);
    set_num_threads(2);
    attention(q, k, v, 8, 2, 32, 10, true, two);
    EXPECT_TRUE(close(two, one));
  }
  set_num_threads(saved);
}

TEST(Attention, ConcurrentCallersWithBlas) {
  // Several threads (in-process "devices") run prompt-sized linear() and attention() at once,
  // each of which uses BLAS and the pool; results must match the single-caller ones.
  const int saved = num_threads();
  set_num_threads(2);
  std::mt19937 rng(99);
  const Tensor x = testing::random_tensor(rng, {70, 96});
  const Tensor w = testing::random_tensor(rng, {96, 3 * 96});
  const Tensor k = testing::random_tensor(rng, {80, 2 * 16});
  const Tensor v = testing::random_tensor(rng, {80, 2 * 16});
  Tensor qkv = Tensor::empty(DType::F32, {70, 3 * 96});
  linear(x, w, WeightLayout::InOut, nullptr, qkv);
  const Tensor q = qkv.cols(0, 96);
  Tensor expected = Tensor::empty(DType::F32, {70, 96});
  attention(q, k, v, 6, 2, 16, 10, true, expected);

  std::vector<Tensor> results(3);
  std::vector<std::thread> callers;
  for (std::size_t i = 0; i < results.size(); ++i) {
    callers.emplace_back([&, i] {
      Tensor mine = Tensor::empty(DType::F32, {70, 3 * 96});
      Tensor out = Tensor::empty(DType::F32, {70, 96});
      for (int r = 0; r < 10; ++r) {
        linear(x, w, WeightLayout::InOut, nullptr, mine);
        attention(mine.cols(0, 96), k, v, 6, 2, 16, 10, true, out);
      }
      results[i] = out;
    });
  }
  for (std::thread& t : callers) t.join();
  for (const Tensor& r : results) EXPECT_TRUE(close(r, expected));
  set_num_threads(saved);
}

}  // namespace
}  // namespace huddle::kernels
