// Executor: runs a Graph on this device with the kernels, keeping one KV cache per attention op.
//
// Activation buffers live from the op that writes them to their last reader; element-wise ops
// and RoPE write in place into an input that has no later reader.
//
// Overlap (Galaxy): a linear that reads an all-gather's output runs inside the all-gather, on
// each device's rows as they arrive; a linear whose only reader is a reduce-scatter runs inside
// the reduce-scatter, producing each destination's rows just before they are sent.
//
// Device groups (2D-tiled plans): a data-movement op whose attrs.group names a subset of the
// ranks runs over a GroupTransport of those ranks. A program splits its tokens over one group
// (its token group, every rank when no token-splitting op names one): each step's tokens are
// split over the group's members by their token shares, and L (kLocalTokens) is this device's
// part of that split.
#pragma once

#include "collectives/group_transport.h"
#include "collectives/partition.h"
#include "graph/graph.h"
#include "kernels/packed_weight.h"
#include "model/model.h"
#include "runtime/step_runner.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace huddle {

namespace net {
class Transport;
}

// Where a lowered program runs: its transport (rank, peers) and how steps split their tokens.
struct DeviceGroup {
  net::Transport* transport = nullptr;  // must outlive the executor
  std::vector<double> token_shares;     // per rank
};

// How long one op took: wall time, and the CPU time the whole process (every thread) used
// meanwhile, which is -1 ns unless the executor measures it (Executor::set_observer).
struct OpTime {
  std::chrono::nanoseconds wall{0};
  std::chrono::nanoseconds cpu{-1};
};

// Called after each op with the op, its output and the time it took (tracing, debug dumps).
using OpObserver = std::function<void(const Op&, const Tensor& output, const OpTime& time)>;

class Executor final : public StepRunner {
 public:
  // Binds the graph's weight values to `weights` (which must outlive the executor).
  // PlanError if a weight is missing or a slice does not fit.
  Executor(const Graph& graph, const WeightMap& weights, std::int64_t max_positions);
  // A device of a lowered program: data-movement ops run over `group.transport`, and every rank
  // must call forward() with the same ids. Only rank 0's graph has outputs; on other ranks
  // forward() returns an empty tensor.
  Executor(const Graph& graph, const WeightMap& weights, std::int64_t max_positions,
           DeviceGroup group);
  // The same, taking the map: the executor then holds each weight alone while it packs them, so
  // a weight it packs is freed as soon as it is packed (a worker's received weights are not held
  // twice, received and packed, at its peak). `weights` is left empty.
  Executor(const Graph& graph, WeightMap&& weights, std::int64_t max_positions, DeviceGroup group);

  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override {
    return forward_rows(ids, all_rows ? OutputRows::All : OutputRows::Last);
  }
  // The same with OutputRows::None too: the ops after LastRow produce 0 rows without computing
  // (data movement still runs, so a pipeline's output link carries one message per slice).
  Tensor forward_rows(std::span<const std::int32_t> ids, OutputRows rows);
  // Imported graphs (ONNX): runs the whole graph once on named F32 inputs, one per graph input,
  // of exactly the graph's input shapes, and returns every graph output by name. InputError
  // naming the input for a missing, unknown, misshapen or non-F32 tensor.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs);
  // The checks run() makes of its inputs, alone (InputError as run's).
  void check_inputs(const std::map<std::string, Tensor>& inputs) const;
  void reset() override { position_ = 0; }
  std::int64_t position() const override { return position_; }
  std::int64_t max_positions() const override { return max_positions_; }

  // `measure_cpu`: also read the process's CPU clock around every op (a system call each side;
  // operator assignment's profiler spreads a CPU quota's throttling over ops by it).
  void set_observer(OpObserver observer, bool measure_cpu = false) {
    observer_ = std::move(observer);
    measure_cpu_ = measure_cpu;
  }

