#include "collectives/ring.h"

#include "collectives/p2p.h"
#include "collectives/tags.h"
#include "core/error.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>

namespace huddle::collectives {

namespace {

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

struct Chunk {
  int part = 0;
  std::int64_t begin = 0;  // absolute rows of `data`
  std::int64_t end = 0;
};

// Moves whole-row chunks of a 2-D tensor between the tensor and the transport. F32 rows travel
// in the wire format (core/wire_format.h); other dtypes, and the f32 format, as their bytes.
class RowIo {
 public:
  RowIo(Tensor data, std::size_t chunk_bytes, WireFormat wire) : data_(std::move(data)) {
    wire_ = data_.dtype() == DType::F32 ? wire : WireFormat::F32;
    row_bytes_ = dtype_bytes(data_.dtype(), data_.dim(1));
    wire_row_bytes_ = raw() ? row_bytes_ : wire_row_bytes(wire_, data_.dim(1));
    stride_bytes_ = dtype_bytes(data_.dtype(), data_.row_stride());
    rows_per_chunk_ =
        wire_row_bytes_ == 0
            ? std::max<std::int64_t>(1, data_.dim(0))
            : std::max<std::int64_t>(1, static_cast<std::int64_t>(chunk_bytes / wire_row_bytes_));
  }

  // Whether the tensor's own bytes travel (no encoding, nothing rounded).
  bool raw() const { return wire_ == WireFormat::F32; }

  std::vector<Chunk> chunks(const RowPartition& p, int part) const {
    std::vector<Chunk> out;
    for (std::int64_t b = p.offset(part); b < p.end(part); b += rows_per_chunk_) {
      out.push_back(Chunk{part, b, std::min(b + rows_per_chunk_, p.end(part))});
    }
    return out;
  }

  // Bytes of chunk `c` on the wire.
  std::size_t bytes(const Chunk& c) const {
    return static_cast<std::size_t>(c.end - c.begin) * wire_row_bytes_;
  }
  bool contiguous(const Chunk& c) const {
    return c.end - c.begin <= 1 || stride_bytes_ == row_bytes_;
  }
  std::byte* row(std::int64_t i) const {
    return static_cast<std::byte*>(const_cast<void*>(data_.raw())) +
           static_cast<std::size_t>(i) * stride_bytes_;
  }
  float* row_f32(std::int64_t i) const { return reinterpret_cast<float*>(row(i)); }

  // The wire bytes of chunk `c`'s rows (encoded; not for raw()).
  void encode(const Chunk& c, std::vector<std::byte>& out) const {
    out.resize(bytes(c));
    encode_rows(wire_, row_f32(c.begin), data_.row_stride(), c.end - c.begin, data_.dim(1),
                out.data());
  }
  // Chunk `c`'s rows from its wire bytes.
  void decode(const Chunk& c, const std::vector<std::byte>& in) const {
    decode_rows(wire_, in.data(), c.end - c.begin, data_.dim(1), row_f32(c.begin),
                data_.row_stride());
  }

  void send(net::Transport& t, int peer, std::uint32_t tag, const Chunk& c,
            std::vector<std::byte>& staging) const {
    if (!raw()) {
      encode(c, staging);
      t.send(peer, tag, staging);
      return;
    }
    if (contiguous(c)) {
      t.send(peer, tag, std::span<const std::byte>(row(c.begin), bytes(c)));
      return;
    }
    staging.resize(bytes(c));
    for (std::int64_t i = c.begin; i < c.end; ++i) {
      std::memcpy(staging.data() + static_cast<std::size_t>(i - c.begin) * row_bytes_, row(i),
                  row_bytes_);
    }
    t.send(peer, tag, staging);
  }

  // Receives a chunk into the tensor's rows.
  void recv(net::Transport& t, int peer, std::uint32_t tag, const Chunk& c,
            std::vector<std::byte>& staging) const {
    if (!raw()) {
      recv_packed(t, peer, tag, c, staging);
      decode(c, staging);
      return;
    }
    if (contiguous(c)) {
      t.recv_into(peer, tag, std::span<std::byte>(row(c.begin), bytes(c)));
      return;
    }
    staging.resize(bytes(c));
    t.recv_into(peer, tag, staging);
    for (std::int64_t i = c.begin; i < c.end; ++i) {
      std::memcpy(row(i), staging.data() + static_cast<std::size_t>(i - c.begin) * row_bytes_,
                  row_bytes_);
    }
  }

