// StepRunner: anything that advances a model by a batch of tokens and returns its output — the
// single-device Executor, or (later) a distributed session driving several devices. Generation
// and the CLI are written against this interface only.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <span>

namespace huddle {

// Which rows of the output a step wants: none (a pipeline slice before the last: nothing after
// LastRow is computed), the last token's, or every token's.
enum class OutputRows : std::uint8_t { None, Last, All };

class StepRunner {
 public:
  virtual ~StepRunner() = default;

  // Feeds `ids` as the tokens at positions [position(), position() + ids.size()) and returns the
  // graph output: [T, C] when `all_rows` (logits of every new token, or an encoder's hidden
  // states), else [1, C] for the last token only. The KV cache keeps the new tokens.
  // InputError if ids is empty, an id is out of the vocabulary, or the context would overflow.
  virtual Tensor forward(std::span<const std::int32_t> ids, bool all_rows) = 0;

  // Forgets every token (empties the KV cache).
  virtual void reset() = 0;

  // Number of tokens processed since the last reset.
  virtual std::int64_t position() const = 0;

  // Largest number of positions the model accepts.
  virtual std::int64_t max_positions() const = 0;
};

}  // namespace huddle
