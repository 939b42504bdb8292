// Transport: tagged messages between the numbered processes of one session.
//
// A session has size() ranks 0..size()-1; this process is rank(). Messages between one ordered
// pair of ranks arrive in the order they were sent (FIFO per link); there is no ordering across
// links. A tag (uint32) is chosen by the sender; receivers name the tag they expect and a
// mismatch is an error, which catches programs that drift out of step. Tags at or above
// kReservedTagBase belong to the net module; collectives use tags in [0xC0000000, 0xFFFF0000).
//
// Every wait has a timeout (timeout(): the longest a call waits without progress); a dead,
// silent or misbehaving peer makes the call throw TransportError naming the peer
// ("rank 2 (10.0.0.3:7000): timed out after 5s waiting for ..."). After an error on a link the
// link stays broken: later calls on it throw.
//
// Thread safety: for each peer, one thread may send while another receives, and different peers
// may be used from different threads at the same time. Calls on the same (peer, direction) from
// several threads are serialised whole messages at a time. close() may be called from any
// thread; it wakes every blocked call.
#pragma once

#include "net/message.h"
#include "net/socket.h"

#include <cstdint>
#include <span>
#include <string>

namespace huddle::net {

// Optional artificial link delay (the testbed has no kernel netem): every message is delayed by
// `latency` plus its size over `bytes_per_second` (0 = unlimited bandwidth).
struct LinkEmulation {
  Duration latency{0};
  double bytes_per_second = 0;

  bool active() const { return latency.count() > 0 || bytes_per_second > 0; }
  // The emulated transfer time of a message of `bytes` bytes.
  std::chrono::microseconds delay(std::size_t bytes) const;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "rank 2 (10.0.0.3:7000)": used in error messages.
  virtual std::string peer_name(int peer) const = 0;

  // Sends one message to `peer` (!= rank()). Returns once the bytes are handed to the link.
  virtual void send(int peer, std::uint32_t tag, std::span<const std::byte> payload) = 0;
  // Receives the next message from `peer`.
  virtual Message recv(int peer) = 0;
  // Receives the next message from `peer` into `out`; it must have `tag` and out.size() bytes.
  virtual void recv_into(int peer, std::uint32_t tag, std::span<std::byte> out) = 0;

  // Payload bytes this rank has sent on the session's mesh links so far (0 where not counted).
  virtual std::uint64_t bytes_sent() const { return 0; }

  virtual Duration timeout() const = 0;
  virtual void set_timeout(Duration timeout) = 0;

  // Ends the session: blocked and later calls throw; peers see the links close. Idempotent.
  virtual void close() = 0;
};

}  // namespace huddle::net
