// A small persistent thread pool for the kernels' own parallel loops.
//
// Hand-written rather than OpenMP so that ThreadSanitizer sees every synchronisation (libgomp is
// not instrumented) and so that its threads coexist with OpenBLAS's pthread pool. The pool runs
// one loop at a time: a call made while the pool is busy with another caller's loop, or from
// inside a loop body, runs inline on the calling thread, so concurrent callers never deadlock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace huddle::kernels {

// fn(b, e) processes the index range [b, e).
using RangeFn = std::function<void(std::int64_t, std::int64_t)>;

class ThreadPool {
 public:
  // threads >= 1 (the calling thread counts as one: threads - 1 workers are started).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  static constexpr int kChunksPerThread = 4;

  int size() const { return size_.load(std::memory_order_relaxed); }
  // Waits for a running loop to finish, then restarts the workers.
  void resize(int threads);

  // Splits [begin, end) into contiguous chunks of at least `grain` indices (at most
  // kChunksPerThread · size() of them) and calls fn once per chunk. The caller and the workers
  // claim chunks from a shared counter, so a worker that the OS schedules late simply gets fewer
  // (the caller never idles waiting for it to start). Returns when all chunks are done. If fn
  // throws, the first exception is rethrown here after every claimed chunk has finished.
  void parallel_for(std::int64_t begin, std::int64_t end, const RangeFn& fn,
                    std::int64_t grain = 1);

 private:
  void start_workers(int threads);
  void stop_workers();
  void worker_loop(std::uint64_t seen);
  void claim_chunks() noexcept;  // runs chunks until none are left

  std::atomic<int> size_{1};
  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // held by the caller whose loop owns the pool

  std::mutex mutex_;  // guards the job fields below and active_
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::atomic<std::uint64_t> generation_{0};  // bumped once per loop
  bool stop_ = false;
  int active_ = 0;  // workers inside claim_chunks(); a new loop starts only at 0
  const RangeFn* fn_ = nullptr;
  std::int64_t begin_ = 0;
  std::int64_t end_ = 0;
  std::int64_t chunk_ = 0;
  std::int64_t chunks_ = 0;
  std::atomic<std::int64_t> next_{0};  // next chunk to claim
  std::atomic<std::int64_t> done_{0};  // chunks finished
  std::exception_ptr error_;
};

// While alive, kernels called on this thread run on it alone: parallel_for runs its loop inline
// and BLAS calls use one thread (BlasSerialScope). Results are those of any thread count (see
// kernels.h). Operator assignment's cpu1 provider runs its ops inside one.
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  bool was_inside_;
};

// The threads a kernel called on this thread may use: 1 inside a pool task or a SerialScope, else
// the pool's size (kernels that bring their own threads, as oneDNN's OpenMP teams, ask this).
int threads_here();

// The process-wide pool used by the fast kernels, sized by set_num_threads() (kernels.h).
void parallel_for(std::int64_t begin, std::int64_t end, const RangeFn& fn, std::int64_t grain = 1);

}  // namespace huddle::kernels
