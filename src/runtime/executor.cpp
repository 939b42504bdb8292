#include "runtime/executor.h"

#include "runtime/row_exchange.h"

#include "collectives/p2p.h"
#include "collectives/ring.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "kernels/cnn.h"
#include "kernels/kernels.h"
#include "kernels/tensor_ops.h"
#include "kernels/thread_pool.h"
#include "net/transport.h"
#include "plan/split.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

#include <time.h>

namespace huddle {
namespace {

std::chrono::nanoseconds process_cpu_time() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Times one op for the observer: the wall clock, and the process's CPU clock when asked.
class OpStopwatch {
 public:
  explicit OpStopwatch(bool measure_cpu)
      : wall_start_(std::chrono::steady_clock::now()),
        cpu_start_(measure_cpu ? process_cpu_time() : std::chrono::nanoseconds(-1)) {}
  OpTime elapsed() const {
    OpTime t;
    t.wall = std::chrono::steady_clock::now() - wall_start_;
    if (cpu_start_.count() >= 0) t.cpu = process_cpu_time() - cpu_start_;
    return t;
  }

 private:
  std::chrono::steady_clock::time_point wall_start_;
  std::chrono::nanoseconds cpu_start_;
};

bool is_elementwise(OpKind kind) {
  return kind == OpKind::Add || kind == OpKind::Mul || kind == OpKind::GeluTanh ||
         kind == OpKind::GeluErf || kind == OpKind::Silu || kind == OpKind::Rope;
}

// Element-wise ops of imported graphs that may write into a dead input of the output's shape.
bool is_imported_elementwise(OpKind kind) {
  return kind == OpKind::Sub || kind == OpKind::Div || kind == OpKind::Relu ||
         kind == OpKind::Clip || kind == OpKind::Sigmoid || kind == OpKind::HardSigmoid ||
         kind == OpKind::HardSwish || kind == OpKind::Softmax;
}

kernels::ActivationSpec activation_of(const Op& op) {
  switch (op.kind) {
    case OpKind::Relu:
      return {kernels::Activation::Relu, 0, 0};
    case OpKind::Clip:
      return {kernels::Activation::Clip, op.attrs.act.a, op.attrs.act.b};
    case OpKind::Sigmoid:
      return {kernels::Activation::Sigmoid, 0, 0};
    case OpKind::HardSigmoid:
      return {kernels::Activation::HardSigmoid, op.attrs.act.a, op.attrs.act.b};
    case OpKind::HardSwish:
      return {kernels::Activation::HardSwish, 0, 0};
    default:
      return {};
  }
}

// Ops whose input or output rows are this device's share of the step's tokens.
bool splits_tokens(const Op& op) {
  return op.kind == OpKind::LocalRows || op.kind == OpKind::AllGather ||
         op.kind == OpKind::ReduceScatter || op.kind == OpKind::GatherToPrimary ||
         op.kind == OpKind::ScatterFromPrimary ||
         (op.kind == OpKind::Attention && op.attrs.local_queries);
}

// The rows a conv, pool or resize computes: its band, or the whole output.
kernels::RowBand band_of(const Op& op, const Tensor& x, const Tensor& y) {
  if (op.attrs.banded) return op.attrs.band;
  const int rows = op.attrs.channels_last ? 1 : 2;  // H of [N,H,W,C] or [N,C,H,W]
  return kernels::whole_band(x.dim(rows), y.dim(rows));
}

std::string group_text(const std::vector<int>& group) {
  if (group.empty()) return "every rank";
  return fmt::format("ranks {}", fmt::join(group, ", "));
}

// Packed weights are read by OutIn linears (PackedWeight::pack makes no other kind) and by
// embeddings, from the table a linear packed (a head tied to the embedding).
bool reads_packed(const Op& op, std::size_t input) {
  if (op.kind == OpKind::Embedding) return input == 1;
  return op.kind == OpKind::Linear && input == 1 &&
         op.attrs.weight_layout == kernels::WeightLayout::OutIn;
}

}  // namespace

Executor::Executor(const Graph& graph, const WeightMap& weights, std::int64_t max_positions)
    : Executor(graph, weights, max_positions, DeviceGroup{nullptr, {1.0}}) {}

Executor::Executor(const Graph& graph, const WeightMap& weights, std::int64_t max_positions,
                   DeviceGroup group)
    : graph_(graph), max_positions_(max_positions), group_(std::move(group)) {
  bind(weights);
  pack_linear_weights();
}

Executor::Executor(const Graph& graph, WeightMap&& weights, std::int64_t max_positions,
                   DeviceGroup group)
    : graph_(graph), max_positions_(max_positions), group_(std::move(group)) {
  bind(weights);
  weights.clear();
  pack_linear_weights();
}

void Executor::bind(const WeightMap& weights) {
  const Graph& graph = graph_;
  const int size = group_.transport ? group_.transport->size() : 1;
  if (static_cast<int>(group_.token_shares.size()) != size) {
    throw PlanError(
        fmt::format("{} token shares for a group of {} devices", group_.token_shares.size(), size));
  }
  const std::size_t n = graph.values().size();
  bound_weights_.resize(n);
  last_use_.assign(n, 0);
  is_output_.assign(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const Value& v = graph.values()[i];
    if (v.kind != ValueKind::Weight) continue;
    Tensor t = resolve_weight(weights, v.weight);
    if (t.shape() != v.shape) {
      throw PlanError(fmt::format("weight '{}' is bound to a tensor of shape {}, graph expects {}",
                                  v.name, shape_str(t.shape()), shape_str(v.shape)));
    }
    // A column slice of a whole weight this device holds (a tensor-parallel cut of K, taken from
    // the mapped checkpoint) is copied into rows of its own: read in place, every row is a short
    // run followed by a gap, and the hardware prefetchers never get going (measured: the
    // primary's row-parallel linears took 3-3.6x the time of a worker's compact slice).
    if (!t.contiguous()) t = t.clone();
    bound_weights_[i] = std::move(t);
  }
  for (std::size_t op = 0; op < graph.ops().size(); ++op) {
    for (ValueId id : graph.ops()[op].inputs) last_use_[static_cast<std::size_t>(id)] = op;
  }
  for (ValueId id : graph.outputs()) is_output_[static_cast<std::size_t>(id)] = true;
  std::vector<bool> from_last_row(n, false);
  after_last_row_.assign(graph.ops().size(), false);
  for (std::size_t i = 0; i < graph.ops().size(); ++i) {
    const Op& op = graph.ops()[i];
    bool after = op.kind == OpKind::LastRow;
    for (ValueId id : op.inputs) after = after || from_last_row[static_cast<std::size_t>(id)];
    after_last_row_[i] = after;
    from_last_row[static_cast<std::size_t>(op.output)] = after;
  }
  caches_.resize(static_cast<std::size_t>(graph.num_cache_slots()));
  plan_groups();
  plan_overlap();
}

void Executor::pack_linear_weights() {
  packed_weights_.resize(bound_weights_.size());
  std::vector<int> other_readers(bound_weights_.size(), 0);  // ops that read a weight unpacked
  for (const Op& op : graph_.ops()) {
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      if (!reads_packed(op, i)) ++other_readers[static_cast<std::size_t>(op.inputs[i])];
    }
  }
  for (const Op& op : graph_.ops()) {
    if (op.kind != OpKind::Linear || !reads_packed(op, 1)) continue;  // linears pack
    const auto w = static_cast<std::size_t>(op.inputs[1]);
    if (graph_.values()[w].kind != ValueKind::Weight || packed_weights_[w]) continue;
    // A packed 16-bit weight is as large as its rows: packed beside another reader of the rows,
    // it would be held twice, for a gain the row kernels mostly have at decode. (An embedding
    // reads a table packed: a tied head is held once.)
    const DType dtype = bound_weights_[w].dtype();
    if ((dtype == DType::F16 || dtype == DType::BF16) && other_readers[w] != 0) continue;
    // Only packed readers: the rows' mapped pages go as soon as they are packed.
    kernels::PackedWeight::Consumed consumed;
    if (other_readers[w] == 0) {
      consumed = [](const std::byte* rows, std::size_t bytes) {
        io::release_mapped_pages(rows, bytes);
      };
    }
    packed_weights_[w] =
        kernels::PackedWeight::pack(bound_weights_[w], op.attrs.weight_layout, consumed);
    if (!packed_weights_[w] || other_readers[w] != 0) continue;
    // Only packed linears read this weight: its data is not read again here. Where it is mapped
    // from the checkpoint its pages leave this process's resident memory; the executor keeps its
    // shape alone, so memory only it held (a worker's received weights once the worker lets go
    // of them, a compact copy of a column slice) is freed. One weight at a time: a Q4_0 model is
    // held once (packed), not twice, even while packing.
    Tensor& t = bound_weights_[w];
    io::release_mapped_pages(t.raw(), t.nbytes());
    t = Tensor::borrow(t.dtype(), t.shape(), nullptr);
  }
}

