// Lowering of Hepti's 2D-tiled weight-stationary mode (papers/hepti-parallel-transformer-
// inference, §3 "2D-tiled WS"): every weight matrix of a layer is cut into an R x C grid of
// tiles and device (i, j) of the grid holds tile (hidden[i]) x (heads[j] or columns[j]), so each
// device holds ~1/n of every layer's weights.
//
// Groups: the row group of (i, j) is grid row i (same hidden range, every head / column range);
// its column group is grid column j (same heads / FFN columns, every hidden range).
//
// Layouts on device (i, j) (T = the step's tokens; L = this device's part of them when the
// step's tokens are split over the column group by the devices' token shares; h = |hidden[i]|;
// w = the block's local width: |heads[j]|·head_dim for q and the attention output,
// |kv heads read by heads[j]|·head_dim for k and v, |columns[j]| in the MLP):
//   Replicated  [T, C]  every device, whole (residual stream, norms, embedding output)
//   Primary     [T, C]  device 0 only (the embedding, the head)
//   Hidden      [T, h]  columns hidden[i] of a replicated value (a view)
//   ColPartial  [T, w]  partial sums over the column group: one term per hidden range
//   ColTokens   [L, w]  summed; this device's tokens of its column group
//   ColAll      [T, w]  summed, every token; identical across the column group
//   RowPartial  [T, h]  partial sums over the row group: one term per head / column range
//   RowReduced  [T, h]  summed; identical across the row group
//
// Per layer (x the replicated residual stream; norms and residual adds run on every device,
// redundantly, as in Hepti's 1D and 2D modes):
//   attention  xn = norm(x)                        Replicated
//              q/k/v = xn[:, hidden[i]] · W tile  ColPartial   (bias on grid row 0)
//              q -> reduce_scatter (column group)  ColTokens    queries: own tokens
//              k, v -> all_reduce (column group)   ColAll       keys: every token
//              rope, attention(heads[j])           ColTokens    whole heads, own queries
//              -> all_gather (column group)        ColAll
//              y = a · W_o tile                    RowPartial   (bias on grid column 0)
//              -> all_reduce (row group)           RowReduced
//              -> all_gather_cols (column group)   Replicated   x += y
//   MLP        u (g) = xn[:, hidden[i]] · W tile  ColPartial
//              -> reduce_scatter (column group)    ColTokens    activation (· gate) own tokens
//              -> all_gather (column group)        ColAll
//              y = a · W_down tile                 RowPartial -> all_reduce (row) ->
//                                                  all_gather_cols (column) -> Replicated
//
// Attention needs whole heads and every key. The q/k/v partial sums of a column group's heads
// are spread over its R devices (one per hidden range). Reducing all of them everywhere would
// make the R devices compute the same attention; instead the queries are reduce-scattered by
// token, so each device attends for its own tokens (no attention or activation computed twice),
// while keys and values are all-reduced: every device of the column group keeps the KV cache of
// the group's kv heads (R copies: the KV cache per device is ~1/C, not 1/n, of the model's). The
// alternative — splitting the column group's heads again among its devices — keeps a 1/n KV
// cache but needs column-wise reduce-scatters of q/k/v and breaks for kv heads shared across the
// split (GQA); token splitting reuses the row collectives and their compute overlap.
// A decode step has one token: one device per column group attends, the others wait.
//
// Bytes each device sends per layer (ring collectives, MHA, even split, E = T·hidden·4 bytes):
//   attention: q reduce-scatter (R-1)/R·E/C, k+v all-reduce 4(R-1)/R·E/C, attention all-gather
//              (R-1)/R·E/C, out all-reduce 2(C-1)/C·E/R, all_gather_cols (R-1)/R·E
//   MLP (ffn = 4·hidden): up reduce-scatter and all-gather 2·4(R-1)/R·E/C (gated: one more
//              reduce-scatter), down all-reduce 2(C-1)/C·E/R, all_gather_cols (R-1)/R·E
// 1D-tiled (megatron) sends two all-reduces of E over n devices: 4(n-1)/n·E per layer. On
// 2 x 2, 2D sends 5.5·E against 3·E for 1D, on 4 x 4 4.9·E against 3.75·E: what 2D buys is the
// 1/n weight tiles (1D keeps q/k/v/up whole along hidden) and collectives in groups of ~sqrt(n)
// devices; the hidden all-gather of the replicated residual, (R-1)/R·E, does not shrink with n
// (docs/distributed.md).
#include "plan/lowering_2d.h"

#include "core/error.h"
#include "plan/lowering_engine.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

