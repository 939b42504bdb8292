// The bulk cipher of a SecureChannel's frames: ChaCha20-Poly1305 (RFC 8439: 32-byte key, 12-byte
// nonce, 16-byte tag) through OpenSSL's EVP interface.
//
// Why OpenSSL here while libsodium runs the handshake: Debian 12's libsodium (1.0.18) seals at
// 1.1 GB/s per core on the development machine (XChaCha20-Poly1305; its AES-256-GCM 1.5), where
// OpenSSL's ChaCha20-Poly1305 runs 3.0 GB/s (its AVX-512 code; NEON on ARM). On two devices
// running galaxy, sealing and opening the collectives' frames took 8-18% of the prefill's wall
// time with libsodium (docs/benchmarks.md). ChaCha20 rather than AES-GCM: one cipher everywhere,
// fast without AES instructions (Raspberry Pi 4), and within 20% of AES-GCM where they exist.
#pragma once

#include "net/wire.h"

#include <array>
#include <cstddef>

struct evp_cipher_ctx_st;  // OpenSSL's EVP_CIPHER_CTX

namespace huddle::net {

using AeadKey = std::array<unsigned char, wire::kSessionKeyBytes>;
using AeadNonce = std::array<unsigned char, wire::kAeadNonceBytes>;

// One direction's cipher under one key (the key schedule lives here until destruction, which
// wipes it). Not thread-safe: a channel gives its sending and its receiving side one each.
class Aead {
 public:
  explicit Aead(const AeadKey& key);
  ~Aead();
  Aead(const Aead&) = delete;
  Aead& operator=(const Aead&) = delete;

  // Encrypts `size` bytes of `in` into `out` (which may be `in`: in place) and writes the tag
  // (wire::kAeadTagBytes) over them and the associated data `ad`.
  void seal(const AeadNonce& nonce, const unsigned char* ad, std::size_t ad_size,
            const unsigned char* in, std::size_t size, unsigned char* out, unsigned char* tag);
  // Decrypts `size` bytes at `data` in place; false when the tag does not authenticate them with
  // `ad` (the data is then garbage and must not be used).
  [[nodiscard]] bool open(const AeadNonce& nonce, const unsigned char* ad, std::size_t ad_size,
                          unsigned char* data, std::size_t size, const unsigned char* tag);

 private:
  evp_cipher_ctx_st* encrypt_ = nullptr;
  evp_cipher_ctx_st* decrypt_ = nullptr;
};

}  // namespace huddle::net
