// The operations a Graph can hold. One table (HUDDLE_OPS) generates the enum, names and arity.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace huddle {

// The ops of imported graphs (ONNX CNNs), a part of HUDDLE_OPS (is_imported_op tells them).
#define HUDDLE_IMPORTED_OPS(X)                                                                   \
  /* Concrete N-D shapes, NCHW images. Add and Mul of HUDDLE_OPS also broadcast (numpy rules) */ \
  /* when neither operand has a symbolic dimension. */                                           \
  X(Sub, "sub", 2, "a - b, numpy broadcasting")                                                  \
  X(Div, "div", 2, "a / b, numpy broadcasting")                                                  \
  X(Relu, "relu", 1, "x -> max(x, 0)")                                                           \
  X(Clip, "clip", 1, "x -> min(max(x, act.a), act.b)")                                           \
  X(Sigmoid, "sigmoid", 1, "x -> 1 / (1 + e^-x)")                                                \
  X(HardSigmoid, "hard_sigmoid", 1, "x -> max(0, min(1, act.a x + act.b))")                      \
  X(HardSwish, "hard_swish", 1, "x -> x hard_sigmoid(x; 1/6, 1/2)")                              \
  X(Conv2d, "conv2d", -1,                                                                        \
    "x[N,C,H,W], w[O,C/groups,kh,kw], (bias[O]), (residual) -> [N,O,Ho,Wo]; attrs window "       \
    "(kernel, stride, pads top/left/bottom/right, dilation), groups, act (fused activation), "   \
    "channels_last, residual (+ residual_act)")                                                  \
  X(BatchNorm, "batch_norm", 5,                                                                  \
    "x[N,C,...], scale[C], bias[C], mean[C], var[C] -> x's shape; attr eps (folded into the "    \
    "preceding conv2d at load when there is one)")                                               \
  X(MaxPool, "max_pool", 1, "x[N,C,H,W] -> [N,C,Ho,Wo]; attr window (pads ignored)")             \
  X(AvgPool, "avg_pool", 1, "x[N,C,H,W] -> [N,C,Ho,Wo]; attrs window, count_include_pad")        \
  X(GlobalAvgPool, "global_avg_pool", 1, "x[N,C,H,W] -> [N,C,1,1]")                              \
  X(Resize, "resize", 1, "x[N,C,H,W] -> [N,C,shape[0],shape[1]]; attrs resize, shape")           \
  X(Concat, "concat", -1, "xs joined along attr axis")                                           \
  X(Slice, "slice", 1, "x -> x[starts + i steps] per dim; attrs starts, steps, shape (output)")  \
  X(Reshape, "reshape", 1, "x -> attr shape (same element count; a view when x is dead)")        \
  X(Transpose, "transpose", 1, "x -> x permuted by attr perm")                                   \
  X(MatMul, "matmul", 2, "a[...,M,K] . b[...,K,N] -> [...,M,N], batch dims broadcast")           \
  X(Softmax, "softmax", 1, "softmax over attr axis (or all dims from it: softmax_flatten)")

