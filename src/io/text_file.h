// Reading a small text file (config.json, plans, cluster files) whole.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace huddle::io {

// The file's contents; nullopt when it cannot be opened (callers throw their own error, naming
// what the file was for).
std::optional<std::string> read_text_file(const std::filesystem::path& path);

}  // namespace huddle::io
