// Choosing the next token from logits: greedy, or sampled with temperature, top-k, top-p and a
// repetition penalty. Seeded: the same seed and inputs give the same tokens.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace huddle {

struct SamplingOptions {
  float temperature = 0.0f;     // <= 0: greedy (argmax)
  int top_k = 0;                // keep the k most likely tokens; 0: all
  float top_p = 1.0f;           // keep the smallest set whose probability reaches p; 1: all
  float repeat_penalty = 1.0f;  // > 1 discourages tokens already in the history
  std::uint64_t seed = 0;
};

class Sampler {
 public:
  // InputError when an option is out of range (temperature < 0, top_p not in (0, 1], ...).
  explicit Sampler(SamplingOptions options);

  // Picks from logits [V]; `history` (prompt and generated ids) feeds the repetition penalty:
  // a positive logit of a token seen before is divided by the penalty, a negative one multiplied
  // (the CTRL / llama.cpp rule).
  std::int32_t pick(std::span<const float> logits, std::span<const std::int32_t> history);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::vector<float> scratch_;
  std::vector<std::int32_t> order_;
};

}  // namespace huddle
