// TcpTransport: a Transport over one persistent SecureChannel per pair of ranks (full mesh).
//
// Build one from channels the caller already opened, or with connect_mesh(), the one mesh
// builder (tests, benchmarks, and the runtime's primary and workers, runtime/mesh.h): of each
// pair of ranks the one that accepts no links (a primary without a listener) dials the other,
// else the higher rank dials the lower. Each rank dials its links (dial_with_retry: exponential
// backoff until the deadline, since processes start at different times) while it takes the
// others from its LinkAcceptor, concurrently. A link refused for a bad key or protocol version is
// not retried; other failures are, until the deadline.
#pragma once

#include "net/session.h"
#include "net/transport.h"

#include <memory>
#include <optional>
#include <vector>

namespace huddle::net {

class TcpTransport final : public Transport {
 public:
  // links[r] is the channel to rank r; links[rank] must be null. Channels are renamed
  // "rank r (address)" and get `timeout` as their idle timeout.
  TcpTransport(int rank, std::vector<std::unique_ptr<SecureChannel>> links, Duration timeout,
               LinkEmulation link = {});
  ~TcpTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(links_.size()); }
  std::string peer_name(int peer) const override;
  void send(int peer, std::uint32_t tag, std::span<const std::byte> payload) override;
  Message recv(int peer) override;
  void recv_into(int peer, std::uint32_t tag, std::span<std::byte> out) override;
  std::uint64_t bytes_sent() const override { return bytes_sent_.load(); }
  Duration timeout() const override { return Duration(timeout_ms_.load()); }
  void set_timeout(Duration timeout) override;
  void close() override;

  SecureChannel& link(int peer);

 private:
  int rank_;
  std::vector<std::unique_ptr<SecureChannel>> links_;
  std::atomic<std::int64_t> timeout_ms_;
  std::atomic<std::uint64_t> bytes_sent_{0};
  LinkEmulation emulation_;
};

struct MeshConfig {
  int rank = 0;
  // Where each rank accepts links, size() ranks; nullopt for a rank that accepts none (it dials
  // every other rank, which must all accept).
  std::vector<std::optional<Endpoint>> endpoints;
  std::uint64_t session_id = 0;
  ChannelOptions channel;
  Duration connect_timeout{10000};  // to build the whole mesh
  Duration timeout{5000};           // the transport's timeout afterwards
  LinkEmulation link;
};

// Whether rank `from` opens the link between ranks `from` and `to` (the rule above).
bool dials(const MeshConfig& config, int from, int to);

// Builds the full mesh described above; `acceptor` may be null only when no rank dials this one.
// Throws TransportError naming the rank that could not be reached or did not connect in time.
std::unique_ptr<TcpTransport> connect_mesh(const MeshConfig& config, const PresharedKey& key,
                                           LinkAcceptor* acceptor);

}  // namespace huddle::net
