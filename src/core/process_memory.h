// Memory of this process, as the operating system counts it.
#pragma once

#include <cstddef>

namespace huddle {

// Resident set size in bytes (/proc/self/statm); 0 if unavailable.
std::size_t resident_bytes();

}  // namespace huddle
