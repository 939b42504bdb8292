#include "planner/dcg.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>

namespace huddle::assign {

void AssignProblem::validate() const {
  const int n = num_ops();
  const int providers = num_providers();
  if (providers == 0) throw PlanError("assignment: no providers");
  if (capable.size() != op_names.size()) throw PlanError("assignment: capability table size");
  for (int i = 0; i < n; ++i) {
    const auto& row = capable[static_cast<std::size_t>(i)];
    if (static_cast<int>(row.size()) != providers) {
      throw PlanError(fmt::format("assignment: op '{}': capability row size", op_names[i]));
    }
    if (std::none_of(row.begin(), row.end(), [](bool b) { return b; })) {
      throw PlanError(fmt::format("assignment: no provider can run op '{}'", op_names[i]));
    }
  }
  for (const TensorEdge& e : edges) {
    if (e.from < 0 || e.from >= n || (e.to != kEnd && (e.to <= e.from || e.to >= n))) {
      throw PlanError(
          fmt::format("assignment: edge '{}' {} -> {} is not forward", e.value, e.from, e.to));
    }
  }
}

AssignProblem make_problem(const Graph& graph, const std::vector<Provider>& providers,
                           std::int64_t tokens) {
  if (providers.empty()) throw InputError("the provider list is empty");
  if (tokens < 1) throw InputError(fmt::format("prompt length {} < 1", tokens));
  AssignProblem p;
  for (const Provider& pr : providers) p.provider_device.push_back(pr.device);
  std::vector<int> producer(graph.values().size(), -1);
  const auto& ops = graph.ops();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    p.op_names.push_back(op.name);
    std::vector<bool> row;
    for (const Provider& pr : providers) row.push_back(pr.capable(graph, op));
    if (std::none_of(row.begin(), row.end(), [](bool b) { return b; })) {
      throw PlanError(
          fmt::format("no provider in the list can run op '{}' ({})", op.name, op_name(op.kind)));
    }
    p.capable.push_back(std::move(row));
    producer[static_cast<std::size_t>(op.output)] = static_cast<int>(i);
  }
  auto edge = [&](ValueId v, int to) {
    const Value& value = graph.value(v);
    std::int64_t elements = 1;
    for (std::int64_t d : value.shape) {
      elements *= d == kTokens ? tokens : d == kOutputRows ? 1 : d;
    }
    p.edges.push_back({producer[static_cast<std::size_t>(v)], to, value.dtype,
                       elements * static_cast<std::int64_t>(dtype_size(value.dtype)), value.name});
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    std::vector<ValueId> seen;  // an op reading one tensor twice needs it once
    for (ValueId in : ops[i].inputs) {
      if (producer[static_cast<std::size_t>(in)] < 0 ||
          std::find(seen.begin(), seen.end(), in) != seen.end())
        continue;
      seen.push_back(in);
      edge(in, static_cast<int>(i));
    }
  }
  for (ValueId o : graph.outputs()) {
    if (producer[static_cast<std::size_t>(o)] >= 0) edge(o, kEnd);
  }
  p.validate();
  return p;
}

Dcg::Dcg(AssignProblem problem) : p_(std::move(problem)) {
  p_.validate();
  const int n = p_.num_ops();
  const int providers = p_.num_providers();
  nodes_.push_back({});  // start
  node_of_.assign(static_cast<std::size_t>(n),
                  std::vector<int>(static_cast<std::size_t>(providers), -1));
  for (int op = 0; op < n; ++op) {
    for (int pr = 0; pr < providers; ++pr) {
      if (!p_.capable[static_cast<std::size_t>(op)][static_cast<std::size_t>(pr)]) continue;
      node_of_[static_cast<std::size_t>(op)][static_cast<std::size_t>(pr)] =
          static_cast<int>(nodes_.size());
      nodes_.push_back({op, pr});
    }
  }
  nodes_.push_back({});  // end
  in_.resize(static_cast<std::size_t>(n));
  std::vector<bool> has_pred(static_cast<std::size_t>(n), false);
  for (std::size_t t = 0; t < p_.edges.size(); ++t) {
    const TensorEdge& e = p_.edges[t];
    std::vector<int> table(static_cast<std::size_t>(providers * providers), -1);
    for (int s = 0; s < providers; ++s) {
      const int from = node(e.from, s);
      if (from < 0) continue;
      if (e.to == kEnd) {
        const int da = p_.provider_device[static_cast<std::size_t>(s)] == 0
                           ? -1
                           : classify({s, kEnd, e.dtype, e.bytes});
        for (int d = 0; d < providers; ++d) table[static_cast<std::size_t>(s * providers + d)] = da;
        edges_.push_back({from, end(), static_cast<int>(t), da});
        continue;
      }
      for (int d = 0; d < providers; ++d) {
        const int to = node(e.to, d);
        if (to < 0) continue;
        const int da = s == d ? -1 : classify({s, d, e.dtype, e.bytes});
        table[static_cast<std::size_t>(s * providers + d)] = da;
        edges_.push_back({from, to, static_cast<int>(t), da});
      }
    }
    da_table_.push_back(std::move(table));
    if (e.to == kEnd) {
      end_edges_.push_back(static_cast<int>(t));
    } else {
      in_[static_cast<std::size_t>(e.to)].push_back(static_cast<int>(t));
      has_pred[static_cast<std::size_t>(e.to)] = true;
    }
  }
  for (int op = 0; op < n; ++op) {
    if (has_pred[static_cast<std::size_t>(op)]) continue;
    for (int pr = 0; pr < providers; ++pr) {
      if (node(op, pr) >= 0) edges_.push_back({start(), node(op, pr), -1, -1});
    }
  }
}

int Dcg::node(int op, int provider) const {
  return node_of_[static_cast<std::size_t>(op)][static_cast<std::size_t>(provider)];
}

int Dcg::classify(const DaKey& key) {
  const auto it = std::find(da_keys_.begin(), da_keys_.end(), key);
  if (it != da_keys_.end()) return static_cast<int>(it - da_keys_.begin());
  da_keys_.push_back(key);
  return num_da() - 1;
}

int Dcg::da_of(int tensor, int src, int dst) const {
  const int providers = p_.num_providers();
  return da_table_[static_cast<std::size_t>(tensor)]
                  [static_cast<std::size_t>(src * providers + dst)];
}

std::vector<int> da_edges_of(const Dcg& dcg, const Assignment& assignment) {
  std::vector<int> out;
  const auto& edges = dcg.problem().edges;
  for (std::size_t t = 0; t < edges.size(); ++t) {
    const TensorEdge& e = edges[t];
    const int src = assignment[static_cast<std::size_t>(e.from)];
    const int dst = e.to == kEnd ? src : assignment[static_cast<std::size_t>(e.to)];
    const int da = dcg.da_of(static_cast<int>(t), src, dst);
    if (da >= 0) out.push_back(da);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace huddle::assign