const kernels::PackedWeight* Executor::packed_weight(const Op& op) const {
  if (!reads_packed(op, 1)) return nullptr;
  const auto w = static_cast<std::size_t>(op.inputs[1]);
  return w < packed_weights_.size() ? packed_weights_[w].get() : nullptr;
}

void Executor::plan_groups() {
  std::optional<std::vector<int>> token_group;
  const Op* token_op = nullptr;
  for (const Op& op : graph_.ops()) {
    const std::vector<int>& g = op.attrs.group;
    if (!g.empty() && !groups_.contains(g)) {
      if (!group_.transport) {
        throw PlanError(
            fmt::format("op '{}' runs in a device group but this executor has no "
                        "transport",
                        op.name));
      }
      groups_.emplace(g, std::make_unique<collectives::GroupTransport>(*group_.transport, g));
    }
    if (!splits_tokens(op)) continue;
    if (token_group && *token_group != g) {
      throw PlanError(
          fmt::format("ops '{}' ({}) and '{}' ({}) split tokens over different "
                      "device groups; a program has one token group",
                      token_op->name, group_text(*token_group), op.name, group_text(g)));
    }
    token_group = g;
    token_op = &op;
  }
  if (!token_group || token_group->empty()) {
    token_shares_ = group_.token_shares;
    token_rank_ = rank();
    return;
  }
  token_shares_.clear();
  for (int r : *token_group)
    token_shares_.push_back(group_.token_shares[static_cast<std::size_t>(r)]);
  token_rank_ = groups_.at(*token_group)->rank();
}

