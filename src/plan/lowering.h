// Lowering: a model Graph + a Plan -> one Program per device.
//
// Every value of the model graph gets a layout on the cluster — replicated (every device holds
// all tokens' rows), token-split (each device its own rows), local columns (each device the
// heads / FFN columns the plan gives it), partial sums (awaiting a reduction) or primary (all rows
// on device 0). Each op is emitted in the layout its block needs, and where an input's layout
// differs the move between them is inserted (see the table in docs/distributed.md):
//   token-split -> replicated: all_gather      replicated -> token-split: local_rows (a view)
//   partial -> token-split: reduce_scatter     partial -> replicated: all_reduce
//   token-split -> primary: gather_to_primary
// Column-parallel linears (q/k/v, MLP up/gate) take the output slice of their weight,
// row-parallel ones (attention out, MLP down) the input slice and produce partial sums; their bias
// is added on device 0 only, so the sum over devices counts it once.
#pragma once

#include "graph/graph.h"
#include "model/model.h"
#include "plan/plan.h"

#include <map>
#include <string>
#include <vector>

namespace huddle {

struct Program {
  int rank = 0;
  int devices = 1;
  std::vector<double> token_shares;  // how each step's tokens are split, per device
  Graph graph;                       // outputs only on device 0
};

// The wire format of a move of model value `value` (core/wire_format.h): the plan's, except for
// the model's outputs (logits, an encoder's states), which always travel exactly. Both ends of a
// transfer are lowered with it, so they agree.
WireFormat wire_for(const Plan& plan, const Graph& graph, ValueId value);

// Lowers `graph` (of a model with `config`) for device `rank` of `plan`. The plan must have been
// validated against the model. PlanError if the graph has an op the plan cannot place.
Program lower(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank);

// Device 0's outputs of `program` (lowered from model `graph`; Executor::run's, keyed by the
// program's value names) keyed by the model's output names, which they are in order: an output
// made on another device is named after its receive in the program ("logits@recv").
std::map<std::string, Tensor> outputs_by_model_name(const Graph& graph, const Program& program,
                                                    std::map<std::string, Tensor> outputs);

// The weights a program reads, as contiguous copies keyed by the program's weight value names
// (what a worker is sent), and the program rewritten to refer to them whole.
WeightMap extract_weights(const Program& program, const WeightMap& model_weights);
void localize_weights(Program& program);

// Bytes of weights a program holds, from its weight values' shapes and dtypes (Value::dtype: the
// loaded model's, which lowering copies; the planners' memory model counts the same).
std::size_t program_weight_bytes(const Program& program);
// Bytes of weights a program holds in the dtypes `weights` keeps them in (Q8_0 blocks, ...): the
// program's weight values resolved against `weights` (the model's, or a worker's extracted map).
std::size_t program_weight_bytes(const Program& program, const WeightMap& weights);

}  // namespace huddle
