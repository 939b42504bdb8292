// GraphBuilder: shorthand that architecture files use to emit a Graph. Each call appends one op
// (or declares one weight) with a name following the scheme "blk.<layer>.<part>" so that any
// intermediate tensor can be found by name for debugging and tests.
#pragma once

#include "graph/graph.h"

#include <string>

namespace huddle {

class GraphBuilder {
 public:
  // A weight that is a whole checkpoint tensor (canonical name) of the given shape.
  ValueId weight(const std::string& tensor, Shape shape);
  // A slice [begin, end) along `axis` of a checkpoint tensor whose full shape is `tensor_shape`.
  ValueId weight_slice(const std::string& tensor, Shape tensor_shape, int axis, std::int64_t begin,
                       std::int64_t end);

  ValueId input(const std::string& name, DType dtype);  // [T]

  // Sets the block (layer index) and name prefix used by the ops that follow; -1 = no block.
  void begin_block(int layer);
  void end_block() { begin_block(-1); }

  ValueId embedding(const std::string& name, ValueId ids, ValueId table, OpRole role);
  ValueId add(const std::string& name, ValueId a, ValueId b, OpRole role);
  ValueId mul(const std::string& name, ValueId a, ValueId b, OpRole role);
  ValueId layer_norm(const std::string& name, ValueId x, ValueId w, ValueId b, float eps,
                     OpRole role);
  ValueId rms_norm(const std::string& name, ValueId x, ValueId w, float eps, OpRole role);
  // bias may be -1 (none).
  ValueId linear(const std::string& name, ValueId x, ValueId w, ValueId bias,
                 kernels::WeightLayout layout, OpRole role);
  ValueId activation(const std::string& name, OpKind kind, ValueId x, OpRole role);
  ValueId rope(const std::string& name, ValueId x, ValueId positions, int heads, int head_dim,
               const kernels::RopeSpec& spec, OpRole role);
  // window > 0 (causal only): sliding-window attention over keys (p - window, p].
  ValueId attention(const std::string& name, ValueId q, ValueId k, ValueId v, int heads,
                    int kv_heads, int head_dim, bool causal, std::int64_t window = 0);
  ValueId last_row(const std::string& name, ValueId x);
  void output(ValueId x) { graph_.add_output(x); }

  Graph finish();

 private:
  std::string qualified(const std::string& name) const;
  ValueId op(OpKind kind, const std::string& name, std::vector<ValueId> inputs, OpAttrs attrs,
             OpRole role);

  Graph graph_;
  int layer_ = -1;
};

}  // namespace huddle
