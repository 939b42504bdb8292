#include "profile/cpu_quota.h"

#include "io/text_file.h"
#include "profile/memory_probe.h"

#include <algorithm>
#include <sstream>

namespace huddle::profile {
namespace {

std::optional<double> positive_number(const std::string& text) {
  try {
    const double v = std::stod(text);
    return v > 0 ? std::optional<double>(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;  // "max" or unreadable
  }
}

}  // namespace

std::optional<double> cfs_quota_cores(const std::string& quota_us, const std::string& period_us) {
  const std::optional<double> quota = positive_number(quota_us);  // -1: no quota
  const std::optional<double> period = positive_number(period_us);
  if (!quota || !period) return std::nullopt;
  return *quota / *period;
}

std::optional<double> cpu_max_cores(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota, period;
  if (!(in >> quota >> period)) return std::nullopt;
  return cfs_quota_cores(quota, period);
}

std::optional<double> cpu_quota_cores() {
  const std::optional<std::string> self = io::read_text_file("/proc/self/cgroup");
  if (!self) return std::nullopt;
  if (const auto v1 = cgroup_path_of(*self, "cpu")) {
    const std::string dir = "/sys/fs/cgroup/cpu" + *v1;
    const auto quota = io::read_text_file(dir + "/cpu.cfs_quota_us");
    const auto period = io::read_text_file(dir + "/cpu.cfs_period_us");
    if (quota && period) return cfs_quota_cores(*quota, *period);
    return std::nullopt;
  }
  if (const auto v2 = cgroup_path_of(*self, "")) {
    if (const auto cpu_max = io::read_text_file("/sys/fs/cgroup" + *v2 + "/cpu.max"))
      return cpu_max_cores(*cpu_max);
  }
  return std::nullopt;
}

double cpu_quota_share(int threads) {
  const std::optional<double> quota = cpu_quota_cores();
  return quota ? std::min(1.0, *quota / std::max(1, threads)) : 1.0;
}

}  // namespace huddle::profile
