#include "collectives/p2p.h"

#include "collectives/tags.h"
#include "core/error.h"
#include "net/wire.h"

#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace huddle::collectives {

namespace {

constexpr int kDTypeCount = 0
#define HUDDLE_DTYPE_COUNT(name, str, elems, bytes) +1
    HUDDLE_DTYPES(HUDDLE_DTYPE_COUNT)
#undef HUDDLE_DTYPE_COUNT
    ;

std::span<const std::byte> bytes_of(const Tensor& t) {
  return {static_cast<const std::byte*>(t.raw()), t.nbytes()};
}

std::span<std::byte> bytes_of(Tensor& t) {
  return {static_cast<std::byte*>(t.raw()), t.nbytes()};
}

constexpr int kWireFormatCount = 0
#define HUDDLE_WIRE_COUNT(e, name) +1
    HUDDLE_WIRE_FORMATS(HUDDLE_WIRE_COUNT)
#undef HUDDLE_WIRE_COUNT
    ;

// Header: u8 dtype, u8 ndim, u8 wire format (0 = f32: the tensor's bytes), u8 reserved,
// u32 reserved, then ndim x i64 dims.
struct TensorHeader {
  DType dtype = DType::F32;
  WireFormat wire = WireFormat::F32;
  Shape shape;
};

// The format `tensor` travels in: `wire` for f32 tensors, their own bytes otherwise.
WireFormat effective_wire(const Tensor& tensor, WireFormat wire) {
  return tensor.dtype() == DType::F32 ? wire : WireFormat::F32;
}

// A tensor as the rows the wire formats encode: [numel / last dim, last dim].
std::pair<std::int64_t, std::int64_t> wire_rows(const Shape& shape) {
  const std::int64_t cols = shape.empty() ? 1 : shape.back();
  return {cols == 0 ? 0 : shape_numel(shape) / cols, cols};
}

std::vector<std::byte> encode_header(const Tensor& t, WireFormat wire) {
  std::vector<std::byte> out(8 + 8 * t.shape().size());
  out[0] = static_cast<std::byte>(t.dtype());
  out[1] = static_cast<std::byte>(t.rank());
  out[2] = static_cast<std::byte>(wire);
  for (std::size_t i = 0; i < t.shape().size(); ++i) {
    net::wire::store_le(out.data() + 8 + 8 * i, static_cast<std::uint64_t>(t.shape()[i]));
  }
  return out;
}

TensorHeader decode_header(net::Transport& t, int peer, const net::Message& m,
                           std::uint64_t max_bytes) {
  auto bad = [&](const std::string& what) {
    return TransportError(fmt::format("{}: malformed tensor header: {}", t.peer_name(peer), what));
  };
  if (m.tag != collective_tag(CollectiveOp::kTensorHeader)) {
    throw bad(
        fmt::format("expected tag {}, got {}", collective_tag(CollectiveOp::kTensorHeader), m.tag));
  }
  if (m.payload.size() < 8) throw bad(fmt::format("{} bytes", m.payload.size()));
  const auto dtype = static_cast<unsigned>(m.payload[0]);
  const auto ndim = static_cast<unsigned>(m.payload[1]);
  if (dtype >= static_cast<unsigned>(kDTypeCount))
    throw bad(fmt::format("unknown dtype {}", dtype));
  if (ndim > kMaxTensorRank) throw bad(fmt::format("rank {} exceeds {}", ndim, kMaxTensorRank));
  const auto wire = static_cast<unsigned>(m.payload[2]);
  if (wire >= static_cast<unsigned>(kWireFormatCount))
    throw bad(fmt::format("unknown wire format {}", wire));
  if (wire != 0 && dtype != static_cast<unsigned>(DType::F32))
    throw bad(fmt::format("a {} tensor in wire format {}", dtype_name(static_cast<DType>(dtype)),
                          wire_format_name(static_cast<WireFormat>(wire))));
  for (std::size_t i = 3; i < 8; ++i) {
    if (m.payload[i] != std::byte{0}) throw bad("reserved bytes are not 0");
  }
  if (m.payload.size() != 8 + 8 * ndim) {
    throw bad(fmt::format("{} bytes for rank {}", m.payload.size(), ndim));
  }
  TensorHeader h;
  h.dtype = static_cast<DType>(dtype);
  h.wire = static_cast<WireFormat>(wire);
  // Element count checked against the byte limit dimension by dimension, so nothing overflows.
  // Block-quantised dtypes: bytes are counted per block of elements.
  const auto block = static_cast<std::uint64_t>(dtype_block_elems(h.dtype));
  const std::uint64_t max_blocks = max_bytes / dtype_block_bytes(h.dtype);
  const std::uint64_t max_elems = max_blocks > std::numeric_limits<std::uint64_t>::max() / block
                                      ? max_blocks
                                      : max_blocks * block;
  std::uint64_t elems = 1;
  for (unsigned i = 0; i < ndim; ++i) {
    const auto d = net::wire::load_le<std::uint64_t>(m.payload.data() + 8 + 8 * i);
    if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw bad(fmt::format("dimension {} is {}", i, d));
    }
    if (d != 0 && elems > max_elems / d) {
      throw bad(fmt::format("tensor exceeds the limit of {} bytes", max_bytes));
    }
    elems *= d;
    h.shape.push_back(static_cast<std::int64_t>(d));
  }
  if (block > 1 && (ndim == 0 || h.shape.back() % static_cast<std::int64_t>(block) != 0)) {
    throw bad(fmt::format("a {} tensor of shape {} has rows that are not whole blocks of {}",
                          dtype_name(h.dtype), shape_str(h.shape), block));
  }
  return h;
}

}  // namespace

