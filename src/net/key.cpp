#include "net/key.h"

#include "core/error.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace huddle::net {

void ensure_sodium() {
  // sodium_init() is itself thread-safe and idempotent; the static makes later calls free.
  static const int status = sodium_init();
  if (status < 0) throw TransportError("libsodium failed to initialise");
}

PresharedKey::~PresharedKey() {
  sodium_memzero(bytes_.data(), bytes_.size());
}

PresharedKey PresharedKey::from_hex(std::string_view hex, std::string_view source) {
  ensure_sodium();
  if (hex.ends_with("\r\n")) {
    hex.remove_suffix(2);
  } else if (hex.ends_with('\n')) {
    hex.remove_suffix(1);
  }
  if (hex.size() != 2 * kBytes) {
    throw LoadError(
        fmt::format("key {}: expected {} hex characters (32 bytes), found {} characters", source,
                    2 * kBytes, hex.size()));
  }
  PresharedKey key;
  std::size_t decoded = 0;
  const char* end = nullptr;
  if (sodium_hex2bin(key.bytes_.data(), key.bytes_.size(), hex.data(), hex.size(), nullptr,
                     &decoded, &end) != 0 ||
      decoded != kBytes || end != hex.data() + hex.size()) {
    throw LoadError(fmt::format("key {}: not a hex string (only 0-9, a-f, A-F allowed)", source));
  }
  return key;
}

PresharedKey PresharedKey::random() {
  ensure_sodium();
  PresharedKey key;
  randombytes_buf(key.bytes_.data(), key.bytes_.size());
  return key;
}

std::string PresharedKey::to_hex() const {
  std::string hex(2 * kBytes + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), bytes_.data(), bytes_.size());
  hex.pop_back();
  return hex;
}

std::string PresharedKey::fingerprint() const {
  static constexpr unsigned char kLabel[] = "huddle key fingerprint";
  std::array<unsigned char, 16> hash{};
  crypto_generichash(hash.data(), hash.size(), kLabel, sizeof(kLabel) - 1, bytes_.data(),
                     bytes_.size());
  std::string hex(2 * hash.size() + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), hash.data(), hash.size());
  return hex.substr(0, 8);
}

PresharedKey load_key_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw LoadError(fmt::format("key file {}: {}", path.string(), std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode))
    throw LoadError(fmt::format("key file {}: not a regular file", path.string()));
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw LoadError(fmt::format(
        "key file {}: readable or writable by group or others (mode {:o}); run chmod 600 on it",
        path.string(), st.st_mode & 0777));
  }
  // A valid file has at most 66 bytes; read a little more so that longer files are reported.
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LoadError(fmt::format("key file {}: cannot open for reading", path.string()));
  std::string text(256, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  std::string source = fmt::format("file {}", path.string());
  PresharedKey key = PresharedKey::from_hex(text, source);
  sodium_memzero(text.data(), text.size());
  return key;
}

PresharedKey generate_key_file(const std::filesystem::path& path) {
  PresharedKey key = PresharedKey::random();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw LoadError(
        fmt::format("key file {}: cannot create: {}", path.string(), std::strerror(errno)));
  }
  std::string text = key.to_hex() + "\n";
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      sodium_memzero(text.data(), text.size());
      ::close(fd);
      throw LoadError(
          fmt::format("key file {}: write failed: {}", path.string(), std::strerror(err)));
    }
    written += static_cast<std::size_t>(n);
  }
  sodium_memzero(text.data(), text.size());
  if (::close(fd) != 0) {
    throw LoadError(
        fmt::format("key file {}: close failed: {}", path.string(), std::strerror(errno)));
  }
  return key;
}

}  // namespace huddle::net
