// Strict config.json reading: a field that a builder does not read and that is not known to leave
// the forward pass alone is refused by name, so that a model whose math Huddle does not implement
// (logit soft-capping, QK norms, multipliers, quantization, ...) fails to load instead of giving a
// wrong answer.
#pragma once

#include "model/model_config.h"

#include <span>
#include <string_view>

namespace huddle {

// Fields of every Hugging Face config that never change a causal LM's logits: names, token ids,
// dtypes, dropout and initialisation, generation defaults, classification-head labels.
std::span<const std::string_view> harmless_config_fields();

// LoadError naming the first field of `r` that is neither in `understood` (the fields the
// `architecture` builder reads or checks) nor harmless.
void refuse_unknown_fields(const ConfigReader& r, std::string_view architecture,
                           std::span<const std::string_view> understood);

}  // namespace huddle