void send_tensor(net::Transport& transport, int peer, const Tensor& tensor, WireFormat wire) {
  HUDDLE_CHECK(tensor.rank() <= kMaxTensorRank, "tensor of rank {}", tensor.rank());
  wire = effective_wire(tensor, wire);
  transport.send(peer, collective_tag(CollectiveOp::kTensorHeader), encode_header(tensor, wire));
  const Tensor packed = tensor.contiguous() ? tensor : tensor.clone();
  if (wire == WireFormat::F32) {
    transport.send(peer, collective_tag(CollectiveOp::kTensorData), bytes_of(packed));
    return;
  }
  const auto [rows, cols] = wire_rows(packed.shape());
  std::vector<std::byte> encoded(static_cast<std::size_t>(rows) * wire_row_bytes(wire, cols));
  encode_rows(wire, packed.f32(), cols, rows, cols, encoded.data());
  transport.send(peer, collective_tag(CollectiveOp::kTensorData), encoded);
}

namespace {

// Receives the data message of a tensor whose header was `h` into `out` (contiguous, h's dtype
// and shape), decoding its wire format.
void recv_data(net::Transport& transport, int peer, const TensorHeader& h, Tensor& out) {
  if (h.wire == WireFormat::F32) {
    transport.recv_into(peer, collective_tag(CollectiveOp::kTensorData), bytes_of(out));
    return;
  }
  const auto [rows, cols] = wire_rows(h.shape);
  std::vector<std::byte> encoded(static_cast<std::size_t>(rows) * wire_row_bytes(h.wire, cols));
  transport.recv_into(peer, collective_tag(CollectiveOp::kTensorData), encoded);
  decode_rows(h.wire, encoded.data(), rows, cols, out.f32(), cols);
}

}  // namespace

Tensor recv_tensor(net::Transport& transport, int peer, std::uint64_t max_bytes) {
  const TensorHeader h = decode_header(transport, peer, transport.recv(peer), max_bytes);
  Tensor out = Tensor::empty(h.dtype, h.shape);
  recv_data(transport, peer, h, out);
  return out;
}

void recv_tensor_into(net::Transport& transport, int peer, Tensor out, WireFormat wire) {
  HUDDLE_CHECK(out.contiguous(), "recv_tensor_into needs a contiguous tensor");
  const TensorHeader h = decode_header(transport, peer, transport.recv(peer),
                                       std::numeric_limits<std::uint64_t>::max());
  if (h.dtype != out.dtype() || h.shape != out.shape()) {
    throw TransportError(fmt::format(
        "{}: sent a {} tensor of shape {}, expected {} {}", transport.peer_name(peer),
        dtype_name(h.dtype), shape_str(h.shape), dtype_name(out.dtype()), shape_str(out.shape())));
  }
  if (h.wire != effective_wire(out, wire)) {
    throw TransportError(fmt::format("{}: sent a tensor in wire format {}, expected {}",
                                     transport.peer_name(peer), wire_format_name(h.wire),
                                     wire_format_name(effective_wire(out, wire))));
  }
  recv_data(transport, peer, h, out);
}

void broadcast(net::Transport& transport, Tensor data, int root) {
  HUDDLE_CHECK(data.contiguous(), "broadcast needs a contiguous tensor");
  HUDDLE_CHECK(root >= 0 && root < transport.size(), "root {} of {}", root, transport.size());
  const std::uint32_t tag = collective_tag(CollectiveOp::kBroadcast, root);
  if (transport.rank() == root) {
    for (int peer = 0; peer < transport.size(); ++peer) {
      if (peer != root) transport.send(peer, tag, bytes_of(data));
    }
  } else {
    transport.recv_into(root, tag, bytes_of(data));
  }
}

void gather_rows(net::Transport& transport, Tensor data, const RowPartition& partition, int root) {
  HUDDLE_CHECK(
      data.rank() == 2 && partition.rows() == data.dim(0) && partition.parts() == transport.size(),
      "gather_rows: shape {} for {} rows in {} parts", shape_str(data.shape()), partition.rows(),
      partition.parts());
  HUDDLE_CHECK(root >= 0 && root < transport.size(), "root {} of {}", root, transport.size());
  const int r = transport.rank();
  if (r != root) {
    const Tensor mine = data.rows(partition.offset(r), partition.end(r));
    const Tensor packed = mine.contiguous() ? mine : mine.clone();
    transport.send(root, collective_tag(CollectiveOp::kGather, r), bytes_of(packed));
    return;
  }
  for (int peer = 0; peer < transport.size(); ++peer) {
    if (peer == root) continue;
    Tensor rows = data.rows(partition.offset(peer), partition.end(peer));
    Tensor target = rows.contiguous() ? rows : Tensor::empty(rows.dtype(), rows.shape());
    transport.recv_into(peer, collective_tag(CollectiveOp::kGather, peer), bytes_of(target));
    if (!rows.contiguous()) {
      const std::size_t row_bytes = dtype_bytes(rows.dtype(), rows.dim(1));
      for (std::int64_t i = 0; i < rows.dim(0); ++i) {
        std::memcpy(
            static_cast<std::byte*>(rows.raw()) + dtype_bytes(rows.dtype(), i * rows.row_stride()),
            static_cast<const std::byte*>(target.raw()) + static_cast<std::size_t>(i) * row_bytes,
            row_bytes);
      }
    }
  }
}

}  // namespace huddle::collectives
