#include "graph/op_kind.h"

namespace huddle {

std::string_view op_name(OpKind kind) {
  switch (kind) {
#define HUDDLE_OP_NAME(e, name, arity, doc) \
  case OpKind::e:                           \
    return name;
    HUDDLE_OPS(HUDDLE_OP_NAME)
#undef HUDDLE_OP_NAME
  }
  return "?";
}

std::optional<OpKind> parse_op_kind(std::string_view name) {
#define HUDDLE_OP_PARSE(e, str, arity, doc) \
  if (name == str) return OpKind::e;
  HUDDLE_OPS(HUDDLE_OP_PARSE)
#undef HUDDLE_OP_PARSE
  return std::nullopt;
}

int op_arity(OpKind kind) {
  switch (kind) {
#define HUDDLE_OP_ARITY(e, name, arity, doc) \
  case OpKind::e:                            \
    return arity;
    HUDDLE_OPS(HUDDLE_OP_ARITY)
#undef HUDDLE_OP_ARITY
  }
  return 0;
}

bool is_imported_op(OpKind kind) {
  switch (kind) {
#define HUDDLE_OP_IMPORTED(e, name, arity, doc) \
  case OpKind::e:                               \
    return true;
    HUDDLE_IMPORTED_OPS(HUDDLE_OP_IMPORTED)
#undef HUDDLE_OP_IMPORTED
    default:
      return false;
  }
}

bool moves_data(OpKind kind) {
  switch (kind) {
    case OpKind::LocalRows:
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::AllReduce:
    case OpKind::GatherToPrimary:
    case OpKind::ScatterFromPrimary:
    case OpKind::BroadcastFromPrimary:
    case OpKind::AllGatherCols:
    case OpKind::GatherColsToPrimary:
    case OpKind::PipeSend:
    case OpKind::PipeRecv:
    case OpKind::RowExchange:
      return true;
    default:
      return false;
  }
}

bool communicates(OpKind kind) {
  return moves_data(kind) && kind != OpKind::LocalRows;
}

}  // namespace huddle