  // Receives a chunk's wire bytes into `staging` without touching the tensor.
  void recv_packed(net::Transport& t, int peer, std::uint32_t tag, const Chunk& c,
                   std::vector<std::byte>& staging) const {
    staging.resize(bytes(c));
    t.recv_into(peer, tag, staging);
  }

  // rows of c (f32) += the chunk's rows in `staging` (wire bytes).
  void add_packed(const Chunk& c, const std::vector<std::byte>& staging) const {
    add_decoded_rows(wire_, staging.data(), c.end - c.begin, data_.dim(1), row_f32(c.begin),
                     data_.row_stride());
  }

 private:
  Tensor data_;
  WireFormat wire_ = WireFormat::F32;
  std::size_t row_bytes_ = 0;       // a row in the tensor
  std::size_t wire_row_bytes_ = 0;  // a row on the wire
  std::size_t stride_bytes_ = 0;
  std::int64_t rows_per_chunk_ = 1;
};

// What an all-gather sends: this rank's chunks, and the chunks it received for forwarding. In a
// lossy wire format this rank's rows are first rounded in place to what the others will decode,
// and received chunks are forwarded as the bytes that arrived: every rank ends with the same
// values, and no row is rounded twice.
class GatherWire {
 public:
  GatherWire(const RowIo& io, std::vector<Chunk> own, std::size_t received)
      : io_(io), own_(std::move(own)) {
    if (io_.raw()) return;
    own_wire_.resize(own_.size());
    for (std::size_t i = 0; i < own_.size(); ++i) {
      io_.encode(own_[i], own_wire_[i]);
      io_.decode(own_[i], own_wire_[i]);
    }
    in_wire_.resize(received);
  }

  const std::vector<Chunk>& own() const { return own_; }

  void send_own(net::Transport& t, int peer, std::uint32_t tag, std::size_t i,
                std::vector<std::byte>& staging) const {
    if (io_.raw())
      io_.send(t, peer, tag, own_[i], staging);
    else
      t.send(peer, tag, own_wire_[i]);
  }
  // Received chunk k (`c`) into the tensor, its bytes kept for forward().
  void recv(net::Transport& t, int peer, std::uint32_t tag, std::size_t k, const Chunk& c,
            std::vector<std::byte>& staging) {
    if (io_.raw()) {
      io_.recv(t, peer, tag, c, staging);
      return;
    }
    io_.recv_packed(t, peer, tag, c, in_wire_[k]);
    io_.decode(c, in_wire_[k]);
  }
  void forward(net::Transport& t, int peer, std::uint32_t tag, std::size_t k, const Chunk& c,
               std::vector<std::byte>& staging) const {
    if (io_.raw())
      io_.send(t, peer, tag, c, staging);
    else
      t.send(peer, tag, in_wire_[k]);
  }

 private:
  const RowIo& io_;
  std::vector<Chunk> own_;
  std::vector<std::vector<std::byte>> own_wire_, in_wire_;
};

// Messages up to this size go inline: the caller's thread sends each step's part and then
// receives the next, with no helper threads. A send of this size completes into the socket's send
// buffer (16 KiB on a fresh Linux TCP socket, more once autotuned) without waiting for the peer
// to read, so every rank of the ring can send before it receives. Decode steps' collectives
// ([1, hidden] rows) are this small; creating two threads per collective cost more than their
// transfer (44 collectives a token on a 22-layer model).
constexpr std::size_t kInlineMessageBytes = std::size_t{16} << 10;

// Whether every part of `partition` travels as one message of at most kInlineMessageBytes.
bool inline_sized(const RowIo& io, const RowPartition& partition) {
  for (int p = 0; p < partition.parts(); ++p) {
    const std::vector<Chunk> chunks = io.chunks(partition, p);
    if (chunks.size() > 1 || (chunks.size() == 1 && io.bytes(chunks[0]) > kInlineMessageBytes)) {
      return false;
    }
  }
  return true;
}

// Thrown inside a helper when another thread failed first; never escapes this file.
struct Aborted {};

// Counters shared by the caller and the two helper threads, plus the first error.
class Progress {
 public:
  enum Counter { kReceived, kProduced, kParts, kCounters };

