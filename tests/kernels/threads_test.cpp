// The thread pool, and the kernels that use only the pool (no BLAS), at 1 and 2 threads. This
// binary carries the "tsan" label: CI runs it under ThreadSanitizer. It must not load OpenBLAS,
// whose threads are not instrumented, so it avoids linear() at T > 1 and attention() with more
// than 4 queries.
#include "kernels/kernels.h"
#include "kernels/reference.h"
#include "kernels/thread_pool.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace huddle::kernels {
namespace {

using testing::close;

// Every index in [begin, end) is visited exactly once, by chunks that respect the grain.
void expect_covers(ThreadPool& pool, std::int64_t begin, std::int64_t end, std::int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(std::max<std::int64_t>(end, 0)));
  std::atomic<int> calls{0};
  pool.parallel_for(
      begin, end,
      [&](std::int64_t b, std::int64_t e) {
        calls.fetch_add(1);
        EXPECT_LT(b, e);
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
      },
      grain);
  for (std::int64_t i = 0; i < end; ++i) {
    EXPECT_EQ(hits[static_cast<std::size_t>(i)].load(), i >= begin ? 1 : 0)
        << "index " << i << " of [" << begin << ", " << end << ") grain " << grain;
  }
  const std::int64_t n = std::max<std::int64_t>(end - begin, 0);
  EXPECT_LE(calls.load(), std::max<std::int64_t>(
                              1, std::min<std::int64_t>(ThreadPool::kChunksPerThread * pool.size(),
                                                        (n + grain - 1) / grain)));
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (std::int64_t end : {0, 1, 2, 3, 7, 13, 100, 1001}) {
      for (std::int64_t grain : {1, 4, 1000}) {
        expect_covers(pool, 0, end, grain);
        expect_covers(pool, end / 2, end, grain);
      }
    }
  }
}

TEST(ThreadPool, UsesWorkerThreads) {
  // Each of 3 chunks waits until all 3 have started, so they must run on 3 different threads
  // (the caller cannot claim a second chunk while it blocks in its first). A broken pool fails
  // by timeout rather than hanging.
  ThreadPool pool(3);
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::thread::id> ids;
  bool all_started = true;
  pool.parallel_for(0, 3, [&](std::int64_t, std::int64_t) {
    std::unique_lock lock(m);
    ids.push_back(std::this_thread::get_id());
    cv.notify_all();
    if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return ids.size() == 3; })) {
      all_started = false;
    }
  });
  EXPECT_TRUE(all_started);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[1], ids[2]);
  EXPECT_NE(ids[0], ids[2]);
}

TEST(ThreadPool, RethrowsTheFirstExceptionAfterAllChunks) {
  ThreadPool pool(4);
  std::atomic<int> finished{0};
  EXPECT_THROW(pool.parallel_for(0, 4,
                                 [&](std::int64_t b, std::int64_t) {
                                   if (b % 2 == 1) throw std::runtime_error("chunk failed");
                                   finished.fetch_add(1);
                                 }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 2);
  expect_covers(pool, 0, 100, 1);  // still usable
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<std::int64_t> total{0};
  pool.parallel_for(0, 4, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      pool.parallel_for(0, 10, [&](std::int64_t ib, std::int64_t ie) { total.fetch_add(ie - ib); });
    }
  });
  EXPECT_EQ(total.load(), 40);
}

TEST(ThreadPool, ConcurrentCallersAllFinish) {
  ThreadPool pool(2);
  constexpr int kCallers = 4;
  constexpr int kRounds = 200;
  std::vector<std::int64_t> sums(kCallers, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int r = 0; r < kRounds; ++r) {
        std::atomic<std::int64_t> s{0};
        pool.parallel_for(0, 100, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) s.fetch_add(i);
        });
        sums[static_cast<std::size_t>(c)] += s.load();
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (std::int64_t s : sums) EXPECT_EQ(s, kRounds * (99 * 100 / 2));
}

TEST(ThreadPool, ResizeBetweenLoops) {
  ThreadPool pool(1);
  for (int n : {2, 4, 1, 3}) {
    pool.resize(n);
    EXPECT_EQ(pool.size(), n);
    expect_covers(pool, 0, 57, 1);
  }
}

