// Point-to-point tensor transfer and simple rooted collectives over a Transport.
//
// A tensor travels as two messages: a header (dtype, rank, dims; every field checked by the
// receiver) and the data (row-major, packed). Bytes on the wire: 8 + 8 * ndim + nbytes.
#pragma once

#include "collectives/partition.h"
#include "core/tensor.h"
#include "net/transport.h"

namespace huddle::collectives {

inline constexpr int kMaxTensorRank = 8;

// Sends `tensor` (any dtype, any strides) to `peer`.
void send_tensor(net::Transport& transport, int peer, const Tensor& tensor);
// Receives a tensor sent with send_tensor. Throws TransportError naming the peer when the header
// is malformed or the tensor is larger than max_bytes.
Tensor recv_tensor(net::Transport& transport, int peer,
                   std::uint64_t max_bytes = std::uint64_t{4} << 30);
// Receives into `out`, which must be contiguous; the incoming dtype and shape must equal it.
void recv_tensor_into(net::Transport& transport, int peer, Tensor out);

// Broadcast: `data` (contiguous, same shape on every rank) takes root's contents everywhere.
// The root sends n-1 copies (flat), so use it for small tensors (control, embeddings of one
// token); weights should be sent once to the rank that needs them.
void broadcast(net::Transport& transport, Tensor data, int root);

// Gather: every rank sends its rows of `data` ([rows, cols], per `partition`) to `root`, which
// ends with all rows. Other ranks' `data` outside their own rows is untouched.
void gather_rows(net::Transport& transport, Tensor data, const RowPartition& partition, int root);

}  // namespace huddle::collectives
