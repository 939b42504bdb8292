// libFuzzer target for the GGUF header reader (io/gguf_format.h): any bytes must either parse or
// throw huddle::LoadError; never crash, hang, or allocate what the file only claims.
// Seeds: tests/fuzz/corpus/gguf (small files written by `huddle quantize` and by hand).
#include "core/error.h"
#include "io/gguf_format.h"

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const huddle::io::GgufLayout layout = huddle::io::parse_gguf(
        std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.gguf");
    (void)layout;
  } catch (const huddle::LoadError&) {
  }
  return 0;
}
