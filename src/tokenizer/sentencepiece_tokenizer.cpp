#include "tokenizer/sentencepiece_tokenizer.h"

#include <fstream>
#include <iterator>
#include <vector>

#include "core/error.h"
#include "tokenizer/spm_model_file.h"
#include "tokenizer/spm_pipeline.h"

namespace huddle::tok {
namespace {

constexpr int kBpeModel = 2;

// The id when it names a control piece of the model.
std::optional<std::int32_t> control_id(const SpmModelFile& m, std::int32_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= m.pieces.size() ||
      m.pieces[static_cast<std::size_t>(id)].type != PieceType::kControl) {
    return std::nullopt;
  }
  return id;
}

}  // namespace

SentencePieceTokenizer load_sentencepiece_model(const std::filesystem::path& model_file,
                                                SentencePieceOptions options) {
  const std::string origin = model_file.string();
  std::ifstream in(model_file, std::ios::binary);
  if (!in) throw LoadError(fmt::format("{}: cannot be read", origin));
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  const SpmModelFile m = parse_spm_model(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(raw.data()), raw.size()),
      origin);
  if (m.model_type != kBpeModel) {
    throw LoadError(fmt::format(
        "{}: a SentencePiece {} model; Huddle reads SentencePiece BPE models (Llama, Mistral)",
        origin,
        m.model_type == 1   ? "unigram"
        : m.model_type == 3 ? "word"
                            : "char"));
  }
  if (m.has_charsmap) {
    throw LoadError(fmt::format(
        "{}: normalizer_spec '{}' has a precompiled normalization map, which Huddle does not "
        "apply (it reads identity-normalized models such as Llama's)",
        origin, m.normalizer_name));
  }
  if (m.treat_whitespace_as_suffix || !m.escape_whitespaces) {
    throw LoadError(
        fmt::format("{}: trainer_spec.treat_whitespace_as_suffix or "
                    "normalizer_spec.escape_whitespaces = false is not read by Huddle",
                    origin));
  }
  SentencePieceTokenizer out;
  out.bos_id = control_id(m, m.bos_id);
  out.eos_id = control_id(m, m.eos_id);
  Json root;
  SpmPipelineOptions pipeline;
  pipeline.add_space_prefix = m.add_dummy_prefix;
  pipeline.remove_extra_whitespaces = m.remove_extra_whitespaces;
  spm_pipeline_json(m.pieces, pipeline, root);
  std::vector<std::string> tokens;
  tokens.reserve(m.pieces.size());
  for (const ScoredPiece& p : m.pieces) tokens.push_back(p.text);
  root["post_processor"] =
      template_processor_json(options.add_bos ? out.bos_id : std::nullopt,
                              options.add_eos ? out.eos_id : std::nullopt, tokens);
  try {
    out.tokenizer =
        tokenizer_from_json(root, std::make_unique<SpmBpeModel>(m.pieces, m.byte_fallback));
  } catch (const LoadError& e) {
    throw LoadError(fmt::format("{}: {}", origin, e.what()));
  }
  return out;
}

}  // namespace huddle::tok
