// A row exchange of a graph input (OpAttrs::palette) between two in-process devices: an image's
// rows arrive bit for bit in a quarter of the bytes, other rows as f32; a peer's piece that is not
// a piece of those rows (unknown kind, cut short, an index beyond its table) is refused naming
// the peer.
#include "runtime/row_exchange.h"
#include "core/error.h"
#include "net/inproc_transport.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

namespace huddle {
namespace {

constexpr std::int64_t kW = 640, kC = 3;  // [1, 4, 640, 3] channels-last: 4 rows of an image

// Rank 0 holds rows [0, 2) and gathers all 4; rank 1 holds rows [2, 4) and sends them.
Op exchange_op(int rank) {
  Op op;
  op.kind = OpKind::RowExchange;
  op.attrs.exchange = 0;
  op.attrs.palette = true;
  op.attrs.channels_last = true;
  op.attrs.shape = {1, 4, kW, kC};
  if (rank == 0) {
    op.attrs.recvs = {{0, 0, 2}, {1, 2, 4}};
  } else {
    op.attrs.sends = {{0, 2, 4}};
    op.attrs.in_begin = 2;
  }
  return op;
}

Tensor rows_of(const Tensor& whole, std::int64_t begin, std::int64_t end) {
  Tensor t = Tensor::empty(DType::F32, {1, end - begin, kW, kC});
  std::memcpy(t.f32(), whole.f32() + begin * kW * kC,
              static_cast<std::size_t>((end - begin) * kW * kC) * sizeof(float));
  return t;
}

// Exchanges `whole` between the two ranks: rank 0's result.
Tensor exchange(const Tensor& whole) {
  net::InprocCluster cluster(2);
  const Tensor mine = rows_of(whole, 0, 2), theirs = rows_of(whole, 2, 4);
  std::thread peer([&] { row_exchange(exchange_op(1), &theirs, {1, 2, kW, kC}, cluster.rank(1)); });
  Tensor got = row_exchange(exchange_op(0), &mine, {1, 4, kW, kC}, cluster.rank(0));
  peer.join();
  return got;
}

// The message rank 1 sends of its rows of `whole`.
net::Message piece_of(const Tensor& whole) {
  net::InprocCluster cluster(2);
  const Tensor theirs = rows_of(whole, 2, 4);
  row_exchange(exchange_op(1), &theirs, {1, 2, kW, kC}, cluster.rank(1));
  return cluster.rank(0).recv(1);
}

Tensor values(bool image) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  Tensor t = Tensor::empty(DType::F32, {1, 4, kW, kC});
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    // An image of 200 levels (as a dim frame), so that an index of 255 is beyond its table.
    t.f32()[i] = image ? (static_cast<float>(rng() % 200) / 255.0f - 0.4f) / 0.23f : normal(rng);
  }
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.f32(), b.f32(), static_cast<std::size_t>(a.numel()) * sizeof(float)) == 0;
}

TEST(RowExchangePalette, ImageRowsArriveExactlyInFewerBytesOtherRowsAsF32) {
  const Tensor image = values(true), activations = values(false);
  EXPECT_TRUE(same_bits(exchange(image), image));
  EXPECT_TRUE(same_bits(exchange(activations), activations));
  const std::size_t f32_bytes = 2 * kW * kC * sizeof(float);
  const net::Message other = piece_of(activations);
  EXPECT_EQ(other.payload.front(), kRowPieceF32);
  EXPECT_EQ(other.payload.size(), 1 + f32_bytes);  // the kind byte, then the rows as they are
  // A byte per value and three tables of at most 256 values: a quarter of the f32 bytes and
  // the tables (3 KB), under half of them on these two rows.
  const net::Message coded = piece_of(image);
  EXPECT_EQ(coded.payload.front(), kRowPiecePalette);
  EXPECT_LT(coded.payload.size(), f32_bytes / 2);
}

// Rank 1 sends `payload` as its piece; rank 0's exchange must fail naming it.
void expect_refused(const std::vector<std::byte>& payload, const std::string& what) {
  net::InprocCluster cluster(2);
  const Tensor mine = rows_of(values(true), 0, 2);
  cluster.rank(1).send(0, kRowExchangeTagBase, payload);
  try {
    row_exchange(exchange_op(0), &mine, {1, 4, kW, kC}, cluster.rank(0));
    ADD_FAILURE() << what << ": accepted";
  } catch (const TransportError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
}

TEST(RowExchangePalette, APieceThatIsNotOneOfTheRowsIsRefusedNamingThePeer) {
  const net::Message good = piece_of(values(true));  // a palette piece, to spoil
  ASSERT_EQ(good.payload.front(), kRowPiecePalette);

  expect_refused({}, "empty");
  std::vector<std::byte> bad = good.payload;
  bad.front() = std::byte{7};
  expect_refused(bad, "unknown kind");
  bad = good.payload;
  bad.resize(bad.size() - 1);
  expect_refused(bad, "cut short");
  bad = good.payload;
  bad[1 + 12] = std::byte{255};  // the first index, after the kind byte and the header
  expect_refused(bad, "index beyond its table");
  std::vector<std::byte> short_f32(1 + 8, std::byte{0});
  short_f32.front() = kRowPieceF32;
  expect_refused(short_f32, "f32 rows of the wrong size");
}

}  // namespace
}  // namespace huddle
