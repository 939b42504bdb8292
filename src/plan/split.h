// Proportional integer splits: the pure slicing functions every planner uses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace huddle {

using Range = std::pair<std::int64_t, std::int64_t>;  // [begin, end)

inline bool empty(const Range& r) {
  return r.first >= r.second;
}

// The smallest range holding both (an empty one adds nothing).
inline Range hull(const Range& a, const Range& b) {
  if (empty(a)) return b;
  if (empty(b)) return a;
  return {std::min(a.first, b.first), std::max(a.second, b.second)};
}

// Whether `outer` holds every element of `inner` (always, for an empty `inner`).
inline bool contains(const Range& outer, const Range& inner) {
  return empty(inner) || (inner.first >= outer.first && inner.second <= outer.second);
}

// Splits `total` units into parts proportional to `shares` (>= 0, not all 0) by largest
// remainder: the parts sum exactly to `total`, each within one unit of its exact share, ties to
// the earlier part. Parts with share 0 get 0.
std::vector<std::int64_t> split_proportional(std::int64_t total, const std::vector<double>& shares);

// The same split as contiguous ranges [0, total) in part order.
std::vector<Range> split_ranges(std::int64_t total, const std::vector<double>& shares);

// Splits `total` units by `shares` with at least one unit per part: the largest-remainder split,
// then each part rounded down to 0 takes one unit from the largest. PlanError naming `what` when
// total is smaller than the part count.
std::vector<Range> split_at_least_one(std::int64_t total, const std::vector<double>& shares,
                                      const std::string& what);

// Rows per message when an all-gather's parts (the largest `largest_part` rows, each row
// `row_bytes` on the wire) travel in `chunks` chunks (Plan::gather_chunks): the largest part
// divided evenly, and no chunk over `max_chunk_bytes` (at least one row).
std::int64_t gather_chunk_rows(std::int64_t largest_part, int chunks, std::size_t row_bytes,
                               std::size_t max_chunk_bytes);

// Ranges from counts.
std::vector<Range> ranges_from_counts(const std::vector<std::int64_t>& counts);

// Contiguous ranges covering [0, total) with every interior boundary moved to the nearest
// multiple of `granule` (ties down), kept in order: the cuts a block-quantised weight allows.
// A range may become empty; the first and last boundaries stay 0 and total.
std::vector<Range> align_ranges(const std::vector<Range>& ranges, std::int64_t granule);

}  // namespace huddle
