// Generation: prefill a prompt, then decode token by token with the KV cache.
#pragma once

#include "runtime/step_runner.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace huddle {

// Picks the next token from the last position's logits [V], given every id so far (prompt and
// generated). Greedy (argmax) when not given.
using TokenPicker = std::function<std::int32_t(std::span<const float> logits,
                                               std::span<const std::int32_t> history)>;

// Index of the largest value; the lowest index wins ties.
std::int32_t argmax(std::span<const float> values);

struct GenerationOptions {
  int n_predict = 0;                   // tokens to generate after the prompt
  bool keep_prompt_output = false;     // return the output rows of every prompt position
  std::vector<std::int32_t> stop_ids;  // generation ends after emitting one of these
  TokenPicker pick;                    // default: greedy
  // Called with each generated token as soon as it is chosen (streaming output).
  std::function<void(std::int32_t)> on_token;
};

struct GenerationResult {
  std::vector<std::int32_t> generated;
  Tensor prompt_output;  // [T, C] if keep_prompt_output (logits, or an encoder's hidden states)
  double prefill_ms = 0;
  std::vector<double> decode_ms;  // one per decode step (each generated token after the first)
  double decode_ms_per_token() const;
};

// Runs the prompt from position 0 (the runner is reset first).
GenerationResult generate(StepRunner& runner, std::span<const std::int32_t> prompt,
                          const GenerationOptions& options);

}  // namespace huddle
