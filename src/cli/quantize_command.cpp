// `huddle quantize`: a Hugging Face llama / qwen2 directory -> a GGUF file (model/gguf_export.h).
#include "cli/command.h"
#include "core/error.h"
#include "model/gguf_export.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>

namespace huddle::cli {
namespace {

struct QuantizeArgs {
  std::string type = "q8_0";
  std::string input;
  std::string output;
};

DType parse_type(const std::string& type) {
  if (type == "f32") return DType::F32;
  if (type == "f16") return DType::F16;
  if (type == "q8_0") return DType::Q8_0;
  if (type == "q4_0") return DType::Q4_0;
  throw UsageError(fmt::format("--type: '{}' is not one of f32, f16, q8_0, q4_0", type));
}

void quantize(const QuantizeArgs& a) {
  const DType type = parse_type(a.type);
  const auto start = std::chrono::steady_clock::now();
  const QuantizeSummary s = quantize_to_gguf(a.input, a.output, type);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string counts;
  for (const auto& [dtype, n] : s.tensors_by_dtype) {
    counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, dtype_name(dtype));
  }
  if (!s.note.empty()) std::fprintf(stderr, "huddle: note: %s\n", s.note.c_str());
  std::printf("%s\n", fmt::format("wrote {} ({} {}, tensors: {}; {:.1f} MB) in {:.1f} s", a.output,
                                  s.architecture, a.type, counts,
                                  static_cast<double>(s.file_bytes) / 1e6, secs)
                          .c_str());
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Write a Hugging Face llama/qwen2 directory as a GGUF file (llama.cpp's format)");
  cmd->add_option("--type", a->type, "Weight type: f32, f16, q8_0, q4_0 (norms stay f32)")
      ->capture_default_str();
  cmd->add_option("input", a->input, "Hugging Face model directory")->required();
  cmd->add_option("output", a->output, "GGUF file to write")->required();
  cmd->callback([a] { quantize(*a); });
}

}  // namespace huddle::cli
