// Memory of this process, as the operating system counts it.
#pragma once

#include <cstddef>

namespace huddle {

// Resident set size in bytes (/proc/self/statm); 0 if unavailable.
std::size_t resident_bytes();

// The largest resident set size of this process so far, in bytes (VmHWM in /proc/self/status:
// anonymous memory and the mapped file pages touched, e.g. a checkpoint's); 0 if unavailable.
std::size_t peak_resident_bytes();

// Gives memory the allocator holds free back to the operating system (glibc's malloc_trim; a
// no-op elsewhere). glibc keeps freed blocks below its adaptive mmap threshold (up to 32 MB) in
// its heap, still counted as the process's (and its cgroup's) memory: a worker that ends a
// session and starts another with other weights (a re-plan) would hold both. A no-op under
// AddressSanitizer and ThreadSanitizer, whose allocator is not glibc's.
void release_free_memory();

}  // namespace huddle
