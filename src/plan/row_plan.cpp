#include "plan/row_plan.h"

#include "core/error.h"
#include "io/json_field.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <map>

namespace huddle {
namespace {

using RowPlanReader = io::JsonField<PlanError>;

bool holds(const Range& r, std::int64_t row) {
  return row >= r.first && row < r.second;
}

}  // namespace

nlohmann::json RowPlan::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const RowSplit& s : ops) {
    nlohmann::json ranges = nlohmann::json::array();
    for (const auto& [b, e] : s.ranges) ranges.push_back({b, e});
    list.push_back({{"op", s.op}, {s.columns ? "columns" : "ranges", ranges}});
  }
  return list;
}

RowPlan RowPlan::from_json(const nlohmann::json& json, const std::string& source) {
  const RowPlanReader root(json, source, "rows");
  RowPlan p;
  for (std::size_t i = 0; i < root.array_size(); ++i) {
    const RowPlanReader entry = root.at(i);
    RowSplit s;
    s.op = entry.at("op").str();
    s.columns = entry.has("columns");
    if (s.columns && entry.has("ranges"))
      entry.fail("give \"ranges\" (rows) or \"columns\", not both");
    const RowPlanReader ranges = entry.at(s.columns ? "columns" : "ranges");
    const char* unit = s.columns ? "columns" : "rows";
    for (std::size_t d = 0; d < ranges.array_size(); ++d) {
      const RowPlanReader r = ranges.at(d);
      if (r.array_size() != 2) r.fail("expected [begin, end]");
      const std::int64_t b = r.at(0).integer(), e = r.at(1).integer();
      if (b < 0 || e < b) r.fail(fmt::format("[{}, {}] is not a range of {}", b, e, unit));
      s.ranges.emplace_back(b, e);
    }
    p.ops.push_back(std::move(s));
  }
  return p;
}

void RowPlan::validate(const rows::RowGraph& graph, int devices, const std::string& source) const {
  std::map<std::string, const rows::RowLayer*> by_name;
  for (const rows::RowLayer& l : graph.layers) by_name.emplace(l.name, &l);
  std::map<std::string, int> seen;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const RowSplit& s = ops[i];
    const std::string field = fmt::format("{}: rows[{}] ('{}')", source, i, s.op);
    const auto it = by_name.find(s.op);
    if (it == by_name.end()) {
      throw PlanError(fmt::format("{}: the model has no row-splittable op of that name", field));
    }
    if (++seen[s.op] > 1) throw PlanError(fmt::format("{}: named twice", field));
    const bool columns = it->second->columns;
    if (s.columns != columns) {
      throw PlanError(fmt::format(
          "{}: a {} layer, split by {}: its entry gives \"{}\"", field, columns ? "column" : "row",
          columns ? "output columns" : "output rows", columns ? "columns" : "ranges"));
    }
    const char* unit = columns ? "columns" : "rows";
    if (static_cast<int>(s.ranges.size()) != devices) {
      throw PlanError(
          fmt::format("{}: {} ranges of {} for {} devices", field, s.ranges.size(), unit, devices));
    }
    const std::int64_t rows = it->second->rows;
    std::vector<bool> covered(static_cast<std::size_t>(rows), false);
    for (std::size_t d = 0; d < s.ranges.size(); ++d) {
      const auto [b, e] = s.ranges[d];
      if (b < 0 || e < b || e > rows) {
        throw PlanError(fmt::format("{}: device {} has {} [{}, {}) of an output of {} {}", field, d,
                                    unit, b, e, rows, unit));
      }
      for (std::int64_t r = b; r < e; ++r) covered[static_cast<std::size_t>(r)] = true;
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      if (!covered[static_cast<std::size_t>(r)]) {
        throw PlanError(fmt::format("{}: no device computes {} {} of {}", field,
                                    columns ? "column" : "row", r, rows));
      }
    }
  }
}

std::vector<std::vector<Range>> RowPlan::layer_ranges(const rows::RowGraph& graph,
                                                      int devices) const {
  std::map<std::string, const RowSplit*> by_name;
  for (const RowSplit& s : ops) by_name.emplace(s.op, &s);
  std::vector<std::vector<Range>> out;
  for (const rows::RowLayer& l : graph.layers) {
    if (const auto it = by_name.find(l.name); it != by_name.end()) {
      out.push_back(it->second->ranges);
    } else {
      std::vector<Range> whole(static_cast<std::size_t>(devices), Range{0, 0});
      whole[0] = {0, l.rows};
      out.push_back(std::move(whole));
    }
  }
  return out;
}

RowPlan RowPlan::of_ranges(const rows::RowGraph& graph,
                           const std::vector<std::vector<Range>>& ranges) {
  HUDDLE_CHECK(ranges.size() == graph.layers.size());
  RowPlan p;
  for (std::size_t i = 0; i < ranges.size(); ++i)
    p.ops.push_back({graph.layers[i].name, ranges[i], graph.layers[i].columns});
  return p;
}

std::vector<RowTransfer> forwarding_table(const std::vector<Range>& held,
                                          const std::vector<Range>& need) {
  HUDDLE_CHECK(held.size() == need.size());
  const int devices = static_cast<int>(held.size());
  std::vector<RowTransfer> out;
  for (int dst = 0; dst < devices; ++dst) {
    const auto [b, e] = need[static_cast<std::size_t>(dst)];
    for (std::int64_t row = b; row < e; ++row) {
      int src = holds(held[static_cast<std::size_t>(dst)], row) ? dst : -1;
      for (int d = 0; src < 0 && d < devices; ++d) {
        if (holds(held[static_cast<std::size_t>(d)], row)) src = d;
      }
      if (src < 0) {
        throw PlanError(fmt::format("row {} that device {} needs is held by no device", row, dst));
      }
      if (!out.empty() && out.back().dst == dst && out.back().src == src && out.back().end == row) {
        ++out.back().end;
      } else {
        out.push_back({src, dst, row, row + 1});
      }
    }
  }
  return out;
}

}  // namespace huddle