net::Transport* Executor::transport_for(const Op& op) const {
  if (op.attrs.group.empty()) return group_.transport;
  return groups_.at(op.attrs.group).get();
}

void Executor::plan_overlap() {
  const auto& ops = graph_.ops();
  gather_consumers_.assign(ops.size(), {});
  scatter_producer_.assign(ops.size(), -1);
  done_inside_collective_.assign(ops.size(), false);
  std::vector<std::ptrdiff_t> producer(graph_.values().size(), -1);
  std::vector<int> readers(graph_.values().size(), 0);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    producer[static_cast<std::size_t>(ops[i].output)] = static_cast<std::ptrdiff_t>(i);
    for (ValueId id : ops[i].inputs) ++readers[static_cast<std::size_t>(id)];
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.kind == OpKind::Linear) {
      const std::ptrdiff_t p = producer[static_cast<std::size_t>(op.inputs[0])];
      if (p >= 0 && ops[static_cast<std::size_t>(p)].kind == OpKind::AllGather) {
        gather_consumers_[static_cast<std::size_t>(p)].push_back(i);
        done_inside_collective_[i] = true;
      }
    }
    if (op.kind == OpKind::ReduceScatter) {
      const auto x = static_cast<std::size_t>(op.inputs[0]);
      const std::ptrdiff_t p = producer[x];
      if (p >= 0 && ops[static_cast<std::size_t>(p)].kind == OpKind::Linear && readers[x] == 1 &&
          !is_output_[x] && !done_inside_collective_[static_cast<std::size_t>(p)]) {
        scatter_producer_[i] = p;
        done_inside_collective_[static_cast<std::size_t>(p)] = true;
        // The deferred linear's inputs must live until the reduce-scatter runs.
        for (ValueId in : ops[static_cast<std::size_t>(p)].inputs) {
          last_use_[static_cast<std::size_t>(in)] =
              std::max(last_use_[static_cast<std::size_t>(in)], i);
        }
      }
    }
  }
}

void Executor::linear_rows(std::size_t op_index, const std::vector<Tensor>& values,
                           const Tensor& input, std::int64_t begin, std::int64_t end, Tensor& out) {
  if (end <= begin) return;
  const Op& op = graph_.ops()[op_index];
  const OpStopwatch stopwatch(measure_cpu_);
  const Tensor* bias =
      op.inputs.size() == 3 ? &values[static_cast<std::size_t>(op.inputs[2])] : nullptr;
  Tensor rows_out = out.rows(begin, end);
  kernels::linear(input.rows(begin, end), values[static_cast<std::size_t>(op.inputs[1])],
                  packed_weight(op), op.attrs.weight_layout, bias, rows_out);
  if (observer_) observer_(op, rows_out, stopwatch.elapsed());
}

int Executor::rank() const {
  return group_.transport ? group_.transport->rank() : 0;
}

Shape Executor::resolve(const Shape& shape, const Step& step) const {
  Shape out = shape;
  for (std::int64_t& d : out) {
    if (d == kTokens)
      d = step.tokens;
    else if (d == kLocalTokens)
      d = step.local_count;
    else if (d == kOutputRows)
      d = step.rows == OutputRows::All ? step.tokens : step.rows == OutputRows::Last ? 1 : 0;
  }
  return out;
}

