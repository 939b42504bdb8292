// kernels::SerialScope (operator assignment's cpu1 provider): inside one, the kernels' loops run
// inline on the calling thread, whole; outside, the pool splits them again; scopes nest.
#include "kernels/kernels.h"
#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

namespace huddle::kernels {
namespace {

struct Calls {
  int count = 0;
  std::set<std::thread::id> threads;
};

Calls loop() {
  Calls c;
  std::mutex m;
  parallel_for(0, 4096, [&](std::int64_t, std::int64_t) {
    std::lock_guard lock(m);
    ++c.count;
    c.threads.insert(std::this_thread::get_id());
  });
  return c;
}

TEST(SerialScope, RunsLoopsInlineAndRestoresThePool) {
  const int before = num_threads();
  set_num_threads(4);
  EXPECT_GT(loop().count, 1);  // the pool splits the loop into chunks
  {
    SerialScope serial;
    const Calls inside = loop();
    EXPECT_EQ(inside.count, 1);
    ASSERT_EQ(inside.threads.size(), 1u);
    EXPECT_EQ(*inside.threads.begin(), std::this_thread::get_id());
    {
      SerialScope nested;
      EXPECT_EQ(loop().count, 1);
    }
    EXPECT_EQ(loop().count, 1);  // still inside the outer scope
  }
  EXPECT_GT(loop().count, 1);
  set_num_threads(before);
}

}  // namespace
}  // namespace huddle::kernels
