// What a worker with its own copy of the model checks before mapping weights from it instead of
// receiving them: per tensor, a digest of the loaded tensor (so a worker checks exactly the
// tensors its program reads, and reads no others); for an imported CNN, whose graph and weights
// are one file, a digest of the whole file.
#pragma once

#include "model/model.h"

#include <map>
#include <string>
#include <string_view>

namespace huddle {

// 64 hex characters (BLAKE2b-256) over the tensor's dtype, shape and samples of its bytes (256 at
// the start, the middle and the end), as loaded: a copy kept in another dtype (loaded with another
// --weight-dtype) differs.
std::string tensor_digest(const Tensor& tensor);
// Canonical name -> tensor_digest, for every tensor of `weights`.
std::map<std::string, std::string> weight_digests(const WeightMap& weights);
// 64 hex characters over every byte of a model file (an ONNX model).
std::string bytes_fingerprint(std::string_view bytes);

}  // namespace huddle
