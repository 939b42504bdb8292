// Executor: runs a Graph on this device with the kernels, keeping one KV cache per attention op.
//
// Activation buffers live from the op that writes them to their last reader; element-wise ops
// and RoPE write in place into an input that has no later reader.
#pragma once

#include "collectives/partition.h"
#include "graph/graph.h"
#include "model/model.h"
#include "runtime/step_runner.h"

#include <chrono>
#include <functional>
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

// Called after each op with the op, its output and the time it took (tracing, debug dumps).
using OpObserver = std::function<void(const Op&, const Tensor& output, std::chrono::nanoseconds elapsed)>;

class Executor final : public StepRunner {
 public:
  // Binds the graph's weight values to `weights` (which must outlive the executor).
  // PlanError if a weight is missing or a slice does not fit.
  Executor(const Graph& graph, const WeightMap& weights, std::int64_t max_positions);
  // A device of a lowered program: data-movement ops run over `group.transport`, and every rank
  // must call forward() with the same ids. Only rank 0's graph has outputs; on other ranks
  // forward() returns an empty tensor.
  Executor(const Graph& graph, const WeightMap& weights, std::int64_t max_positions, DeviceGroup group);

  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override;
  void reset() override { position_ = 0; }
  std::int64_t position() const override { return position_; }
  std::int64_t max_positions() const override { return max_positions_; }

  void set_observer(OpObserver observer) { observer_ = std::move(observer); }

 private:
  struct KvCache {
    Tensor k;  // [max_positions, kv_heads * head_dim]
    Tensor v;
  };

  struct Step {
    std::int64_t tokens = 0;                    // T
    bool all_rows = false;
    collectives::RowPartition partition{{0}};   // tokens per rank
    std::int64_t local_begin = 0, local_count = 0;
  };

  Shape resolve(const Shape& shape, const Step& step) const;
  Tensor run_op(const Op& op, std::vector<Tensor>& values, const Step& step, std::size_t op_index);
  Tensor attention(const Op& op, const Tensor& q, const Tensor& k, const Tensor& v, const Step& step);
  Tensor data_movement(const Op& op, const Tensor& x, const Shape& out_shape, const Step& step,
                       bool input_is_dead);
  int rank() const;
  // Output buffer for an element-wise op: an input's buffer when nothing reads it later.
  Tensor reusable_or_new(const Op& op, std::size_t op_index, std::vector<Tensor>& values, Shape shape);

  const Graph& graph_;
  std::int64_t max_positions_;
  std::int64_t position_ = 0;
  std::vector<Tensor> bound_weights_;     // by ValueId; undefined for non-weights
  std::vector<std::size_t> last_use_;     // by ValueId: index of the last op that reads it
  std::vector<bool> is_output_;           // by ValueId
  std::vector<KvCache> caches_;           // by cache slot
  OpObserver observer_;
  DeviceGroup group_;
};

}  // namespace huddle
