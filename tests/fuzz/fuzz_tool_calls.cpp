// libFuzzer target for the tool-call parser of chat replies (serve/tool_calls.h), which reads
// what a model wrote: any text must parse without throwing, and the streamed split must agree
// with the whole one. The first byte picks the format (bits 0-1) and the streamed piece size
// (bits 2-4, plus 1); the rest is the reply. Seeds: tests/fuzz/corpus/tool_calls.
#include "serve/tool_calls.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using huddle::serve::ToolCallFormat;
  if (size == 0) return 0;
  static const ToolCallFormat kFormats[] = {ToolCallFormat::kHermes, ToolCallFormat::kLlama3,
                                            ToolCallFormat::kGeneric, ToolCallFormat::kGeneric};
  const huddle::serve::ToolCallSyntax syntax{
      kFormats[data[0] & 3], {"f", "get_weather"}, (data[0] & 0x80) == 0};
  const std::size_t step = ((data[0] >> 2) & 7) + 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const huddle::serve::ParsedReply whole = huddle::serve::parse_tool_calls(text, syntax);
  huddle::serve::ToolCallStream stream(syntax);
  std::string streamed;
  for (std::size_t at = 0; at < text.size(); at += step)
    streamed += stream.push(text.substr(at, step));
  const huddle::serve::ParsedReply rest = stream.finish();
  streamed += rest.content.value_or("");
  if (streamed != whole.content.value_or("") || rest.calls.size() != whole.calls.size())
    std::abort();
  return 0;
}
