// A model's fingerprint: a hash of its config, its tensor names and shapes, and samples of every
// weight's values. A worker with its own copy of the model checks it against the primary's
// before mapping weights locally instead of receiving them.
#pragma once

#include "model/model.h"

#include <string>

namespace huddle {

// 64 hex characters (BLAKE2b-256).
std::string model_fingerprint(const Model& model);

}  // namespace huddle
