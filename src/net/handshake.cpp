#include "net/handshake.h"

#include "core/error.h"

#include <sodium.h>

#include <string_view>
#include <vector>

namespace huddle::net {

namespace {

using Bytes = std::vector<unsigned char>;

constexpr char kKdfContext[crypto_kdf_CONTEXTBYTES + 1] = "huddleHS";
constexpr std::uint64_t kKdfAuthId = 1;
constexpr std::uint64_t kKdfSessionId = 2;
constexpr std::string_view kInitiatorLabel = "huddle v1 auth initiator";
constexpr std::string_view kResponderLabel = "huddle v1 auth responder";
constexpr std::string_view kI2RLabel = "huddle v1 key initiator->responder";
constexpr std::string_view kR2ILabel = "huddle v1 key responder->initiator";

static_assert(wire::kKxPublicBytes == crypto_kx_PUBLICKEYBYTES);
static_assert(wire::kMacBytes == crypto_auth_hmacsha256_BYTES);
static_assert(wire::kSessionKeyBytes == crypto_kx_SESSIONKEYBYTES);
static_assert(crypto_kdf_KEYBYTES == PresharedKey::kBytes);

// Holds secret bytes and wipes them on destruction.
template <std::size_t N>
struct Secret {
  std::array<unsigned char, N> bytes{};
  ~Secret() { sodium_memzero(bytes.data(), bytes.size()); }
  unsigned char* data() { return bytes.data(); }
  const unsigned char* data() const { return bytes.data(); }
};

std::string hex_prefix(std::span<const std::byte> bytes) {
  std::string out;
  for (std::byte b : bytes) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{:02x}", static_cast<unsigned>(b));
  }
  return out;
}

Bytes concat(std::string_view label, std::span<const unsigned char> a,
             std::span<const unsigned char> b = {}) {
  Bytes out(label.begin(), label.end());
  out.insert(out.end(), a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

class Handshake {
 public:
  Handshake(Socket& socket, const PresharedKey& key, wire::Role role, Duration timeout)
      : socket_(socket), key_(key), role_(role), wait_(Wait::total(timeout)) {}

  SessionKeys run() {
    wire::Hello mine;
    mine.role = role_;
    randombytes_buf(mine.nonce.data(), mine.nonce.size());
    crypto_kx_keypair(mine.kx_public.data(), kx_secret_.data());
    const wire::HelloBytes mine_bytes = wire::encode(mine);
    send(mine_bytes, "HELLO");

    const wire::HelloBytes theirs_bytes = read_hello();
    const wire::Hello theirs = wire::decode_hello(theirs_bytes);
    const wire::Role expected_role =
        role_ == wire::Role::kInitiator ? wire::Role::kResponder : wire::Role::kInitiator;
    if (theirs.role != expected_role) {
      fail(fmt::format("HELLO has role {}, expected {}", static_cast<int>(theirs.role),
                       static_cast<int>(expected_role)));
    }
    if (theirs.flags != 0) fail(fmt::format("HELLO has unknown flags 0x{:02x}", theirs.flags));

    const bool initiator = role_ == wire::Role::kInitiator;
    const wire::HelloBytes& hello_i = initiator ? mine_bytes : theirs_bytes;
    const wire::HelloBytes& hello_r = initiator ? theirs_bytes : mine_bytes;
    crypto_generichash_state st;
    crypto_generichash_init(&st, nullptr, 0, transcript_.size());
    crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(hello_i.data()),
                              hello_i.size());
    crypto_generichash_update(&st, reinterpret_cast<const unsigned char*>(hello_r.data()),
                              hello_r.size());
    crypto_generichash_final(&st, transcript_.data(), transcript_.size());

    // X25519 session keys (forward secrecy); kx "client" is the initiator.
    Secret<crypto_kx_SESSIONKEYBYTES> kx_rx, kx_tx;
    const int kx_rc =
        initiator ? crypto_kx_client_session_keys(kx_rx.data(), kx_tx.data(), mine.kx_public.data(),
                                                  kx_secret_.data(), theirs.kx_public.data())
                  : crypto_kx_server_session_keys(kx_rx.data(), kx_tx.data(), mine.kx_public.data(),
                                                  kx_secret_.data(), theirs.kx_public.data());
    if (kx_rc != 0) fail("HELLO carries an invalid key-exchange public key");

    Secret<crypto_auth_hmacsha256_KEYBYTES> auth_key;
    Secret<crypto_generichash_KEYBYTES> session_base;
    crypto_kdf_derive_from_key(auth_key.data(), crypto_auth_hmacsha256_KEYBYTES, kKdfAuthId,
                               kKdfContext, key_.bytes().data());
    crypto_kdf_derive_from_key(session_base.data(), crypto_generichash_KEYBYTES, kKdfSessionId,
                               kKdfContext, key_.bytes().data());

    if (initiator) {
      send_auth(wire::AuthStatus::kOk, mac(auth_key, kInitiatorLabel));
      const wire::Auth auth = read_auth();
      if (auth.status != wire::AuthStatus::kOk) {
        fail(fmt::format("peer refused us: {}", wire::auth_status_text(auth.status)));
      }
      verify(auth_key, kResponderLabel, auth.mac);
    } else {
      const wire::Auth auth = read_auth();
      if (auth.status != wire::AuthStatus::kOk) {
        fail(fmt::format("AUTH with status {}", static_cast<int>(auth.status)));
      }
      verify(auth_key, kInitiatorLabel, auth.mac);
      send_auth(wire::AuthStatus::kOk, mac(auth_key, kResponderLabel));
    }

    // Initiator's kx tx key equals the responder's kx rx key, and vice versa.
    const auto& i2r_kx = initiator ? kx_tx : kx_rx;
    const auto& r2i_kx = initiator ? kx_rx : kx_tx;
    SessionKeys keys;
    auto& i2r = initiator ? keys.send : keys.recv;
    auto& r2i = initiator ? keys.recv : keys.send;
    derive(session_base, kI2RLabel, i2r_kx.bytes, i2r);
    derive(session_base, kR2ILabel, r2i_kx.bytes, r2i);
    return keys;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw TransportError(fmt::format("peer {}: handshake failed: {}", socket_.peer(), what));
  }

  template <std::size_t N>
  void send(const std::array<std::byte, N>& bytes, std::string_view what) {
    socket_.send_all(bytes, wait_, what);
  }

  template <std::size_t N>
  void recv(std::span<std::byte, N> bytes, std::string_view what) {
    try {
      socket_.recv_exact(bytes, wait_, what);
    } catch (const TransportError& e) {
      throw TransportError(fmt::format("{} (during handshake)", e.what()));
    }
  }

  wire::HelloBytes read_hello() {
    wire::HelloBytes bytes{};
    recv(std::span<std::byte, wire::kHelloPrefixBytes>(bytes.data(), wire::kHelloPrefixBytes),
         "HELLO");
    const auto magic = wire::load_le<std::uint32_t>(bytes.data());
    if (magic != wire::kMagic) {
      fail(fmt::format("not a huddle peer (first bytes {})",
                       hex_prefix(std::span(bytes.data(), wire::kHelloPrefixBytes))));
    }
    const auto version = wire::load_le<std::uint16_t>(bytes.data() + 4);
    if (version != wire::kProtocolVersion) {
      fail(fmt::format("protocol version {} not supported (this is {})", version,
                       wire::kProtocolVersion));
    }
    recv(std::span<std::byte, wire::kHelloBytes - wire::kHelloPrefixBytes>(
             bytes.data() + wire::kHelloPrefixBytes, wire::kHelloBytes - wire::kHelloPrefixBytes),
         "HELLO");
    return bytes;
  }

  wire::Auth read_auth() {
    wire::AuthBytes bytes{};
    recv(std::span<std::byte, wire::kAuthBytes>(bytes), "AUTH");
    const wire::Auth auth = wire::decode_auth(bytes);
    if (auth.magic != wire::kMagic) fail("AUTH has a bad magic");
    for (std::uint8_t r : auth.reserved) {
      if (r != 0) fail("AUTH has non-zero reserved bytes");
    }
    return auth;
  }

  void send_auth(wire::AuthStatus status, const std::array<std::uint8_t, wire::kMacBytes>& m) {
    wire::Auth auth;
    auth.status = status;
    auth.mac = m;
    send(wire::encode(auth), "AUTH");
  }

  std::array<std::uint8_t, wire::kMacBytes> mac(const Secret<crypto_auth_hmacsha256_KEYBYTES>& k,
                                                std::string_view label) const {
    const Bytes msg = concat(label, transcript_);
    std::array<std::uint8_t, wire::kMacBytes> out{};
    crypto_auth_hmacsha256(out.data(), msg.data(), msg.size(), k.data());
    return out;
  }

  void verify(const Secret<crypto_auth_hmacsha256_KEYBYTES>& k, std::string_view label,
              const std::array<std::uint8_t, wire::kMacBytes>& their_mac) {
    const Bytes msg = concat(label, transcript_);
    if (crypto_auth_hmacsha256_verify(their_mac.data(), msg.data(), msg.size(), k.data()) == 0) {
      return;
    }
    if (role_ == wire::Role::kResponder) {
      // Tell the initiator why, so that its user sees "bad key" rather than "peer closed".
      try {
        send_auth(wire::AuthStatus::kBadKey, {});
      } catch (const TransportError&) {
      }
    }
    fail(std::string(wire::auth_status_text(wire::AuthStatus::kBadKey)));
  }

  void derive(const Secret<crypto_generichash_KEYBYTES>& base, std::string_view label,
              const std::array<unsigned char, crypto_kx_SESSIONKEYBYTES>& kx_key,
              std::array<unsigned char, wire::kSessionKeyBytes>& out) const {
    Bytes msg = concat(label, transcript_, kx_key);
    crypto_generichash(out.data(), out.size(), msg.data(), msg.size(), base.data(),
                       crypto_generichash_KEYBYTES);
    sodium_memzero(msg.data(), msg.size());
  }

  Socket& socket_;
  const PresharedKey& key_;
  wire::Role role_;
  Wait wait_;
  Secret<crypto_kx_SECRETKEYBYTES> kx_secret_;
  std::array<unsigned char, crypto_generichash_BYTES> transcript_{};
};

}  // namespace

SessionKeys::~SessionKeys() {
  sodium_memzero(send.data(), send.size());
  sodium_memzero(recv.data(), recv.size());
}

SessionKeys run_handshake(Socket& socket, const PresharedKey& key, wire::Role role,
                          Duration timeout) {
  ensure_sodium();
  return Handshake(socket, key, role, timeout).run();
}

}  // namespace huddle::net
