#include "planner/row_simulator.h"

#include "core/error.h"
#include "plan/row_plan.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <utility>

namespace huddle {
namespace {

using std::size_t;

// Rows of input `in` that output rows `out` read (empty for an empty unit).
Range input_need(const rows::RowInput& in, std::int64_t producer_rows, const Range& out) {
  if (empty(out)) return {0, 0};
  if (in.map.kind == rows::RowMap::Kind::Whole) return {0, producer_rows};
  const kernels::RowSpan s = in.map.input_rows(out.first, out.second);
  return {s.begin, s.end};
}

// A value no row layer makes (graph input, tail op's output), held whole by device 0; a Whole
// reader sees it as one row of all its bytes.
struct External {
  std::int64_t rows = 0, bytes_per_row = 0;
  int first_reader = 0;  // layer index
  std::vector<Range> need;
  std::vector<double> arrival;
};

class Sim {
 public:
  Sim(const rows::RowGraph& g, const RowCosts& c, const std::vector<std::vector<Range>>& ranges)
      : g_(g), c_(c), ranges_(ranges), n_(static_cast<size_t>(c.devices())) {
    HUDDLE_CHECK(ranges.size() == g.layers.size());
    for (const auto& r : ranges) HUDDLE_CHECK(r.size() == n_);
    free_.assign(n_, 0.0);
    link_free_.assign(n_, std::vector<double>(n_ + 1, 0.0));
    pred_.bytes_sent.assign(n_, 0);
    pred_.busy_s.assign(n_, 0.0);
    finish_.assign(g.layers.size(), std::vector<double>(n_, 0.0));
    arrival_.assign(g.layers.size(), std::vector<double>(n_, 0.0));
    for (size_t l = 0; l < g.layers.size(); ++l) {
      for (const rows::RowInput& in : g.layers[l].inputs) {
        if (in.producer >= 0) continue;
        const bool whole = in.map.kind == rows::RowMap::Kind::Whole;
        External& e = ext_[{in.value, whole}];
        if (e.need.empty()) {
          e.rows = whole ? 1 : in.map.in_rows;
          e.bytes_per_row = in.bytes_per_row;
          e.first_reader = static_cast<int>(l);
          e.need.assign(n_, Range{0, 0});
          e.arrival.assign(n_, 0.0);
        }
        for (size_t d = 0; d < n_; ++d)
          e.need[d] = hull(e.need[d], input_need(in, e.rows, ranges[l][d]));
      }
    }
  }

  RowPrediction run() {
    size_t t = 0;
    for (size_t l = 0; l < g_.layers.size(); ++l) {
      for (; t < g_.tail.size() && g_.tail[t].op < g_.layers[l].op; ++t) run_tail(t);
      run_layer(l);
    }
    for (; t < g_.tail.size(); ++t) run_tail(t);
    double end = free_[0];
    for (int o : g_.output_layers) end = std::max(end, arrival_[static_cast<size_t>(o)][0]);
    pred_.latency_s = end;
    return pred_;
  }

 private:
  // Sends the transfers of a value held as `held` to the devices needing `need`; `ready[src]` is
  // when src holds its rows. Returns the arrival per device (0 where nothing comes).
  std::vector<double> send(const std::vector<Range>& held, const std::vector<Range>& need,
                           const std::vector<double>& ready, std::int64_t bytes_per_row) {
    std::vector<double> arrival(n_, 0.0);
    std::vector<double> cpu(n_, 0.0);      // per sender: the CPU of its messages so far
    std::vector<double> opening(n_, 0.0);  // per receiver: the CPU of opening what it receives
    for (const RowTransfer& x : forwarding_table(held, need)) {
      const auto s = static_cast<size_t>(x.src), d = static_cast<size_t>(x.dst);
      if (s == d) continue;
      const double bytes = static_cast<double>((x.end - x.begin) * bytes_per_row);
      cpu[s] += c_.overhead_s(x.src) + bytes * c_.cpu_s(x.src);
      double& queue = link_free_[s][c_.egress.empty() ? d : static_cast<size_t>(c_.egress[s][d])];
      const double start = std::max(ready[s] + cpu[s], queue);
      queue = start + bytes * c_.seconds_per_byte[s][d];
      arrival[d] = std::max(arrival[d], queue + c_.latency_s[s][d]);
      opening[d] += bytes * c_.cpu_s(x.dst);
      pred_.bytes_sent[s] += static_cast<std::int64_t>(bytes);
    }
    // A receiver opens its pieces once they are all there (the exchange's receive loop).
    for (size_t d = 0; d < n_; ++d) arrival[d] += opening[d];
    // The sender's exchange returns once its messages are packed and handed to the transport:
    // their fixed costs delay its next unit.
    for (size_t s = 0; s < n_; ++s) {
      if (cpu[s] > 0) free_[s] = std::max(free_[s], ready[s] + cpu[s]);
    }
    return arrival;
  }

