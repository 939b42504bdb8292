// libFuzzer target for the SentencePiece tokenizer.model reader (tokenizer/spm_model_file.h) and
// the BPE model it feeds: any bytes must either parse or throw huddle::LoadError; a model that
// parses must tokenize text without crashing. Seeds: tests/fuzz/corpus/spm_model (hand-written
// ModelProto bytes).
#include "core/error.h"
#include "tokenizer/spm_bpe_model.h"
#include "tokenizer/spm_model_file.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const huddle::tok::SpmModelFile m = huddle::tok::parse_spm_model(
        std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz.model");
    const huddle::tok::SpmBpeModel model(m.pieces, m.byte_fallback);
    std::vector<std::int32_t> ids;
    model.tokenize(
        "\xE2\x96\x81"
        "ab a\xC3\xA9\xFF",
        ids);
  } catch (const huddle::LoadError&) {
  }
  return 0;
}
