// HelperThread (collectives/helper_thread.h): one thread per owner for every task, not one per
// task; each calling thread its own helpers.
#include "collectives/helper_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace huddle::collectives {
namespace {

TEST(HelperThread, RunsEveryTaskOnOneThreadOfItsOwn) {
  std::set<std::thread::id> ran_on;
  int runs = 0;
  for (int i = 0; i < 5; ++i) {
    sender_helper().start([&] {
      ran_on.insert(std::this_thread::get_id());
      ++runs;
    });
    sender_helper().wait();  // the task's writes are visible after wait()
  }
  EXPECT_EQ(runs, 5);
  ASSERT_EQ(ran_on.size(), 1u);
  EXPECT_NE(*ran_on.begin(), std::this_thread::get_id());
}

// Two callers at once (ranks of an in-process cluster) each get their own helpers: a task that
// waits for the other caller's task would deadlock on shared ones.
TEST(HelperThread, EachCallingThreadHasItsOwnHelpers) {
  std::atomic<int> arrived{0};
  std::vector<std::thread::id> helpers(2);
  std::vector<std::thread> callers;
  for (int c = 0; c < 2; ++c) {
    callers.emplace_back([&, c] {
      receiver_helper().start([&, c] {
        helpers[static_cast<std::size_t>(c)] = std::this_thread::get_id();
        ++arrived;
        while (arrived.load() < 2) std::this_thread::yield();  // both tasks run at once
      });
      receiver_helper().wait();
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(arrived.load(), 2);
  EXPECT_NE(helpers[0], helpers[1]);
}

}  // namespace
}  // namespace huddle::collectives
