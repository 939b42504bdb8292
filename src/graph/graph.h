// Graph: the intermediate representation every planner partitions and every runtime executes.
//
// A Graph is a list of named ops over named values, in execution (topological) order. Values are
//   - inputs the runtime fills per step: "ids" [T] I32, "positions" [T] I32, "token_types" [T];
//   - weights, which name a checkpoint tensor (optionally a slice of it) and are bound at load;
//   - activations, the outputs of ops.
// Activation shapes are [T, C] where T is symbolic (kTokens): the number of tokens of the current
// step (the whole prompt at prefill, 1 at decode). Weight shapes are concrete.
// Imported graphs (ONNX CNNs, src/onnx) use the same IR with concrete N-D shapes (NCHW images,
// any batch), named F32 inputs, and the N-D ops of the HUDDLE_OPS table; Executor::run runs them.
//
// Ops carry a role (which part of a transformer block they are) so planners can recognise
// column-parallel (q/k/v, MLP up/gate) and row-parallel (attention out, MLP down) linears
// without pattern matching on names.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/wire_format.h"
#include "graph/op_kind.h"
#include "kernels/cnn.h"
#include "kernels/kernels.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace huddle {

using ValueId = std::int32_t;

// Symbolic dimensions, resolved per step by the executor:
inline constexpr std::int64_t kTokens = -1;       // tokens of the current step (T)
inline constexpr std::int64_t kLocalTokens = -2;  // this device's share of them (L)
inline constexpr std::int64_t kOutputRows = -3;   // after LastRow: 1, or T when all rows are wanted

enum class ValueKind : std::uint8_t { Input, Weight, Activation };

// Where a weight comes from: a checkpoint tensor, whole or a slice [begin, end) along `axis`,
// optionally also sliced [begin2, end2) along another axis `axis2` (a 2-D tile: 2D-tiled plans).
struct WeightRef {
  std::string tensor;
  Shape tensor_shape;  // the whole checkpoint tensor's shape, checked at load
  int axis = -1;       // -1: the whole tensor
  std::int64_t begin = 0;
  std::int64_t end = 0;
  int axis2 = -1;  // -1: no second slice; otherwise != axis
  std::int64_t begin2 = 0;
  std::int64_t end2 = 0;
};

struct Value {
  std::string name;
  ValueKind kind = ValueKind::Activation;
  // Activations are F32. A weight's is the dtype the loaded model keeps its tensor in (Model::load
  // sets it; lowering copies it to the programs' weights): what the planners' memory model counts.
  // Graphs built without a checkpoint (a worker's describe_model) leave F32.
  DType dtype = DType::F32;
  Shape shape;       // may contain kTokens in dimension 0
  WeightRef weight;  // kind == Weight only
};

// Bytes of weight value `v` in its dtype: dtype_bytes over its elements, exact when each row
// (last axis) is whole blocks, as every weight a block-quantised model can resolve is.
std::size_t weight_value_bytes(const Value& v);

// X(Enum, "name"): what part of the model an op belongs to.
#define HUDDLE_OP_ROLES(X)         \
  X(Other, "other")                \
  X(Embed, "embed")                \
  X(AttnNorm, "attn_norm")         \
  X(AttnQ, "attn_q")               \
  X(AttnK, "attn_k")               \
  X(AttnV, "attn_v")               \
  X(AttnRope, "attn_rope")         \
  X(AttnCore, "attn_core")         \
  X(AttnOut, "attn_out")           \
  X(AttnResidual, "attn_residual") \
  X(MlpNorm, "mlp_norm")           \
  X(MlpUp, "mlp_up")               \
  X(MlpGate, "mlp_gate")           \
  X(MlpAct, "mlp_act")             \
  X(MlpDown, "mlp_down")           \
  X(MlpResidual, "mlp_residual")   \
  X(FinalNorm, "final_norm")       \
  X(Head, "head")