  void add(Counter c) {
    std::lock_guard lock(mutex_);
    ++values_[c];
    cv_.notify_all();
  }

  void set(Counter c, std::int64_t v) {
    std::lock_guard lock(mutex_);
    values_[c] = v;
    cv_.notify_all();
  }

  // Waits until counter c >= at_least. Every counter is advanced by a thread of this process
  // whose own waits are bounded (transport timeouts), or the collective has failed.
  void wait(Counter c, std::int64_t at_least) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return failed_ || values_[c] >= at_least; });
    if (values_[c] < at_least) throw Aborted{};
  }

  void fail(std::exception_ptr e) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = e;
    failed_ = true;
    cv_.notify_all();
  }

  std::exception_ptr error() {
    std::lock_guard lock(mutex_);
    return error_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::int64_t values_[kCounters] = {};
  bool failed_ = false;
  std::exception_ptr error_;
};

// Runs the caller's part and two helper threads; rethrows the first failure after all ended.
template <typename SendFn, typename RecvFn, typename CallerFn>
void run_ring(Progress& progress, SendFn send_fn, RecvFn recv_fn, CallerFn caller_fn) {
  auto guarded = [&progress](auto& fn) {
    try {
      fn();
    } catch (const Aborted&) {
    } catch (...) {
      progress.fail(std::current_exception());
    }
  };
  // The calling thread's persistent helpers (helper_thread.h): no thread starts per collective.
  HelperThread& sender = sender_helper();
  HelperThread& receiver = receiver_helper();
  sender.start([&] { guarded(send_fn); });
  receiver.start([&] { guarded(recv_fn); });
  guarded(caller_fn);
  sender.wait();
  receiver.wait();
  if (std::exception_ptr e = progress.error()) std::rethrow_exception(e);
}

void check_args(const net::Transport& t, const Tensor& data, const RowPartition& p) {
  HUDDLE_CHECK(data.rank() == 2, "collective on a tensor of shape {}", shape_str(data.shape()));
  HUDDLE_CHECK(p.parts() == t.size(), "partition of {} parts for {} ranks", p.parts(), t.size());
  HUDDLE_CHECK(p.rows() == data.dim(0), "partition of {} rows for {} rows", p.rows(), data.dim(0));
}

}  // namespace

