#include "kernels/thread_pool.h"

#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"

#include <algorithm>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace huddle::kernels {
namespace {

// A worker spins this many times before sleeping; successive kernels of one layer follow each
// other within microseconds, and a condition-variable wake-up costs tens of them.
constexpr int kSpinIterations = 2000;

thread_local bool t_inside_pool = false;

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  start_workers(threads);
}

ThreadPool::~ThreadPool() {
  stop_workers();
}

void ThreadPool::resize(int threads) {
  HUDDLE_CHECK(threads >= 1, "thread count {}", threads);
  std::lock_guard submit(submit_mutex_);
  if (threads == size()) return;
  stop_workers();
  start_workers(threads);
}

void ThreadPool::start_workers(int threads) {
  HUDDLE_CHECK(threads >= 1, "thread count {}", threads);
  {
    std::lock_guard lock(mutex_);
    stop_ = false;
  }
  size_.store(threads, std::memory_order_relaxed);
  workers_.reserve(static_cast<std::size_t>(threads - 1));
  // No loop is running (constructor, or resize() holding submit_mutex_): workers start from the
  // current generation so that they do not mistake the last finished loop for a new one.
  const std::uint64_t generation = generation_.load(std::memory_order_relaxed);
  for (int i = 1; i < threads; ++i) {
    workers_.emplace_back([this, i, generation] { worker_loop(i, generation); });
  }
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& w : workers_) w.join();
  workers_.clear();
  size_.store(1, std::memory_order_relaxed);
}

void ThreadPool::run_chunk(int index) noexcept {
  const std::int64_t b = begin_ + index * chunk_;
  const std::int64_t e = std::min(end_, b + chunk_);
  t_inside_pool = true;
  try {
    (*fn_)(b, e);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
  t_inside_pool = false;
}

void ThreadPool::worker_loop(int index, std::uint64_t seen) {
  for (;;) {
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen;
         ++i) {
      cpu_relax();
    }
    int chunks = 0;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock,
                    [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      chunks = chunks_;
    }
    if (index >= chunks) continue;
    run_chunk(index);
    std::lock_guard lock(mutex_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_cv_.notify_one();
  }
}

void ThreadPool::parallel_for(std::int64_t begin, std::int64_t end, const RangeFn& fn,
                              std::int64_t grain) {
  if (end <= begin) return;
  const std::int64_t n = end - begin;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t max_chunks = std::min<std::int64_t>(size(), (n + grain - 1) / grain);
  if (max_chunks <= 1 || t_inside_pool) {
    fn(begin, end);
    return;
  }
  std::unique_lock submit(submit_mutex_, std::try_to_lock);
  if (!submit.owns_lock()) {  // another thread's loop has the pool
    fn(begin, end);
    return;
  }
  const std::int64_t chunk = (n + max_chunks - 1) / max_chunks;
  const int chunks = static_cast<int>((n + chunk - 1) / chunk);
  {
    std::lock_guard lock(mutex_);
    fn_ = &fn;
    begin_ = begin;
    end_ = end;
    chunk_ = chunk;
    chunks_ = chunks;
    error_ = nullptr;
    pending_.store(chunks - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  run_chunk(0);
  for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i) {
    cpu_relax();
  }
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_relaxed) == 0; });
    fn_ = nullptr;
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

namespace {

int default_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

ThreadPool& global_pool() {
  static ThreadPool pool(default_threads());
  return pool;
}

}  // namespace

void parallel_for(std::int64_t begin, std::int64_t end, const RangeFn& fn, std::int64_t grain) {
  global_pool().parallel_for(begin, end, fn, grain);
}

void set_num_threads(int n) {
  HUDDLE_CHECK(n >= 1, "set_num_threads({})", n);
  global_pool().resize(n);
  blas_set_num_threads(n);
}

int num_threads() {
  return global_pool().size();
}

}  // namespace huddle::kernels
