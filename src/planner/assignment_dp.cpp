#include "planner/assignment_dp.h"

#include "core/error.h"
#include "planner/constants.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <utility>

namespace huddle::assign {
namespace {

double node_cost(const Dcg& dcg, const Costs& costs, int op, int provider) {
  return costs.node[at(dcg.node(op, provider))];
}

double edge_cost(const Dcg& dcg, const Costs& costs, int tensor, int src, int dst) {
  const int da = dcg.da_of(tensor, src, dst);
  return da < 0 ? 0.0 : costs.da[at(da)];
}

bool same_device(const Dcg& dcg, int a, int b) {
  const std::vector<int>& device = dcg.problem().provider_device;
  return device[at(a)] == device[at(b)];
}

// Bit of provider's device in a "delivered to" mask (device < kMaxMaskDevices).
constexpr int kMaxMaskDevices = 15;
std::int16_t device_bit(const Dcg& dcg, int provider) {
  return static_cast<std::int16_t>(1 << dcg.problem().provider_device[at(provider)]);
}

// Whether op `from`'s value already reached provider `pr`'s device before op j's k-th input
// edge: an earlier reader of it (providers in `before`) on that device, or an earlier input edge
// of op j from the same op.
bool already_sent(const Dcg& dcg, const Assignment& before, int j, std::size_t k, int from, int pr,
                  const std::vector<int>& readers) {
  const std::vector<int>& device = dcg.problem().provider_device;
  for (int r : readers) {
    if (r >= j) break;
    if (device[at(before[at(r)])] == device[at(pr)]) return true;
  }
  for (std::size_t i = 0; i < k; ++i) {
    if (dcg.problem().edges[at(dcg.in_edges(j)[i])].from == from) return true;
  }
  return false;
}

// Cost of the kEnd edges (outputs to the primary) under a full assignment.
double end_cost(const Dcg& dcg, const Costs& costs, const Assignment& a) {
  double sum = 0;
  for (int t : dcg.end_edges()) {
    const int src = a[at(dcg.problem().edges[at(t)].from)];
    sum += edge_cost(dcg, costs, t, src, src);
  }
  return sum;
}

// The fixed costs of the devices `a` places at least one op on.
double fixed_costs(const Dcg& dcg, const Costs& costs, const Assignment& a) {
  const std::vector<int>& device = dcg.problem().provider_device;
  std::vector<bool> used;
  double sum = 0;
  for (int pr : a) {
    const int d = device[at(pr)];
    if (at(d) >= used.size()) used.resize(at(d) + 1, false);
    if (!used[at(d)]) sum += costs.fixed(d);
    used[at(d)] = true;
  }
  return sum;
}

bool allows(const ProviderMask& allowed, int provider) {
  return allowed.empty() || allowed[at(provider)];
}

// Node of (op, provider) when the DP may use it, else -1.
int usable_node(const Dcg& dcg, const ProviderMask& allowed, int op, int provider) {
  return allows(allowed, provider) ? dcg.node(op, provider) : -1;
}

// The first op no allowed provider can run, -1 when there is none.
int stranded_op(const Dcg& dcg, const ProviderMask& allowed) {
  const AssignProblem& p = dcg.problem();
  HUDDLE_CHECK(allowed.empty() || allowed.size() == at(p.num_providers()));
  for (int op = 0; op < p.num_ops(); ++op) {
    bool any = false;
    for (int pr = 0; pr < p.num_providers() && !any; ++pr) {
      any = usable_node(dcg, allowed, op, pr) >= 0;
    }
    if (!any) return op;
  }
  return -1;
}

void check_feasible(const Dcg& dcg, const ProviderMask& allowed) {
  const int op = stranded_op(dcg, allowed);
  if (op >= 0) {
    throw PlanError(fmt::format("op '{}' has no allowed provider", dcg.problem().op_names[at(op)]));
  }
}

}  // namespace

double CostBreakdown::total() const {
  double sum = overhead + fixed;
  for (double t : node_by_provider) sum += t;
  for (double t : edges_by_da) sum += t;
  return sum;
}

CostBreakdown cost_breakdown(const Dcg& dcg, const Costs& costs, const Assignment& a) {
  const AssignProblem& p = dcg.problem();
  HUDDLE_CHECK(a.size() == at(p.num_ops()), "assignment of {} ops for {}", a.size(), p.num_ops());
  CostBreakdown b;
  b.node_by_provider.assign(at(p.num_providers()), 0.0);
  b.crossings_by_da.assign(at(dcg.num_da()), 0);
  b.edges_by_da.assign(at(dcg.num_da()), 0.0);
  const auto cross = [&](int tensor, int src, int dst) {
    const int da = dcg.da_of(tensor, src, dst);
    if (da < 0) return;
    ++b.crossings_by_da[at(da)];
    b.edges_by_da[at(da)] += costs.da[at(da)];
  };
  std::set<std::pair<int, int>> delivered;  // (producing op, device) a value already reached
  for (int op = 0; op < p.num_ops(); ++op) {
    HUDDLE_CHECK(dcg.node(op, a[at(op)]) >= 0, "op {} on an incapable provider", op);
    b.node_by_provider[at(a[at(op)])] += node_cost(dcg, costs, op, a[at(op)]);
    for (int t : dcg.in_edges(op)) {
      const int from = p.edges[at(t)].from, src = a[at(from)], dst = a[at(op)];
      if (!same_device(dcg, src, dst) &&
          !delivered.emplace(from, p.provider_device[at(dst)]).second) {
        continue;  // an earlier reader on this device had it sent
      }
      cross(t, src, dst);
    }
  }
  for (int t : dcg.end_edges()) {
    const int src = a[at(p.edges[at(t)].from)];
    cross(t, src, src);
  }
  b.overhead = costs.overhead;
  b.fixed = fixed_costs(dcg, costs, a);
  return b;
}

double assignment_cost(const Dcg& dcg, const Costs& costs, const Assignment& a) {
  return cost_breakdown(dcg, costs, a).total();
}

DpResult assembly_line_dp(const Dcg& dcg, const Costs& costs, const ProviderMask& allowed) {
  const AssignProblem& p = dcg.problem();
  const int n = p.num_ops(), providers = p.num_providers();
  if (n == 0) return {{}, costs.overhead};
  check_feasible(dcg, allowed);
  // consumers[i]: the ops reading op i's output, ascending.
  std::vector<std::vector<int>> consumers(at(n));
  for (const TensorEdge& e : p.edges) {
    if (e.to != kEnd) consumers[at(e.from)].push_back(e.to);
  }
  // f[q] and the path to (j-1, q) (providers of ops 0..j-1), per line q.
  std::vector<double> f(at(providers), kInf);
  std::vector<Assignment> path(at(providers));
  for (int q = 0; q < providers; ++q) {
    if (usable_node(dcg, allowed, 0, q) < 0) continue;
    f[at(q)] = node_cost(dcg, costs, 0, q);
    path[at(q)] = {q};
  }
  for (int j = 1; j < n; ++j) {
    std::vector<double> g(at(providers), kInf);
    std::vector<Assignment> next(at(providers));
    for (int pr = 0; pr < providers; ++pr) {
      if (usable_node(dcg, allowed, j, pr) < 0) continue;
      for (int q = 0; q < providers; ++q) {
        if (f[at(q)] == kInf) continue;
        double t = 0;  // T[j][pr | path to (j-1, q)]
        const Assignment& before = path[at(q)];
        for (std::size_t k = 0; k < dcg.in_edges(j).size(); ++k) {
          const int e = dcg.in_edges(j)[k];
          const int from = p.edges[at(e)].from, src = before[at(from)];
          if (!same_device(dcg, src, pr) &&
              already_sent(dcg, before, j, k, from, pr, consumers[at(from)])) {
            continue;
          }
          t += edge_cost(dcg, costs, e, src, pr);
        }
        const double v = f[at(q)] + t + node_cost(dcg, costs, j, pr);
        if (v < g[at(pr)]) {
          g[at(pr)] = v;
          next[at(pr)] = path[at(q)];
        }
      }
      if (g[at(pr)] < kInf) next[at(pr)].push_back(pr);
    }
    f = std::move(g);
    path = std::move(next);
  }
  DpResult best{{}, kInf};
  for (int q = 0; q < providers; ++q) {
    if (f[at(q)] == kInf) continue;
    const double v = f[at(q)] + end_cost(dcg, costs, path[at(q)]) + costs.overhead;
    if (v < best.cost) best = {path[at(q)], v};
  }
  best.cost += fixed_costs(dcg, costs, best.assignment);
  return best;
}

std::optional<DpResult> frontier_dp(const Dcg& dcg, const Costs& costs, std::size_t max_states,
                                    const ProviderMask& allowed) {
  const AssignProblem& p = dcg.problem();
  const int n = p.num_ops(), providers = p.num_providers();
  if (n == 0) return DpResult{{}, costs.overhead};
  check_feasible(dcg, allowed);
  if (p.num_devices() > kMaxMaskDevices) return std::nullopt;
  // last_read[i]: the last op reading op i's output (n for a model output, -1 if none).
  std::vector<int> last_read(at(n), -1);
  for (const TensorEdge& e : p.edges) {
    last_read[at(e.from)] = std::max(last_read[at(e.from)], e.to == kEnd ? n : e.to);
  }
  // Per step j: the live ops after j (ascending) and, per state, its cost and how it was reached.
  struct Entry {
    double cost;
    int prev;      // state index at step j-1
    int provider;  // of op j
  };
  std::vector<int> live;  // live ops before step j
  std::vector<std::vector<Entry>> steps;
  // A state: per live op, its provider and the mask of the devices (besides its own) its value
  // was already sent to, which later readers there get for free.
  using State = std::vector<std::int16_t>;
  std::vector<State> states{{}};
  std::vector<Entry> entries{{0.0, -1, -1}};
  for (int j = 0; j < n; ++j) {
    std::vector<int> next_live;
    for (int i : live) {
      if (last_read[at(i)] > j) next_live.push_back(i);
    }
    if (last_read[at(j)] > j) next_live.push_back(j);
    std::map<State, int> next_index;
    std::vector<State> next_states;
    std::vector<Entry> next_entries;
    for (std::size_t s = 0; s < states.size(); ++s) {
      auto slot_of = [&](int op) {
        const auto it = std::lower_bound(live.begin(), live.end(), op);
        HUDDLE_CHECK(it != live.end() && *it == op, "op {} read after it died", op);
        return 2 * at(static_cast<int>(it - live.begin()));
      };
      for (int pr = 0; pr < providers; ++pr) {
        if (usable_node(dcg, allowed, j, pr) < 0) continue;
        double v = entries[s].cost + node_cost(dcg, costs, j, pr);
        State after = states[s];  // the live ops' masks once j's inputs are sent
        for (int e : dcg.in_edges(j)) {
          const std::size_t slot = slot_of(p.edges[at(e)].from);
          const int src = after[slot];
          if (!same_device(dcg, src, pr)) {
            if ((after[slot + 1] & device_bit(dcg, pr)) != 0) continue;
            after[slot + 1] = static_cast<std::int16_t>(after[slot + 1] | device_bit(dcg, pr));
          }
          v += edge_cost(dcg, costs, e, src, pr);
        }
        State key;
        for (int i : next_live) {
          if (i == j) {
            key.insert(key.end(), {static_cast<std::int16_t>(pr), 0});
          } else {
            const std::size_t slot = slot_of(i);
            key.insert(key.end(), {after[slot], after[slot + 1]});
          }
        }
        const auto [it, inserted] =
            next_index.try_emplace(key, static_cast<int>(next_states.size()));
        if (inserted) {
          if (next_states.size() >= max_states) return std::nullopt;
          next_states.push_back(std::move(key));
          next_entries.push_back({v, static_cast<int>(s), pr});
        } else if (v < next_entries[at(it->second)].cost) {
          next_entries[at(it->second)] = {v, static_cast<int>(s), pr};
        }
      }
    }
    steps.push_back(next_entries);
    live = std::move(next_live);
    states = std::move(next_states);
    entries = std::move(next_entries);
  }
  // Only outputs are live after the last op: add their edges to the end.
  int best = -1;
  double best_cost = kInf;
  for (std::size_t s = 0; s < states.size(); ++s) {
    double v = entries[s].cost + costs.overhead;
    for (int t : dcg.end_edges()) {
      const int from = p.edges[at(t)].from;
      const auto it = std::lower_bound(live.begin(), live.end(), from);
      const int src = states[s][2 * at(static_cast<int>(it - live.begin()))];
      v += edge_cost(dcg, costs, t, src, src);
    }
    if (v < best_cost) {
      best_cost = v;
      best = static_cast<int>(s);
    }
  }
  HUDDLE_CHECK(best >= 0, "no feasible assignment");
  Assignment a(at(n), -1);
  for (int j = n - 1, s = best; j >= 0; --j) {
    const Entry& e = steps[at(j)][at(s)];
    a[at(j)] = e.provider;
    s = e.prev;
  }
  best_cost += fixed_costs(dcg, costs, a);
  return DpResult{std::move(a), best_cost};
}

DpResult optimal_assignment(const Dcg& dcg, const Costs& costs, bool* exact) {
  const AssignProblem& p = dcg.problem();
  bool all_exact = true;
  // The restricted DP over the providers of devices not in `dropped`; nullopt when some op has
  // no provider left.
  auto restricted = [&](const std::vector<bool>& dropped) -> std::optional<DpResult> {
    ProviderMask allowed(at(p.num_providers()));
    for (int pr = 0; pr < p.num_providers(); ++pr) {
      const int d = p.provider_device[at(pr)];
      allowed[at(pr)] = at(d) >= dropped.size() || !dropped[at(d)];
    }
    if (stranded_op(dcg, allowed) >= 0) return std::nullopt;
    std::optional<DpResult> r = frontier_dp(dcg, costs, kMaxFrontierStates, allowed);
    if (r) return r;
    all_exact = false;
    return assembly_line_dp(dcg, costs, allowed);
  };
  std::vector<int> priced;  // devices with a fixed cost
  const int num_devices = p.num_devices();
  for (int d = 0; d < num_devices; ++d) {
    if (costs.fixed(d) > 0) priced.push_back(d);
  }
  std::vector<bool> dropped(at(num_devices), false);
  std::optional<DpResult> best = restricted(dropped);  // every device allowed: always feasible
  HUDDLE_CHECK(best.has_value());
  if (priced.size() <= static_cast<std::size_t>(kMaxFixedCostDevices)) {
    for (std::uint32_t subset = 1; subset < (1u << priced.size()); ++subset) {
      for (std::size_t i = 0; i < priced.size(); ++i)
        dropped[at(priced[i])] = ((subset >> i) & 1u) != 0;
      std::optional<DpResult> r = restricted(dropped);
      if (r && r->cost < best->cost) best = std::move(r);
    }
  } else {
    all_exact = false;
    // Greedy descent from every device allowed: each step drops the device whose removal gives
    // the cheapest result, while that is cheaper than the current one (`best`).
    for (bool improved = true; improved;) {
      int drop = -1;
      for (int d : priced) {
        if (dropped[at(d)]) continue;
        dropped[at(d)] = true;
        std::optional<DpResult> r = restricted(dropped);
        dropped[at(d)] = false;
        if (r && r->cost < best->cost) {
          best = std::move(r);
          drop = d;
        }
      }
      improved = drop >= 0;
      if (improved) dropped[at(drop)] = true;
    }
    for (int d : priced) dropped[at(d)] = true;  // the other end: none of them
    std::optional<DpResult> none = restricted(dropped);
    if (none && none->cost < best->cost) best = std::move(none);
  }
  if (exact) *exact = all_exact;
  return std::move(*best);
}

Assignment priority_assignment(const Dcg& dcg, const std::vector<int>& order) {
  const AssignProblem& p = dcg.problem();
  Assignment a(at(p.num_ops()), -1);
  for (int op = 0; op < p.num_ops(); ++op) {
    for (int pr : order) {
      if (dcg.node(op, pr) >= 0) {
        a[at(op)] = pr;
        break;
      }
    }
    for (int pr = 0; a[at(op)] < 0; ++pr) {
      if (dcg.node(op, pr) >= 0) a[at(op)] = pr;
    }
  }
  return a;
}

}  // namespace huddle::assign
