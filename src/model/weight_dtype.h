// Which dtype a loaded model keeps each checkpoint tensor in, and the conversion.
//
// Matrix weights (the weight of a linear op, an embedding table) stay as stored (F32, F16, BF16,
// or a block-quantised GGUF type) unless LoadOptions ask for another dtype; everything else
// (norm scales, biases: small vectors) is kept as F32. A block-quantised dtype needs rows of
// whole blocks, and the graph's slices of the last axis on block boundaries; a tensor that has
// neither falls back to a 16-bit dtype (its stored one, or F16), as llama.cpp's quantiser falls
// back for such tensors.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"
#include "graph/graph.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace huddle {

struct LoadOptions {
  // Dtype of the matrix weights: nullopt keeps each as stored; F32 widens; F16, BF16, Q8_0 and
  // Q4_0 convert (quantise) at load.
  std::optional<DType> weight_dtype;
  // Canonical names of the tensors to read: nullopt reads every tensor the graph uses. The others
  // are still checked against the checkpoint's header (present, shape) and their kept dtype is
  // recorded in the graph, but their data is never touched (not paged in, not converted) and
  // Model::weights() leaves them out; a name the graph does not use is ignored. A worker with its
  // own copy of the model reads only its shard this way.
  std::optional<std::set<std::string>> only_tensors = std::nullopt;
};

// Parses "f32", "f16", "bf16", "q8_0", "q4_0" (any case); nullopt otherwise.
std::optional<DType> parse_weight_dtype(std::string_view name);

// What the graph asks of each checkpoint tensor it uses (by canonical name).
struct WeightUse {
  bool matrix = false;           // read as a linear weight or an embedding table
  bool last_axis_cut = false;    // some value slices its last axis
  std::int64_t cut_granule = 0;  // gcd of the offsets where the last axis is cut (0: none)
};
std::map<std::string, WeightUse> weight_uses(const Graph& graph);

// The dtype to keep a tensor stored as `stored` with shape `shape` in.
DType kept_dtype(DType stored, const Shape& shape, const WeightUse& use,
                 const LoadOptions& options);

// `stored` (a view of the checkpoint in any weight dtype) as `wanted`: `stored` itself, sharing
// its memory, when the dtypes agree; else converted row by row (threaded) into new storage.
Tensor convert_weight(const Tensor& stored, DType wanted);

}  // namespace huddle