void all_gather(net::Transport& transport, Tensor data, const RowPartition& partition,
                const PartReady& on_part, const RingOptions& options) {
  check_args(transport, data, partition);
  const int n = transport.size();
  const int r = transport.rank();
  auto call = [&](int part) {
    if (on_part) on_part(part, partition.offset(part), partition.end(part));
  };
  if (n == 1) {
    call(r);
    return;
  }
  const RowIo io(data, options.chunk_bytes, options.wire);
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);
  // Step s receives part r-s-1; its chunks, in order, are what the sender forwards at s+1.
  std::vector<Chunk> received;
  std::vector<std::size_t> step_start;
  for (int s = 0; s < n - 1; ++s) {
    step_start.push_back(received.size());
    for (const Chunk& c : io.chunks(partition, mod(r - s - 1, n))) received.push_back(c);
  }
  step_start.push_back(received.size());
  const std::size_t forwarded = step_start[static_cast<std::size_t>(n - 2)];
  GatherWire wire(io, io.chunks(partition, r), received.size());
  auto tag = [](const Chunk& c) { return collective_tag(CollectiveOp::kAllGather, c.part); };

  if (inline_sized(io, partition)) {
    // Every message goes out before the compute on what this rank holds: this rank's own part
    // first, then each received part (forwarded at once, unless it is the last to arrive), so
    // the next rank's compute never waits for this one's. (Computing on the own rows first made
    // a decode step's one-token gathers a chain: the rank without the token waited for the other
    // rank's q/k/v or MLP-up on it before it could start its own.)
    std::vector<std::byte> staging;
    for (std::size_t i = 0; i < wire.own().size(); ++i)
      wire.send_own(transport, next, tag(wire.own()[i]), i, staging);
    call(r);
    for (int s = 0; s < n - 1; ++s) {
      const std::size_t first = step_start[static_cast<std::size_t>(s)];
      const std::size_t last = step_start[static_cast<std::size_t>(s) + 1];
      for (std::size_t k = first; k < last; ++k)
        wire.recv(transport, prev, tag(received[k]), k, received[k], staging);
      if (s < n - 2) {
        for (std::size_t k = first; k < last; ++k)
          wire.forward(transport, next, tag(received[k]), k, received[k], staging);
      }
      call(mod(r - s - 1, n));
    }
    return;
  }

  Progress progress;
  auto send_fn = [&] {
    std::vector<std::byte> staging;
    for (std::size_t i = 0; i < wire.own().size(); ++i)
      wire.send_own(transport, next, tag(wire.own()[i]), i, staging);
    for (std::size_t k = 0; k < forwarded; ++k) {
      progress.wait(Progress::kReceived, static_cast<std::int64_t>(k) + 1);
      wire.forward(transport, next, tag(received[k]), k, received[k], staging);
    }
  };
  auto recv_fn = [&] {
    std::vector<std::byte> staging;
    for (int s = 0; s < n - 1; ++s) {
      for (std::size_t k = step_start[static_cast<std::size_t>(s)];
           k < step_start[static_cast<std::size_t>(s) + 1]; ++k) {
        wire.recv(transport, prev, tag(received[k]), k, received[k], staging);
        progress.add(Progress::kReceived);
      }
      progress.add(Progress::kParts);
    }
  };
  auto caller_fn = [&] {
    call(r);
    for (int s = 0; s < n - 1; ++s) {
      const int part = mod(r - s - 1, n);
      const std::size_t first = step_start[static_cast<std::size_t>(s)];
      const std::size_t last = step_start[static_cast<std::size_t>(s) + 1];
      if (first == last) {  // an empty part
        progress.wait(Progress::kParts, s + 1);
        call(part);
        continue;
      }
      // Each chunk's rows as soon as they are in `data`.
      for (std::size_t k = first; k < last; ++k) {
        progress.wait(Progress::kReceived, static_cast<std::int64_t>(k) + 1);
        if (on_part) on_part(part, received[k].begin, received[k].end);
      }
    }
  };
  run_ring(progress, send_fn, recv_fn, caller_fn);
}

