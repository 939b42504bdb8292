// Ring collectives and tensor transfer over both transports, for 1..4 ranks with uneven row
// counts (including empty parts). Expected results are computed serially in the test from the
// same generating functions the ranks use.
#include "collectives/p2p.h"
#include "collectives/ring.h"
#include "collectives/tags.h"
#include "core/quant.h"
#include "net/test_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

namespace huddle::collectives {
namespace {

using net::testing::run_ranks;
using net::testing::TestCluster;
using net::testing::TransportKind;
using ::testing::HasSubstr;

// Row counts per rank for n ranks: uneven, with empty parts.
std::vector<std::vector<std::int64_t>> count_cases(int n) {
  switch (n) {
    case 1:
      return {{5}, {0}};
    case 2:
      return {{0, 5}, {7, 2}, {0, 0}};
    case 3:
      return {{4, 0, 2}, {1, 6, 3}};
    default:
      return {{1, 0, 6, 3}, {0, 0, 0, 9}, {2, 5, 0, 1}};
  }
}

// The value each rank owns at (row, col) for all-gather.
float owned_value(std::int64_t row, std::int64_t col) {
  return static_cast<float>(row * 100 + col) + 0.25f;
}

// Rank r's partial sum at (row, col) for reduce-scatter: varied magnitudes and signs.
float partial_value(int rank, std::int64_t row, std::int64_t col) {
  return std::sin(static_cast<float>(rank * 31 + row * 7 + col)) * static_cast<float>(1 + rank);
}

struct Case {
  TransportKind kind;
  int ranks;
};

class CollectivesTest : public ::testing::TestWithParam<Case> {
 protected:
  TestCluster cluster_{GetParam().kind, GetParam().ranks};
  int n() const { return GetParam().ranks; }
};

constexpr std::int64_t kCols = 5;

// Small chunks (two rows) so that parts travel as several messages and are forwarded in pieces.
RingOptions small_chunks() {
  return RingOptions{2 * kCols * sizeof(float)};
}

TEST_P(CollectivesTest, AllGatherMatchesTheSerialResultAndCallsTheHookOnEveryChunkAsItLands) {
  for (const auto& counts : count_cases(n())) {
    const RowPartition p(counts);
    for (const RingOptions& options : {RingOptions{}, small_chunks()}) {
      const bool chunked = options.chunk_bytes == small_chunks().chunk_bytes;
      run_ranks(n(), [&](int r) {
        Tensor data = Tensor::zeros(DType::F32, {p.rows(), kCols});
        for (std::int64_t i = p.offset(r); i < p.end(r); ++i) {
          for (std::int64_t j = 0; j < kCols; ++j) data.f32()[i * kCols + j] = owned_value(i, j);
        }
        struct Call {
          int part;
          std::int64_t begin, end;
        };
        std::vector<Call> calls;
        bool rows_ready = true;
        all_gather(
            cluster_.rank(r), data, p,
            [&](int part, std::int64_t b, std::int64_t e) {
              calls.push_back({part, b, e});
              for (std::int64_t i = b; i < e; ++i) {
                if (data.f32()[i * kCols + kCols - 1] != owned_value(i, kCols - 1))
                  rows_ready = false;
              }
            },
            options);
        EXPECT_TRUE(rows_ready) << "hook called before its rows arrived";
        // Parts in ring order from this rank's own; each part's calls cover its rows once, in
        // order: the own part whole, the others in as many calls as they travelled in chunks.
        std::size_t c = 0;
        for (int s = 0; s < n(); ++s) {
          const int part = (r - s + n()) % n();
          std::int64_t next = p.offset(part);
          int part_calls = 0;
          while (c < calls.size() && calls[c].part == part) {
            EXPECT_EQ(calls[c].begin, next) << "rank " << r << " part " << part;
            next = calls[c].end;
            ++part_calls;
            ++c;
          }
          EXPECT_EQ(next, p.end(part)) << "rank " << r << " part " << part;
          const std::int64_t rows = p.count(part);
          const std::int64_t expected = s == 0 || rows <= 2 || !chunked ? 1 : (rows + 1) / 2;
          EXPECT_EQ(part_calls, expected) << "rank " << r << " part " << part << " step " << s;
        }
        EXPECT_EQ(c, calls.size());
        for (std::int64_t i = 0; i < p.rows(); ++i) {
          for (std::int64_t j = 0; j < kCols; ++j) {
            ASSERT_EQ(data.f32()[i * kCols + j], owned_value(i, j)) << "rank " << r << " row " << i;
          }
        }
      });
    }
  }
}

TEST_P(CollectivesTest, AllGatherIntoAStridedViewLeavesOtherColumnsAlone) {
  const RowPartition p(count_cases(n()).front());
  run_ranks(n(), [&](int r) {
    Tensor wide = Tensor::zeros(DType::F32, {p.rows(), kCols + 3});
    for (std::int64_t i = 0; i < wide.numel(); ++i) wide.f32()[i] = -1.0f;
    Tensor view = wide.cols(1, 1 + kCols);  // row stride kCols + 3
    for (std::int64_t i = p.offset(r); i < p.end(r); ++i) {
      for (std::int64_t j = 0; j < kCols; ++j)
        wide.f32()[i * (kCols + 3) + 1 + j] = owned_value(i, j);
    }
    all_gather(cluster_.rank(r), view, p, {}, small_chunks());
    for (std::int64_t i = 0; i < p.rows(); ++i) {
      EXPECT_EQ(wide.f32()[i * (kCols + 3)], -1.0f);
      for (std::int64_t j = 0; j < kCols; ++j) {
        EXPECT_EQ(wide.f32()[i * (kCols + 3) + 1 + j], owned_value(i, j));
      }
      EXPECT_EQ(wide.f32()[i * (kCols + 3) + kCols + 1], -1.0f);
    }
  });
}

// Expected reduce-scatter result at (row, col): the serial sum over ranks, in double.
double serial_sum(int ranks, std::int64_t row, std::int64_t col) {
  double s = 0;
  for (int q = 0; q < ranks; ++q) s += partial_value(q, row, col);
  return s;
}

TEST_P(CollectivesTest, ReduceScatterMatchesTheSerialSum) {
  for (const auto& counts : count_cases(n())) {
    const RowPartition p(counts);
    for (const RingOptions& options : {RingOptions{}, small_chunks()}) {
      run_ranks(n(), [&](int r) {
        Tensor data = Tensor::empty(DType::F32, {p.rows(), kCols});
        for (std::int64_t i = 0; i < p.rows(); ++i) {
          for (std::int64_t j = 0; j < kCols; ++j)
            data.f32()[i * kCols + j] = partial_value(r, i, j);
        }
        const Tensor out = reduce_scatter(cluster_.rank(r), data, p, {}, options);
        ASSERT_EQ(out.shape(), (Shape{p.count(r), kCols}));
        for (std::int64_t i = 0; i < p.count(r); ++i) {
          for (std::int64_t j = 0; j < kCols; ++j) {
            EXPECT_NEAR(out.f32()[i * kCols + j], serial_sum(n(), p.offset(r) + i, j), 1e-5);
          }
        }
      });
    }
  }
}

TEST_P(CollectivesTest, ReduceScatterProducesTilesJustInTimeInRingOrder) {
  for (const auto& counts : count_cases(n())) {
    const RowPartition p(counts);
    run_ranks(n(), [&](int r) {
      Tensor data = Tensor::empty(DType::F32, {p.rows(), kCols});
      std::vector<int> order;
      const Tensor out = reduce_scatter(
          cluster_.rank(r), data, p,
          [&](int part, Tensor tile) {
            order.push_back(part);
            ASSERT_EQ(tile.shape(), (Shape{p.count(part), kCols}));
            for (std::int64_t i = 0; i < tile.dim(0); ++i) {
              for (std::int64_t j = 0; j < kCols; ++j) {
                tile.f32()[i * kCols + j] = partial_value(r, p.offset(part) + i, j);
              }
            }
          },
          small_chunks());
      std::vector<int> expected;
      for (int k = 1; k <= n(); ++k) expected.push_back(((r - k) % n() + n()) % n());
      EXPECT_EQ(order, expected);
      for (std::int64_t i = 0; i < p.count(r); ++i) {
        for (std::int64_t j = 0; j < kCols; ++j) {
          EXPECT_NEAR(out.f32()[i * kCols + j], serial_sum(n(), p.offset(r) + i, j), 1e-5);
        }
      }
    });
  }
}

TEST_P(CollectivesTest, AllReduceMatchesTheSerialSum) {
  for (const Shape& shape : {Shape{3, 7}, Shape{13}, Shape{2}, Shape{0, 4}}) {
    run_ranks(n(), [&](int r) {
      std::mt19937 rng(static_cast<unsigned>(r + 1));
      std::uniform_real_distribution<float> dist(-1, 1);
      Tensor data = Tensor::empty(DType::F32, shape);
      for (std::int64_t i = 0; i < data.numel(); ++i) data.f32()[i] = dist(rng);
      all_reduce(cluster_.rank(r), data, RingOptions{8});
      // Regenerate every rank's input in the same order and sum serially.
      std::vector<double> expected(static_cast<std::size_t>(data.numel()), 0.0);
      for (int q = 0; q < n(); ++q) {
        std::mt19937 rq(static_cast<unsigned>(q + 1));
        for (auto& e : expected) e += dist(rq);
      }
      for (std::int64_t i = 0; i < data.numel(); ++i) {
        EXPECT_NEAR(data.f32()[i], expected[static_cast<std::size_t>(i)], 1e-5);
      }
    });
  }
}

// Parts of at most 16 KiB travel inline on the caller's thread, larger ones on helper threads
// (ring.cpp): both, at and past that size, with uneven parts, and with one rank entering late
// (the others' sends wait in socket buffers or queues, not for it), give exact results.
TEST_P(CollectivesTest, InlineAndThreadedSizesWithALateRankAreExact) {
  constexpr std::int64_t kWide = 1024;                  // 4 KiB rows
  const std::vector<std::int64_t> base = {4, 3, 4, 1};  // 16 KiB parts at most: inline
  const std::vector<std::int64_t> big = {5, 0, 4, 2};   // a 20 KiB part: threaded
  for (const auto* counts_all : {&base, &big}) {
    const std::vector<std::int64_t> counts(counts_all->begin(), counts_all->begin() + n());
    const RowPartition p(counts);
    run_ranks(n(), [&](int r) {
      if (r == n() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Tensor gathered = Tensor::zeros(DType::F32, {p.rows(), kWide});
      for (std::int64_t i = p.offset(r); i < p.end(r); ++i) {
        for (std::int64_t j = 0; j < kWide; ++j) gathered.f32()[i * kWide + j] = owned_value(i, j);
      }
      all_gather(cluster_.rank(r), gathered, p);
      for (std::int64_t i = 0; i < p.rows(); ++i) {
        for (std::int64_t j = 0; j < kWide; ++j) {
          ASSERT_EQ(gathered.f32()[i * kWide + j], owned_value(i, j)) << "rank " << r;
        }
      }
      Tensor partial = Tensor::empty(DType::F32, {p.rows(), kWide});
      for (std::int64_t i = 0; i < p.rows(); ++i) {
        for (std::int64_t j = 0; j < kWide; ++j) {
          partial.f32()[i * kWide + j] = partial_value(r, i, j);
        }
      }
      const Tensor out = reduce_scatter(cluster_.rank(r), partial, p);
      for (std::int64_t i = 0; i < p.count(r); ++i) {
        for (std::int64_t j = 0; j < kWide; ++j) {
          ASSERT_NEAR(out.f32()[i * kWide + j], serial_sum(n(), p.offset(r) + i, j), 1e-5)
              << "rank " << r;
        }
      }
    });
  }
}

// A small (inline) all-gather sends this rank's rows before computing on them: every rank's hook
// for its own part waits until every other rank has received that part. (With the compute first,
// a decode step's one-token gather made the rank without the token wait for the other's linears;
// here the hooks would wait out their 20 s bound and the test fail.)
TEST_P(CollectivesTest, InlineAllGatherSendsOwnRowsBeforeTheHookRunsOnThem) {
  if (n() < 2) GTEST_SKIP() << "needs a peer";
  std::vector<std::int64_t> counts(static_cast<std::size_t>(n()), 0);
  counts[0] = 1;  // one token, on rank 0, as in a decode step
  const RowPartition p(counts);
  std::mutex mutex;
  std::condition_variable cv;
  int received_part0 = 0;  // ranks other than 0 that have rank 0's row
  bool rank0_waited_ok = false;
  run_ranks(n(), [&](int r) {
    Tensor rows = Tensor::zeros(DType::F32, {1, kCols});
    if (r == 0) rows.f32()[0] = 7;
    all_gather(cluster_.rank(r), rows, p, [&](int part, std::int64_t, std::int64_t) {
      if (part != 0) return;
      std::unique_lock lock(mutex);
      if (r != 0) {
        ++received_part0;
        cv.notify_all();
        return;
      }
      rank0_waited_ok =
          cv.wait_for(lock, std::chrono::seconds(20), [&] { return received_part0 == n() - 1; });
    });
    EXPECT_EQ(rows.f32()[0], 7.0f) << "rank " << r;
  });
  EXPECT_TRUE(rank0_waited_ok);
}

// Galaxy's overlap: GEMM on each all-gathered part as it lands equals GEMM on the whole.
TEST_P(CollectivesTest, GemmOnArrivedPartsEqualsGemmOnTheGatheredMatrix) {
  const RowPartition p(count_cases(n()).front());
  constexpr std::int64_t kOut = 3;
  auto weight = [](std::int64_t j, std::int64_t k) {
    return static_cast<float>((j + 2 * k) % 5) - 2.0f;
  };
  run_ranks(n(), [&](int r) {
    Tensor h = Tensor::zeros(DType::F32, {p.rows(), kCols});
    for (std::int64_t i = p.offset(r); i < p.end(r); ++i) {
      for (std::int64_t j = 0; j < kCols; ++j) h.f32()[i * kCols + j] = owned_value(i, j);
    }
    Tensor e = Tensor::zeros(DType::F32, {p.rows(), kOut});
    all_gather(
        cluster_.rank(r), h, p,
        [&](int, std::int64_t b, std::int64_t end) {
          for (std::int64_t i = b; i < end; ++i) {
            for (std::int64_t k = 0; k < kOut; ++k) {
              float acc = 0;
              for (std::int64_t j = 0; j < kCols; ++j) acc += h.f32()[i * kCols + j] * weight(j, k);
              e.f32()[i * kOut + k] = acc;
            }
          }
        },
        small_chunks());
    for (std::int64_t i = 0; i < p.rows(); ++i) {
      for (std::int64_t k = 0; k < kOut; ++k) {
        double acc = 0;
        for (std::int64_t j = 0; j < kCols; ++j)
          acc += static_cast<double>(owned_value(i, j)) * weight(j, k);
        EXPECT_NEAR(e.f32()[i * kOut + k], acc, 1e-3 * std::max(1.0, std::abs(acc)));
      }
    }
  });
}

TEST_P(CollectivesTest, BroadcastAndGatherRows) {
  const RowPartition p(count_cases(n()).front());
  run_ranks(n(), [&](int r) {
    const int root = n() - 1;
    Tensor b = Tensor::zeros(DType::F32, {4});
    if (r == root) b = Tensor::from_f32({4}, std::vector<float>{1, 2, 3, 4});
    broadcast(cluster_.rank(r), b, root);
    EXPECT_EQ(b.to_vector(), (std::vector<float>{1, 2, 3, 4}));

    Tensor g = Tensor::zeros(DType::F32, {p.rows(), kCols});
    for (std::int64_t i = p.offset(r); i < p.end(r); ++i) {
      for (std::int64_t j = 0; j < kCols; ++j) g.f32()[i * kCols + j] = owned_value(i, j);
    }
    gather_rows(cluster_.rank(r), g, p, 0);
    if (r == 0) {
      for (std::int64_t i = 0; i < p.rows(); ++i) {
        for (std::int64_t j = 0; j < kCols; ++j)
          EXPECT_EQ(g.f32()[i * kCols + j], owned_value(i, j));
      }
    }
  });
}

TEST_P(CollectivesTest, GatherColsLeavesEveryRanksColumnsOnTheRootOnly) {
  // Uneven widths (rank r holds r + 1 columns), from strided views: each row of the root's result
  // is every rank's block side by side, in rank order.
  constexpr std::int64_t kRows = 3;
  std::vector<std::int64_t> widths;
  for (int r = 0; r < n(); ++r) widths.push_back(r + 1);
  const std::int64_t total = n() * (n() + 1) / 2;
  const auto value = [](int rank, std::int64_t row, std::int64_t col) {
    return static_cast<float>(1000 * rank + 10 * row + col) + 0.5f;
  };
  for (const int root : {0, n() - 1}) {
    run_ranks(n(), [&](int r) {
      // The block is columns [1, 1 + r + 1) of a wider tensor: not contiguous.
      Tensor wide = Tensor::zeros(DType::F32, {kRows, r + 3});
      for (std::int64_t i = 0; i < kRows; ++i) {
        for (std::int64_t j = 0; j <= r; ++j) wide.f32()[i * (r + 3) + 1 + j] = value(r, i, j);
      }
      const Tensor block = wide.cols(1, 2 + r);
      Tensor out = r == root ? Tensor::zeros(DType::F32, {kRows, total}) : Tensor();
      gather_cols(cluster_.rank(r), block, widths, out, root);
      if (r != root) return;
      for (std::int64_t i = 0; i < kRows; ++i) {
        std::int64_t col = 0;
        for (int owner = 0; owner < n(); ++owner) {
          for (std::int64_t j = 0; j <= owner; ++j, ++col)
            EXPECT_EQ(out.f32()[i * total + col], value(owner, i, j)) << owner << " " << i;
        }
      }
    });
  }
}

TEST_P(CollectivesTest, TensorsTravelWithDtypeAndShape) {
  if (n() < 2) GTEST_SKIP() << "needs two ranks";
  run_ranks(2, [&](int r) {
    net::Transport& t = cluster_.rank(r);
    if (r == 0) {
      const Tensor a = Tensor::from_f32({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
      send_tensor(t, 1, a.cols(1, 3));  // strided view
      send_tensor(t, 1, Tensor::from_i32({3}, std::vector<std::int32_t>{7, -8, 9}));
      send_tensor(t, 1, Tensor::zeros(DType::BF16, {0, 5}));
      std::vector<float> v(2 * 96);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f;
      send_tensor(t, 1, quantize(Tensor::from_f32({2, 96}, v), DType::Q8_0).cols(32, 96));
      send_tensor(t, 1, Tensor::from_f32({2}, std::vector<float>{1, 2}));
    } else {
      const Tensor a = recv_tensor(t, 0);
      EXPECT_EQ(a.shape(), (Shape{2, 2}));
      EXPECT_EQ(a.to_vector(), (std::vector<float>{2, 3, 5, 6}));
      const Tensor b = recv_tensor(t, 0);
      ASSERT_EQ(b.dtype(), DType::I32);
      EXPECT_EQ(b.i32()[1], -8);
      const Tensor c = recv_tensor(t, 0);
      EXPECT_EQ(c.dtype(), DType::BF16);
      EXPECT_EQ(c.shape(), (Shape{0, 5}));
      const Tensor q = recv_tensor(t, 0);
      ASSERT_EQ(q.dtype(), DType::Q8_0);
      ASSERT_EQ(q.shape(), (Shape{2, 64}));
      const std::vector<float> got = dequantize(q).to_vector();
      EXPECT_NEAR(got[64], (96 + 32) * 0.25f, 0.25f);  // row 1, column 32 of the original
      Tensor wrong = Tensor::zeros(DType::F32, {3});
      try {
        recv_tensor_into(t, 0, wrong);
        ADD_FAILURE() << "accepted a tensor of the wrong shape";
      } catch (const TransportError& e) {
        EXPECT_THAT(e.what(), HasSubstr("shape [2], expected F32 [3]"));
        EXPECT_THAT(e.what(), HasSubstr("rank 0"));
      }
    }
  });
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (TransportKind k : {TransportKind::kInproc, TransportKind::kTcp}) {
    for (int n = 1; n <= 4; ++n) cases.push_back(Case{k, n});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesTest, ::testing::ValuesIn(all_cases()),
                         [](const auto& param_info) {
                           return fmt::format("{}{}",
                                              net::testing::kind_name(param_info.param.kind),
                                              param_info.param.ranks);
                         });

// ---- failures ----

class CollectiveFailureTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(CollectiveFailureTest, DeadRankMakesTheOthersFailNamingAPeer) {
  TestCluster cluster(GetParam(), 3, net::Duration(500));
  cluster.kill(2);
  const RowPartition p({2, 2, 2});
  std::mutex m;
  std::vector<std::string> errors;
  run_ranks(2, [&](int r) {
    Tensor data = Tensor::zeros(DType::F32, {6, kCols});
    try {
      all_gather(cluster.rank(r), data, p);
    } catch (const TransportError& e) {
      std::lock_guard lock(m);
      errors.push_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors) EXPECT_THAT(e, HasSubstr("rank "));
  // Rank 0 receives from rank 2 (dead): its error names rank 2.
  EXPECT_TRUE(
      std::any_of(errors.begin(), errors.end(),
                  [](const std::string& e) { return e.find("rank 2") != std::string::npos; }))
      << errors[0] << " | " << errors[1];
}

TEST_P(CollectiveFailureTest, HookExceptionIsRethrownAfterTheRingFinishes) {
  TestCluster cluster(GetParam(), 2, net::Duration(2000));
  const RowPartition p({1, 1});
  std::mutex m;
  int thrown = 0;
  run_ranks(2, [&](int r) {
    Tensor data = Tensor::zeros(DType::F32, {2, kCols});
    try {
      all_gather(cluster.rank(r), data, p, [&](int part, std::int64_t, std::int64_t) {
        if (r == 0 && part == 1) throw InputError("hook failed");
      });
    } catch (const InputError& e) {
      std::lock_guard lock(m);
      ++thrown;
      EXPECT_THAT(e.what(), HasSubstr("hook failed"));
    }
  });
  EXPECT_EQ(thrown, 1);
}

TEST_P(CollectiveFailureTest, MalformedTensorHeadersAreRefused) {
  TestCluster cluster(GetParam(), 2);
  net::Transport& a = cluster.rank(0);
  net::Transport& b = cluster.rank(1);
  const std::uint32_t header_tag = collective_tag(CollectiveOp::kTensorHeader);
  auto header = [](std::uint8_t dtype, std::uint8_t ndim, std::vector<std::uint64_t> dims) {
    std::vector<std::byte> h(8 + 8 * dims.size());
    h[0] = std::byte{dtype};
    h[1] = std::byte{ndim};
    for (std::size_t i = 0; i < dims.size(); ++i)
      net::wire::store_le(h.data() + 8 + 8 * i, dims[i]);
    return h;
  };
  struct Bad {
    std::vector<std::byte> bytes;
    const char* error;
  };
  const std::vector<Bad> cases = {
      {header(200, 1, {4}), "unknown dtype 200"},
      {header(0, 9, std::vector<std::uint64_t>(9, 1)), "rank 9 exceeds 8"},
      {header(0, 2, {4}), "16 bytes for rank 2"},
      {header(0, 2, {1ull << 40, 1ull << 40}), "exceeds the limit"},
      {header(0, 1, {~0ull}), "dimension 0 is"},
      // Block-quantised (4: Q8_0, 5: Q4_0): rows of whole blocks of 32, bytes counted per block.
      {header(4, 2, {2, 33}), "not whole blocks of 32"},
      {header(5, 0, {}), "not whole blocks of 32"},
      {header(4, 2, {1ull << 40, 1ull << 40}), "exceeds the limit"},
      {{std::byte{0}}, "1 bytes"},
  };
  for (const Bad& bad : cases) {
    a.send(1, header_tag, bad.bytes);
    try {
      recv_tensor(b, 0);
      ADD_FAILURE() << "accepted: " << bad.error;
    } catch (const TransportError& e) {
      EXPECT_THAT(e.what(), HasSubstr(bad.error));
      EXPECT_THAT(e.what(), HasSubstr("rank 0"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, CollectiveFailureTest,
                         ::testing::Values(TransportKind::kInproc, TransportKind::kTcp),
                         [](const auto& param_info) {
                           return net::testing::kind_name(param_info.param);
                         });

}  // namespace
}  // namespace huddle::collectives
