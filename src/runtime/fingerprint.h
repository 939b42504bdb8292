// A model's fingerprint: a hash of its config, its tensor names and shapes, and samples of every
// weight's values. A worker with its own copy of the model checks it against the primary's
// before mapping weights locally instead of receiving them.
#pragma once

#include "model/model.h"

#include <string>
#include <string_view>

namespace huddle {

// 64 hex characters (BLAKE2b-256).
std::string model_fingerprint(const Model& model);
// The same over every byte of a model file (an ONNX model, whose graph and weights are one file).
std::string bytes_fingerprint(std::string_view bytes);

}  // namespace huddle
