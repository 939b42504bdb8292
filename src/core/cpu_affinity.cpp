#include "core/cpu_affinity.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include <sched.h>

namespace huddle {
namespace {

cpu_set_t as_set(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return set;
}

}  // namespace

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::vector<std::vector<int>> device_cores(const std::vector<int>& cpus, int devices, int threads) {
  if (devices < 1 || threads < 1 ||
      cpus.size() < static_cast<std::size_t>(devices) * static_cast<std::size_t>(threads)) {
    return {};
  }
  std::vector<std::vector<int>> out;
  for (int d = 0; d < devices; ++d) {
    const auto first = cpus.begin() + static_cast<std::ptrdiff_t>(d) * threads;
    out.emplace_back(first, first + threads);
  }
  return out;
}

void pin_this_process(const std::vector<int>& cpus) {
  const cpu_set_t set = as_set(cpus);
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const long tid = std::strtol(task.path().filename().c_str(), nullptr, 10);
    if (tid > 0) ::sched_setaffinity(static_cast<pid_t>(tid), sizeof(set), &set);
  }
}

void pin_this_thread(const std::vector<int>& cpus) {
  const cpu_set_t set = as_set(cpus);
  ::sched_setaffinity(0, sizeof(set), &set);
}

}  // namespace huddle