Tensor Executor::forward_rows(std::span<const std::int32_t> ids, OutputRows rows) {
  const auto tokens = static_cast<std::int64_t>(ids.size());
  if (tokens == 0) throw InputError("no input tokens");
  if (position_ + tokens > max_positions_) {
    throw InputError(
        fmt::format("{} tokens after {} already processed exceed the model's context of "
                    "{} positions",
                    tokens, position_, max_positions_));
  }
  Step step{tokens, rows, collectives::RowPartition(split_proportional(tokens, token_shares_)), 0,
            0};
  step.local_begin = step.partition.offset(token_rank_);
  step.local_count = step.partition.count(token_rank_);

  std::vector<Tensor> values(graph_.values().size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const Value& v = graph_.values()[i];
    if (v.kind == ValueKind::Weight) {
      values[i] = bound_weights_[i];
    } else if (v.kind == ValueKind::Input) {
      Tensor t = Tensor::empty(DType::I32, {tokens});
      if (v.name == "ids") {
        std::memcpy(t.i32(), ids.data(), ids.size_bytes());
      } else if (v.name == "positions") {
        std::iota(t.i32(), t.i32() + tokens, static_cast<std::int32_t>(position_));
      } else if (v.name == "token_types") {
        std::fill(t.i32(), t.i32() + tokens, 0);
      } else {
        throw PlanError(fmt::format("graph input '{}' is not one the executor provides", v.name));
      }
      values[i] = std::move(t);
    }
  }

  run_ops(values, step);
  position_ += tokens;
  if (graph_.outputs().empty()) return Tensor();
  return values[static_cast<std::size_t>(graph_.outputs().front())];
}

void Executor::check_inputs(const std::map<std::string, Tensor>& inputs) const {
  std::size_t used = 0;
  for (const Value& v : graph_.values()) {
    if (v.kind != ValueKind::Input) continue;
    const auto it = inputs.find(v.name);
    if (it == inputs.end()) throw InputError(fmt::format("graph input '{}' is not given", v.name));
    const Tensor& t = it->second;
    if (t.dtype() != DType::F32 || t.shape() != v.shape || !t.contiguous()) {
      throw InputError(fmt::format("input '{}' is {} {}, the graph expects F32 {}", v.name,
                                   dtype_name(t.dtype()), shape_str(t.shape()),
                                   shape_str(v.shape)));
    }
    ++used;
  }
  if (used != inputs.size()) {
    for (const auto& [name, t] : inputs) {
      const auto id = graph_.find(name);
      if (!id || graph_.value(*id).kind != ValueKind::Input)
        throw InputError(fmt::format("'{}' is not an input of the graph", name));
    }
  }
}

std::map<std::string, Tensor> Executor::run(const std::map<std::string, Tensor>& inputs) {
  check_inputs(inputs);
  std::vector<Tensor> values(graph_.values().size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const Value& v = graph_.values()[i];
    if (v.kind == ValueKind::Weight) {
      values[i] = bound_weights_[i];
    } else if (v.kind == ValueKind::Input) {
      values[i] = inputs.at(v.name);
    }
  }
  Step step{0, OutputRows::All, collectives::RowPartition({0}), 0, 0};
  run_ops(values, step);
  std::map<std::string, Tensor> out;
  for (ValueId id : graph_.outputs()) {
    out[graph_.value(id).name] = values[static_cast<std::size_t>(id)];
  }
  return out;
}

void Executor::run_ops(std::vector<Tensor>& values, const Step& step) {
  const auto& ops = graph_.ops();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (step.rows == OutputRows::None && after_last_row_[i] && !moves_data(op.kind)) {
      values[static_cast<std::size_t>(op.output)] =
          Tensor::empty(DType::F32, resolve(graph_.value(op.output).shape, step));
    } else if (!done_inside_collective_[i]) {
      const OpStopwatch stopwatch(measure_cpu_);
      std::optional<kernels::SerialScope> serial;
      if (op.attrs.threads == 1) serial.emplace();
      Tensor out = run_op(op, values, step, i);
      serial.reset();
      if (observer_) observer_(op, out, stopwatch.elapsed());
      values[static_cast<std::size_t>(op.output)] = std::move(out);
    }
    for (ValueId id : op.inputs) {  // free activations nobody reads any more
      if (dies_at(id, i)) values[static_cast<std::size_t>(id)] = Tensor();
    }
  }
}

bool Executor::dies_at(ValueId id, std::size_t op_index) const {
  const auto u = static_cast<std::size_t>(id);
  return last_use_[u] == op_index && !is_output_[u] &&
         graph_.values()[u].kind == ValueKind::Activation;
}

Tensor Executor::reusable_or_new(const Op& op, std::size_t op_index, std::vector<Tensor>& values,
                                 Shape shape) {
  for (ValueId id : op.inputs) {
    const Tensor& t = values[static_cast<std::size_t>(id)];
    if (dies_at(id, op_index) && t.contiguous() && t.shape() == shape && t.dtype() == DType::F32)
      return t;
  }
  return Tensor::empty(DType::F32, std::move(shape));
}

