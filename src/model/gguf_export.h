// `huddle quantize`: a Hugging Face llama or qwen2 directory -> one GGUF file that llama.cpp and
// Huddle both load, with its weights stored as F32, F16, Q8_0 or Q4_0.
//
// Written like llama.cpp's convert_hf_to_gguf.py + llama-quantize: the metadata llama.cpp requires
// (general.architecture, general.file_type, {arch}.context_length, embedding_length, block_count,
// feed_forward_length, attention.head_count(_kv), attention.layer_norm_rms_epsilon,
// rope.dimension_count, rope.freq_base, rope scaling), the tokenizer (tokenizer/gguf_vocab.h),
// tensors under llama.cpp's names (model/gguf_names.h) with llama's q/k rows permuted. Which dtype
// each tensor gets: gguf_storage_dtype. Llama 3 rope scaling is written as llama.cpp's
// rope_freqs.weight factors plus a huddle.rope_scaling key (the rope_scaling JSON) for Huddle.
// Dynamic NTK rope and sliding windows have no llama.cpp equivalent and are refused.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace huddle {

struct QuantizeSummary {
  std::string architecture;
  std::map<DType, int> tensors_by_dtype;
  std::uint64_t file_bytes = 0;
  std::string note;  // e.g. that the directory had no tokenizer.json
};

// The dtype a weight of `shape` is stored as when `type` is asked for: 1-D tensors (norms,
// biases) stay F32, as llama.cpp keeps them; a block type whose rows are not whole blocks of 32
// falls back to F16; everything else is `type`.
DType gguf_storage_dtype(DType type, const Shape& shape);

// llama.cpp's general.file_type for `type` (ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7).
std::uint32_t gguf_file_type(DType type);

// Converts. type: F32, F16, Q8_0 or Q4_0. LoadError naming the directory, file or field when the
// model cannot be written (architecture, rope type, tokenizer kind); the output is written
// atomically.
QuantizeSummary quantize_to_gguf(const std::filesystem::path& in_dir,
                                 const std::filesystem::path& out, DType type);

}  // namespace huddle
