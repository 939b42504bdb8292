// Pipeline units: the layer-level pieces a pipeline plan assigns to stages (HPipe's
// "finer than a transformer block" granularity). A model of L transformer layers has U = 2L + 2
// units, in execution order:
//   unit 0          the embedding: every op before layer 0 (token, position, type embeddings and
//                   BERT's embedding norm);
//   unit 1 + 2l     the attention sub-block of layer l: its norm, q/k/v, RoPE, attention, out
//                   projection, residual add (roles attn_*; BERT's post-attention norm too);
//   unit 2 + 2l     the MLP sub-block of layer l: norm, up/gate, activation, down, residual add
//                   (roles mlp_*);
//   unit 2L + 1     everything after the last block: final norm and LM head (an encoder: the ops
//                   that follow its blocks, if any).
// A stage is a contiguous range [begin, end) of units on one device; between stages the
// activation [tokens, hidden] float32 goes from one stage's device to the next's.
#pragma once

#include "graph/graph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace huddle::pipeline {

enum class UnitKind : std::uint8_t { Embedding, Attention, Mlp, Head };

constexpr int kEmbeddingUnit = 0;
constexpr int unit_count(std::int64_t layers) {
  return static_cast<int>(2 * layers + 2);
}
constexpr int attention_unit(std::int64_t layer) {
  return static_cast<int>(1 + 2 * layer);
}
constexpr int mlp_unit(std::int64_t layer) {
  return static_cast<int>(2 + 2 * layer);
}
constexpr int head_unit(std::int64_t layers) {
  return static_cast<int>(2 * layers + 1);
}

// Kind of `unit` (0 <= unit < unit_count(layers)).
UnitKind unit_kind(int unit, std::int64_t layers);
// The transformer layer of an attention or MLP unit; -1 for the embedding and head units.
std::int64_t unit_layer(int unit, std::int64_t layers);
// "embedding", "layer 3 attention", "layer 3 mlp", "head".
std::string unit_name(int unit, std::int64_t layers);

// A unit range [begin, end) in words, for plan tables: "embedding, layers 0-3, layer 4
// attention", "layer 4 mlp, layers 5-11, head", "layer 2" (both units of one layer).
std::string describe_units(int begin, int end, std::int64_t layers);

// The unit of every op of `graph` (indexed like graph.ops()), by role and layer: attn_* roles go
// to their layer's attention unit, mlp_* to its MLP unit, embed to unit 0, final_norm and head to
// the last unit; an op of role "other" goes, inside a layer, to the attention unit until an MLP op
// of that layer has been seen, and outside the layers to unit 0 before the first layer's ops and
// to the last unit after them.
std::vector<int> unit_of_ops(const Graph& graph, std::int64_t layers);

}  // namespace huddle::pipeline