Tensor reduce_scatter(net::Transport& transport, Tensor data, const RowPartition& partition,
                      const ProduceTile& produce, const RingOptions& options) {
  check_args(transport, data, partition);
  HUDDLE_CHECK(data.dtype() == DType::F32, "reduce_scatter needs f32, got {}",
               dtype_name(data.dtype()));
  const int n = transport.size();
  const int r = transport.rank();
  Tensor result = data.rows(partition.offset(r), partition.end(r));
  // Production order: part r-1-k for k = 0..n-1 (this rank's own part last).
  auto produce_part = [&](int k) {
    const int part = mod(r - 1 - k, n);
    if (produce) produce(part, data.rows(partition.offset(part), partition.end(part)));
  };
  if (n == 1) {
    produce_part(0);
    return result;
  }
  const RowIo io(data, options.chunk_bytes, options.wire);
  const int next = mod(r + 1, n);
  const int prev = mod(r - 1, n);
  std::vector<Chunk> received;  // accumulated chunks, in the order they complete
  std::vector<std::size_t> step_start;
  for (int s = 0; s < n - 1; ++s) {
    step_start.push_back(received.size());
    for (const Chunk& c : io.chunks(partition, mod(r - s - 2, n))) received.push_back(c);
  }
  const std::size_t forwarded = step_start[static_cast<std::size_t>(n - 2)];

  if (inline_sized(io, partition)) {
    // Step s: send part r-s-1 (this rank's tile at s = 0, the accumulated sum after), receive
    // part r-s-2's sum so far and add this rank's tile of it.
    std::vector<std::byte> staging;
    produce_part(0);
    for (int s = 0; s < n - 1; ++s) {
      const int out = mod(r - s - 1, n);
      for (const Chunk& c : io.chunks(partition, out)) {
        io.send(transport, next, collective_tag(CollectiveOp::kReduceScatter, out), c, staging);
      }
      produce_part(s + 1);
      const int in = mod(r - s - 2, n);
      for (const Chunk& c : io.chunks(partition, in)) {
        io.recv_packed(transport, prev, collective_tag(CollectiveOp::kReduceScatter, in), c,
                       staging);
        io.add_packed(c, staging);
      }
    }
    return result;
  }

  Progress progress;
  auto send_fn = [&] {
    std::vector<std::byte> staging;
    progress.wait(Progress::kProduced, 1);
    const int first = mod(r - 1, n);
    for (const Chunk& c : io.chunks(partition, first)) {
      io.send(transport, next, collective_tag(CollectiveOp::kReduceScatter, first), c, staging);
    }
    for (std::size_t k = 0; k < forwarded; ++k) {
      progress.wait(Progress::kReceived, static_cast<std::int64_t>(k) + 1);
      const Chunk& c = received[k];
      io.send(transport, next, collective_tag(CollectiveOp::kReduceScatter, c.part), c, staging);
    }
  };
  auto recv_fn = [&] {
    std::vector<std::byte> staging;
    for (int s = 0; s < n - 1; ++s) {
      const int part = mod(r - s - 2, n);
      for (const Chunk& c : io.chunks(partition, part)) {
        io.recv_packed(transport, prev, collective_tag(CollectiveOp::kReduceScatter, part), c,
                       staging);
        progress.wait(Progress::kProduced, s + 2);  // our own tile of `part` is ready
        io.add_packed(c, staging);
        progress.add(Progress::kReceived);
      }
    }
  };
  auto caller_fn = [&] {
    if (!produce) {
      progress.set(Progress::kProduced, n);
      return;
    }
    for (int k = 0; k < n; ++k) {
      produce_part(k);
      progress.add(Progress::kProduced);
    }
  };
  run_ring(progress, send_fn, recv_fn, caller_fn);
  return result;
}

void all_reduce(net::Transport& transport, Tensor data, const RingOptions& options) {
  HUDDLE_CHECK(data.dtype() == DType::F32, "all_reduce needs f32, got {}",
               dtype_name(data.dtype()));
  HUDDLE_CHECK(data.contiguous(), "all_reduce needs a contiguous tensor");
  const std::int64_t numel = data.numel();
  // Exact sums split elements evenly; a lossy format encodes rows of up to kWireAllReduceRow
  // values (one int8 scale per row), split evenly by rows.
  const std::int64_t cols =
      options.wire == WireFormat::F32 ? 1 : std::gcd(numel, kWireAllReduceRow);
  Tensor flat = Tensor::borrow(DType::F32, {numel / cols, cols}, data.raw());
  const RowPartition partition = RowPartition::even(numel / cols, transport.size());
  reduce_scatter(transport, flat, partition, {}, options);
  all_gather(transport, flat, partition, {}, options);
}

namespace {

// Column blocks of `col_counts` columns each ([rows, cols(p)]) packed one after another, row-major,
// into a flat buffer that the row collectives move: block p is "rows" [offset(p), end(p)) of the
// [sum rows * cols(p), 1] tensor `packed`.
class PackedColumns {
 public:
  PackedColumns(std::int64_t rows, const std::vector<std::int64_t>& col_counts)
      : rows_(rows),
        col_counts_(col_counts),
        col_offset_(col_counts.size() + 1, 0),
        partition_(block_sizes(rows, col_counts)),
        packed_(Tensor::empty(DType::F32, {partition_.rows(), 1})) {
    for (std::size_t p = 0; p < col_counts.size(); ++p)
      col_offset_[p + 1] = col_offset_[p] + col_counts[p];
  }

