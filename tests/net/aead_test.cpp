// The frames' cipher: ChaCha20-Poly1305 through OpenSSL (net/aead.h), against RFC 8439's test
// vector and against every change an attacker could make.
#include "net/aead.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace huddle::net {
namespace {

std::vector<unsigned char> from_hex(const std::string& hex) {
  std::vector<unsigned char> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<unsigned char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// RFC 8439, section 2.8.2: the AEAD test vector (the sunscreen text).
TEST(Aead, MatchesRfc8439) {
  AeadKey key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<unsigned char>(0x80 + i);
  const std::vector<unsigned char> n = from_hex("070000004041424344454647");
  AeadNonce nonce{};
  std::copy(n.begin(), n.end(), nonce.begin());
  const std::vector<unsigned char> ad = from_hex("50515253c0c1c2c3c4c5c6c7");
  const std::string text =
      "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
      "future, sunscreen would be it.";
  std::vector<unsigned char> data(text.begin(), text.end());
  std::array<unsigned char, wire::kAeadTagBytes> tag{};
  Aead aead(key);
  aead.seal(nonce, ad.data(), ad.size(), data.data(), data.size(), data.data(), tag.data());
  EXPECT_EQ(std::vector<unsigned char>(data.begin(), data.begin() + 16),
            from_hex("d31a8d34648e60db7b86afbc53ef7ec2"));
  EXPECT_EQ(std::vector<unsigned char>(tag.begin(), tag.end()),
            from_hex("1ae10b594f09e26a7e902ecbd0600691"));
  ASSERT_TRUE(aead.open(nonce, ad.data(), ad.size(), data.data(), data.size(), tag.data()));
  EXPECT_EQ(std::string(data.begin(), data.end()), text);
}

// A flipped ciphertext bit, another nonce (a replayed or reordered frame), other associated data
// (a changed header) or another tag: none opens. An empty payload seals and opens.
TEST(Aead, EveryChangeFailsToOpen) {
  AeadKey key{};
  key[0] = 7;
  Aead sender(key), receiver(key);
  const AeadNonce nonce = wire::frame_nonce(41), other = wire::frame_nonce(42);
  const std::array<unsigned char, 12> head{1, 2, 3};
  const std::vector<unsigned char> plain(1000, 0x5a);
  std::vector<unsigned char> sealed(plain.size());
  std::array<unsigned char, wire::kAeadTagBytes> tag{};
  sender.seal(nonce, head.data(), head.size(), plain.data(), plain.size(), sealed.data(),
              tag.data());
  EXPECT_NE(sealed, plain);
  const auto opens = [&](std::vector<unsigned char> data, const AeadNonce& n,
                         std::array<unsigned char, 12> h, std::array<unsigned char, 16> t) {
    return receiver.open(n, h.data(), h.size(), data.data(), data.size(), t.data());
  };
  EXPECT_TRUE(opens(sealed, nonce, head, tag));
  std::vector<unsigned char> flipped = sealed;
  flipped[500] ^= 1;
  EXPECT_FALSE(opens(flipped, nonce, head, tag));
  EXPECT_FALSE(opens(sealed, other, head, tag));
  std::array<unsigned char, 12> changed = head;
  changed[0] = 9;
  EXPECT_FALSE(opens(sealed, nonce, changed, tag));
  std::array<unsigned char, 16> bad_tag = tag;
  bad_tag[15] ^= 0x80;
  EXPECT_FALSE(opens(sealed, nonce, head, bad_tag));
  // The receiver still opens good frames after refusing bad ones.
  EXPECT_TRUE(opens(sealed, nonce, head, tag));

  std::array<unsigned char, wire::kAeadTagBytes> empty_tag{};
  sender.seal(other, head.data(), head.size(), nullptr, 0, nullptr, empty_tag.data());
  EXPECT_TRUE(receiver.open(other, head.data(), head.size(), nullptr, 0, empty_tag.data()));
  EXPECT_FALSE(receiver.open(nonce, head.data(), head.size(), nullptr, 0, empty_tag.data()));
}

}  // namespace
}  // namespace huddle::net
