// libFuzzer target: a .safetensors file's bytes (length prefix, JSON header, data buffer) as the
// loader validates them. Anything but a LoadError, or a crash, is a finding.
#include "core/error.h"
#include "io/safetensors_format.h"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    huddle::io::parse_safetensors(std::as_bytes(std::span(data, size)), "fuzz.safetensors");
  } catch (const huddle::LoadError&) {
  }
  return 0;
}
