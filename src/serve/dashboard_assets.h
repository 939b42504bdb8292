// The dashboard's files (src/serve/dashboard/), embedded in the binary at build time by
// cmake/embed_files.cmake: the page needs no files and no internet at run time.
#pragma once

#include <span>
#include <string_view>

namespace huddle::serve {

struct EmbeddedFile {
  std::string_view path;  // relative to src/serve/dashboard/, e.g. "index.html"
  std::string_view bytes;
};

std::span<const EmbeddedFile> dashboard_assets();

}  // namespace huddle::serve