Tensor Executor::run_op(const Op& op, std::vector<Tensor>& values, const Step& step,
                        std::size_t op_index) {
  auto in = [&](std::size_t i) -> const Tensor& {
    return values[static_cast<std::size_t>(op.inputs[i])];
  };
  const Shape out_shape = resolve(graph_.value(op.output).shape, step);
  if (moves_data(op.kind)) return data_movement(op, values, out_shape, step, op_index);
  Tensor out;
  if (is_imported_op(op.kind)) {
    if (is_imported_elementwise(op.kind)) {
      out = reusable_or_new(op, op_index, values, out_shape);
    } else if (op.kind == OpKind::Conv2d && op.attrs.residual) {
      // The output starts as the residual: its own buffer when nothing else reads it.
      const ValueId r = op.inputs.back();
      const Tensor& residual = values[static_cast<std::size_t>(r)];
      const bool own = dies_at(r, op_index) && residual.contiguous() && op.inputs[0] != r;
      out = own ? residual : residual.clone();
    } else if (op.kind != OpKind::Reshape) {
      out = Tensor::empty(DType::F32, out_shape);
    }
    run_imported_op(op, values, op_index, out);
    return out;
  }
  if ((op.kind == OpKind::Add || op.kind == OpKind::Mul) &&
      (in(0).shape() != in(1).shape() || in(0).rank() != 2)) {  // N-D, broadcasting
    out = reusable_or_new(op, op_index, values, out_shape);
    kernels::binary(op.kind == OpKind::Add ? kernels::BinaryOp::Add : kernels::BinaryOp::Mul, in(0),
                    in(1), out);
    return out;
  }
  if (is_elementwise(op.kind)) {
    out = reusable_or_new(op, op_index, values, out_shape);
  } else if (op.kind != OpKind::LastRow && op.kind != OpKind::Attention &&
             op.kind != OpKind::SliceCols) {
    out = Tensor::empty(DType::F32, out_shape);
  }
  switch (op.kind) {
    case OpKind::Embedding:
      if (const kernels::PackedWeight* table = packed_weight(op)) {
        kernels::embedding(std::span(in(0).i32(), static_cast<std::size_t>(in(0).numel())), *table,
                           out);
      } else {
        kernels::embedding(std::span(in(0).i32(), static_cast<std::size_t>(in(0).numel())), in(1),
                           out);
      }
      break;
    case OpKind::Add:
      kernels::add(in(0), in(1), out);
      break;
    case OpKind::Mul:
      kernels::mul(in(0), in(1), out);
      break;
    case OpKind::LayerNorm:
      kernels::layer_norm(in(0), in(1), in(2), op.attrs.eps, out);
      break;
    case OpKind::RmsNorm:
      kernels::rms_norm(in(0), in(1), op.attrs.eps, out);
      break;
    case OpKind::Linear:
      kernels::linear(in(0), in(1), packed_weight(op), op.attrs.weight_layout,
                      op.inputs.size() == 3 ? &in(2) : nullptr, out);
      break;
    case OpKind::GeluTanh:
      kernels::gelu_tanh(in(0), out);
      break;
    case OpKind::GeluErf:
      kernels::gelu_erf(in(0), out);
      break;
    case OpKind::Silu:
      kernels::silu(in(0), out);
      break;
    case OpKind::Rope: {
      if (out.raw() != in(0).raw()) std::memcpy(out.raw(), in(0).raw(), out.nbytes());
      const Tensor& pos = in(1);
      kernels::rope(out, std::span(pos.i32(), static_cast<std::size_t>(pos.numel())),
                    op.attrs.heads, op.attrs.head_dim, op.attrs.rope);
      break;
    }
    case OpKind::Attention:
      out = attention(op, in(0), in(1), in(2), step);
      break;
    case OpKind::LastRow:
      out = step.rows == OutputRows::All ? in(0) : in(0).rows(in(0).dim(0) - 1, in(0).dim(0));
      break;
    case OpKind::SliceCols:
      out = in(0).cols(op.attrs.col_begin, op.attrs.col_begin + op.attrs.width);
      break;
    default:  // data movement (moves_data) and imported ops are dispatched before this switch
      HUDDLE_CHECK(false, "op '{}' ({}) dispatched here", op.name, op_name(op.kind));
  }
  return out;
}