namespace huddle {
namespace {

using lowering::Layout;
using lowering::LoweringEngine;

class Lowering2D final : public LoweringEngine {
 public:
  Lowering2D(const Graph& g, const ModelConfig& c, const Plan& p, int rank)
      : LoweringEngine(g, c, p, rank),
        grid_(*p.grid),
        row_(grid_.row_of(rank)),
        col_(grid_.col_of(rank)),
        row_group_(grid_.row_group(row_)),
        col_group_(grid_.column_group(col_)) {}

 private:
  const LayerPlan& layer(int l) const { return p_.layers.at(static_cast<std::size_t>(l)); }
  Range hidden(int l) const { return layer(l).hidden[static_cast<std::size_t>(row_)]; }
  Range heads(int l) const { return layer(l).heads[static_cast<std::size_t>(col_)]; }
  Range columns(int l) const { return layer(l).columns[static_cast<std::size_t>(col_)]; }
  // The kv heads that query heads [hb, he) read.
  Range kv_heads(int l) const {
    const auto [hb, he] = heads(l);
    const int group = c_.heads / c_.kv_heads;
    return {hb / group, (he - 1) / group + 1};
  }

  OpAttrs in_group(const std::vector<int>& group, WireFormat wire = WireFormat::F32) const {
    OpAttrs a;
    a.group = group;
    a.wire = wire;
    return a;
  }

  // Hidden slices depend on the reading op's layer (a plan's layers may differ).
  bool reusable_move(Layout want) const override { return want != Layout::Hidden; }

  ValueId move(ValueId id, ValueId have_id, Layout have, Layout want,
               const std::string& name) override {
    const Value& v = g_.value(id);
    if (want == Layout::Hidden) {
      // Columns of the whole value, the hidden range of the reading op's layer, kept per layer.
      const auto slice_key = std::make_pair(id, current_layer_);
      if (const auto c = hidden_slices_.find(slice_key); c != hidden_slices_.end())
        return c->second;
      const ValueId whole = get(id, Layout::Replicated);
      const auto [hb, he] = hidden(current_layer_);
      OpAttrs attrs;
      attrs.col_begin = hb;
      attrs.width = he - hb;
      const ValueId result =
          emit(OpKind::SliceCols, fmt::format("{}@hidden.{}", v.name, current_layer_), {whole},
               attrs, OpRole::Other);
      hidden_slices_[slice_key] = result;
      return result;
    }
    if (have == Layout::Replicated && want == Layout::ColTokens)
      return emit(OpKind::LocalRows, name, {have_id}, in_group(col_group_), OpRole::Other);
    const WireFormat wire = wire_for(p_, g_, id);
    if (have == Layout::ColPartial && want == Layout::ColTokens)
      return emit(OpKind::ReduceScatter, name, {have_id}, in_group(col_group_, wire),
                  OpRole::Other);
    if (have == Layout::ColPartial && want == Layout::ColAll)
      return emit(OpKind::AllReduce, name, {have_id}, in_group(col_group_, wire), OpRole::Other);
    if (have == Layout::ColTokens && want == Layout::ColAll)
      return emit(OpKind::AllGather, name, {have_id}, in_group(col_group_, wire), OpRole::Other);
    if (have == Layout::RowPartial && want == Layout::RowReduced)
      return emit(OpKind::AllReduce, name, {have_id}, in_group(row_group_, wire), OpRole::Other);
    if ((have == Layout::RowPartial || have == Layout::RowReduced) && want == Layout::Replicated) {
      const ValueId reduced = get(id, Layout::RowReduced);
      OpAttrs attrs = in_group(col_group_, wire);
      for (const auto& [b, e] : layer(row_layer_.at(id)).hidden) attrs.parts.push_back(e - b);
      return emit(OpKind::AllGatherCols, name, {reduced}, attrs, OpRole::Other);
    }
    throw PlanError(fmt::format("2d-tiled lowering cannot move '{}' from {} to {}", v.name,
                                layout_name(have), layout_name(want)));
  }

  // A linear whose output columns are this grid column's [b, e) (q/k/v, MLP up/gate): it reads
  // the hidden rows of grid row i and yields partial sums over the column group; the bias
  // (output columns [b, e)) is added on grid row 0 only, so the sum counts it once.
  void column_tiled(const Op& op, std::int64_t b, std::int64_t e) {
    const auto [hb, he] = hidden(op.layer);
    const int out = out_axis(op);
    std::vector<ValueId> inputs = {get(op.inputs[0], Layout::Hidden),
                                   weight_tile(op.inputs[1], {{out, b, e}, {1 - out, hb, he}})};
    if (op.inputs.size() == 3 && row_ == 0)
      inputs.push_back(weight_tile(op.inputs[2], {{0, b, e}}));
    define(op, emit(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer),
           Layout::ColPartial);
  }

