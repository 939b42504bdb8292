// Huddle wire protocol: pinned constants and fixed-layout records (docs/protocol.md, which lists
// what each version changed). A peer of another version is refused at HELLO, naming both.
//
// Every multi-byte integer is little-endian on the wire. Records are encoded and decoded field by
// field (no struct punning), so their layout is independent of the host; the static_asserts pin
// each record's size. Decoders never trust a field: callers check every value before use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace huddle::net::wire {

inline constexpr std::uint32_t kMagic = 0x4C445548;  // "HUDL" as little-endian bytes
// 9: frames sealed with ChaCha20-Poly1305; 10: a graph input's row pieces start with a kind byte
// (palette-coded images), and an imported CNN's output ops run early (its exchanges' numbering).
inline constexpr std::uint16_t kProtocolVersion = 10;

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kKxPublicBytes = 32;  // crypto_kx_PUBLICKEYBYTES
inline constexpr std::size_t kMacBytes = 32;       // crypto_auth_hmacsha256_BYTES
inline constexpr std::size_t kAeadTagBytes = 16;   // ChaCha20-Poly1305 (RFC 8439), net/aead.h
inline constexpr std::size_t kAeadNonceBytes = 12;
inline constexpr std::size_t kSessionKeyBytes = 32;

// Roles in the handshake: the side that opened the TCP connection is the initiator.
enum class Role : std::uint8_t { kInitiator = 1, kResponder = 2 };

// Status in the AUTH record.
#define HUDDLE_AUTH_STATUSES(X)                                            \
  X(kOk, 1, "ok")                                                          \
  X(kBadKey, 2, "bad key: the peer does not hold the same pre-shared key") \
  X(kBadVersion, 3, "protocol version not supported")

enum class AuthStatus : std::uint8_t {
#define HUDDLE_AUTH_STATUS_ENUM(name, value, text) name = value,
  HUDDLE_AUTH_STATUSES(HUDDLE_AUTH_STATUS_ENUM)
#undef HUDDLE_AUTH_STATUS_ENUM
};

constexpr std::string_view auth_status_text(AuthStatus s) {
  switch (s) {
#define HUDDLE_AUTH_STATUS_TEXT(name, value, text) \
  case AuthStatus::name:                           \
    return text;
    HUDDLE_AUTH_STATUSES(HUDDLE_AUTH_STATUS_TEXT)
#undef HUDDLE_AUTH_STATUS_TEXT
  }
  return "unknown status";
}

// Frame kinds after the handshake.
#define HUDDLE_FRAME_KINDS(X) \
  X(kData, 1, "data")         \
  X(kClose, 2, "close")

enum class FrameKind : std::uint16_t {
#define HUDDLE_FRAME_KIND_ENUM(name, value, text) name = value,
  HUDDLE_FRAME_KINDS(HUDDLE_FRAME_KIND_ENUM)
#undef HUDDLE_FRAME_KIND_ENUM
};

constexpr bool is_known_frame_kind(std::uint16_t v) {
  switch (v) {
#define HUDDLE_FRAME_KIND_CASE(name, value, text) case value:
    HUDDLE_FRAME_KINDS(HUDDLE_FRAME_KIND_CASE)
#undef HUDDLE_FRAME_KIND_CASE
    return true;
    default:
      return false;
  }
}

// Frame flags.
inline constexpr std::uint16_t kFlagMore = 1;  // more frames of the same message follow
inline constexpr std::uint16_t kKnownFlags = kFlagMore;

// Largest reason text in a Close frame.
inline constexpr std::size_t kMaxCloseReason = 1024;

// ---- little-endian helpers ----

template <typename T>
void store_le(std::byte* p, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
}

template <typename T>
T load_le(const std::byte* p) {
  T v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return v;
}

// ---- HELLO: sent by both sides first, in plaintext. ----
// The first 8 bytes (magic, version) keep this layout in every future version, so that a peer
// can always read them and refuse a version it does not speak.
struct Hello {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kProtocolVersion;
  Role role = Role::kInitiator;
  std::uint8_t flags = 0;  // must be 0 (versions 1 and 2)
  std::array<std::uint8_t, kNonceBytes> nonce{};
  std::array<std::uint8_t, kKxPublicBytes> kx_public{};
};
inline constexpr std::size_t kHelloPrefixBytes = 8;
inline constexpr std::size_t kHelloBytes = 8 + kNonceBytes + kKxPublicBytes;
static_assert(sizeof(Hello) == kHelloBytes, "Hello must have no padding");
static_assert(kHelloBytes == 72);

