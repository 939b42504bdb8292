// FifoMutex grants the lock in the order it was asked for.
#include "serve/fifo_mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace huddle::serve {
namespace {

TEST(FifoMutex, GrantsTurnsInArrivalOrder) {
  FifoMutex mutex;
  std::vector<int> order;
  std::vector<std::thread> threads;
  mutex.lock();  // everyone queues behind this
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      std::lock_guard turn(mutex);
      order.push_back(i);
    });
    // Thread i holds ticket i + 1 before thread i + 1 starts.
    while (mutex.queued() != static_cast<std::uint64_t>(i) + 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  mutex.unlock();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(mutex.queued(), 0u);
}

}  // namespace
}  // namespace huddle::serve
