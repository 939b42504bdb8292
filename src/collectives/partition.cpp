#include "collectives/partition.h"

#include "core/error.h"

namespace huddle::collectives {

RowPartition::RowPartition(std::vector<std::int64_t> counts) : counts_(std::move(counts)) {
  HUDDLE_CHECK(!counts_.empty(), "a partition needs at least one part");
  offsets_.reserve(counts_.size() + 1);
  offsets_.push_back(0);
  for (std::int64_t c : counts_) {
    HUDDLE_CHECK(c >= 0, "negative row count {}", c);
    offsets_.push_back(offsets_.back() + c);
  }
}

RowPartition RowPartition::even(std::int64_t rows, int parts) {
  HUDDLE_CHECK(rows >= 0 && parts >= 1, "{} rows into {} parts", rows, parts);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(parts), rows / parts);
  for (std::int64_t i = 0; i < rows % parts; ++i) ++counts[static_cast<std::size_t>(i)];
  return RowPartition(std::move(counts));
}

}  // namespace huddle::collectives
