// SecureChannel: one authenticated, encrypted, framed connection to one peer over a Socket.
//
// Handshake (docs/protocol.md has the byte layout):
//   1. both sides send HELLO {magic, version, role, 32-byte random nonce, X25519 public key};
//      a HELLO with another magic, version, flags or role is refused (the error names both
//      versions);
//   2. transcript hash H = BLAKE2b(initiator HELLO || responder HELLO);
//   3. the initiator sends AUTH {HMAC-SHA256(K_auth, "initiator" || H)}; the responder checks it
//      ("bad key" if wrong) and answers with its own AUTH over "responder" || H, which the
//      initiator checks. K_auth is derived from the PSK with crypto_kdf;
//   4. one session key per direction = BLAKE2b keyed by a second PSK-derived key over the
//      direction label, H and the X25519 session key (crypto_kx), so a recorded session stays
//      secret even if the PSK leaks later.
// Frames: 12-byte header {length, kind, flags, tag} (associated data) then the payload sealed
// with ChaCha20-Poly1305 (net/aead.h) under the direction's key and a counter nonce: tampering,
// replay, reordering and truncation all fail. A header's length is checked against max_frame_bytes
// before anything is allocated. Messages longer than send_frame_bytes are split into frames
// (flag "more") and reassembled by the receiver.
//
// Errors: every failure throws TransportError naming the peer (name()) and the cause; the first
// failure poisons the channel and later calls rethrow it.
// Thread safety: one thread may send while another receives; sends (and receives) from several
// threads are serialised per message. shutdown() may be called from any thread.
#pragma once

#include "net/aead.h"
#include "net/handshake.h"
#include "net/key.h"
#include "net/message.h"
#include "net/socket.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace huddle::net {

struct ChannelOptions {
  Duration handshake_timeout{5000};              // whole handshake, both HELLOs and AUTHs
  Duration io_timeout{5000};                     // idle limit for every frame sent or received
  std::uint32_t max_frame_bytes = 16u << 20;     // receiver refuses longer frames
  std::uint32_t send_frame_bytes = 1u << 20;     // sender splits messages into frames of this
  std::uint64_t max_message_bytes = 4ull << 30;  // recv() refuses longer messages
};

class SecureChannel {
 public:
  // Connects and runs the handshake as initiator.
  static std::unique_ptr<SecureChannel> connect(const Endpoint& endpoint, const PresharedKey& key,
                                                const ChannelOptions& options);
  // Runs the handshake on an already connected socket.
  static std::unique_ptr<SecureChannel> initiate(Socket socket, const PresharedKey& key,
                                                 const ChannelOptions& options);
  static std::unique_ptr<SecureChannel> respond(Socket socket, const PresharedKey& key,
                                                const ChannelOptions& options);

  SecureChannel(const SecureChannel&) = delete;
  SecureChannel& operator=(const SecureChannel&) = delete;
  ~SecureChannel();

  // Who the peer is, for error messages: the address, or what set_name() gave ("rank 2 (...)").
  std::string name() const;
  void set_name(std::string name);
  Duration io_timeout() const { return Duration(io_timeout_ms_.load()); }
  void set_io_timeout(Duration timeout) { io_timeout_ms_.store(timeout.count()); }
  // Every later send and receive also fails once `deadline` passes; Clock::time_point::max() (the
  // default) lifts it. A worker bounds a connection's handshake and OPEN with one deadline.
  void set_deadline(Clock::time_point deadline) {
    deadline_.store(deadline.time_since_epoch().count());
  }

  // Sends one message (split into frames as needed).
  void send(std::uint32_t tag, std::span<const std::byte> payload);
  // Tells the peer why we are closing (best effort, never throws) and shuts the socket down.
  void close(std::string_view reason);

  // Receives the next message. A Close frame from the peer throws "peer closed: <reason>".
  Message recv();
  // Receives the next message, which must carry `tag` and exactly out.size() bytes, into out
  // (decrypted in place: no copy). Anything else throws and poisons the channel.
  void recv_into(std::uint32_t tag, std::span<std::byte> out);

  // Wakes threads blocked in send/recv (they throw); later calls throw. Any thread.
  void shutdown();
  bool broken() const { return broken_.load(); }

 private:
  struct FrameIn {
    std::uint32_t length = 0;
    std::uint16_t kind = 0;
    std::uint16_t flags = 0;
    std::uint32_t tag = 0;
  };

  SecureChannel(Socket socket, const ChannelOptions& options, const SessionKeys& keys);

  [[noreturn]] void fail(const std::string& what);
  void check_usable() const;
  Wait io_wait() const {
    return Wait{io_timeout(), Clock::time_point(Clock::duration(deadline_.load()))};
  }
  // Reads one frame header and checks every field (length against the limit, kind, flags).
  FrameIn read_header(std::string_view expecting);
  // Reads the frame's ciphertext and tag into out (out.size() == frame.length) and decrypts it.
  void read_body(const FrameIn& frame, std::span<std::byte> out);
  // Reads a Close frame's reason and throws "peer closed".
  [[noreturn]] void read_close(const FrameIn& frame);
  void send_frame(std::uint16_t kind, std::uint16_t flags, std::uint32_t tag,
                  std::span<const std::byte> payload);

  Socket socket_;
  ChannelOptions options_;
  std::atomic<std::int64_t> io_timeout_ms_;
  std::atomic<Clock::rep> deadline_{Clock::time_point::max().time_since_epoch().count()};
  mutable std::mutex name_mutex_;
  std::string name_;
  std::atomic<bool> broken_{false};
  mutable std::mutex error_mutex_;
  std::string error_;

  std::mutex send_mutex_;
  Aead sealer_;
  std::uint64_t send_counter_ = 0;
  std::vector<unsigned char> send_buffer_;

  std::mutex recv_mutex_;
  Aead opener_;
  std::uint64_t recv_counter_ = 0;
};

}  // namespace huddle::net