enum class OpRole : std::uint8_t {
#define HUDDLE_ROLE_ENUM(e, name) e,
  HUDDLE_OP_ROLES(HUDDLE_ROLE_ENUM)
#undef HUDDLE_ROLE_ENUM
};
std::string_view op_role_name(OpRole role);

// The part of a transformer an op belongs to, by its role: connection blocks (embedding,
// residual adds, norms), attention, MLP, or the output head. nullopt for OpRole::Other.
enum class BlockKind : std::uint8_t { Connection, Attention, Mlp, Head };
std::optional<BlockKind> block_of(OpRole role);

struct OpAttrs {
  float eps = 0.0f;                                                    // norms
  kernels::WeightLayout weight_layout = kernels::WeightLayout::OutIn;  // linear
  int heads = 0;                                                       // rope, attention
  int kv_heads = 0;                                                    // attention
  int head_dim = 0;                                                    // rope, attention
  bool causal = false;                                                 // attention
  std::int64_t sliding_window = 0;        // attention: keys in (p - sliding_window, p]; 0 = all
  kernels::RopeSpec rope{.theta = 0.0f};  // rope
  int cache_slot = -1;                    // attention: KV cache index
  // Attention in lowered programs. A device may hold a subset [q_head_begin, +heads) of the
  // model's query heads; with kv_group > 0 (query heads per kv head in the whole model) its
  // kv_heads are those that subset reads, first = q_head_begin / kv_group.
  int q_head_begin = 0;
  int kv_group = 0;
  bool local_queries = false;  // queries are this device's token rows; keys are all tokens
  std::int64_t width = 0;      // scatter/broadcast from the primary, slice_cols: output columns
  std::int64_t col_begin = 0;  // slice_cols: first column
  // Data movement and local-query attention: the global ranks taking part, in group order
  // (a grid row or column of a 2D-tiled plan); empty = every rank. Token-split values of one
  // program are all split over the same group (the executor checks).
  std::vector<int> group;
  std::vector<std::int64_t> parts;  // all_gather_cols: columns of each group member, in order
  int peer = -1;                    // pipe_send / pipe_recv: the rank at the other end
  // all_gather, reduce_scatter, all_reduce, all_gather_cols, pipe_send / pipe_recv, row_exchange:
  // the form f32 activations travel in (core/wire_format.h; f32 = exact).
  WireFormat wire = WireFormat::F32;
  // all_gather whose readers are linears: each device's rows travel in this many chunks (at most
  // 1 MiB each), and the linears run on each chunk as it lands (Plan::gather_chunks).
  int chunks = 1;
  int threads = 0;  // 0: the kernels' pool; 1: this thread only (operator assignment's cpu1)
  // Imported (ONNX) ops. Conv and pool windows stay explicit so a row-splitting planner
  // (EdgeFlow) can derive each band's input rows (kernels::input_rows_for).
  kernels::Window2d window;        // conv2d, max_pool, avg_pool
  std::int64_t groups = 1;         // conv2d
  kernels::ActivationSpec act;     // conv2d: fused activation; clip, hard_sigmoid: a, b
  bool count_include_pad = false;  // avg_pool
  // conv2d, max_pool, avg_pool, global_avg_pool: x and the output are channels-last [N,H,W,C]
  // (graph/channels_last.h), not NCHW; row_exchange: its rows are H of [N,H,W,C].
  bool channels_last = false;
  // conv2d (channels-last only): the last input is a residual r shaped like the output, and
  // y = residual_act(act(conv(x) + bias) + r) (onnx/fuse.h, fuse_residual_adds).
  bool residual = false;
  kernels::ActivationSpec residual_act;
  kernels::ResizeSpec resize;               // resize
  int axis = 0;                             // concat, softmax (non-negative)
  bool softmax_flatten = false;             // softmax over all dims from axis (ONNX opset < 13)
  Shape shape;                              // reshape: target; slice, pipe_recv: output shape
  std::vector<std::int64_t> starts, steps;  // slice: per dimension, starts in range
  std::vector<std::int64_t> perm;           // transpose
  // Row-split ops (EdgeFlow lowering). banded conv2d / pools / resize compute output rows
  // [band.out_begin, band.out_end) of an output out_rows high, from an input holding rows
  // [band.in_begin, + its height) of one band.in_height high (kernels/cnn.h, RowBand).
  bool banded = false;
  kernels::RowBand band;
  std::int64_t out_rows = 0;
  // row_exchange: this device's part of a value's forwarding table. The input (if any) holds
  // rows [in_begin, +H) of the value, the output (attr shape) rows [out_begin, +H); each piece
  // sends or receives rows [begin, end) to or from `peer` (recvs from this rank: a local copy).
  // A value of another rank than 4 moves whole, as one row.
  struct RowPiece {
    int peer = -1;
    std::int64_t begin = 0, end = 0;
  };
  std::vector<RowPiece> sends, recvs;
  std::int64_t in_begin = 0, out_begin = 0;
  int exchange = -1;  // row_exchange: index of the exchange in the program (its message tag)
  // row_exchange of a graph input in f32, channels-last: each piece whose channels take at most
  // 256 values each (an 8-bit image, normalised) travels palette-coded (core/palette.h), exactly
  // and in about a quarter of the bytes; any other as f32. Each message then starts with a byte
  // saying which (kRowPieceF32, kRowPiecePalette).
  bool palette = false;
  // row_exchange of a 4-D graph output that only device 0 receives (it gathers the output):
  // the rows travel NCHW, the output's own layout, so each device converts its own rows before
  // sending and device 0 does not transpose the whole output after the last piece arrives.
  bool gather_nchw = false;
};

