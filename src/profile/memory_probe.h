// Memory probe: how much memory this process could still take.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace huddle::profile {

// The smallest of: the system's MemAvailable (/proc/meminfo) and the room left in this process's
// memory cgroup (v1 memory.limit_in_bytes − memory.usage_in_bytes, or v2 memory.max −
// memory.current). 0 when nothing can be read.
std::int64_t available_memory_bytes();

// Parsing helpers, exposed for tests: the MemAvailable line of a /proc/meminfo text, and this
// process's cgroup path for `controller` ("memory"; "" for the v2 unified hierarchy) in a
// /proc/self/cgroup text.
std::optional<std::int64_t> mem_available_of(const std::string& meminfo);
std::optional<std::string> cgroup_path_of(const std::string& proc_cgroup,
                                          const std::string& controller);

}  // namespace huddle::profile
