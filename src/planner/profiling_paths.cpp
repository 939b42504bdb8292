#include "planner/profiling_paths.h"

#include "core/error.h"
#include "planner/assignment_dp.h"

#include <algorithm>

namespace huddle::assign {
namespace {

// A profiled-edge list (as flags over DA classes, with its count) and its profiled path.
struct Profiled {
  std::vector<bool> list;
  int count = 0;
  Assignment path;  // providers of ops 0..j

  void mark(int da, const std::vector<bool>& covered) {
    if (da < 0 || covered[at(da)] || list[at(da)]) return;
    list[at(da)] = true;
    ++count;
  }
  bool includes(const Profiled& o) const {
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (o.list[i] && !list[i]) return false;
    }
    return true;
  }
};

// Keeps the lists no other kept list includes, largest first, at most `cap`.
void merge_by_inclusion(std::vector<Profiled>& lists, std::size_t cap) {
  std::stable_sort(lists.begin(), lists.end(),
                   [](const Profiled& a, const Profiled& b) { return a.count > b.count; });
  std::vector<Profiled> kept;
  for (Profiled& l : lists) {
    if (kept.size() >= cap) break;
    const bool included =
        std::any_of(kept.begin(), kept.end(), [&](const Profiled& k) { return k.includes(l); });
    if (!included) kept.push_back(std::move(l));
  }
  lists = std::move(kept);
}

// Completes a path over ops 0..j by keeping each later op on the provider of op j where it can,
// else the first capable one.
Assignment complete(const Dcg& dcg, Assignment path) {
  const int n = dcg.problem().num_ops();
  const int stay = path.back();
  const Assignment fill = priority_assignment(dcg, {stay});
  for (int op = static_cast<int>(path.size()); op < n; ++op) path.push_back(fill[at(op)]);
  return path;
}

// One edge-profiling pass: a run crossing as many uncovered classes as the pass finds.
Assignment edge_pass(const Dcg& dcg, const std::vector<bool>& covered, int uncovered,
                     std::size_t cap) {
  const AssignProblem& p = dcg.problem();
  const int n = p.num_ops(), providers = p.num_providers();
  const std::vector<bool> none(at(dcg.num_da()), false);
  std::vector<std::vector<Profiled>> prev(at(providers));  // per node of op j-1
  for (int j = 0; j < n; ++j) {
    std::vector<std::vector<Profiled>> cur(at(providers));
    for (int pr = 0; pr < providers; ++pr) {
      if (dcg.node(j, pr) < 0) continue;
      std::vector<Profiled> lists;
      auto extend = [&](Profiled l) {
        l.path.push_back(pr);
        for (int e : dcg.in_edges(j))
          l.mark(dcg.da_of(e, l.path[at(p.edges[at(e)].from)], pr), covered);
        lists.push_back(std::move(l));
      };
      if (j == 0) extend({none, 0, {}});
      for (const auto& from : prev) {
        for (const Profiled& l : from) extend(l);
      }
      merge_by_inclusion(lists, cap);
      if (!lists.empty() && lists.front().count == uncovered) {
        return complete(dcg, lists.front().path);  // every class marked: done
      }
      cur[at(pr)] = std::move(lists);
    }
    prev = std::move(cur);
  }
  const Profiled* best = nullptr;
  std::vector<Profiled> finals;
  for (const auto& from : prev) {
    for (Profiled l : from) {
      for (int t : dcg.end_edges()) {
        const int src = l.path[at(p.edges[at(t)].from)];
        l.mark(dcg.da_of(t, src, src), covered);
      }
      finals.push_back(std::move(l));
    }
  }
  for (const Profiled& l : finals) {
    if (!best || l.count > best->count) best = &l;
  }
  HUDDLE_CHECK(best != nullptr, "no path through the DCG");
  return best->count > 0 ? best->path : Assignment{};
}

// A run crossing DA class `da`: some edge of that class, its ends on their providers, the rest
// on the source provider where it can run.
Assignment run_through(const Dcg& dcg, int da) {
  for (const DcgEdge& e : dcg.edges()) {
    if (e.da != da) continue;
    const DcgNode& from = dcg.nodes()[at(e.from)];
    Assignment a = priority_assignment(dcg, {from.provider});
    a[at(from.op)] = from.provider;
    if (e.to != dcg.end()) {
      const DcgNode& to = dcg.nodes()[at(e.to)];
      a[at(to.op)] = to.provider;
    }
    return a;
  }
  HUDDLE_CHECK(false, "DA class {} has no edge", da);
  return {};
}

}  // namespace

std::vector<Assignment> ProfilingRuns::all() const {
  std::vector<Assignment> out = node_runs;
  out.insert(out.end(), edge_runs.begin(), edge_runs.end());
  return out;
}

ProfilingRuns profiling_paths(const Dcg& dcg, std::size_t max_lists) {
  HUDDLE_CHECK(max_lists >= 1);
  const int providers = dcg.problem().num_providers();
  ProfilingRuns runs;
  std::vector<bool> covered(at(dcg.num_da()), false);
  int uncovered = dcg.num_da();
  auto cover = [&](const Assignment& a) {
    for (int da : da_edges_of(dcg, a)) {
      if (!covered[at(da)]) {
        covered[at(da)] = true;
        --uncovered;
      }
    }
  };
  for (int i = 0; i < providers; ++i) {
    std::vector<int> order{i};
    for (int q = 0; q < providers; ++q) {
      if (q != i) order.push_back(q);
    }
    runs.node_runs.push_back(priority_assignment(dcg, order));
    cover(runs.node_runs.back());
  }
  while (uncovered > 0) {
    Assignment a = edge_pass(dcg, covered, uncovered, max_lists);
    if (a.empty()) {
      const int da =
          static_cast<int>(std::find(covered.begin(), covered.end(), false) - covered.begin());
      a = run_through(dcg, da);
    }
    cover(a);
    runs.edge_runs.push_back(std::move(a));
  }
  return runs;
}

bool covers_every_da_edge(const Dcg& dcg, const std::vector<Assignment>& runs) {
  std::vector<bool> seen(at(dcg.num_da()), false);
  for (const Assignment& a : runs) {
    for (int da : da_edges_of(dcg, a)) seen[at(da)] = true;
  }
  return std::all_of(seen.begin(), seen.end(), [](bool b) { return b; });
}

}  // namespace huddle::assign
