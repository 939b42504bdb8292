// Collectives inside device groups (GroupTransport): a 2 x 3 grid of ranks runs ring
// collectives in its rows and columns at the same time, over both transports; results are
// checked against serial sums. Also the column all-gather and the group's argument checks.
#include "collectives/group_transport.h"
#include "collectives/ring.h"
#include "core/error.h"
#include "net/test_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace huddle::collectives {
namespace {

using net::testing::run_ranks;
using net::testing::TestCluster;
using net::testing::TransportKind;

constexpr int kGridRows = 2, kGridCols = 3;  // rank r at (r / kGridCols, r % kGridCols)

std::vector<int> row_group(int row) {
  std::vector<int> g;
  for (int c = 0; c < kGridCols; ++c) g.push_back(row * kGridCols + c);
  return g;
}
std::vector<int> column_group(int col) {
  std::vector<int> g;
  for (int r = 0; r < kGridRows; ++r) g.push_back(r * kGridCols + col);
  return g;
}

float value(int rank, std::int64_t i) {
  return std::sin(static_cast<float>(rank * 13 + i)) * static_cast<float>(1 + rank);
}

class GroupCollectives : public ::testing::TestWithParam<TransportKind> {
 protected:
  TestCluster cluster_{GetParam(), kGridRows* kGridCols};
};

TEST_P(GroupCollectives, RowsAndColumnsReduceAndGatherInsideTheirGroups) {
  constexpr std::int64_t kElems = 7;
  constexpr std::int64_t kTokens = 5;
  const std::vector<std::int64_t> widths = {1, 3};  // columns per grid row (uneven)
  run_ranks(kGridRows * kGridCols, [&](int r) {
    const int row = r / kGridCols, col = r % kGridCols;
    GroupTransport rows(cluster_.rank(r), row_group(row));
    GroupTransport cols(cluster_.rank(r), column_group(col));
    EXPECT_EQ(rows.size(), kGridCols);
    EXPECT_EQ(rows.rank(), col);
    EXPECT_EQ(cols.rank(), row);
    EXPECT_EQ(cols.global(1), kGridCols + col);
    // All-reduce in the row group: the sum over the row's ranks only.
    Tensor a = Tensor::empty(DType::F32, {kElems});
    for (std::int64_t i = 0; i < kElems; ++i) a.f32()[i] = value(r, i);
    all_reduce(rows, a);
    for (std::int64_t i = 0; i < kElems; ++i) {
      float expected = 0;
      for (int g : row_group(row)) expected += value(g, i);
      EXPECT_NEAR(a.f32()[i], expected, 1e-5f) << "rank " << r << " element " << i;
    }
    // Column all-gather in the column group: blocks of `widths[row]` columns, in row order.
    Tensor local = Tensor::empty(DType::F32, {kTokens, widths[static_cast<std::size_t>(row)]});
    for (std::int64_t t = 0; t < kTokens; ++t) {
      for (std::int64_t c = 0; c < local.dim(1); ++c)
        local.f32()[t * local.dim(1) + c] = static_cast<float>(100 * r + 10 * t + c);
    }
    Tensor out = Tensor::empty(DType::F32, {kTokens, 4});
    all_gather_cols(cols, local, widths, out);
    for (std::int64_t t = 0; t < kTokens; ++t) {
      EXPECT_EQ(out.f32()[t * 4 + 0], static_cast<float>(100 * col + 10 * t));  // grid row 0
      for (std::int64_t c = 0; c < 3; ++c) {
        EXPECT_EQ(out.f32()[t * 4 + 1 + c],
                  static_cast<float>(100 * (kGridCols + col) + 10 * t + c));
      }
    }
  });
}

TEST_P(GroupCollectives, AGroupMustContainThisRankOnce) {
  net::Transport& t = cluster_.rank(1);
  EXPECT_THROW(GroupTransport(t, {0, 2}), PlanError);
  EXPECT_THROW(GroupTransport(t, {1, 1}), PlanError);
  EXPECT_THROW(GroupTransport(t, {1, 9}), PlanError);
  const GroupTransport g(t, {4, 1});
  EXPECT_EQ(g.rank(), 1);
  EXPECT_EQ(g.peer_name(0), t.peer_name(4));
}

INSTANTIATE_TEST_SUITE_P(Transports, GroupCollectives,
                         ::testing::Values(TransportKind::kInproc, TransportKind::kTcp),
                         [](const auto& p) { return net::testing::kind_name(p.param); });

}  // namespace
}  // namespace huddle::collectives
