#include "runtime/row_exchange.h"

#include "collectives/helper_thread.h"
#include "core/error.h"
#include "core/palette.h"
#include "core/wire_format.h"

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <map>
#include <vector>

namespace huddle {
namespace {

// A value seen as [planes, rows, row_len] floats: NCHW -> [N·C, H, W]; channels-last
// [N, H, W, C] -> [N, H, W·C]; any other rank [..., C] -> [numel / C, C, 1] (a "row" is one
// column: column layers are split by the last axis, rows::split_extent).
struct RowView {
  std::int64_t planes = 1, rows = 1, row_len = 0;
};

RowView view_of(const Shape& s, bool channels_last) {
  std::int64_t n = 1;
  for (std::int64_t d : s) n *= d;
  if (s.size() == 4)
    return channels_last ? RowView{s[0], s[1], s[2] * s[3]} : RowView{s[0] * s[1], s[2], s[3]};
  if (s.empty() || s.back() == 0) return {1, 1, n};
  return {n / s.back(), s.back(), 1};
}

// Copies rows [r0, r1) of `src` (first row src_row0) into `dst` (first row dst_row0).
void copy_rows(const float* src, const RowView& sv, std::int64_t src_row0, float* dst,
               const RowView& dv, std::int64_t dst_row0, std::int64_t r0, std::int64_t r1) {
  const auto bytes = static_cast<std::size_t>((r1 - r0) * sv.row_len) * sizeof(float);
  for (std::int64_t p = 0; p < sv.planes; ++p) {
    std::memcpy(dst + (p * dv.rows + (r0 - dst_row0)) * dv.row_len,
                src + (p * sv.rows + (r0 - src_row0)) * sv.row_len, bytes);
  }
}

// Rows [row0, + piece.rows) of `src` (first row src_row0, view sv) as one contiguous span:
// in place where the value is one plane (channels-last, one image), else gathered plane by plane
// into `buffer`.
std::span<const float> piece_rows(const float* src, const RowView& sv, std::int64_t src_row0,
                                  const RowView& piece, std::int64_t row0,
                                  std::vector<float>& buffer) {
  const auto n = static_cast<std::size_t>(piece.planes * piece.rows * piece.row_len);
  if (sv.planes == 1) return {src + (row0 - src_row0) * sv.row_len, n};
  buffer.resize(n);
  copy_rows(src, sv, src_row0, buffer.data(), piece, row0, row0, row0 + piece.rows);
  return buffer;
}

// Where rows [row0, + piece.rows) of `dst` (first row dst_row0, view dv) are received: in place
// where the value is one plane, else in `buffer`, to be copied plane by plane (copy_rows).
std::span<float> landing_rows(float* dst, const RowView& dv, std::int64_t dst_row0,
                              const RowView& piece, std::int64_t row0, std::vector<float>& buffer) {
  const auto n = static_cast<std::size_t>(piece.planes * piece.rows * piece.row_len);
  if (dv.planes == 1) return {dst + (row0 - dst_row0) * dv.row_len, n};
  buffer.resize(n);
  return buffer;
}

// A piece of a palette exchange (OpAttrs::palette): its kind byte, then the palette coding of
// `rows` (channels-last values of `channels` channels) where it qualifies and is the smaller,
// else their f32 bytes.
void pack_palette_piece(std::span<const float> rows, std::int64_t channels,
                        std::vector<std::byte>& message) {
  message.assign(1, kRowPiecePalette);
  // A small piece of few values can take more bytes coded (its tables) than as f32.
  if (encode_palette(rows, channels, message) && message.size() <= rows.size_bytes()) return;
  const std::span<const std::byte> raw = std::as_bytes(rows);
  message.resize(1 + raw.size());
  message[0] = kRowPieceF32;
  std::memcpy(message.data() + 1, raw.data(), raw.size());
}

// Receives a piece of a palette exchange from `peer` into `rows`. TransportError naming the peer
// when the message is not such a piece of rows.size() values.
void recv_palette_piece(net::Transport& transport, int peer, std::uint32_t tag,
                        std::int64_t channels, std::span<float> rows) {
  const net::Message m = transport.recv(peer);
  const auto fail = [&](const std::string& what) {
    return TransportError(
        fmt::format("{}: a piece of row exchange {:#x}: {}", transport.peer_name(peer), tag, what));
  };
  if (m.tag != tag) throw fail(fmt::format("got tag {:#x}", m.tag));
  if (m.payload.empty()) throw fail("empty message");
  const std::span<const std::byte> body = std::span(m.payload).subspan(1);
  if (m.payload[0] == kRowPieceF32) {
    if (body.size() != rows.size_bytes()) {
      throw fail(
          fmt::format("{} bytes of f32 rows where {} are due", body.size(), rows.size_bytes()));
    }
    std::memcpy(rows.data(), body.data(), body.size());
  } else if (m.payload[0] == kRowPiecePalette) {
    try {
      decode_palette(body, channels, rows);
    } catch (const InputError& e) {
      throw fail(e.what());
    }
  } else {
    throw fail(fmt::format("unknown kind {}", static_cast<int>(m.payload[0])));
  }
}

}  // namespace

Tensor row_exchange(const Op& op, const Tensor* held, const Shape& out_shape,
                    net::Transport& transport) {
  const OpAttrs& a = op.attrs;
  const int me = transport.rank();
  const std::uint32_t tag =
      kRowExchangeTagBase + (static_cast<std::uint32_t>(a.exchange) & 0xFFFFFFu);
  const bool nhwc = a.channels_last && out_shape.size() == 4;
  const RowView ov = view_of(out_shape, nhwc);
  // Rows quantised one scale each (int8): an NCHW piece's rows per channel plane; a
  // channels-last piece's pixels, over their channels.
  const std::int64_t channels = nhwc ? out_shape[3] : 1;
  const bool palette = a.palette && nhwc;  // lowering sets it for f32 exchanges only
  auto scaled_rows = [&](const RowView& pv) {
    return nhwc ? pv.planes * pv.rows * (pv.row_len / channels) : pv.planes;
  };
  RowView hv;
  Tensor packed_held;
  if (held != nullptr) {
    packed_held = held->contiguous() ? *held : held->clone();
    hv = view_of(packed_held.shape(), nhwc);
  }
  // Sends on helper threads, one per destination (each piece packed into one message), that live
  // as long as this thread: the pieces to one peer keep their order, and a slow link does not hold
  // up the others. (A thread started per peer per exchange cost YOLOv5s some 200 thread starts
  // per image, each out of a small device's CPU quota.)
  std::map<int, std::vector<const OpAttrs::RowPiece*>> by_peer;
  for (const OpAttrs::RowPiece& piece : a.sends) by_peer[piece.peer].push_back(&piece);
  std::vector<std::exception_ptr> send_errors(by_peer.size());
  std::vector<collectives::HelperThread*> senders;
  std::size_t slot = 0;
  for (const auto& [peer, pieces] : by_peer) {
    senders.push_back(&collectives::peer_sender(peer));
    senders.back()->start([&, peer = peer, pieces = &pieces, error = &send_errors[slot++]] {
      try {
        std::vector<float> buffer;
        std::vector<std::byte> encoded;
        for (const OpAttrs::RowPiece* s : *pieces) {
          const RowView pv{hv.planes, s->end - s->begin, hv.row_len};
          const std::span<const float> rows =
              piece_rows(packed_held.f32(), hv, a.in_begin, pv, s->begin, buffer);
          if (palette) {
            pack_palette_piece(rows, channels, encoded);
            transport.send(peer, tag, encoded);
            continue;
          }
          if (a.wire == WireFormat::F32) {
            transport.send(peer, tag, std::as_bytes(rows));
            continue;
          }
          const std::int64_t n_rows = scaled_rows(pv);
          const std::int64_t cols = pv.planes * pv.rows * pv.row_len / n_rows;
          encoded.resize(static_cast<std::size_t>(n_rows) * wire_row_bytes(a.wire, cols));
          encode_rows(a.wire, rows.data(), cols, n_rows, cols, encoded.data());
          transport.send(peer, tag, encoded);
        }
      } catch (...) {
        *error = std::current_exception();
      }
    });
  }
  Tensor out;
  std::exception_ptr recv_error;
  try {  // nothing may leave this function before the senders are waited for
    out = Tensor::empty(DType::F32, out_shape);
    std::vector<float> buffer;
    std::vector<std::byte> encoded;
    for (const OpAttrs::RowPiece& r : a.recvs) {
      if (r.peer == me) {
        copy_rows(packed_held.f32(), hv, a.in_begin, out.f32(), ov, a.out_begin, r.begin, r.end);
        continue;
      }
      const RowView pv{ov.planes, r.end - r.begin, ov.row_len};
      const std::span<float> rows = landing_rows(out.f32(), ov, a.out_begin, pv, r.begin, buffer);
      const bool in_place = ov.planes == 1;  // landing_rows gave part of `out` itself
      if (palette) {
        recv_palette_piece(transport, r.peer, tag, channels, rows);
      } else if (a.wire == WireFormat::F32) {
        transport.recv_into(r.peer, tag, std::as_writable_bytes(rows));
      } else {
        const std::int64_t n_rows = scaled_rows(pv);
        const std::int64_t cols = pv.planes * pv.rows * pv.row_len / n_rows;
        encoded.resize(static_cast<std::size_t>(n_rows) * wire_row_bytes(a.wire, cols));
        transport.recv_into(r.peer, tag, encoded);
        decode_rows(a.wire, encoded.data(), n_rows, cols, rows.data(), cols);
      }
      if (!in_place) {
        copy_rows(rows.data(), pv, r.begin, out.f32(), ov, a.out_begin, r.begin, r.end);
      }
    }
  } catch (...) {
    recv_error = std::current_exception();
  }
  for (collectives::HelperThread* sender : senders) sender->wait();
  if (recv_error) std::rethrow_exception(recv_error);
  for (const std::exception_ptr& e : send_errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

}  // namespace huddle