void Executor::run_imported_op(const Op& op, std::vector<Tensor>& values, std::size_t op_index,
                               Tensor& out) {
  auto in = [&](std::size_t i) -> const Tensor& {
    return values[static_cast<std::size_t>(op.inputs[i])];
  };
  const OpAttrs& a = op.attrs;
  switch (op.kind) {
    case OpKind::Sub:
      kernels::binary(kernels::BinaryOp::Sub, in(0), in(1), out);
      break;
    case OpKind::Div:
      kernels::binary(kernels::BinaryOp::Div, in(0), in(1), out);
      break;
    case OpKind::Relu:
    case OpKind::Clip:
    case OpKind::Sigmoid:
    case OpKind::HardSigmoid:
    case OpKind::HardSwish:
      kernels::unary(activation_of(op), in(0), out);
      break;
    case OpKind::Conv2d:
      if (a.channels_last) {
        const std::size_t data_inputs = op.inputs.size() - (a.residual ? 1 : 0);
        kernels::conv2d_nhwc(in(0), in(1), data_inputs == 3 ? &in(2) : nullptr, a.window, a.groups,
                             a.act, band_of(op, in(0), out), out,
                             a.residual ? &a.residual_act : nullptr);
      } else {
        kernels::conv2d(in(0), in(1), op.inputs.size() == 3 ? &in(2) : nullptr, a.window, a.groups,
                        a.act, band_of(op, in(0), out), out);
      }
      break;
    case OpKind::BatchNorm: {
      // Unfolded batch norm (no conv before it): y = (x - mean) / sqrt(var + eps) * scale + bias.
      const Tensor& x = in(0);
      const std::int64_t c = x.dim(1), inner = x.numel() / (x.dim(0) * c);
      for (std::int64_t n = 0; n < x.dim(0); ++n) {
        for (std::int64_t ch = 0; ch < c; ++ch) {
          const float k = in(1).f32()[ch] / std::sqrt(in(4).f32()[ch] + a.eps);
          const float b = in(2).f32()[ch] - in(3).f32()[ch] * k;
          const float* src = x.f32() + (n * c + ch) * inner;
          float* dst = out.f32() + (n * c + ch) * inner;
          for (std::int64_t i = 0; i < inner; ++i) dst[i] = src[i] * k + b;
        }
      }
      break;
    }
    case OpKind::MaxPool:
    case OpKind::AvgPool: {
      const auto kind =
          op.kind == OpKind::MaxPool ? kernels::PoolKind::Max : kernels::PoolKind::Average;
      if (a.channels_last) {
        kernels::pool2d_nhwc(in(0), kind, a.window, a.count_include_pad, band_of(op, in(0), out),
                             out);
      } else {
        kernels::pool2d(in(0), kind, a.window, a.count_include_pad, band_of(op, in(0), out), out);
      }
      break;
    }
    case OpKind::GlobalAvgPool:
      if (a.channels_last) {
        kernels::global_avg_pool_nhwc(in(0), out);
      } else {
        kernels::global_avg_pool(in(0), out);
      }
      break;
    case OpKind::Resize:
      kernels::resize(in(0), a.resize, band_of(op, in(0), out), a.banded ? a.out_rows : out.dim(2),
                      out);
      break;
    case OpKind::Concat: {
      std::vector<const Tensor*> parts;
      for (std::size_t i = 0; i < op.inputs.size(); ++i) parts.push_back(&in(i));
      kernels::concat(parts, a.axis, out);
      break;
    }
    case OpKind::Slice:
      kernels::slice(in(0), a.starts, a.steps, out);
      break;
    case OpKind::Reshape: {
      // A view when nothing else reads the input (and it is an activation of ours); otherwise a
      // copy, so that no in-place op writes through one name into another's data.
      out = (dies_at(op.inputs[0], op_index) ? in(0) : in(0).clone()).reshape(a.shape);
      break;
    }
    case OpKind::Transpose:
      kernels::transpose(in(0), a.perm, out);
      break;
    case OpKind::MatMul:
      kernels::matmul(in(0), in(1), out);
      break;
    case OpKind::Softmax: {
      const Shape& s = in(0).shape();
      std::int64_t outer = 1, len = 1, inner = 1;
      for (std::size_t d = 0; d < s.size(); ++d) {
        const auto di = static_cast<int>(d);
        if (di < a.axis)
          outer *= s[d];
        else if (di == a.axis || a.softmax_flatten)
          len *= s[d];
        else
          inner *= s[d];
      }
      kernels::softmax_axis(in(0), outer, len, inner, out);
      break;
    }
    default:
      HUDDLE_CHECK(false, "not an imported op: {}", op.name);
  }
}

