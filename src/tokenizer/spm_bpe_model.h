// SentencePiece's BPE encoding over scored pieces: the vocabulary of a GGUF file whose
// tokenizer.ggml.model is "llama" (Llama 1/2, Mistral, Phi-3, TinyLlama, ... as llama.cpp's
// converter writes them), the same algorithm as libsentencepiece's bpe_model and llama.cpp's
// SPM tokenizer.
//
// A word (for these models the whole normalized text between added tokens: "▁Hello▁world") is
// split into characters (an ill-formed UTF-8 byte counts as one). Then, repeatedly, the adjacent
// pair whose concatenation is a piece with the highest score is merged (the leftmost among equal
// scores), until no adjacent pair forms a piece. Each remaining symbol becomes its piece's id; a
// symbol that is no piece (a character the vocabulary lacks) becomes the <0xXX> pieces of its
// UTF-8 bytes (byte fallback), or the unknown piece (one for a run of such symbols, as
// SentencePiece does).
//
// Why not libsentencepiece: it needs a ModelProto, and loading one in a program that also links
// libprotobuf (ONNX import) fails (docs/tokenizers.md); GGUF gives pieces and scores, not a proto.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/model.h"

namespace huddle::tok {

// SentencePiece's piece types (sentencepiece_model.proto; GGUF's token_type uses the same numbers).
enum class PieceType : std::int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct ScoredPiece {
  std::string text;
  float score = 0;
  PieceType type = PieceType::kNormal;
};

class SpmBpeModel final : public Model {
 public:
  // pieces[id]. Normal and user-defined pieces can be the result of a merge; byte pieces
  // ("<0x41>") spell characters without a piece when `byte_fallback`; the first unknown piece is
  // the id of anything else. LoadError naming the piece when a byte piece is malformed.
  SpmBpeModel(const std::vector<ScoredPiece>& pieces, bool byte_fallback);

  void tokenize(std::string_view word, std::vector<std::int32_t>& out) const override;
  const Vocab& vocab() const override { return vocab_; }
  bool encodes_bytes() const override { return byte_fallback_; }
  std::string_view kind() const override { return "SentencePiece"; }

 private:
  // The id of a piece a merge may produce, with its score.
  struct Mergeable {
    std::int32_t id;
    float score;
  };
  std::optional<Mergeable> mergeable(std::string_view text) const;
  // Appends the ids of a final symbol; `previous_unknown`: the last symbol was unknown.
  void emit(std::string_view symbol, std::vector<std::int32_t>& out, bool& previous_unknown) const;

  Vocab vocab_;
  StringIdMap mergeable_ids_;
  std::vector<float> scores_;
  std::optional<std::int32_t> unk_id_;
  bool byte_fallback_ = false;
  std::array<std::int32_t, 256> byte_ids_{};  // id of <0xXX>, or -1
};

}  // namespace huddle::tok
