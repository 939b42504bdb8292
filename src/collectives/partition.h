// RowPartition: how the rows of a [rows, cols] matrix are split among the ranks of a session.
// Rank r owns rows [offset(r), offset(r) + count(r)); counts may be uneven and may be 0.
#pragma once

#include <cstdint>
#include <vector>

namespace huddle::collectives {

class RowPartition {
 public:
  // counts[r] >= 0 rows for rank r (programmer error otherwise; plans are validated upstream).
  explicit RowPartition(std::vector<std::int64_t> counts);
  // `rows` split into `parts` near-equal parts; the first rows % parts get one extra row.
  static RowPartition even(std::int64_t rows, int parts);

  int parts() const { return static_cast<int>(counts_.size()); }
  std::int64_t rows() const { return offsets_.back(); }
  std::int64_t count(int r) const { return counts_[static_cast<std::size_t>(r)]; }
  std::int64_t offset(int r) const { return offsets_[static_cast<std::size_t>(r)]; }
  std::int64_t end(int r) const { return offset(r) + count(r); }

 private:
  std::vector<std::int64_t> counts_;
  std::vector<std::int64_t> offsets_;  // parts() + 1 entries
};

}  // namespace huddle::collectives