using HelloBytes = std::array<std::byte, kHelloBytes>;

inline HelloBytes encode(const Hello& h) {
  HelloBytes out{};
  store_le(out.data(), h.magic);
  store_le(out.data() + 4, h.version);
  out[6] = static_cast<std::byte>(h.role);
  out[7] = static_cast<std::byte>(h.flags);
  std::memcpy(out.data() + 8, h.nonce.data(), kNonceBytes);
  std::memcpy(out.data() + 8 + kNonceBytes, h.kx_public.data(), kKxPublicBytes);
  return out;
}

inline Hello decode_hello(const HelloBytes& in) {
  Hello h;
  h.magic = load_le<std::uint32_t>(in.data());
  h.version = load_le<std::uint16_t>(in.data() + 4);
  h.role = static_cast<Role>(in[6]);
  h.flags = static_cast<std::uint8_t>(in[7]);
  std::memcpy(h.nonce.data(), in.data() + 8, kNonceBytes);
  std::memcpy(h.kx_public.data(), in.data() + 8 + kNonceBytes, kKxPublicBytes);
  return h;
}

// ---- AUTH: after both HELLOs; proves knowledge of the PSK (HMAC over the transcript). ----
struct Auth {
  std::uint32_t magic = kMagic;
  AuthStatus status = AuthStatus::kOk;
  std::array<std::uint8_t, 3> reserved{};  // must be 0
  std::array<std::uint8_t, kMacBytes> mac{};
};
inline constexpr std::size_t kAuthBytes = 8 + kMacBytes;
static_assert(sizeof(Auth) == kAuthBytes, "Auth must have no padding");
static_assert(kAuthBytes == 40);

using AuthBytes = std::array<std::byte, kAuthBytes>;

inline AuthBytes encode(const Auth& a) {
  AuthBytes out{};
  store_le(out.data(), a.magic);
  out[4] = static_cast<std::byte>(a.status);
  std::memcpy(out.data() + 8, a.mac.data(), kMacBytes);
  return out;
}

inline Auth decode_auth(const AuthBytes& in) {
  Auth a;
  a.magic = load_le<std::uint32_t>(in.data());
  a.status = static_cast<AuthStatus>(in[4]);
  for (std::size_t i = 0; i < 3; ++i) a.reserved[i] = static_cast<std::uint8_t>(in[5 + i]);
  std::memcpy(a.mac.data(), in.data() + 8, kMacBytes);
  return a;
}

// ---- Frame header: precedes every encrypted frame; authenticated as associated data. ----
// On the wire: header | ciphertext (length bytes) | AEAD tag (16 bytes).
struct FrameHeader {
  std::uint32_t length = 0;  // plaintext payload bytes in this frame
  std::uint16_t kind = 0;    // FrameKind
  std::uint16_t flags = 0;   // kFlagMore or 0
  std::uint32_t tag = 0;     // the message tag chosen by the sender's application
};
inline constexpr std::size_t kFrameHeaderBytes = 12;
static_assert(sizeof(FrameHeader) == kFrameHeaderBytes, "FrameHeader must have no padding");

using FrameHeaderBytes = std::array<std::byte, kFrameHeaderBytes>;

inline FrameHeaderBytes encode(const FrameHeader& f) {
  FrameHeaderBytes out{};
  store_le(out.data(), f.length);
  store_le(out.data() + 4, f.kind);
  store_le(out.data() + 6, f.flags);
  store_le(out.data() + 8, f.tag);
  return out;
}

inline FrameHeader decode_frame_header(std::span<const std::byte, kFrameHeaderBytes> in) {
  FrameHeader f;
  f.length = load_le<std::uint32_t>(in.data());
  f.kind = load_le<std::uint16_t>(in.data() + 4);
  f.flags = load_le<std::uint16_t>(in.data() + 6);
  f.tag = load_le<std::uint32_t>(in.data() + 8);
  return f;
}

