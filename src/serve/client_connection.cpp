#include "serve/client_connection.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace huddle::serve {
namespace {

// An address in network byte order: 4 bytes (IPv4) or 16 (IPv6, IPv4-mapped included).
using RawAddress = std::vector<unsigned char>;

// `text` as inet_pton reads it; empty when it is neither family's numeric form.
RawAddress parse_numeric(const std::string& text) {
  unsigned char bytes[sizeof(in6_addr)];
  if (::inet_pton(AF_INET, text.c_str(), bytes) == 1) return RawAddress(bytes, bytes + 4);
  if (::inet_pton(AF_INET6, text.c_str(), bytes) == 1) return RawAddress(bytes, bytes + 16);
  return {};
}

// One "ADDR:PORT" field of /proc/net/tcp{,6}: ADDR is the address's 32-bit words, each printed
// as %08X of the word as it lies in memory, so reading each back and storing it in host order
// gives the address's bytes.
bool parse_proc_endpoint(std::string_view field, RawAddress& addr, int& port) {
  const size_t colon = field.find(':');
  if (colon == std::string_view::npos || colon % 8 != 0 || colon == 0 || colon > 32) return false;
  addr.clear();
  for (size_t word = 0; word < colon; word += 8) {
    std::uint32_t value = 0;
    const std::string_view hex = field.substr(word, 8);
    if (std::from_chars(hex.data(), hex.data() + 8, value, 16).ptr != hex.data() + 8) return false;
    unsigned char bytes[4];
    std::memcpy(bytes, &value, 4);
    addr.insert(addr.end(), bytes, bytes + 4);
  }
  const std::string_view port_hex = field.substr(colon + 1);
  return std::from_chars(port_hex.data(), port_hex.data() + port_hex.size(), port, 16).ptr ==
         port_hex.data() + port_hex.size();
}

// The inode of the TCP socket listed in `table` (/proc/net/tcp or tcp6) whose local end is
// (local, local_port) and remote end (remote, remote_port); 0 when none is. An empty `local`
// matches any local address.
unsigned long find_socket_inode(const char* table, const RawAddress& remote, int remote_port,
                                const RawAddress& local, int local_port) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
    std::istringstream fields(line);
    std::string slot, local_field, remote_field, skip;
    unsigned long inode = 0;
    fields >> slot >> local_field >> remote_field;
    for (int i = 0; i < 6; ++i) fields >> skip;
    fields >> inode;
    RawAddress local_addr, remote_addr;
    int local_p = -1, remote_p = -1;
    if (!fields || !parse_proc_endpoint(local_field, local_addr, local_p) ||
        !parse_proc_endpoint(remote_field, remote_addr, remote_p)) {
      continue;
    }
    if (local_p == local_port && remote_p == remote_port && remote_addr == remote &&
        (local.empty() || local_addr == local) && inode != 0) {
      return inode;
    }
  }
  return 0;
}

// This process's descriptor for socket `inode`, or -1. Reads only the links under /proc/self/fd:
// no system call touches another thread's descriptors, which may be closing meanwhile.
int find_descriptor(unsigned long inode) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  const std::string wanted = "socket:[" + std::to_string(inode) + "]";
  int found = -1;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    char target[64];
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
    if (n > 0 && std::string_view(target, static_cast<size_t>(n)) == wanted) {
      found = std::atoi(entry->d_name);
      break;
    }
  }
  ::closedir(dir);
  return found;
}

}  // namespace

ClientConnection::ClientConnection(const httplib::Request& req)
    : fd_(find_socket(req.remote_addr, req.remote_port, req.local_addr, req.local_port)) {}

int ClientConnection::find_socket(const std::string& remote_addr, int remote_port,
                                  const std::string& local_addr, int local_port) {
  if (remote_port <= 0 || local_port <= 0) return -1;
  const RawAddress remote = parse_numeric(remote_addr);
  const RawAddress local = local_addr.empty() ? RawAddress{} : parse_numeric(local_addr);
  if (remote.empty() || (!local_addr.empty() && local.empty())) return -1;
  const char* table = remote.size() == 4 ? "/proc/net/tcp" : "/proc/net/tcp6";
  const unsigned long inode = find_socket_inode(table, remote, remote_port, local, local_port);
  return inode == 0 ? -1 : find_descriptor(inode);
}

bool ClientConnection::gone() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;  // nothing happened (or poll failed: assume there)
  if ((p.revents & (POLLERR | POLLNVAL)) != 0) return true;
  char byte;
  const ssize_t n = ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;  // a request sent ahead: the client is there
  if (n == 0) return true;  // end of stream: it closed the connection
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace huddle::serve
