// Point-to-point tensor transfer and simple rooted collectives over a Transport.
//
// A tensor travels as two messages: a header (dtype, rank, wire format, dims; every field checked
// by the receiver) and the data (row-major, packed). Bytes on the wire: 8 + 8 * ndim + nbytes,
// or for an f32 tensor sent in another wire format (core/wire_format.h) its rows (the last
// dimension) encoded: 8 + 8 * ndim + rows * wire_row_bytes(format, last dim).
#pragma once

#include "collectives/partition.h"
#include "core/tensor.h"
#include "core/wire_format.h"
#include "net/transport.h"

namespace huddle::collectives {

inline constexpr int kMaxTensorRank = 8;

// Sends `tensor` (any dtype, any strides) to `peer`; an f32 tensor in wire format `wire`.
void send_tensor(net::Transport& transport, int peer, const Tensor& tensor,
                 WireFormat wire = WireFormat::F32);
// Receives a tensor sent with send_tensor (decoded to f32 if it came in another wire format).
// Throws TransportError naming the peer when the header is malformed or the tensor is larger
// than max_bytes.
Tensor recv_tensor(net::Transport& transport, int peer,
                   std::uint64_t max_bytes = std::uint64_t{4} << 30);
// Receives into `out`, which must be contiguous; the incoming dtype and shape must equal it, and
// an f32 tensor must come in wire format `wire` (TransportError naming the peer otherwise).
void recv_tensor_into(net::Transport& transport, int peer, Tensor out,
                      WireFormat wire = WireFormat::F32);

// Broadcast: `data` (contiguous, same shape on every rank) takes root's contents everywhere.
// The root sends n-1 copies (flat), so use it for small tensors (control, embeddings of one
// token); weights should be sent once to the rank that needs them.
void broadcast(net::Transport& transport, Tensor data, int root);

// Gather: every rank sends its rows of `data` ([rows, cols], per `partition`) to `root`, which
// ends with all rows. Other ranks' `data` outside their own rows is untouched.
void gather_rows(net::Transport& transport, Tensor data, const RowPartition& partition, int root);

}  // namespace huddle::collectives
