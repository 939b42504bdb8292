// The lowering engine: what every lowering (1D token/head splits, 2D tiles, pipeline stages)
// shares. A lowering walks the model graph once and emits, for one device, the ops it runs on the
// slices it holds; every model value gets a lowered value in some layout (how the value is spread
// over the devices), and where a consumer needs another layout than the producer left, the move
// between them is inserted once and reused.
//
// A lowering derives from LoweringEngine and gives:
//   lower_op(op)  emit the op (or nothing, when this device does not run it) with its inputs
//                 fetched by get(value, layout) in the layouts it needs, and define() its output;
//   move(...)     the data movement from one of its layouts to another (the engine handles the
//                 moves every lowering shares: a replicated value is on device 0 too, and a value
//                 only device 0 holds is broadcast from it);
//   finish()      optional: what happens to the model's outputs once every op is lowered
//                 (default: outputs no head op defined are gathered to device 0).
#pragma once

#include "graph/graph.h"
#include "model/model_config.h"
#include "plan/lowering.h"
#include "plan/plan.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace huddle::lowering {

// Every layout any lowering uses (T = the step's tokens, L = this device's part of them).
#define HUDDLE_LAYOUTS(X)                                                                  \
  X(Replicated, "replicated")  /* [T, C] whole on every device that holds it */            \
  X(Tokens, "tokens")          /* [L, C] this device's token rows */                       \
  X(Local, "local")            /* [T, w] this device's heads / FFN columns */              \
  X(Partial, "partial")        /* [T, C] partial sums awaiting a reduction */              \
  X(Primary, "primary")        /* [T, C] on device 0 only */                               \
  X(Hidden, "hidden")          /* 2D: [T, h] columns hidden[i] of a replicated value */    \
  X(ColPartial, "col_partial") /* 2D: partial sums over the column group */                \
  X(ColTokens, "col_tokens")   /* 2D: summed, this device's tokens of its column group */  \
  X(ColAll, "col_all")         /* 2D: summed, every token, same across the column group */ \
  X(RowPartial, "row_partial") /* 2D: partial sums over the row group */                   \
  X(RowReduced, "row_reduced") /* 2D: summed, same across the row group */

enum class Layout : std::uint8_t {
#define HUDDLE_LAYOUT_ENUM(e, name) e,
  HUDDLE_LAYOUTS(HUDDLE_LAYOUT_ENUM)
#undef HUDDLE_LAYOUT_ENUM
};
const char* layout_name(Layout layout);

// A slice [begin, end) of a weight along `axis`, relative to the weight value's own shape.
struct WeightSlice {
  int axis;
  std::int64_t begin, end;
};

class LoweringEngine {
 public:
  LoweringEngine(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank);
  virtual ~LoweringEngine() = default;
  LoweringEngine(const LoweringEngine&) = delete;
  LoweringEngine& operator=(const LoweringEngine&) = delete;

  // Lowers every op in order, then finish(); the program's graph is validated.
  Program run();

 protected:
  virtual void lower_op(const Op& op) = 0;
  // The move of model value `id` (lowered as `have_id` in `have`) to `want`, named `name`;
  // PlanError when this lowering has none.
  virtual ValueId move(ValueId id, ValueId have_id, Layout have, Layout want,
                       const std::string& name) = 0;
  // Whether the result of move(.., want, ..) may be reused by every later reader (false when
  // it depends on the reader, as a 2D hidden slice depends on the reader's layer).
  virtual bool reusable_move(Layout /*want*/) const { return true; }
  virtual void finish();

  // The lowered value of model value `id` in layout `want`, inserting the move if needed. Inputs
  // are replicated (every device receives the step's ids); weights are whole.
  ValueId get(ValueId id, Layout want);
  // get() for several values read by one op, with their gathers fused: F32 activations of the
  // same rows lowered as Tokens and wanted Replicated travel as one all-gather of their joined
  // columns ([L, sum w] -> [T, sum w], then a column view per value) instead of one each: one
  // ring of messages and one synchronisation instead of several. The lowering's move() is asked
  // for that gather as a move of ids[0] (its wire format), so it must turn Tokens -> Replicated
  // into an all-gather. Values are fused only while their wire format is per element (f32, f16,
  // bf16: the same bits as separate gathers); with int8 (a scale per row) each goes alone.
  std::vector<ValueId> get_gathered_together(const std::vector<ValueId>& ids, Layout want);
  // Weight value `id` whole, or cut to `slices` (at most one per axis), composed with the slice it
  // may already be (GPT-2's q/k/v blocks of c_attn).
  ValueId weight(ValueId id);
  ValueId weight_tile(ValueId id, const std::vector<WeightSlice>& slices);
  // Ops emitted with layer -1 inside a move take the moved value's layer.
  ValueId emit(OpKind kind, const std::string& name, std::vector<ValueId> inputs,
               const OpAttrs& attrs, OpRole role, int layer = -1);
  void define(const Op& op, ValueId id, Layout layout);
  // Re-emits `op` with every input in `layout` and defines its output in it.
  void same_op(const Op& op, Layout layout);
  // A head op on device 0 (elsewhere only the gathers of its inputs to device 0, in which every
  // device takes part); model outputs it defines become the program's outputs.
  void head_on_primary(const Op& op);
  // The head split by the plan's vocab ranges (Plan::vocab): last_row runs on every device (its
  // input Replicated), the LM head linear on this device's vocabulary rows of its weight, and
  // device 0 gathers the logits' columns. PlanError for any other head op, or a head linear whose
  // outputs the ranges do not cover.
  void head_by_vocab(const Op& op);
  // Defines head op `op`'s lowered value `out` (Primary) and, on device 0, makes it a program
  // output where `op` defines a model output.
  void define_head_output(const Op& op, ValueId out);
  // Tensor-parallel (Megatron) blocks, for 1D plans and pipeline stages of a device group. This
  // device computes attention heads `heads` (and the kv heads they read: a device may hold part
  // of a GQA group) or FFN columns `columns`: column-parallel linears (q/k/v, up/gate) read the
  // input Replicated and give Local [T, w]; row-parallel ones (attention out, MLP down) read Local
  // and give Partial [T, C], their bias added where `bias` (one device of the group, so the sum
  // counts it once). The lowering's move() reduces Partial. PlanError for an empty range.
  void attention_heads(const Op& op, Range heads, bool bias);
  void mlp_columns(const Op& op, Range columns, bool bias);
  // The model graph's "ids" input (PlanError if it has none).
  ValueId ids_input() const;
  // Output dim of a linear's weight: 0 for [N, K] (OutIn), 1 for [K, N] (InOut).
  static int out_axis(const Op& op);

  const Graph& g_;
  const ModelConfig& c_;
  const Plan& p_;
  const int rank_;
  Graph out_;
  std::map<ValueId, std::pair<ValueId, Layout>> lowered_;  // model value -> (lowered, layout)
  std::set<ValueId> head_outputs_;  // model values head ops define (present on device 0 only)

 private:
  void column_linear(const Op& op, std::int64_t b, std::int64_t e);
  void row_linear(const Op& op, std::int64_t b, std::int64_t e, bool bias);

  std::map<std::pair<ValueId, Layout>, ValueId> moved_;
  std::map<ValueId, ValueId> weights_;
  std::vector<int> value_layer_;  // model value -> the layer of the op defining it (-1: none)
  // While a move is emitted: the layer of the value it moves, given to the ops it emits (so a
  // trace can say which layer's communication was exposed); -1 otherwise.
  int move_layer_ = -1;
};

}  // namespace huddle::lowering