Tensor Executor::data_movement(const Op& op, std::vector<Tensor>& values, const Shape& out_shape,
                               const Step& step, std::size_t op_index) {
  net::Transport* transport = transport_for(op);
  if (op.kind == OpKind::RowExchange) {
    if (transport == nullptr) throw PlanError(fmt::format("op '{}' needs a transport", op.name));
    const Tensor* held =
        op.inputs.empty() ? nullptr : &values[static_cast<std::size_t>(op.inputs[0])];
    return row_exchange(op, held, out_shape, *transport);
  }
  if (op.kind == OpKind::PipeRecv) {  // its input (the ids), if any, only gave the row count
    if (transport == nullptr) throw PlanError(fmt::format("op '{}' needs a transport", op.name));
    Tensor out = Tensor::empty(DType::F32, out_shape);
    collectives::recv_tensor_into(*transport, op.attrs.peer, out, op.attrs.wire);
    return out;
  }
  const bool single = transport == nullptr || transport->size() == 1;
  const auto input_id = static_cast<std::size_t>(op.inputs[0]);
  const bool input_is_dead = dies_at(op.inputs[0], op_index);
  collectives::RingOptions ring;
  ring.wire = op.attrs.wire;
  switch (op.kind) {
    case OpKind::LocalRows: {
      const Tensor& x = values[input_id];
      return x.rows(step.local_begin, step.local_begin + step.local_count);
    }
    case OpKind::AllGather:
    case OpKind::GatherToPrimary: {
      const Tensor& x = values[input_id];
      Tensor out = x;
      if (!single) {
        out = Tensor::empty(DType::F32, out_shape);
        if (step.local_count > 0) {
          const Tensor packed = x.contiguous() ? x : x.clone();  // copy only strided views
          std::memcpy(out.f32() + step.local_begin * out.dim(1), packed.f32(), x.nbytes());
        }
      }
      // Linears reading the gathered rows run on each device's rows as soon as they land.
      const auto& consumers = gather_consumers_[op_index];
      std::vector<Tensor> consumer_out;
      for (std::size_t c : consumers) {
        const ValueId o = graph_.ops()[c].output;
        consumer_out.push_back(Tensor::empty(DType::F32, resolve(graph_.value(o).shape, step)));
      }
      auto on_part = [&](int /*part*/, std::int64_t begin, std::int64_t end) {
        for (std::size_t k = 0; k < consumers.size(); ++k)
          linear_rows(consumers[k], values, out, begin, end, consumer_out[k]);
      };
      if (single) {
        on_part(0, 0, out.dim(0));
      } else if (op.kind == OpKind::AllGather) {
        if (op.attrs.chunks > 1 && !consumers.empty()) {  // chunks only help linears start
          std::int64_t largest = 0;
          for (int p = 0; p < step.partition.parts(); ++p)
            largest = std::max(largest, step.partition.count(p));
          const std::size_t row_bytes = wire_row_bytes(ring.wire, out.dim(1));
          ring.chunk_bytes = static_cast<std::size_t>(gather_chunk_rows(
                                 largest, op.attrs.chunks, row_bytes, ring.chunk_bytes)) *
                             row_bytes;
        }
        collectives::all_gather(*transport, out, step.partition, on_part, ring);
      } else {
        collectives::gather_rows(*transport, out, step.partition, /*root=*/0);
      }
      for (std::size_t k = 0; k < consumers.size(); ++k) {
        values[static_cast<std::size_t>(graph_.ops()[consumers[k]].output)] =
            std::move(consumer_out[k]);
      }
      return out;
    }
    case OpKind::ReduceScatter: {
      const std::ptrdiff_t producer = scatter_producer_[op_index];
      if (producer >= 0) {
        // The partial sums are computed tile by tile, each just before the ring needs it.
        const Op& linear = graph_.ops()[static_cast<std::size_t>(producer)];
        const Tensor& x = values[static_cast<std::size_t>(linear.inputs[0])];
        Tensor data = Tensor::empty(DType::F32, resolve(graph_.value(linear.output).shape, step));
        if (single) {
          linear_rows(static_cast<std::size_t>(producer), values, x, 0, data.dim(0), data);
          return data;
        }
        // Each tile is rows [offset(part), end(part)) of `data`.
        return collectives::reduce_scatter(
            *transport, data, step.partition,
            [&](int part, const Tensor&) {
              linear_rows(static_cast<std::size_t>(producer), values, x,
                          step.partition.offset(part), step.partition.end(part), data);
            },
            ring);
      }
      const Tensor& x = values[input_id];
      if (single) return x;
      Tensor data = input_is_dead && x.contiguous() ? x : x.clone();
      return collectives::reduce_scatter(*transport, data, step.partition, {}, ring);
    }
    case OpKind::ScatterFromPrimary: {
      const Tensor& x = values[input_id];
      if (single) return x;
      if (transport->rank() == 0) {
        for (int r = 1; r < transport->size(); ++r) {
          collectives::send_tensor(*transport, r,
                                   x.rows(step.partition.offset(r), step.partition.end(r)));
        }
        return x.rows(step.local_begin, step.local_begin + step.local_count);
      }
      Tensor out = Tensor::empty(DType::F32, out_shape);
      collectives::recv_tensor_into(*transport, 0, out);
      return out;
    }
    case OpKind::PipeSend: {
      const Tensor& x = values[input_id];
      if (transport == nullptr) throw PlanError(fmt::format("op '{}' needs a transport", op.name));
      collectives::send_tensor(*transport, op.attrs.peer, x, op.attrs.wire);
      return x;
    }
    case OpKind::BroadcastFromPrimary: {
      const Tensor& x = values[input_id];
      if (single) return x;
      Tensor data = transport->rank() == 0 ? (x.contiguous() ? x : x.clone())
                                           : Tensor::empty(DType::F32, out_shape);
      collectives::broadcast(*transport, data, /*root=*/0);
      return data;
    }
    case OpKind::AllReduce: {
      const Tensor& x = values[input_id];
      if (single) return x;
      Tensor data = input_is_dead && x.contiguous() ? x : x.clone();
      collectives::all_reduce(*transport, data, ring);
      return data;
    }
    case OpKind::AllGatherCols: {
      const Tensor& x = values[input_id];
      if (single) return x;
      if (x.dim(1) != op.attrs.parts[static_cast<std::size_t>(transport->rank())]) {
        throw PlanError(
            fmt::format("op '{}': this device's block has {} columns, the op expects {}", op.name,
                        x.dim(1), op.attrs.parts[static_cast<std::size_t>(transport->rank())]));
      }
      Tensor out = Tensor::empty(DType::F32, out_shape);
      collectives::all_gather_cols(*transport, x, op.attrs.parts, out, ring);
      return out;
    }
    case OpKind::GatherColsToPrimary: {
      const Tensor& x = values[input_id];
      if (single) return x;
      const auto rank = static_cast<std::size_t>(transport->rank());
      if (op.attrs.parts.size() != static_cast<std::size_t>(transport->size()) ||
          x.dim(1) != op.attrs.parts[rank]) {
        throw PlanError(
            fmt::format("op '{}': this device's block has {} columns, the op expects {}", op.name,
                        x.dim(1), rank < op.attrs.parts.size() ? op.attrs.parts[rank] : 0));
      }
      Tensor out = rank == 0 ? Tensor::empty(DType::F32, out_shape) : Tensor();
      collectives::gather_cols(*transport, x, op.attrs.parts, out, /*root=*/0);
      return rank == 0 ? out : x;  // elsewhere nothing reads it
    }
    default:
      HUDDLE_CHECK(false, "not a data-movement op: {}", op.name);
  }
  return {};
}

