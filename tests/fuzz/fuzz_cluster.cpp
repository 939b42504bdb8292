// libFuzzer target: a cluster file's text, read as ClusterSpec::load reads it
// (io::parse_strict_json, then ClusterSpec::from_json) for `huddle plan --cluster`. Anything but a
// LoadError, or a crash, is a finding.
#include "core/error.h"
#include "io/strict_json.h"
#include "planner/cluster.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    huddle::ClusterSpec::from_json(huddle::io::parse_strict_json(text, "fuzz-cluster.json"),
                                   "fuzz-cluster.json");
  } catch (const huddle::LoadError&) {
  }
  return 0;
}
