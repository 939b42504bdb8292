// A fair mutex: lock() is granted in the order it was called (a ticket lock), so requests that
// queue for the model are served first come, first served. std::mutex makes no such promise.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace huddle::serve {

class FifoMutex {
 public:
  void lock() {
    std::unique_lock guard(mutex_);
    const std::uint64_t ticket = next_ticket_++;
    turn_changed_.wait(guard, [&] { return serving_ == ticket; });
  }
  void unlock() {
    {
      std::lock_guard guard(mutex_);
      ++serving_;
    }
    turn_changed_.notify_all();
  }
  // Requests waiting or running (for /health).
  std::uint64_t queued() const {
    std::lock_guard guard(mutex_);
    return next_ticket_ - serving_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable turn_changed_;
  std::uint64_t next_ticket_ = 0;
  std::uint64_t serving_ = 0;
};

}  // namespace huddle::serve