Tensor Executor::attention(const Op& op, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Step& step) {
  const std::int64_t tokens = k.dim(0);  // keys/values of every token of the step
  const std::int64_t kv_width = k.dim(1);
  KvCache& cache = caches_[static_cast<std::size_t>(op.attrs.cache_slot)];
  if (!cache.k.defined() || cache.k.dim(1) != kv_width) {
    cache.k = Tensor::empty(DType::F32, {max_positions_, kv_width});
    cache.v = Tensor::empty(DType::F32, {max_positions_, kv_width});
  }
  const std::size_t row_bytes = static_cast<std::size_t>(kv_width) * sizeof(float);
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::memcpy(cache.k.f32() + (position_ + t) * kv_width, k.f32() + t * k.row_stride(),
                row_bytes);
    std::memcpy(cache.v.f32() + (position_ + t) * kv_width, v.f32() + t * v.row_stride(),
                row_bytes);
  }
  const std::int64_t keys = position_ + tokens;
  const std::int64_t q_pos0 = position_ + (op.attrs.local_queries ? step.local_begin : 0);
  const Tensor all_k = cache.k.rows(0, keys), all_v = cache.v.rows(0, keys);
  Tensor out = Tensor::empty(DType::F32, q.shape());
  const OpAttrs& a = op.attrs;
  const bool whole_groups =
      a.kv_group == 0 || (a.q_head_begin % a.kv_group == 0 && a.heads == a.kv_heads * a.kv_group);
  if (whole_groups) {
    kernels::attention(q, all_k, all_v, a.heads, a.kv_heads, a.head_dim, q_pos0, a.causal, out,
                       a.sliding_window);
    return out;
  }
  // A device holding part of a kv group: run each span of query heads that shares one kv head.
  const std::int64_t d = a.head_dim;
  const int first_kv = a.q_head_begin / a.kv_group;
  for (int h = 0; h < a.heads;) {
    const int kv = (a.q_head_begin + h) / a.kv_group - first_kv;
    int end = h;
    while (end < a.heads && (a.q_head_begin + end) / a.kv_group - first_kv == kv) ++end;
    Tensor span_out = Tensor::empty(DType::F32, {q.dim(0), (end - h) * d});
    kernels::attention(q.cols(h * d, end * d), all_k.cols(kv * d, (kv + 1) * d),
                       all_v.cols(kv * d, (kv + 1) * d), end - h, 1, a.head_dim, q_pos0, a.causal,
                       span_out, a.sliding_window);
    for (std::int64_t r = 0; r < q.dim(0); ++r) {
      std::memcpy(out.f32() + r * out.dim(1) + h * d, span_out.f32() + r * span_out.dim(1),
                  static_cast<std::size_t>((end - h) * d) * sizeof(float));
    }
    h = end;
  }
  return out;
}

}  // namespace huddle
