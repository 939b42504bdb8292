// The row exchange of a row-split CNN (EdgeFlow's forwarding table at run time): each device
// sends the rows of a value other devices need, directly to each of them, and assembles the rows
// it needs from its own and the received ones. Sends run on their own threads (one per peer)
// while this one receives, so two devices that exchange halos with each other never wait on each
// other's sends, and the messages to different peers travel at the same time. A "row" is a row of
// H for NCHW values and a column (the last axis) for any other rank: the column units of a CNN's
// fully connected head gather their output columns the same way. In a lossy wire format
// (attrs.wire, core/wire_format.h) each piece travels as [planes, its rows x row length] rows:
// one scale per channel's band (NCHW) or per row of a column layer. A graph input's pieces in
// f32 travel palette-coded where their channels take at most 256 values each (OpAttrs::palette).
#pragma once

#include "core/tensor.h"
#include "graph/graph.h"
#include "net/transport.h"

namespace huddle {

// Message tags of row exchanges: kRowExchangeTagBase + the exchange's index (mod 2^24).
inline constexpr std::uint32_t kRowExchangeTagBase = 0x30000000u;

// The first byte of a piece of a palette exchange (OpAttrs::palette): f32 rows or their palette
// coding follow.
inline constexpr std::byte kRowPieceF32{0}, kRowPiecePalette{1};

// Runs row_exchange `op` (attrs sends, recvs, in_begin, out_begin, exchange) on this device:
// `held` is the device's rows of the value (undefined when it holds none), the result has
// `out_shape`. TransportError naming the peer when a link fails; PlanError when a received
// piece does not fit.
Tensor row_exchange(const Op& op, const Tensor* held, const Shape& out_shape,
                    net::Transport& transport);

}  // namespace huddle
