#include "core/error.h"
#include "graph/graph.h"

#include <fmt/format.h>

#include <algorithm>

namespace huddle {
namespace {

[[noreturn]] void mismatch(std::string_view op, std::string_view what) {
  throw PlanError(fmt::format("op '{}': {}", op, what));
}

void expect_rank(const Shape& s, int rank, std::string_view op, std::string_view which) {
  if (static_cast<int>(s.size()) != rank) {
    mismatch(op, fmt::format("{} must have rank {}, has shape {}", which, rank, shape_str(s)));
  }
}

void expect_dim(std::int64_t got, std::int64_t want, std::string_view op, std::string_view what) {
  if (got != want) mismatch(op, fmt::format("{} is {}, expected {}", what, got, want));
}

}  // namespace

Shape infer_shape(OpKind kind, const OpAttrs& a, const std::vector<Shape>& in,
                  std::string_view op) {
  const int arity = op_arity(kind);
  if (arity >= 0 && static_cast<int>(in.size()) != arity) {
    mismatch(op, fmt::format("{} takes {} inputs, got {}", op_name(kind), arity, in.size()));
  }
  if (kind == OpKind::Concat && a.axis == 1 && !in.empty() &&
      std::all_of(in.begin(), in.end(), [](const Shape& s) { return s.size() == 2; })) {
    // Columns of [rows, w] matrices joined (a lowering's fused gather): rows may be symbolic.
    Shape out{in[0][0], 0};
    for (const Shape& s : in) {
      expect_dim(s[0], in[0][0], op, "rows");
      if (s[1] <= 0) mismatch(op, fmt::format("columns of {} are not positive", shape_str(s)));
      out[1] += s[1];
    }
    return out;
  }
  switch (kind) {
    case OpKind::Embedding:
      expect_rank(in[0], 1, op, "ids");
      expect_rank(in[1], 2, op, "table");
      return {in[0][0], in[1][1]};
    case OpKind::Add:
    case OpKind::Mul:
      if (in[0] != in[1]) return infer_imported_shape(kind, a, in, op);  // broadcasting
      return in[0];
    case OpKind::LayerNorm:
    case OpKind::RmsNorm: {
      expect_rank(in[0], 2, op, "x");
      for (std::size_t i = 1; i < in.size(); ++i) {
        expect_rank(in[i], 1, op, "norm parameter");
        expect_dim(in[i][0], in[0][1], op, "norm parameter length");
      }
      if (!(a.eps > 0.0f)) mismatch(op, "eps must be positive");
      return in[0];
    }
    case OpKind::Linear: {
      if (in.size() != 2 && in.size() != 3) mismatch(op, "linear takes x, w and an optional bias");
      expect_rank(in[0], 2, op, "x");
      expect_rank(in[1], 2, op, "weight");
      const bool out_in = a.weight_layout == kernels::WeightLayout::OutIn;
      const std::int64_t k = out_in ? in[1][1] : in[1][0];
      const std::int64_t n = out_in ? in[1][0] : in[1][1];
      expect_dim(in[0][1], k, op, "input width");
      if (in.size() == 3) {
        expect_rank(in[2], 1, op, "bias");
        expect_dim(in[2][0], n, op, "bias length");
      }
      return {in[0][0], n};
    }
    case OpKind::GeluTanh:
    case OpKind::GeluErf:
    case OpKind::Silu:
      return in[0];
    case OpKind::Rope:
      expect_rank(in[0], 2, op, "x");
      expect_rank(in[1], 1, op, "positions");
      if (a.heads <= 0 || a.head_dim <= 0 || a.head_dim % 2 != 0) {
        mismatch(op, fmt::format("heads {} / head_dim {} invalid", a.heads, a.head_dim));
      }
      expect_dim(in[0][1], static_cast<std::int64_t>(a.heads) * a.head_dim, op, "x width");
      if (!(a.rope.theta > 0.0f)) mismatch(op, "rope theta must be positive");
      if (a.rope.scaling != kernels::RopeScaling::None && !(a.rope.factor > 0.0f)) {
        mismatch(op, "rope scaling factor must be positive");
      }
      if ((a.rope.scaling == kernels::RopeScaling::Dynamic ||
           a.rope.scaling == kernels::RopeScaling::Llama3) &&
          a.rope.original_max_positions <= 0) {
        mismatch(op, "rope scaling needs the original context length");
      }
      return in[0];
    case OpKind::Attention: {
      for (const Shape& s : in) expect_rank(s, 2, op, "q/k/v");
      if (a.kv_group > 0) {
        const int first = a.q_head_begin / a.kv_group;
        const int last = (a.q_head_begin + a.heads - 1) / a.kv_group;
        if (a.heads <= 0 || a.q_head_begin < 0 || a.kv_heads != last - first + 1) {
          mismatch(op, fmt::format("query heads [{}, {}) in groups of {} read {} kv heads, not {}",
                                   a.q_head_begin, a.q_head_begin + a.heads, a.kv_group,
                                   last - first + 1, a.kv_heads));
        }
      } else if (a.heads <= 0 || a.kv_heads <= 0 || a.head_dim <= 0 || a.heads % a.kv_heads != 0) {
        mismatch(op, fmt::format("heads {} must be a positive multiple of kv_heads {}", a.heads,
                                 a.kv_heads));
      }
      expect_dim(in[0][1], static_cast<std::int64_t>(a.heads) * a.head_dim, op, "q width");
      expect_dim(in[1][1], static_cast<std::int64_t>(a.kv_heads) * a.head_dim, op, "k width");
      expect_dim(in[2][1], static_cast<std::int64_t>(a.kv_heads) * a.head_dim, op, "v width");
      if (a.cache_slot < 0) mismatch(op, "attention needs a cache_slot");
      if (a.sliding_window < 0 || (a.sliding_window > 0 && !a.causal)) {
        mismatch(op, fmt::format("sliding window {} needs a causal attention", a.sliding_window));
      }
      return in[0];
    }
    case OpKind::LastRow:
      expect_rank(in[0], 2, op, "x");
      return {kOutputRows, in[0][1]};
    case OpKind::SliceCols:
      expect_rank(in[0], 2, op, "x");
      if (a.col_begin < 0 || a.width <= 0 || a.col_begin + a.width > in[0][1]) {
        mismatch(op, fmt::format("columns [{}, {}) do not fit the input {}", a.col_begin,
                                 a.col_begin + a.width, shape_str(in[0])));
      }
      return {in[0][0], a.width};
    case OpKind::AllGatherCols: {
      expect_rank(in[0], 2, op, "x");
      std::int64_t total = 0;
      bool mine = false;
      for (std::int64_t p : a.parts) {
        if (p <= 0) mismatch(op, "every group member needs at least one column");
        total += p;
        mine = mine || p == in[0][1];
      }
      if (a.parts.size() != a.group.size() || !mine) {
        mismatch(op, fmt::format("{} column parts for a group of {} ranks, input {}",
                                 a.parts.size(), a.group.size(), shape_str(in[0])));
      }
      return {in[0][0], total};
    }
    case OpKind::GatherColsToPrimary: {
      expect_rank(in[0], 2, op, "x");
      std::int64_t total = 0;
      for (std::int64_t p : a.parts) {
        if (p <= 0) mismatch(op, "every device needs at least one column");
        total += p;
      }
      if (a.parts.size() < 2 || !a.group.empty()) {
        mismatch(op, fmt::format("{} column parts{}; it needs one per device, over every device",
                                 a.parts.size(), a.group.empty() ? "" : " in a group"));
      }
      return {in[0][0], total};
    }
    case OpKind::LocalRows:
      if (in[0].empty() || in[0][0] != kTokens) mismatch(op, "local_rows needs all tokens' rows");
      return [&] {
        Shape s = in[0];
        s[0] = kLocalTokens;
        return s;
      }();
    case OpKind::AllGather:
    case OpKind::GatherToPrimary:
      expect_rank(in[0], 2, op, "x");
      if (in[0][0] != kLocalTokens) mismatch(op, "gathers need this device's token rows as input");
      return {kTokens, in[0][1]};
    case OpKind::ReduceScatter:
      expect_rank(in[0], 2, op, "x");
      if (in[0][0] != kTokens) mismatch(op, "reduce_scatter needs all tokens' rows");
      return {kLocalTokens, in[0][1]};
    case OpKind::AllReduce:
      expect_rank(in[0], 2, op, "x");
      return in[0];
    case OpKind::ScatterFromPrimary:
    case OpKind::BroadcastFromPrimary: {
      if (in[0].empty() || in[0][0] != kTokens)
        mismatch(op, "needs all tokens' rows (or the ids) as input");
      if (a.width <= 0 || (in[0].size() == 2 && in[0][1] != a.width)) {
        mismatch(op,
                 fmt::format("width {} does not match the input {}", a.width, shape_str(in[0])));
      }
      return {kind == OpKind::ScatterFromPrimary ? kLocalTokens : kTokens, a.width};
    }
    case OpKind::PipeSend:
      if (a.peer < 0) mismatch(op, "pipe_send needs a peer");
      return in[0];
    case OpKind::PipeRecv:
      if (a.peer < 0) mismatch(op, "pipe_recv needs a peer");
      if (in.empty()) {  // token-less: a value of concrete shape (an imported graph's)
        if (a.shape.empty() ||
            std::any_of(a.shape.begin(), a.shape.end(), [](std::int64_t d) { return d < 0; })) {
          mismatch(op, fmt::format("a pipe_recv without the ids needs a concrete shape, not {}",
                                   shape_str(a.shape)));
        }
        return a.shape;
      }
      if (in.size() != 1 || in[0].size() != 1 || in[0][0] != kTokens)
        mismatch(op, "needs the ids as input");
      if (a.width <= 0) mismatch(op, fmt::format("width {} is not positive", a.width));
      return {kTokens, a.width};
    case OpKind::RowExchange:
      if (in.size() > 1) mismatch(op, "row_exchange takes at most the rows this device holds");
      if (a.shape.empty()) mismatch(op, "row_exchange needs its output shape");
      for (const auto& pieces : {a.sends, a.recvs}) {
        for (const OpAttrs::RowPiece& p : pieces) {
          if (p.peer < 0 || p.end <= p.begin) mismatch(op, "row_exchange piece without rows");
        }
      }
      if (!a.sends.empty() && in.empty()) mismatch(op, "row_exchange sends rows it does not hold");
      return a.shape;
#define HUDDLE_IMPORTED_CASE(e, name, arity, doc) case OpKind::e:
      HUDDLE_IMPORTED_OPS(HUDDLE_IMPORTED_CASE)
#undef HUDDLE_IMPORTED_CASE
      return infer_imported_shape(kind, a, in, op);
  }
  mismatch(op, "unknown op kind");
}

}  // namespace huddle
