#include "kernels/thread_pool.h"

#include "core/error.h"
#include "kernels/blas.h"
#include "kernels/kernels.h"

#include <algorithm>
#include <deque>
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
// BLAS scopes of this thread's SerialScopes (a member would make the header need blas.h).
thread_local std::deque<BlasSerialScope> t_blas_serial;

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
  // No loop is running (constructor, or resize() holding submit_mutex_): workers start from the
  // current generation so that they do not mistake the last finished loop for a new one.
  const std::uint64_t generation = generation_.load(std::memory_order_relaxed);
  workers_.reserve(static_cast<std::size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) {
    workers_.emplace_back([this, generation] { worker_loop(generation); });
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

void ThreadPool::claim_chunks() noexcept {
  const bool nested = t_inside_pool;
  t_inside_pool = true;
  for (;;) {
    const std::int64_t c = next_.fetch_add(1, std::memory_order_relaxed);
    if (c >= chunks_) break;
    const std::int64_t b = begin_ + c * chunk_;
    try {
      (*fn_)(b, std::min(end_, b + chunk_));
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks_) {
      { std::lock_guard lock(mutex_); }  // the caller is either before its check or waiting
      done_cv_.notify_all();
    }
  }
  t_inside_pool = nested;
}

void ThreadPool::worker_loop(std::uint64_t seen) {
  for (;;) {
    for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen;
         ++i) {
      cpu_relax();
    }
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock,
                    [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
      ++active_;
    }
    claim_chunks();
    {
      std::lock_guard lock(mutex_);
      --active_;
    }
    done_cv_.notify_all();
  }
}

void ThreadPool::parallel_for(std::int64_t begin, std::int64_t end, const RangeFn& fn,
                              std::int64_t grain) {
  if (end <= begin) return;
  const std::int64_t n = end - begin;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t max_chunks =
      std::min<std::int64_t>(kChunksPerThread * size(), (n + grain - 1) / grain);
  if (max_chunks <= 1 || size() <= 1 || t_inside_pool) {
    fn(begin, end);
    return;
  }
  std::unique_lock submit(submit_mutex_, std::try_to_lock);
  if (!submit.owns_lock()) {  // another thread's loop has the pool
    fn(begin, end);
    return;
  }
  const std::int64_t chunk = (n + max_chunks - 1) / max_chunks;
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  {
    std::unique_lock lock(mutex_);
    // A worker that woke too late for the previous loop may still be leaving it.
    done_cv_.wait(lock, [&] { return active_ == 0; });
    fn_ = &fn;
    begin_ = begin;
    end_ = end;
    chunk_ = chunk;
    chunks_ = chunks;
    error_ = nullptr;
    next_.store(0, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_cv_.notify_all();
  claim_chunks();
  for (int i = 0; i < kSpinIterations && done_.load(std::memory_order_acquire) != chunks; ++i) {
    cpu_relax();
  }
  std::exception_ptr error;
  {
    std::unique_lock lock(mutex_);
    done_cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == chunks; });
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

int threads_here() {
  return t_inside_pool ? 1 : global_pool().size();
}

SerialScope::SerialScope() : was_inside_(t_inside_pool) {
  t_inside_pool = true;
  t_blas_serial.emplace_back();
}

SerialScope::~SerialScope() {
  t_blas_serial.pop_back();
  t_inside_pool = was_inside_;
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
