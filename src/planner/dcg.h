// The device-mapped computational graph (DCG) of Lee et al., "Optimal Model Partitioning with
// Low-Overhead Profiling on the PIM-based Platform" (§3.1-3.2), over Huddle's operator graph.
//
// The problem is kept as plain data (AssignProblem) so that the profiling-path search and the
// assignment DP can be tested on small random graphs without a model:
//   ops        in topological order (the Graph's op order), each with the providers able to run it;
//   edges      one per (tensor, consumer op): the producer op, the consumer op (kEnd for a model
//              output, which must reach the primary), the tensor's dtype and bytes.
// Graph inputs (ids, positions) and weights are no edges: every device has its own.
//
// The DCG holds a node per (op, capable provider), a start and an end node, and an edge per
// (tensor edge, producer node, consumer node); start edges go to the nodes of ops that read no
// other op. An edge's cost is 0 inside one provider; between providers it is a distinct-attribute
// (DA) edge, classified by (source provider, destination provider, dtype, bytes) — edges of one
// class cost the same, so profiling need observe each class once. Edges to the end node from a
// provider on device 0 cost 0 (the outputs are already on the primary); from another device
// they are DA edges with destination kEnd.
#pragma once

#include "core/dtype.h"
#include "graph/graph.h"
#include "plan/assign_providers.h"

#include <cstdint>
#include <string>
#include <vector>

namespace huddle::assign {

// An op, provider or node index (int, as the DCG stores them) as a container index.
inline std::size_t at(int i) {
  return static_cast<std::size_t>(i);
}

inline constexpr int kEnd = -1;  // TensorEdge::to / DaKey::dst for the end node (model outputs)

struct TensorEdge {
  int from = 0;   // producer op
  int to = kEnd;  // consumer op, or kEnd
  DType dtype = DType::F32;
  std::int64_t bytes = 0;
  std::string value;  // the tensor's name (reports)
};

struct AssignProblem {
  std::vector<std::string> op_names;
  std::vector<std::vector<bool>> capable;  // [op][provider]; every op has at least one
  std::vector<int> provider_device;        // [provider]: 0 = this process
  std::vector<TensorEdge> edges;           // from < to (topological), or to == kEnd

  int num_ops() const { return static_cast<int>(op_names.size()); }
  int num_providers() const { return static_cast<int>(provider_device.size()); }
  // Devices the providers run on: this process and each remote (at least 1).
  int num_devices() const {
    int n = 1;
    for (int d : provider_device) n = d + 1 > n ? d + 1 : n;
    return n;
  }
  // Checks the invariants above; PlanError naming the op or edge.
  void validate() const;
};

// The problem of `graph` over `providers` for a step of `tokens` tokens (kTokens dims take it;
// the rows after last_row are 1, as in generation). PlanError naming the op no provider can run.
AssignProblem make_problem(const Graph& graph, const std::vector<Provider>& providers,
                           std::int64_t tokens);

struct DaKey {
  int src = 0;  // provider
  int dst = 0;  // provider, or kEnd
  DType dtype = DType::F32;
  std::int64_t bytes = 0;
  bool operator==(const DaKey&) const = default;
};

struct DcgNode {
  int op = -1;  // -1: start or end
  int provider = -1;
};

struct DcgEdge {
  int from = 0, to = 0;  // node indices
  int tensor = -1;       // index into AssignProblem::edges; -1 for start edges
  int da = -1;           // DA class, -1 when the edge costs nothing
};

class Dcg {
 public:
  explicit Dcg(AssignProblem problem);

  const AssignProblem& problem() const { return p_; }
  int start() const { return 0; }
  int end() const { return static_cast<int>(nodes_.size()) - 1; }
  // Node of (op, provider), -1 when the provider cannot run the op.
  int node(int op, int provider) const;
  const std::vector<DcgNode>& nodes() const { return nodes_; }
  const std::vector<DcgEdge>& edges() const { return edges_; }
  const std::vector<DaKey>& da_keys() const { return da_keys_; }
  int num_da() const { return static_cast<int>(da_keys_.size()); }

  // DA class of tensor edge `tensor` with its producer on `src` and consumer on `dst` (ignored
  // for kEnd edges), -1 when that costs nothing.
  int da_of(int tensor, int src, int dst) const;
  // Tensor edges into op (its inputs from other ops), and the kEnd edges.
  const std::vector<int>& in_edges(int op) const { return in_[static_cast<std::size_t>(op)]; }
  const std::vector<int>& end_edges() const { return end_edges_; }

 private:
  int classify(const DaKey& key);

  AssignProblem p_;
  std::vector<DcgNode> nodes_;
  std::vector<std::vector<int>> node_of_;  // [op][provider]
  std::vector<DcgEdge> edges_;
  std::vector<DaKey> da_keys_;
  std::vector<std::vector<int>> da_table_;  // [tensor][src * P + dst]
  std::vector<std::vector<int>> in_;
  std::vector<int> end_edges_;
};

// An assignment: the provider of every op.
using Assignment = std::vector<int>;

// DA classes an assignment's execution crosses (each once, ascending).
std::vector<int> da_edges_of(const Dcg& dcg, const Assignment& assignment);

}  // namespace huddle::assign