struct Op {
  OpKind kind;
  std::string name;
  std::vector<ValueId> inputs;
  ValueId output = -1;
  OpAttrs attrs;
  OpRole role = OpRole::Other;
  int layer = -1;  // transformer block index, -1 outside blocks
};

class Graph {
 public:
  ValueId add_input(std::string name, Shape shape, DType dtype);
  ValueId add_weight(std::string name, Shape shape, WeightRef ref, DType dtype = DType::F32);
  // Appends an op; infers and checks the output shape (PlanError naming the op on mismatch).
  ValueId add_op(OpKind kind, std::string name, std::vector<ValueId> inputs, OpAttrs attrs = {},
                 OpRole role = OpRole::Other, int layer = -1);
  void add_output(ValueId id);
  // Points weight value `id` at another tensor of the same shape (workers that receive their
  // slices as whole tensors).
  void rebind_weight(ValueId id, WeightRef ref);
  // Records the dtype weight value `id`'s tensor is kept in (Model::load).
  void set_weight_dtype(ValueId id, DType dtype);

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Op>& ops() const { return ops_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const Value& value(ValueId id) const;
  std::optional<ValueId> find(std::string_view name) const;
  // Number of KV-cache slots the attention ops use (max cache_slot + 1).
  int num_cache_slots() const;

  // Structure check: ids in range, inputs defined before use, names unique, shapes consistent.
  void validate() const;
  // Debug / tooling form: {"values": [...], "ops": [...], "outputs": [...]}.
  nlohmann::json to_json() const;

 private:
  ValueId add_value(Value v);

  std::vector<Value> values_;
  std::vector<Op> ops_;
  std::vector<ValueId> outputs_;
};

// Output shape of an op given its input shapes; throws PlanError naming `op_name` on mismatch.
Shape infer_shape(OpKind kind, const OpAttrs& attrs, const std::vector<Shape>& inputs,
                  std::string_view op_name);
// The imported (N-D, concrete-shape) ops' part of infer_shape (graph/shape_inference_nd.cpp).
Shape infer_imported_shape(OpKind kind, const OpAttrs& attrs, const std::vector<Shape>& inputs,
                           std::string_view op_name);

}  // namespace huddle
