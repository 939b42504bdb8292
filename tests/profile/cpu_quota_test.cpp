#include "profile/cpu_quota.h"

#include <gtest/gtest.h>

namespace huddle::profile {
namespace {

TEST(CpuQuota, ReadsCgroupV1QuotaAndPeriod) {
  EXPECT_DOUBLE_EQ(cfs_quota_cores("60000\n", "100000\n").value(), 0.6);
  EXPECT_DOUBLE_EQ(cfs_quota_cores("1000", "10000").value(), 0.1);
  EXPECT_DOUBLE_EQ(cfs_quota_cores("200000", "100000").value(), 2.0);
  EXPECT_FALSE(cfs_quota_cores("-1\n", "100000\n").has_value());  // no quota
  EXPECT_FALSE(cfs_quota_cores("garbage", "100000").has_value());
  EXPECT_FALSE(cfs_quota_cores("1000", "0").has_value());
}

TEST(CpuQuota, ReadsCgroupV2CpuMax) {
  EXPECT_DOUBLE_EQ(cpu_max_cores("25000 100000\n").value(), 0.25);
  EXPECT_FALSE(cpu_max_cores("max 100000\n").has_value());  // no quota
  EXPECT_FALSE(cpu_max_cores("50000").has_value());
  EXPECT_FALSE(cpu_max_cores("").has_value());
}

TEST(CpuQuota, ThisProcessHasNoneOrAPositiveOne) {
  const std::optional<double> cores = cpu_quota_cores();
  if (cores) {
    EXPECT_GT(*cores, 0);
  }
}

}  // namespace
}  // namespace huddle::profile