  std::int64_t total_cols() const { return col_offset_.back(); }
  const RowPartition& partition() const { return partition_; }
  Tensor& packed() { return packed_; }
  // Copies `from` ([rows, cols(p)], any row stride) into block p.
  void put(int p, const Tensor& from) { copy_rows(from, block(p)); }
  // Copies every block into its columns of `out` ([rows, total_cols()]).
  void unpack(Tensor& out) {
    for (std::size_t p = 0; p < col_counts_.size(); ++p) {
      copy_rows(block(static_cast<int>(p)), out.cols(col_offset_[p], col_offset_[p + 1]));
    }
  }

 private:
  static std::vector<std::int64_t> block_sizes(std::int64_t rows,
                                               const std::vector<std::int64_t>& col_counts) {
    std::vector<std::int64_t> sizes;
    for (std::int64_t cols : col_counts) sizes.push_back(rows * cols);
    return sizes;
  }
  Tensor block(int p) {
    return Tensor::borrow(DType::F32, {rows_, col_counts_[static_cast<std::size_t>(p)]},
                          packed_.f32() + partition_.offset(p));
  }
  void copy_rows(const Tensor& from, Tensor to) const {
    const std::size_t row_bytes = static_cast<std::size_t>(from.dim(1)) * sizeof(float);
    for (std::int64_t i = 0; i < rows_; ++i) {
      std::memcpy(to.f32() + i * to.row_stride(), from.f32() + i * from.row_stride(), row_bytes);
    }
  }

  std::int64_t rows_;
  std::vector<std::int64_t> col_counts_, col_offset_;
  RowPartition partition_;
  Tensor packed_;
};

void check_column_blocks(const char* what, net::Transport& transport, const Tensor& local,
                         const std::vector<std::int64_t>& col_counts) {
  HUDDLE_CHECK(static_cast<int>(col_counts.size()) == transport.size(),
               "{}: {} column parts for {} ranks", what, col_counts.size(), transport.size());
  HUDDLE_CHECK(local.rank() == 2 && local.dtype() == DType::F32 &&
                   local.dim(1) == col_counts[static_cast<std::size_t>(transport.rank())],
               "{}: block {} for {} columns", what, shape_str(local.shape()),
               col_counts[static_cast<std::size_t>(transport.rank())]);
}

}  // namespace

void all_gather_cols(net::Transport& transport, const Tensor& local,
                     const std::vector<std::int64_t>& col_counts, Tensor out,
                     const RingOptions& options) {
  check_column_blocks("all_gather_cols", transport, local, col_counts);
  PackedColumns blocks(local.dim(0), col_counts);
  HUDDLE_CHECK(out.rank() == 2 && out.contiguous() && out.dtype() == DType::F32 &&
                   out.dim(0) == local.dim(0) && out.dim(1) == blocks.total_cols(),
               "all_gather_cols: {} into {}", shape_str(local.shape()), shape_str(out.shape()));
  blocks.put(transport.rank(), local);
  all_gather(transport, blocks.packed(), blocks.partition(), {}, options);
  blocks.unpack(out);
}

void gather_cols(net::Transport& transport, const Tensor& local,
                 const std::vector<std::int64_t>& col_counts, Tensor out, int root) {
  check_column_blocks("gather_cols", transport, local, col_counts);
  HUDDLE_CHECK(root >= 0 && root < transport.size(), "root {} of {}", root, transport.size());
  PackedColumns blocks(local.dim(0), col_counts);
  const bool is_root = transport.rank() == root;
  HUDDLE_CHECK(!is_root || (out.rank() == 2 && out.dtype() == DType::F32 &&
                            out.dim(0) == local.dim(0) && out.dim(1) == blocks.total_cols()),
               "gather_cols: {} into {}", shape_str(local.shape()), shape_str(out.shape()));
  blocks.put(transport.rank(), local);
  gather_rows(transport, blocks.packed(), blocks.partition(), root);
  if (is_root) blocks.unpack(out);
}

}  // namespace huddle::collectives
