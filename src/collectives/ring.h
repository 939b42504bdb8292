// Ring collectives over a Transport for uneven per-rank row counts, with compute overlap
// (Galaxy's ring all-gather / reduce-scatter overlap, papers/galaxy-hybrid-model-parallelism).
//
// Shapes: `data` is a 2-D [rows, cols] tensor (its row stride may exceed cols) with the same
// shape on every rank; `partition` says which rows each rank owns (RowPartition, counts may be
// 0) and is identical on every rank. The ring is rank r -> r+1 (mod n).
//
// Chunking: every part travels as messages of whole rows of at most chunk_bytes (at least one
// row), and a rank forwards each chunk as soon as it has it, so a part streams around the ring
// instead of hopping whole. Sends and receives run on two helper threads; hooks run on the
// caller's thread, so caller computation overlaps the transfers, chunk by chunk (the smaller the
// chunks, the sooner compute starts on arrived rows; the more messages). Collectives whose every
// part is one message of at most 16 KiB (decode steps) run inline on the caller's thread instead:
// send a step's part, receive the next, call the hook; no threads, same messages and tags.
//
// Bytes on the wire per rank (payload; add 28 bytes of framing per chunk), with
// B(p) = count(p) * (bytes of a row: cols * element size, or wire_row_bytes of the format):
//   all_gather:      sends sum_{p != r+1} B(p), receives sum_{p != r} B(p)
//   reduce_scatter:  sends sum_{p != r} B(p),   receives sum_{p != r-1} B(p)
//   all_reduce:      both of the above with an even split of all elements: about
//                    2 (n-1)/n * bytes(data) sent and received.
// Links: while a collective runs it is the only user of the link from rank r-1 (receive) and
// the link to rank r+1 (send); do not use them from other threads meanwhile.
// Timeouts: a rank waits at most the transport's timeout for each chunk, and a chunk may wait
// on a neighbour's hook (a GEMM tile): set the timeout above the slowest tile's compute time.
// Errors: a transport failure (dead or silent peer) throws its TransportError, naming the peer.
// Hooks that throw abort the collective; the exception is rethrown after the helper threads
// have finished (they finish within the transport timeout).
#pragma once

#include "collectives/partition.h"
#include "core/tensor.h"
#include "core/wire_format.h"
#include "net/transport.h"

#include <functional>

namespace huddle::collectives {

struct RingOptions {
  std::size_t chunk_bytes = kRingChunkBytes;  // on the wire
  // The form f32 rows travel in (core/wire_format.h); other dtypes travel as their bytes. With a
  // lossy format an all-gather first rounds this rank's rows in place to what the others decode
  // and forwards received rows as they arrived, so every rank ends with the same values; a
  // reduce-scatter rounds each partial sum it sends (n - 1 roundings on the way to the owner).
  WireFormat wire = WireFormat::F32;
};

// Called with rows [row_begin, row_end) of `part` as soon as they are in `data`: this rank's own
// part first (whole), then every other part in ring order (r-1, r-2, ...), each as the chunks it
// arrives in (in row order; one call for a part sent as one message, and for an empty part), so
// the calls for a part cover its rows exactly once. Runs on the caller's thread.
using PartReady = std::function<void(int part, std::int64_t row_begin, std::int64_t row_end)>;

// Fills `tile` ([count(part), cols], a view of `data`) with this rank's partial sums for the
// rows of `part`. Called once per part, in the order the ring needs them (part r-1 first, this
// rank's own part last), on the caller's thread.
using ProduceTile = std::function<void(int part, Tensor tile)>;

// All-gather: on entry the rows of this rank's part hold its data (any dtype); on return every
// row of `data` holds its owner's data. `on_part` lets the caller compute on parts as they land.
void all_gather(net::Transport& transport, Tensor data, const RowPartition& partition,
                const PartReady& on_part = {}, const RingOptions& options = {});

// Reduce-scatter (f32): `data` is this rank's [rows, cols] partial-sum workspace. Without
// `produce`, it holds every partial sum on entry; with it, the tiles are produced just in time.
// On return the rows of this rank's part hold the sum over all ranks (other rows are
// clobbered); the returned tensor is that view: [count(rank), cols].
Tensor reduce_scatter(net::Transport& transport, Tensor data, const RowPartition& partition,
                      const ProduceTile& produce = {}, const RingOptions& options = {});

// All-reduce (f32, sum) of a contiguous tensor of any shape, in place: reduce-scatter then
// all-gather over an even split of its elements.
void all_reduce(net::Transport& transport, Tensor data, const RingOptions& options = {});

// Column all-gather (f32): `local` is this rank's [rows, col_counts[rank]] block (any row
// stride); on return `out` ([rows, sum(col_counts)], contiguous) holds every rank's block at
// its columns, in rank order. Each block travels packed (rows * cols elements) around the ring:
// the same bytes as all_gather of the blocks, plus one copy in and one out per element.
void all_gather_cols(net::Transport& transport, const Tensor& local,
                     const std::vector<std::int64_t>& col_counts, Tensor out,
                     const RingOptions& options = {});

// Column gather (f32) to `root`: as all_gather_cols, but only `root` receives, each block sent
// straight to it (gather_rows of the packed blocks); `out` is written on `root` only and may be
// undefined elsewhere. Exact (f32 bytes): what it gathers is a model output.
void gather_cols(net::Transport& transport, const Tensor& local,
                 const std::vector<std::int64_t>& col_counts, Tensor out, int root);

}  // namespace huddle::collectives
