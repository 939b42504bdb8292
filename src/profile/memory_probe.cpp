#include "profile/memory_probe.h"

#include "io/text_file.h"

#include <algorithm>
#include <sstream>

namespace huddle::profile {
namespace {

std::optional<std::int64_t> read_number(const std::string& path) {
  const std::optional<std::string> text = io::read_text_file(path);
  if (!text) return std::nullopt;
  try {
    std::size_t used = 0;
    const long long v = std::stoll(*text, &used);
    return v >= 0 ? std::optional<std::int64_t>(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;  // "max" (v2: no limit) or unreadable
  }
}

// Room left under the cgroup's limit; nullopt without a limit.
std::optional<std::int64_t> cgroup_room() {
  const std::optional<std::string> self = io::read_text_file("/proc/self/cgroup");
  if (!self) return std::nullopt;
  if (const auto v1 = cgroup_path_of(*self, "memory")) {
    const std::string dir = "/sys/fs/cgroup/memory" + *v1;
    const auto limit = read_number(dir + "/memory.limit_in_bytes");
    const auto usage = read_number(dir + "/memory.usage_in_bytes");
    if (limit && usage && *limit < (std::int64_t{1} << 60))
      return std::max<std::int64_t>(0, *limit - *usage);
    return std::nullopt;
  }
  if (const auto v2 = cgroup_path_of(*self, "")) {
    const std::string dir = "/sys/fs/cgroup" + *v2;
    const auto limit = read_number(dir + "/memory.max");
    const auto usage = read_number(dir + "/memory.current");
    if (limit && usage) return std::max<std::int64_t>(0, *limit - *usage);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::int64_t> mem_available_of(const std::string& meminfo) {
  std::istringstream in(meminfo);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key, unit;
    long long value = 0;
    if (fields >> key >> value && key == "MemAvailable:") {
      fields >> unit;
      return static_cast<std::int64_t>(value) * (unit == "kB" ? 1024 : 1);
    }
  }
  return std::nullopt;
}

std::optional<std::string> cgroup_path_of(const std::string& proc_cgroup,
                                          const std::string& controller) {
  // Lines are "hierarchy-id:controller,controller:path"; v2 is "0::path".
  std::istringstream in(proc_cgroup);
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (controller.empty()) {
      if (controllers.empty()) return path;
      continue;
    }
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');) {
      if (name == controller) return path;
    }
  }
  return std::nullopt;
}

std::int64_t available_memory_bytes() {
  std::optional<std::int64_t> best;
  if (const auto meminfo = io::read_text_file("/proc/meminfo")) best = mem_available_of(*meminfo);
  if (const auto room = cgroup_room()) best = best ? std::min(*best, *room) : *room;
  return best.value_or(0);
}

}  // namespace huddle::profile
