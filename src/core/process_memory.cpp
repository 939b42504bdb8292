#include "core/process_memory.h"

#include <cstdio>

#include <unistd.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// AddressSanitizer and ThreadSanitizer replace malloc: glibc's heap is not the one in use, and
// malloc_trim on its never-initialised arena crashes (SEGV in mtrim). GCC defines the
// __SANITIZE_* macros; clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HUDDLE_MALLOC_REPLACED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HUDDLE_MALLOC_REPLACED 1
#endif
#endif

namespace huddle {

std::size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

std::size_t peak_resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  std::size_t kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long value = 0;
    if (std::sscanf(line, "VmHWM: %lu kB", &value) == 1) {
      kib = value;
      break;
    }
  }
  std::fclose(f);
  return kib * 1024;
}

void release_free_memory() {
#if defined(__GLIBC__) && !defined(HUDDLE_MALLOC_REPLACED)
  malloc_trim(0);
#endif
}

}  // namespace huddle
