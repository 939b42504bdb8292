#include "runtime/sampling.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace huddle {

Sampler::Sampler(SamplingOptions options) : options_(options), rng_(options.seed) {
  if (!(options_.temperature >= 0))
    throw InputError(fmt::format("temperature {} must be >= 0", options_.temperature));
  if (options_.top_k < 0) throw InputError(fmt::format("top-k {} must be >= 0", options_.top_k));
  if (!(options_.top_p > 0 && options_.top_p <= 1)) {
    throw InputError(fmt::format("top-p {} must be in (0, 1]", options_.top_p));
  }
  if (!(options_.repeat_penalty > 0)) {
    throw InputError(fmt::format("repeat penalty {} must be > 0", options_.repeat_penalty));
  }
}

std::int32_t Sampler::pick(std::span<const float> logits, std::span<const std::int32_t> history) {
  HUDDLE_CHECK(!logits.empty());
  scratch_.assign(logits.begin(), logits.end());
  if (options_.repeat_penalty != 1.0f) {
    std::vector<bool> seen(scratch_.size(), false);
    for (std::int32_t id : history) {
      if (id < 0 || static_cast<std::size_t>(id) >= scratch_.size() ||
          seen[static_cast<std::size_t>(id)])
        continue;
      seen[static_cast<std::size_t>(id)] = true;
      float& l = scratch_[static_cast<std::size_t>(id)];
      l = l > 0 ? l / options_.repeat_penalty : l * options_.repeat_penalty;
    }
  }
  if (options_.temperature <= 0) {
    return static_cast<std::int32_t>(std::max_element(scratch_.begin(), scratch_.end()) -
                                     scratch_.begin());
  }
  // Candidates by decreasing logit (ties: lower id first), cut to top-k.
  order_.resize(scratch_.size());
  std::iota(order_.begin(), order_.end(), 0);
  const std::size_t k =
      options_.top_k > 0
          ? std::min<std::size_t>(static_cast<std::size_t>(options_.top_k), order_.size())
          : order_.size();
  auto by_logit = [&](std::int32_t a, std::int32_t b) {
    const float la = scratch_[static_cast<std::size_t>(a)],
                lb = scratch_[static_cast<std::size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(k), order_.end(),
                    by_logit);
  order_.resize(k);
  // Softmax at the temperature, in double for a stable sum.
  const double max_logit = scratch_[static_cast<std::size_t>(order_.front())];
  std::vector<double> probs(k);
  double sum = 0;
  for (std::size_t i = 0; i < k; ++i) {
    probs[i] = std::exp((scratch_[static_cast<std::size_t>(order_[i])] - max_logit) /
                        options_.temperature);
    sum += probs[i];
  }
  // Nucleus: the smallest prefix whose probability reaches top_p.
  std::size_t keep = k;
  if (options_.top_p < 1.0f) {
    double acc = 0;
    for (std::size_t i = 0; i < k; ++i) {
      acc += probs[i] / sum;
      if (acc >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  const double kept =
      std::accumulate(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  const double u = std::uniform_real_distribution<double>(0.0, kept)(rng_);
  double acc = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    acc += probs[i];
    if (u < acc) return order_[i];
  }
  return order_[keep - 1];
}

}  // namespace huddle