// X(Enum, "name", inputs (-1: variable), summary)
#define HUDDLE_OPS(X)                                                                            \
  X(Embedding, "embedding", 2, "ids[T] (I32), table[V,C] -> [T,C]")                              \
  X(Add, "add", 2, "a[T,C] + b[T,C]")                                                            \
  X(Mul, "mul", 2, "a[T,C] * b[T,C]")                                                            \
  X(LayerNorm, "layer_norm", 3, "x[T,C], w[C], b[C] -> [T,C]; attr eps")                         \
  X(RmsNorm, "rms_norm", 2, "x[T,C], w[C] -> [T,C]; attr eps")                                   \
  X(Linear, "linear", -1, "x[T,K], w, (bias[N]) -> [T,N]; attr weight_layout")                   \
  X(GeluTanh, "gelu_tanh", 1, "x -> x")                                                          \
  X(GeluErf, "gelu_erf", 1, "x -> x")                                                            \
  X(Silu, "silu", 1, "x -> x")                                                                   \
  X(Rope, "rope", 2, "x[T,H*D], positions[T] (I32) -> [T,H*D]; attrs heads, head_dim, rope")     \
  X(Attention, "attention", 3,                                                                   \
    "q[T,H*D], k[T,Hkv*D], v[T,Hkv*D] -> [T,H*D]; attrs heads, kv_heads, head_dim, causal, "     \
    "sliding_window, cache_slot (KV cache of this step's keys/values appended before "           \
    "attending)")                                                                                \
  X(LastRow, "last_row", 1, "x[T,C] -> [R,C]: the last token (R = 1), or all rows when wanted")  \
  X(SliceCols, "slice_cols", 1, "x[T,C] -> [T,width]: columns [col_begin, +width) (a view)")     \
  /* Data movement between devices (lowered programs only; T = all tokens, L = local; attr */    \
  /* group: the ranks taking part, all when empty). */                                           \
  X(LocalRows, "local_rows", 1, "x[T,...] -> [L,...]: this device's token rows (a view)")        \
  X(AllGather, "all_gather", 1, "x[L,C] -> [T,C]: every device's rows, ring all-gather")         \
  X(ReduceScatter, "reduce_scatter", 1, "partial x[T,C] -> [L,C]: summed, own rows")             \
  X(AllReduce, "all_reduce", 1, "partial x[T,C] -> [T,C]: summed on every device")               \
  X(AllGatherCols, "all_gather_cols", 1,                                                         \
    "x[T,parts[me]] -> [T,sum(parts)]: every member's columns, in group order (ring)")           \
  X(GatherToPrimary, "gather_to_primary", 1, "x[L,C] -> [T,C] on device 0 (others: nothing)")    \
  X(GatherColsToPrimary, "gather_cols_to_primary", 1,                                            \
    "x[R,parts[me]] -> [R,sum(parts)] on device 0 (others: nothing); every device's columns")    \
  X(ScatterFromPrimary, "scatter_from_primary", 1,                                               \
    "x[T,C] on device 0 -> [L,C] on every device (elsewhere the input is the ids: rows only)")   \
  X(BroadcastFromPrimary, "broadcast_from_primary", 1,                                           \
    "x[T,C] on device 0 -> [T,C] on every device (elsewhere the input is the ids: rows only)")   \
  /* Pipeline stages (attr peer: the other end). */                                              \
  X(PipeSend, "pipe_send", 1, "x[R,C] -> x: sent to rank `peer` (the next stage, or device 0)")  \
  X(PipeRecv, "pipe_recv", -1, "(ids[T]) -> [T,width] or attr `shape` without ids: from `peer`") \
  /* Row-split CNNs (EdgeFlow): attrs sends, recvs, in_begin, out_begin, shape, exchange. */     \
  X(RowExchange, "row_exchange", -1,                                                             \
    "(x[N,C,held,W]) -> [N,C,needed,W]: rows sent to and received from peers, own rows copied")  \
  HUDDLE_IMPORTED_OPS(X)

enum class OpKind : std::uint8_t {
#define HUDDLE_OP_ENUM(e, name, arity, doc) e,
  HUDDLE_OPS(HUDDLE_OP_ENUM)
#undef HUDDLE_OP_ENUM
};

std::string_view op_name(OpKind kind);
std::optional<OpKind> parse_op_kind(std::string_view name);
// Number of inputs the op takes, or -1 when it varies (Linear: 2 or 3).
int op_arity(OpKind kind);
// Whether the op is one of HUDDLE_IMPORTED_OPS (concrete N-D shapes; Executor::run).
bool is_imported_op(OpKind kind);
// Whether the op moves data between devices (or, local_rows, takes this device's rows of it).
bool moves_data(OpKind kind);
// Whether the op communicates with other devices (moves_data except local_rows).
bool communicates(OpKind kind);

}  // namespace huddle
