#include "profile/memory_probe.h"

#include <gtest/gtest.h>

namespace huddle::profile {
namespace {

TEST(MemoryProbe, ParsesMemAvailable) {
  EXPECT_EQ(mem_available_of("MemTotal:  100 kB\nMemFree: 10 kB\nMemAvailable:    2048 kB\n"),
            2048 * 1024);
  EXPECT_FALSE(mem_available_of("MemTotal: 100 kB\n").has_value());
}

TEST(MemoryProbe, FindsTheCgroupOfAController) {
  const std::string v1 = "12:cpu,cpuacct:/a\n11:memory:/hd-x_S\n0::/unified\n";
  EXPECT_EQ(cgroup_path_of(v1, "memory"), "/hd-x_S");
  EXPECT_EQ(cgroup_path_of(v1, "cpuacct"), "/a");
  EXPECT_EQ(cgroup_path_of(v1, ""), "/unified");
  EXPECT_FALSE(cgroup_path_of("0::/only-v2\n", "memory").has_value());
  EXPECT_FALSE(cgroup_path_of("garbage", "").has_value());
}

TEST(MemoryProbe, ThisMachineHasSomeMemoryFree) {
  EXPECT_GT(available_memory_bytes(), std::int64_t{16} << 20);
}

}  // namespace
}  // namespace huddle::profile
