#include "model/config_fields.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace huddle {

std::span<const std::string_view> harmless_config_fields() {
  static constexpr std::string_view fields[] = {
      // Identity and bookkeeping.
      "architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
      "_name_or_path", "auto_map", "use_cache", "tokenizer_class", "prefix", "finetuning_task",
      "task_specific_params", "problem_type", "_attn_implementation",
      "_attn_implementation_autoset", "attn_implementation",
      // Token ids (read by the tokenizer and generation, not the forward pass).
      "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
      // Training only: initialisation and dropout (inactive at inference).
      "initializer_range", "attention_dropout", "hidden_dropout", "embd_pdrop", "resid_pdrop",
      // Tensor-parallel pretraining layout; mathematically the same linear layers.
      "pretraining_tp",
      // PretrainedConfig's output switches and structure flags of a plain causal LM.
      "return_dict", "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16",
      "tf_legacy_loss", "pruned_heads", "chunk_size_feed_forward", "is_encoder_decoder",
      "is_decoder", "add_cross_attention", "tie_encoder_decoder", "cross_attention_hidden_size",
      // Classification-head labels (unused by a causal LM head).
      "id2label", "label2id", "num_labels",
      // Generation defaults older configs carry (sampling is chosen by the caller).
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
      "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
      "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
      "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
      "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
      "suppress_tokens", "begin_suppress_tokens"};
  return fields;
}

void refuse_unknown_fields(const ConfigReader& r, std::string_view architecture,
                           std::span<const std::string_view> understood) {
  const auto harmless = harmless_config_fields();
  for (const std::string& key : r.keys()) {
    const auto in = [&](std::span<const std::string_view> list) {
      return std::find(list.begin(), list.end(), key) != list.end();
    };
    if (in(understood) || in(harmless)) continue;
    throw LoadError(
        fmt::format("{}: field '{}' is not understood by Huddle's {} architecture and may change "
                    "the model's math; refusing rather than giving a wrong answer",
                    r.source(), r.field(key), architecture));
  }
}

}  // namespace huddle