// Runs `op` at 1 and at 2 threads and compares the results. Every kernel here computes each
// output element with the same arithmetic whichever thread owns it, so they agree bit for bit.
void expect_thread_independent(const std::function<Tensor()>& op, const char* name) {
  const int saved = num_threads();
  set_num_threads(1);
  const Tensor one = op();
  set_num_threads(2);
  const Tensor two = op();
  set_num_threads(saved);
  EXPECT_TRUE(close(two, one)) << name;
  EXPECT_EQ(two.to_vector(), one.to_vector()) << name;
}

TEST(KernelThreads, OneAndTwoThreadsAgree) {
  std::mt19937 rng(42);
  const Tensor x = testing::random_tensor(rng, {64, 1024}, -4.0f, 4.0f);
  const Tensor x2 = testing::random_tensor(rng, {64, 1024});
  const Tensor w = testing::random_tensor(rng, {1024});
  const Tensor b = testing::random_tensor(rng, {1024});
  auto out = [&] { return Tensor::empty(DType::F32, x.shape()); };

  expect_thread_independent(
      [&] {
        Tensor y = out();
        layer_norm(x, w, b, 1e-5f, y);
        return y;
      },
      "layer_norm");
  expect_thread_independent(
      [&] {
        Tensor y = out();
        rms_norm(x, w, 1e-5f, y);
        return y;
      },
      "rms_norm");
  expect_thread_independent(
      [&] {
        Tensor y = out();
        gelu_tanh(x, y);
        return y;
      },
      "gelu_tanh");
  expect_thread_independent(
      [&] {
        Tensor y = out();
        gelu_erf(x, y);
        return y;
      },
      "gelu_erf");
  expect_thread_independent(
      [&] {
        Tensor y = out();
        silu(x, y);
        return y;
      },
      "silu");
  expect_thread_independent(
      [&] {
        Tensor y = out();
        add(x, x2, y);
        return y;
      },
      "add");
  expect_thread_independent(
      [&] {
        Tensor y = out();
        mul(x, x2, y);
        return y;
      },
      "mul");
  expect_thread_independent(
      [&] {
        Tensor y = x.clone();
        softmax_rows(y);
        return y;
      },
      "softmax");
  const std::vector<std::int32_t> positions(64, 4097);
  expect_thread_independent(
      [&] {
        Tensor y = x.clone();
        rope(y, positions, 16, 64, {10000.0f});
        return y;
      },
      "rope");

  // GEMV at T = 1 (the pool's loops, no BLAS), both layouts.
  const Tensor w_out_in = testing::random_tensor(rng, {700, 1024});
  const Tensor w_in_out = testing::random_tensor(rng, {1024, 700});
  const Tensor row = x.rows(0, 1);
  expect_thread_independent(
      [&] {
        Tensor y = Tensor::empty(DType::F32, {1, 700});
        linear(row, w_out_in, WeightLayout::OutIn, nullptr, y);
        return y;
      },
      "gemv OutIn");
  expect_thread_independent(
      [&] {
        Tensor y = Tensor::empty(DType::F32, {1, 700});
        linear(row, w_in_out, WeightLayout::InOut, nullptr, y);
        return y;
      },
      "gemv InOut");

  // Decode attention (direct loop): 2 new queries after 200 cached positions.
  const Tensor q = testing::random_tensor(rng, {2, 8 * 64});
  const Tensor k = testing::random_tensor(rng, {202, 2 * 64});
  const Tensor v = testing::random_tensor(rng, {202, 2 * 64});
  expect_thread_independent(
      [&] {
        Tensor y = Tensor::empty(DType::F32, {2, 8 * 64});
        attention(q, k, v, 8, 2, 64, 200, true, y);
        return y;
      },
      "attention decode");
}

TEST(KernelThreads, ConcurrentKernelCallsFromSeveralThreads) {
  // Several "devices" in one process call the kernels at once (as in-process runtime tests do).
  set_num_threads(2);
  std::mt19937 rng(43);
  const Tensor x = testing::random_tensor(rng, {32, 512});
  const Tensor w = testing::random_tensor(rng, {512});
  Tensor expected = Tensor::empty(DType::F32, x.shape());
  reference::rms_norm(x, w, 1e-6f, expected);
  std::vector<std::thread> threads;
  std::vector<Tensor> results(3);
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      Tensor y = Tensor::empty(DType::F32, x.shape());
      for (int r = 0; r < 20; ++r) rms_norm(x, w, 1e-6f, y);
      results[static_cast<std::size_t>(i)] = y;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Tensor& r : results) EXPECT_TRUE(close(r, expected));
}

}  // namespace
}  // namespace huddle::kernels
