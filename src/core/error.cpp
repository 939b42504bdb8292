#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace huddle {

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "huddle: internal error: %s:%d: check '%s' failed %s\n", file, line, expr,
               msg.c_str());
  std::abort();
}

}  // namespace huddle
