#include "tokenizer/spm_pipeline.h"

namespace huddle::tok {

void spm_pipeline_json(const std::vector<ScoredPiece>& pieces, const SpmPipelineOptions& options,
                       Json& root) {
  Json added = Json::array();
  for (std::size_t id = 0; id < pieces.size(); ++id) {
    const PieceType type = pieces[id].type;
    if (type == PieceType::kControl || type == PieceType::kUserDefined) {
      added.push_back({{"id", id},
                       {"content", pieces[id].text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type == PieceType::kControl}});
    }
  }
  root["added_tokens"] = added;

  // Spaces become U+2581, and every stretch of text between added tokens gets SentencePiece's
  // dummy prefix, as llama.cpp and Hugging Face's (legacy) Llama tokenizer do and as Llama 2 chat
  // was trained ("<s>▁[INST]"); decoding keeps the space after a control piece.
  Json normalizers = Json::array();
  if (options.remove_extra_whitespaces) {
    normalizers.push_back({{"type", "Strip"}, {"left", true}, {"right", true}});
    normalizers.push_back(
        {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
  }
  if (options.add_space_prefix) {
    normalizers.push_back({{"type", "Prepend"}, {"prepend", "\u2581"}});
  }
  normalizers.push_back(
      {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}});
  root["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};

  Json decoders =
      Json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}});
  if (options.add_space_prefix) {
    decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  }
  root["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
}

Json template_processor_json(std::optional<std::int32_t> bos, std::optional<std::int32_t> eos,
                             const std::vector<std::string>& tokens) {
  Json single = Json::array();
  Json specials = Json::object();
  auto special = [&](const char* name, std::int32_t id) {
    specials[name] = {
        {"id", name}, {"ids", {id}}, {"tokens", {tokens[static_cast<std::size_t>(id)]}}};
    single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
  };
  if (bos) special("bos", *bos);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (eos) special("eos", *eos);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}};
}

}  // namespace huddle::tok