 private:
  struct KvCache {
    Tensor k;  // [max_positions, kv_heads * head_dim]
    Tensor v;
  };

  struct Step {
    std::int64_t tokens = 0;  // T
    OutputRows rows = OutputRows::Last;
    collectives::RowPartition partition{{0}};  // tokens per member of the token group
    std::int64_t local_begin = 0, local_count = 0;
  };

  Shape resolve(const Shape& shape, const Step& step) const;
  // Runs every op in order over `values` (inputs and weights filled), freeing dead activations.
  void run_ops(std::vector<Tensor>& values, const Step& step);
  Tensor run_op(const Op& op, std::vector<Tensor>& values, const Step& step, std::size_t op_index);
  // The imported-graph (N-D) ops; `out` is allocated for all but views.
  void run_imported_op(const Op& op, std::vector<Tensor>& values, std::size_t op_index,
                       Tensor& out);
  Tensor attention(const Op& op, const Tensor& q, const Tensor& k, const Tensor& v,
                   const Step& step);
  Tensor data_movement(const Op& op, std::vector<Tensor>& values, const Shape& out_shape,
                       const Step& step, std::size_t op_index);
  // Runs linear op `op_index` on rows [begin, end) of its input into the same rows of `out`.
  void linear_rows(std::size_t op_index, const std::vector<Tensor>& values, const Tensor& input,
                   std::int64_t begin, std::int64_t end, Tensor& out);
  void plan_overlap();
  // Packs the weights linear ops read into their kernels' layouts (packed_weights_).
  void pack_linear_weights();
  // Everything the constructors do but packing: binds the weights, plans groups and overlap.
  void bind(const WeightMap& weights);
  // Linear op `op`'s packed weight, or null.
  const kernels::PackedWeight* packed_weight(const Op& op) const;
  // Group transports for the ops' groups and the token group; PlanError for a bad group.
  void plan_groups();
  // The transport op `op` runs over: its group's, or the whole session's.
  net::Transport* transport_for(const Op& op) const;
  int rank() const;
  // Whether value `id` is an activation of ours that no op after `op_index` reads and no caller
  // gets: its buffer may be freed, reused or written through by that op.
  bool dies_at(ValueId id, std::size_t op_index) const;
  // Output buffer for an element-wise op: an input's buffer when nothing reads it later.
  Tensor reusable_or_new(const Op& op, std::size_t op_index, std::vector<Tensor>& values,
                         Shape shape);

  const Graph& graph_;
  std::int64_t max_positions_;
  std::int64_t position_ = 0;
  // By ValueId; undefined for non-weights; the shape alone (no data) for a weight that only
  // packed linears read (pack_linear_weights).
  std::vector<Tensor> bound_weights_;
  // By ValueId: the packed form of a weight that linear ops read (kernels/packed_weight.h), null
  // where it has none. Packed once here, at bind time, never on the request path.
  std::vector<std::shared_ptr<const kernels::PackedWeight>> packed_weights_;
  std::vector<std::size_t> last_use_;  // by ValueId: index of the last op that reads it
  std::vector<bool> is_output_;        // by ValueId
  std::vector<bool> after_last_row_;   // by op index: LastRow and the ops that read its result
  std::vector<KvCache> caches_;        // by cache slot
  OpObserver observer_;
  bool measure_cpu_ = false;
  DeviceGroup group_;
  // Overlap, by op index: linears run inside an all-gather, the linear a reduce-scatter runs,
  // and whether an op's work was already done inside a collective.
  std::vector<std::vector<std::size_t>> gather_consumers_;
  std::vector<std::ptrdiff_t> scatter_producer_;
  std::vector<bool> done_inside_collective_;
  std::map<std::vector<int>, std::unique_ptr<collectives::GroupTransport>> groups_;
  std::vector<double> token_shares_;  // per member of the token group
  int token_rank_ = 0;                // this device's index in the token group
};

}  // namespace huddle
