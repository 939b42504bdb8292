#include "onnx/schedule.h"

#include "onnx/rebuild.h"

#include <cstddef>
#include <vector>

namespace huddle::onnx_import {

Graph outputs_early(const Graph& graph) {
  const auto& ops = graph.ops();
  std::vector<int> producer(graph.values().size(), -1);
  for (std::size_t i = 0; i < ops.size(); ++i)
    producer[static_cast<std::size_t>(ops[i].output)] = static_cast<int>(i);
  std::vector<bool> is_output(graph.values().size(), false);
  for (ValueId o : graph.outputs()) is_output[static_cast<std::size_t>(o)] = true;
  std::vector<std::size_t> early;  // ops making a graph output, in file order
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (is_output[static_cast<std::size_t>(ops[i].output)]) early.push_back(i);
  }

  Rebuild rebuild(graph);
  std::vector<bool> done(ops.size(), false);
  const auto ready = [&](std::size_t i) {
    for (ValueId in : ops[i].inputs) {
      const int p = producer[static_cast<std::size_t>(in)];
      if (p >= 0 && !done[static_cast<std::size_t>(p)]) return false;
    }
    return true;
  };
  const auto emit = [&](std::size_t i) {
    const Op& op = ops[i];
    std::vector<ValueId> inputs;
    for (ValueId in : op.inputs) inputs.push_back(rebuild.mapped(in));
    rebuild.set(op.output, rebuild.out.add_op(op.kind, op.name, std::move(inputs), op.attrs,
                                              op.role, op.layer));
    done[i] = true;
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (done[i]) continue;
    emit(i);
    // Every output op whose inputs are now all made, until none is (one may feed another).
    for (bool more = true; more;) {
      more = false;
      for (std::size_t j : early) {
        if (done[j] || !ready(j)) continue;
        emit(j);
        more = true;
      }
    }
  }
  return rebuild.finish();
}

}  // namespace huddle::onnx_import
