// SentencePiece `tokenizer.model` files read without libsentencepiece or libprotobuf.
//
// Why by hand: the file is a protobuf ModelProto, and Debian's libsentencepiece carries its own
// protobuf-lite whose symbols clash with libprotobuf's in a program that also imports ONNX
// (docs/tokenizers.md); only a handful of fields matter, so a bounded reader of the protobuf wire
// format (varints, length-delimited fields, fixed 32/64) reads them and skips the rest.
//
// Fields read (sentencepiece_model.proto):
//   ModelProto      1 pieces (repeated SentencePiece), 2 trainer_spec, 3 normalizer_spec
//   SentencePiece   1 piece (string), 2 score (float), 3 type (enum, default NORMAL)
//   TrainerSpec     3 model_type (1 UNIGRAM default, 2 BPE, 3 WORD, 4 CHAR),
//                   24 treat_whitespace_as_suffix, 35 byte_fallback, 41 bos_id (default 1),
//                   42 eos_id (default 2; -1: none)
//   NormalizerSpec  1 name, 2 precompiled_charsmap, 3 add_dummy_prefix (default true),
//                   4 remove_extra_whitespaces (default true), 5 escape_whitespaces (default true)
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/spm_bpe_model.h"

namespace huddle::tok {

struct SpmModelFile {
  std::vector<ScoredPiece> pieces;  // by id
  int model_type = 1;               // TrainerSpec.ModelType
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  std::int32_t bos_id = 1;
  std::int32_t eos_id = 2;
  std::string normalizer_name;
  bool has_charsmap = false;  // a precompiled normalization map (nmt_nfkc and the like)
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// Parses the bytes of a tokenizer.model. LoadError naming `origin` and what is malformed
// (truncated field, length past the end, wrong wire type, unknown piece type, no pieces).
SpmModelFile parse_spm_model(std::span<const std::byte> bytes, const std::string& origin);

}  // namespace huddle::tok
