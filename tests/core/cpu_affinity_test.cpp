// Pinning emulated devices to cores of their own (core/cpu_affinity.h).
#include "core/cpu_affinity.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

namespace huddle {
namespace {

TEST(CpuAffinity, DevicesTakeConsecutiveCoresOrNoneWhenTooFew) {
  const std::vector<int> cpus = {0, 2, 3, 5, 6, 7};
  EXPECT_EQ(device_cores(cpus, 3, 2), (std::vector<std::vector<int>>{{0, 2}, {3, 5}, {6, 7}}));
  EXPECT_EQ(device_cores(cpus, 2, 1), (std::vector<std::vector<int>>{{0}, {2}}));
  EXPECT_TRUE(device_cores(cpus, 4, 2).empty());  // 8 cores wanted, 6 allowed
  EXPECT_TRUE(device_cores(cpus, 7, 1).empty());
  EXPECT_TRUE(device_cores({}, 1, 1).empty());
  EXPECT_TRUE(device_cores(cpus, 0, 1).empty());
}

// In a child process (pinning this test process would confine every later test): every thread,
// the ones started before the call included, ends up on the given core.
TEST(CpuAffinity, PinningAProcessPinsEveryThread) {
  const std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  const int last = cpus.back();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::vector<int> seen;
    std::atomic<bool> pinned{false};
    std::thread early([&] {
      // Started before the pinning; reads its own mask once the main thread has pinned.
      while (!pinned.load()) std::this_thread::yield();
      seen = allowed_cpus();
    });
    pin_this_process({last});
    pinned.store(true);
    const bool main_ok = allowed_cpus() == std::vector<int>{last};
    early.join();
    ::_exit(main_ok && seen == std::vector<int>{last} ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(allowed_cpus(), cpus);  // this process untouched
}

}  // namespace
}  // namespace huddle
