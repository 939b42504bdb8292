#include "plan/split.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace huddle {

std::vector<std::int64_t> split_proportional(std::int64_t total,
                                             const std::vector<double>& shares) {
  HUDDLE_CHECK(total >= 0 && !shares.empty());
  const double sum = std::accumulate(shares.begin(), shares.end(), 0.0);
  HUDDLE_CHECK(sum > 0, "shares sum to {}", sum);
  std::vector<std::int64_t> parts(shares.size());
  std::vector<std::pair<double, std::size_t>> remainders;
  std::int64_t assigned = 0;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    HUDDLE_CHECK(shares[i] >= 0);
    const double exact = static_cast<double>(total) * shares[i] / sum;
    parts[i] = static_cast<std::int64_t>(std::floor(exact));
    assigned += parts[i];
    if (shares[i] > 0) remainders.emplace_back(exact - std::floor(exact), i);
  }
  // Largest remainder first; stable so ties go to the earlier part.
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t k = 0; assigned < total; ++k, ++assigned)
    ++parts[remainders[k % remainders.size()].second];
  return parts;
}

std::vector<Range> ranges_from_counts(const std::vector<std::int64_t>& counts) {
  std::vector<Range> ranges;
  std::int64_t begin = 0;
  for (std::int64_t c : counts) {
    ranges.emplace_back(begin, begin + c);
    begin += c;
  }
  return ranges;
}

std::vector<Range> align_ranges(const std::vector<Range>& ranges, std::int64_t granule) {
  HUDDLE_CHECK(granule >= 1, "granule {}", granule);
  std::vector<Range> out = ranges;
  if (out.empty()) return out;
  const std::int64_t total = out.back().second;
  std::int64_t prev = out.front().first;
  for (std::size_t i = 0; i + 1 < out.size(); ++i) {
    const std::int64_t cut = out[i].second;
    const std::int64_t down = cut / granule * granule;
    std::int64_t aligned = cut - down <= down + granule - cut ? down : down + granule;
    aligned = std::clamp(aligned, prev, total);
    out[i].second = aligned;
    out[i + 1].first = aligned;
    prev = aligned;
  }
  return out;
}

std::vector<Range> split_ranges(std::int64_t total, const std::vector<double>& shares) {
  return ranges_from_counts(split_proportional(total, shares));
}

std::vector<Range> split_at_least_one(std::int64_t total, const std::vector<double>& shares,
                                      const std::string& what) {
  const auto n = static_cast<std::int64_t>(shares.size());
  if (total < n) {
    throw PlanError(
        fmt::format("cannot split {} {} over {} devices with at least one each", total, what, n));
  }
  std::vector<std::int64_t> counts = split_proportional(total, shares);
  // Devices rounded down to 0 take one unit from the device with the most.
  for (std::int64_t& c : counts) {
    if (c > 0) continue;
    auto most = std::max_element(counts.begin(), counts.end());
    --*most;
    c = 1;
  }
  return ranges_from_counts(counts);
}

std::int64_t gather_chunk_rows(std::int64_t largest_part, int chunks, std::size_t row_bytes,
                               std::size_t max_chunk_bytes) {
  const std::int64_t even = (std::max<std::int64_t>(largest_part, 1) + chunks - 1) / chunks;
  const auto fit = static_cast<std::int64_t>(max_chunk_bytes / std::max<std::size_t>(row_bytes, 1));
  return std::max<std::int64_t>(1, std::min(even, fit));
}

}  // namespace huddle
