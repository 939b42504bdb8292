// Collectives and tensor transfers in lossy wire formats (RingOptions::wire, send_tensor's
// `wire`), over both transports, 2..4 ranks, uneven row counts with empty parts, whole and
// chunked messages. An all-gather must leave every rank with the same rows, each exactly what
// decoding its owner's encoding gives; reductions stay within the formats' stated error.
#include "collectives/p2p.h"
#include "collectives/ring.h"
#include "core/wire_format.h"
#include "net/test_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

namespace huddle::collectives {
namespace {

using net::testing::run_ranks;
using net::testing::TestCluster;
using net::testing::TransportKind;

constexpr std::int64_t kWireCols = 37;
constexpr WireFormat kLossy[] = {WireFormat::F16, WireFormat::BF16, WireFormat::Int8};

float wire_value(int rank, std::int64_t row, std::int64_t col) {
  return std::sin(static_cast<float>(rank * 31 + row * 7 + col)) * static_cast<float>(1 + row % 3);
}

// What a receiver decodes from `rows` rows of `x` in format `f`.
std::vector<float> through_wire(WireFormat f, const float* x, std::int64_t rows) {
  std::vector<std::byte> wire(static_cast<std::size_t>(rows) * wire_row_bytes(f, kWireCols));
  encode_rows(f, x, kWireCols, rows, kWireCols, wire.data());
  std::vector<float> y(static_cast<std::size_t>(rows * kWireCols));
  decode_rows(f, wire.data(), rows, kWireCols, y.data(), kWireCols);
  return y;
}

// Relative error of one rounding in format f, of values up to `magnitude`.
float one_rounding(WireFormat f, float magnitude) {
  switch (f) {
    case WireFormat::F16:
      return magnitude * 0x1p-11f;
    case WireFormat::BF16:
      return magnitude * 0x1p-8f;
    default:
      return magnitude / 254.0f;
  }
}

struct WireCase {
  TransportKind kind;
  int ranks;
};

class WireCollectivesTest : public ::testing::TestWithParam<WireCase> {
 protected:
  TestCluster cluster_{GetParam().kind, GetParam().ranks};
  int n() const { return GetParam().ranks; }
  RowPartition partition() const {
    if (n() == 2) return RowPartition({0, 5});
    if (n() == 3) return RowPartition({4, 0, 3});
    return RowPartition({1, 0, 6, 3});
  }
  static std::vector<RingOptions> options(WireFormat f) {
    RingOptions whole;
    whole.wire = f;
    RingOptions chunked = whole;
    chunked.chunk_bytes = 2 * wire_row_bytes(f, kWireCols);  // two rows a message: helper threads
    return {whole, chunked};
  }
};

TEST_P(WireCollectivesTest, AllGatherLeavesEveryRankWithItsOwnersDecodedRows) {
  const RowPartition p = partition();
  for (WireFormat f : kLossy) {
    for (const RingOptions& o : options(f)) {
      std::vector<Tensor> results(static_cast<std::size_t>(n()));
      run_ranks(n(), [&](int r) {
        Tensor data = Tensor::zeros(DType::F32, {p.rows(), kWireCols});
        for (std::int64_t i = p.offset(r); i < p.end(r); ++i)
          for (std::int64_t j = 0; j < kWireCols; ++j)
            data.f32()[i * kWireCols + j] = wire_value(0, i, j);
        all_gather(cluster_.rank(r), data, p, {}, o);
        results[static_cast<std::size_t>(r)] = data;
      });
      Tensor original = Tensor::zeros(DType::F32, {p.rows(), kWireCols});
      for (std::int64_t i = 0; i < p.rows(); ++i)
        for (std::int64_t j = 0; j < kWireCols; ++j)
          original.f32()[i * kWireCols + j] = wire_value(0, i, j);
      const std::vector<float> want = through_wire(f, original.f32(), p.rows());
      for (int r = 0; r < n(); ++r) {
        const Tensor& got = results[static_cast<std::size_t>(r)];
        for (std::int64_t k = 0; k < p.rows() * kWireCols; ++k) {
          ASSERT_EQ(got.f32()[k], want[static_cast<std::size_t>(k)])
              << wire_format_name(f) << " rank " << r << " element " << k;
        }
      }
    }
  }
}

TEST_P(WireCollectivesTest, ReduceScatterAndAllReduceStayWithinTheFormatsError) {
  const RowPartition p = partition();
  for (WireFormat f : kLossy) {
    for (const RingOptions& o : options(f)) {
      std::vector<Tensor> scattered(static_cast<std::size_t>(n())),
          reduced(static_cast<std::size_t>(n()));
      run_ranks(n(), [&](int r) {
        Tensor data = Tensor::empty(DType::F32, {p.rows(), kWireCols});
        for (std::int64_t i = 0; i < p.rows(); ++i)
          for (std::int64_t j = 0; j < kWireCols; ++j)
            data.f32()[i * kWireCols + j] = wire_value(r, i, j);
        Tensor all = data.clone();
        scattered[static_cast<std::size_t>(r)] =
            reduce_scatter(cluster_.rank(r), data, p, {}, o).clone();
        all_reduce(cluster_.rank(r), all, o);
        reduced[static_cast<std::size_t>(r)] = all;
      });
      // n - 1 roundings of partial sums of up to n * 3 in magnitude, on the way to the owner;
      // one more for the all-reduce's gather.
      const float tol = static_cast<float>(n()) * one_rounding(f, 3.0f * static_cast<float>(n()));
      for (int r = 0; r < n(); ++r) {
        for (std::int64_t i = 0; i < p.rows(); ++i) {
          for (std::int64_t j = 0; j < kWireCols; ++j) {
            double exact = 0;
            for (int q = 0; q < n(); ++q) exact += wire_value(q, i, j);
            const float all = reduced[static_cast<std::size_t>(r)].f32()[i * kWireCols + j];
            ASSERT_NEAR(all, exact, tol) << wire_format_name(f) << " rank " << r;
            ASSERT_EQ(all, reduced[0].f32()[i * kWireCols + j]) << "ranks hold different sums";
            if (i >= p.offset(r) && i < p.end(r)) {
              const Tensor& mine = scattered[static_cast<std::size_t>(r)];
              ASSERT_NEAR(mine.f32()[(i - p.offset(r)) * kWireCols + j], exact, tol);
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, WireCollectivesTest,
    ::testing::Values(WireCase{TransportKind::kInproc, 2}, WireCase{TransportKind::kInproc, 3},
                      WireCase{TransportKind::kInproc, 4}, WireCase{TransportKind::kTcp, 3}),
    [](const auto& param_info) {
      return fmt::format("{}{}", net::testing::kind_name(param_info.param.kind),
                         param_info.param.ranks);
    });

TEST(WireTransfer, ATensorArrivesDecodedAndAMismatchedFormatIsRefused) {
  TestCluster cluster(TransportKind::kInproc, 2);
  Tensor x = Tensor::empty(DType::F32, {2, 3, kWireCols});
  for (std::int64_t k = 0; k < x.numel(); ++k)
    x.f32()[k] = wire_value(1, k / kWireCols, k % kWireCols);
  const std::vector<float> want = through_wire(WireFormat::Int8, x.f32(), 6);
  run_ranks(2, [&](int r) {
    if (r == 0) {
      send_tensor(cluster.rank(0), 1, x, WireFormat::Int8);
      send_tensor(cluster.rank(0), 1, x, WireFormat::Int8);
      send_tensor(cluster.rank(0), 1, x, WireFormat::F16);
      return;
    }
    Tensor into = Tensor::empty(DType::F32, x.shape());
    recv_tensor_into(cluster.rank(1), 0, into, WireFormat::Int8);
    for (std::int64_t k = 0; k < x.numel(); ++k)
      ASSERT_EQ(into.f32()[k], want[static_cast<std::size_t>(k)]);
    const Tensor any = recv_tensor(cluster.rank(1), 0);  // takes the format the header names
    EXPECT_EQ(any.shape(), x.shape());
    for (std::int64_t k = 0; k < x.numel(); ++k)
      ASSERT_EQ(any.f32()[k], want[static_cast<std::size_t>(k)]);
    try {
      recv_tensor_into(cluster.rank(1), 0, into, WireFormat::Int8);
      ADD_FAILURE() << "an f16 tensor was taken for int8";
    } catch (const TransportError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("wire format f16, expected int8"));
    }
  });
}

TEST(WireTransfer, NonF32TensorsTravelAsTheirBytes) {
  TestCluster cluster(TransportKind::kInproc, 2);
  Tensor ids = Tensor::empty(DType::I32, {5});
  for (std::int32_t i = 0; i < 5; ++i) ids.i32()[i] = 1000 * i + 7;
  run_ranks(2, [&](int r) {
    if (r == 0) {
      send_tensor(cluster.rank(0), 1, ids, WireFormat::Int8);
      return;
    }
    Tensor into = Tensor::empty(DType::I32, {5});
    recv_tensor_into(cluster.rank(1), 0, into, WireFormat::Int8);
    for (std::int32_t i = 0; i < 5; ++i) EXPECT_EQ(into.i32()[i], 1000 * i + 7);
  });
}

}  // namespace
}  // namespace huddle::collectives