  void run_tail(size_t t) {
    double start = free_[0];
    for (int m : g_.tail[t].row_inputs)
      start = std::max(start, arrival_[static_cast<size_t>(m)][0]);
    free_[0] = start + c_.tail[t];
    pred_.busy_s[0] += c_.tail[t];
    tails_done_ = free_[0];
  }

  void run_layer(size_t l) {
    const rows::RowLayer& layer = g_.layers[l];
    for (auto& [key, e] : ext_) {
      if (static_cast<size_t>(e.first_reader) != l) continue;
      std::vector<Range> held(n_, Range{0, 0});
      held[0] = {0, e.rows};
      e.arrival = send(held, e.need, std::vector<double>(n_, tails_done_), e.bytes_per_row);
    }
    for (size_t d = 0; d < n_; ++d) {
      const Range& r = ranges_[l][d];
      if (empty(r)) continue;
      double start = free_[d];
      for (const rows::RowInput& in : layer.inputs) {
        if (in.producer >= 0) {
          start = std::max(start, arrival_[static_cast<size_t>(in.producer)][d]);
        } else {
          const bool whole = in.map.kind == rows::RowMap::Kind::Whole;
          start = std::max(start, ext_.at({in.value, whole}).arrival[d]);
        }
      }
      const double y = c_.unit_s(static_cast<int>(l), static_cast<int>(d), r.second - r.first);
      finish_[l][d] = free_[d] = start + y;
      pred_.busy_s[d] += y;
    }
    arrival_[l] = send(ranges_[l], value_needs(g_, ranges_, static_cast<int>(l)), finish_[l],
                       layer.bytes_per_row);
  }

  const rows::RowGraph& g_;
  const RowCosts& c_;
  const std::vector<std::vector<Range>>& ranges_;
  size_t n_;
  std::vector<double> free_;
  std::vector<std::vector<double>> link_free_, finish_, arrival_;
  std::map<std::pair<ValueId, bool>, External> ext_;
  double tails_done_ = 0;
  RowPrediction pred_;
};

}  // namespace

std::vector<Range> consumer_needs(const rows::RowGraph& graph,
                                  const std::vector<std::vector<Range>>& ranges, int producer,
                                  int consumer) {
  const size_t n = ranges.at(static_cast<size_t>(consumer)).size();
  std::vector<Range> need(n, Range{0, 0});
  const std::int64_t rows = graph.layers[static_cast<size_t>(producer)].rows;
  for (const rows::RowInput& in : graph.layers[static_cast<size_t>(consumer)].inputs) {
    if (in.producer != producer) continue;
    for (size_t d = 0; d < n; ++d) {
      need[d] = hull(need[d], input_need(in, rows, ranges[static_cast<size_t>(consumer)][d]));
    }
  }
  return need;
}

std::vector<Range> value_needs(const rows::RowGraph& graph,
                               const std::vector<std::vector<Range>>& ranges, int producer) {
  const size_t n = ranges.at(static_cast<size_t>(producer)).size();
  std::vector<Range> need(n, Range{0, 0});
  for (int c : graph.consumers[static_cast<size_t>(producer)]) {
    const std::vector<Range> part = consumer_needs(graph, ranges, producer, c);
    for (size_t d = 0; d < n; ++d) need[d] = hull(need[d], part[d]);
  }
  bool gathered = std::find(graph.output_layers.begin(), graph.output_layers.end(), producer) !=
                  graph.output_layers.end();
  for (const rows::TailOp& t : graph.tail) {
    gathered = gathered ||
               std::find(t.row_inputs.begin(), t.row_inputs.end(), producer) != t.row_inputs.end();
  }
  if (gathered) need[0] = {0, graph.layers[static_cast<size_t>(producer)].rows};
  return need;
}

RowPrediction simulate_rows(const rows::RowGraph& graph, const RowCosts& costs,
                            const std::vector<std::vector<Range>>& ranges) {
  return Sim(graph, costs, ranges).run();
}

}  // namespace huddle
