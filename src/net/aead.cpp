#include "net/aead.h"

#include "core/error.h"

#include <openssl/evp.h>

#include <climits>

namespace huddle::net {
namespace {

// Every call below fails only on a programming error (a bad length, a null context) or when
// OpenSSL cannot allocate: neither is a peer's doing.
void check(int ok, const char* what) {
  if (ok != 1) throw Error(std::string("ChaCha20-Poly1305: ") + what + " failed in OpenSSL");
}

int as_int(std::size_t n) {
  HUDDLE_CHECK(n <= static_cast<std::size_t>(INT_MAX), "AEAD input of {} bytes", n);
  return static_cast<int>(n);
}

}  // namespace

static_assert(wire::kSessionKeyBytes == 32 && wire::kAeadNonceBytes == 12 &&
                  wire::kAeadTagBytes == 16,
              "ChaCha20-Poly1305 (RFC 8439)");

Aead::Aead(const AeadKey& key) {
  encrypt_ = EVP_CIPHER_CTX_new();
  decrypt_ = EVP_CIPHER_CTX_new();
  if (encrypt_ == nullptr || decrypt_ == nullptr) {
    EVP_CIPHER_CTX_free(encrypt_);
    EVP_CIPHER_CTX_free(decrypt_);
    throw Error("ChaCha20-Poly1305: OpenSSL could not allocate a cipher context");
  }
  // The key is set once; each message sets only its nonce.
  check(EVP_EncryptInit_ex(encrypt_, EVP_chacha20_poly1305(), nullptr, key.data(), nullptr),
        "setting the key");
  check(EVP_DecryptInit_ex(decrypt_, EVP_chacha20_poly1305(), nullptr, key.data(), nullptr),
        "setting the key");
}

Aead::~Aead() {
  EVP_CIPHER_CTX_free(encrypt_);  // wipes the key schedule
  EVP_CIPHER_CTX_free(decrypt_);
}

void Aead::seal(const AeadNonce& nonce, const unsigned char* ad, std::size_t ad_size,
                const unsigned char* in, std::size_t size, unsigned char* out, unsigned char* tag) {
  int written = 0;
  check(EVP_EncryptInit_ex(encrypt_, nullptr, nullptr, nullptr, nonce.data()), "setting the nonce");
  check(EVP_EncryptUpdate(encrypt_, nullptr, &written, ad, as_int(ad_size)), "the associated data");
  if (size > 0) check(EVP_EncryptUpdate(encrypt_, out, &written, in, as_int(size)), "encrypting");
  check(EVP_EncryptFinal_ex(encrypt_, out + size, &written), "finishing");
  check(EVP_CIPHER_CTX_ctrl(encrypt_, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(wire::kAeadTagBytes),
                            tag),
        "reading the tag");
}

bool Aead::open(const AeadNonce& nonce, const unsigned char* ad, std::size_t ad_size,
                unsigned char* data, std::size_t size, const unsigned char* tag) {
  int written = 0;
  check(EVP_DecryptInit_ex(decrypt_, nullptr, nullptr, nullptr, nonce.data()), "setting the nonce");
  check(EVP_DecryptUpdate(decrypt_, nullptr, &written, ad, as_int(ad_size)), "the associated data");
  if (size > 0)
    check(EVP_DecryptUpdate(decrypt_, data, &written, data, as_int(size)), "decrypting");
  // OpenSSL takes the expected tag as a mutable pointer but only reads it.
  check(EVP_CIPHER_CTX_ctrl(decrypt_, EVP_CTRL_AEAD_SET_TAG, static_cast<int>(wire::kAeadTagBytes),
                            const_cast<unsigned char*>(tag)),
        "setting the tag");
  return EVP_DecryptFinal_ex(decrypt_, data + size, &written) == 1;
}

}  // namespace huddle::net