  // A linear whose input columns are this grid column's [b, e) (attention out, MLP down): it
  // yields the hidden rows of grid row i, partial over the row group; bias on grid column 0.
  void row_tiled(const Op& op, std::int64_t b, std::int64_t e) {
    const auto [hb, he] = hidden(op.layer);
    const int out = out_axis(op);
    std::vector<ValueId> inputs = {get(op.inputs[0], Layout::ColAll),
                                   weight_tile(op.inputs[1], {{out, hb, he}, {1 - out, b, e}})};
    if (op.inputs.size() == 3 && col_ == 0)
      inputs.push_back(weight_tile(op.inputs[2], {{0, hb, he}}));
    define(op, emit(op.kind, op.name, std::move(inputs), op.attrs, op.role, op.layer),
           Layout::RowPartial);
    row_layer_[op.output] = op.layer;
  }

  void lower_op(const Op& op) override {
    const std::optional<BlockKind> block = block_of(op.role);
    if (!block)
      throw PlanError(fmt::format("op '{}' has no role; lowering cannot place it", op.name));
    if (op.layer >= 0) current_layer_ = op.layer;
    switch (*block) {
      case BlockKind::Connection:
        if (op.role == OpRole::Embed && p_.num_devices() > 1) {
          // The embedding runs on device 0 (the tables stay there) and is broadcast.
          if (rank_ == 0) return same_op(op, Layout::Primary);
          lowered_[op.output] = {-1, Layout::Primary};
          return;
        }
        return same_op(op, Layout::Replicated);
      case BlockKind::Attention:
        return attention(op);
      case BlockKind::Mlp:
        return mlp(op);
      case BlockKind::Head:
        return head(op);
    }
  }

  void attention(const Op& op) {
    const auto [hb, he] = heads(op.layer);
    const auto [kb, ke] = kv_heads(op.layer);
    const std::int64_t d = c_.head_dim;
    switch (op.role) {
      case OpRole::AttnQ:
        column_tiled(op, hb * d, he * d);
        queries_.insert(op.output);
        return;
      case OpRole::AttnK:
      case OpRole::AttnV:
        return column_tiled(op, kb * d, ke * d);
      case OpRole::AttnRope: {
        const bool query = queries_.contains(op.inputs[0]);
        const Layout layout = query ? Layout::ColTokens : Layout::ColAll;
        OpAttrs attrs = op.attrs;
        attrs.heads = static_cast<int>(query ? he - hb : ke - kb);
        const ValueId x = get(op.inputs[0], layout);
        const ValueId pos = get(op.inputs[1], query ? Layout::ColTokens : Layout::Replicated);
        define(op, emit(op.kind, op.name, {x, pos}, attrs, op.role, op.layer), layout);
        if (query) queries_.insert(op.output);
        return;
      }
      case OpRole::AttnCore: {
        OpAttrs attrs = op.attrs;
        attrs.heads = static_cast<int>(he - hb);
        attrs.kv_heads = static_cast<int>(ke - kb);
        attrs.q_head_begin = static_cast<int>(hb);
        attrs.kv_group = c_.heads / c_.kv_heads;
        attrs.local_queries = true;
        attrs.group = col_group_;
        const ValueId q = get(op.inputs[0], Layout::ColTokens);
        const ValueId k = get(op.inputs[1], Layout::ColAll);
        const ValueId v = get(op.inputs[2], Layout::ColAll);
        define(op, emit(op.kind, op.name, {q, k, v}, attrs, op.role, op.layer), Layout::ColTokens);
        return;
      }
      case OpRole::AttnOut:
        return row_tiled(op, hb * d, he * d);
      default:
        throw PlanError(fmt::format("op '{}' is not a known part of an attention block", op.name));
    }
  }

  void mlp(const Op& op) {
    const auto [cb, ce] = columns(op.layer);
    switch (op.role) {
      case OpRole::MlpUp:
      case OpRole::MlpGate:
        return column_tiled(op, cb, ce);
      case OpRole::MlpAct:
        return same_op(op, Layout::ColTokens);
      case OpRole::MlpDown:
        return row_tiled(op, cb, ce);
      default:
        throw PlanError(fmt::format("op '{}' is not a known part of an MLP block", op.name));
    }
  }

  // The head runs on device 0, which holds the replicated final hidden states.
  void head(const Op& op) { head_on_primary(op); }

  Grid grid_;
  int row_, col_;
  std::vector<int> row_group_, col_group_;
  int current_layer_ = 0;
  std::map<std::pair<ValueId, int>, ValueId> hidden_slices_;  // (value, layer) -> its slice
  std::map<ValueId, int> row_layer_;  // RowPartial values: the layer whose hidden ranges they use
  std::set<ValueId> queries_;         // model values that are queries (q, rope(q))
};

}  // namespace

Program lower_2d(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank) {
  HUDDLE_CHECK(plan.grid.has_value() && rank >= 0 && rank < plan.num_devices());
  return Lowering2D(graph, config, plan, rank).run();
}

}  // namespace huddle
