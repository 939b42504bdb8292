// The pre-shared key (PSK) that every device of one cluster holds; it authenticates peers.
//
// Key file format: exactly 64 hexadecimal characters (32 random bytes), optionally followed by
// one newline ("\n" or "\r\n"). Anything else is refused with a LoadError naming the file.
// The file should be readable by its owner only (mode 0600): load_key_file() refuses a file
// that group or others can read or write, since anyone who reads it can join the cluster.
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace huddle::net {

class PresharedKey {
 public:
  static constexpr std::size_t kBytes = 32;

  // Parses 64 hex characters; throws LoadError naming `source` when malformed.
  static PresharedKey from_hex(std::string_view hex, std::string_view source);
  // 32 bytes from the OS random generator.
  static PresharedKey random();

  PresharedKey(const PresharedKey& other) = default;
  PresharedKey& operator=(const PresharedKey& other) = default;
  ~PresharedKey();  // wipes the bytes

  const std::array<unsigned char, kBytes>& bytes() const { return bytes_; }
  std::string to_hex() const;
  // First 8 hex chars of a hash of the key: safe to log, lets users see that two devices agree.
  std::string fingerprint() const;

 private:
  PresharedKey() = default;
  std::array<unsigned char, kBytes> bytes_{};
};

// Reads a key file (format above). Throws LoadError naming the file when it is missing,
// unreadable, malformed, or readable/writable by group or others.
PresharedKey load_key_file(const std::filesystem::path& path);

// Writes a fresh random key to `path` with mode 0600 and returns it. Refuses (LoadError) to
// overwrite an existing file.
PresharedKey generate_key_file(const std::filesystem::path& path);

// Initialises libsodium once (thread-safe); throws TransportError if it cannot.
void ensure_sodium();

}  // namespace huddle::net
