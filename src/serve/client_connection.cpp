#include "serve/client_connection.h"

#include <httplib.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

namespace huddle::serve {
namespace {

// An address as cpp-httplib spells it (getnameinfo, numeric host), and its port.
bool numeric_address(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char name[NI_MAXHOST];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, name, sizeof name, nullptr, 0,
                    NI_NUMERICHOST) != 0) {
    return false;
  }
  host = name;
  if (addr.ss_family == AF_INET)
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  else if (addr.ss_family == AF_INET6)
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  else
    return false;
  return true;
}

// Whether socket `fd` is the TCP connection between (local_addr, local_port) here and
// (remote_addr, remote_port).
bool is_client_socket(int fd, const std::string& remote_addr, int remote_port,
                      const std::string& local_addr, int local_port) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  std::string host;
  int port = -1;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      !numeric_address(addr, len, host, port) || port != local_port ||
      (!local_addr.empty() && host != local_addr)) {
    return false;
  }
  len = sizeof addr;
  return ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
         numeric_address(addr, len, host, port) && port == remote_port && host == remote_addr;
}

}  // namespace

ClientConnection::ClientConnection(const httplib::Request& req)
    : fd_(find_socket(req.remote_addr, req.remote_port, req.local_addr, req.local_port)) {}

int ClientConnection::find_socket(const std::string& remote_addr, int remote_port,
                                  const std::string& local_addr, int local_port) {
  if (remote_port <= 0 || local_port <= 0) return -1;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name.empty() || name[0] < '0' || name[0] > '9') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == ::dirfd(dir)) continue;
    if (is_client_socket(fd, remote_addr, remote_port, local_addr, local_port)) {
      found = fd;
      break;
    }
  }
  ::closedir(dir);
  return found;
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