// Per-direction AEAD nonce: the frame counter (little-endian) followed by zeros. Each direction
// has its own key, so a (key, nonce) pair is never reused; a replayed, dropped or reordered
// frame is decrypted with the wrong counter and fails authentication.
inline std::array<unsigned char, kAeadNonceBytes> frame_nonce(std::uint64_t counter) {
  std::array<unsigned char, kAeadNonceBytes> n{};
  for (std::size_t i = 0; i < 8; ++i)
    n[i] = static_cast<unsigned char>((counter >> (8 * i)) & 0xFF);
  return n;
}

}  // namespace huddle::net::wire

namespace huddle::net::wire {

// ---- OPEN: the first message on a new channel says what it is for (net/session.h). ----
// Sent as a Data message with tag kTagOpen; answered with an empty kTagOpenAck message, or a
// Close frame giving the reason for refusal ("busy ...").
inline constexpr std::uint32_t kTagOpen = 0xFFFF0001u;
inline constexpr std::uint32_t kTagOpenAck = 0xFFFF0002u;
inline constexpr std::uint32_t kMaxWorld = 4096;

// kJoin (net/join.h) is accepted only on a primary's admission port: a worker's read_open()
// refuses it as an unknown kind.
enum class OpenKind : std::uint32_t { kSession = 1, kMeshLink = 2, kJoin = 3 };

struct Open {
  std::uint32_t kind = 0;      // OpenKind
  std::uint32_t rank = 0;      // the opener's rank (mesh link), or 0
  std::uint32_t world = 0;     // ranks in the session (mesh link), or 0
  std::uint32_t reserved = 0;  // must be 0
  std::uint64_t session_id = 0;
};
inline constexpr std::size_t kOpenBytes = 24;
static_assert(sizeof(Open) == kOpenBytes, "Open must have no padding");

using OpenBytes = std::array<std::byte, kOpenBytes>;

inline OpenBytes encode(const Open& o) {
  OpenBytes out{};
  store_le(out.data(), o.kind);
  store_le(out.data() + 4, o.rank);
  store_le(out.data() + 8, o.world);
  store_le(out.data() + 12, o.reserved);
  store_le(out.data() + 16, o.session_id);
  return out;
}

inline Open decode_open(std::span<const std::byte, kOpenBytes> in) {
  Open o;
  o.kind = load_le<std::uint32_t>(in.data());
  o.rank = load_le<std::uint32_t>(in.data() + 4);
  o.world = load_le<std::uint32_t>(in.data() + 8);
  o.reserved = load_le<std::uint32_t>(in.data() + 12);
  o.session_id = load_le<std::uint64_t>(in.data() + 16);
  return o;
}

// ---- JOIN: after an OPEN of kind kJoin, a worker announces where it takes sessions. ----
// One Data message with tag kTagJoin: this 8-byte record, then `host_bytes` bytes of host name
// or address literal (0 bytes: the primary dials the address the join came from). Answered with
// kTagOpenAck (admitted: the primary will open sessions on it) or a Close frame with the reason.
inline constexpr std::uint32_t kTagJoin = 0xFFFF0003u;
inline constexpr std::size_t kMaxJoinHostBytes = 255;

struct Join {
  std::uint16_t port = 0;        // the worker's session port, 1..65535
  std::uint16_t host_bytes = 0;  // <= kMaxJoinHostBytes
  std::uint32_t reserved = 0;    // must be 0
};
inline constexpr std::size_t kJoinBytes = 8;
static_assert(sizeof(Join) == kJoinBytes, "Join must have no padding");

using JoinBytes = std::array<std::byte, kJoinBytes>;

inline JoinBytes encode(const Join& j) {
  JoinBytes out{};
  store_le(out.data(), j.port);
  store_le(out.data() + 2, j.host_bytes);
  store_le(out.data() + 4, j.reserved);
  return out;
}

inline Join decode_join(std::span<const std::byte, kJoinBytes> in) {
  Join j;
  j.port = load_le<std::uint16_t>(in.data());
  j.host_bytes = load_le<std::uint16_t>(in.data() + 2);
  j.reserved = load_le<std::uint32_t>(in.data() + 4);
  return j;
}

}  // namespace huddle::net::wire
