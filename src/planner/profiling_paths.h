// Profiling-path selection, Algorithm 1 of Lee et al.: the fewest profile runs (assignments) that
// observe every node cost and every DA edge cost of a DCG.
//
//   node runs  one per provider i, priority [i, then the list order]: each op runs on i where i
//              can, so every node is run once; these runs already cross some DA edges.
//   edge runs  a pass over the DCG nodes in topological order (ops in order, providers as
//              siblings). Each node keeps its profiled-edge lists L (the not-yet-covered DA
//              classes crossed so far) with their profiled paths P (providers of the ops so far);
//              a node extends every (L, P) of the previous op's nodes by its incoming edges and
//              keeps only the lists no other list includes (merge by inclusion). A list holding
//              every uncovered class ends the pass early (Algorithm 1, lines 12-14); otherwise
//              the end node's largest list is taken. Its path is one run; the pass repeats with
//              those classes covered until every class is.
//
// With branches and joins the inclusion merge may drop a path that a later edge would have
// needed (the path fixes producers' providers); the result always covers every DA class (a
// pass that finds nothing new falls back to a run built around one uncovered edge), but its
// size may exceed the minimum. `max_lists` caps the lists kept per node.
#pragma once

#include "planner/dcg.h"

#include <cstddef>
#include <vector>

namespace huddle::assign {

struct ProfilingRuns {
  std::vector<Assignment> node_runs;  // one per provider, in provider order
  std::vector<Assignment> edge_runs;  // what covers the DA classes node runs missed
  std::size_t size() const { return node_runs.size() + edge_runs.size(); }
  std::vector<Assignment> all() const;
};

ProfilingRuns profiling_paths(const Dcg& dcg, std::size_t max_lists = 16);

// Whether `runs` cross every DA class of `dcg`.
bool covers_every_da_edge(const Dcg& dcg, const std::vector<Assignment>& runs);

}  // namespace huddle::assign
