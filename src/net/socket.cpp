#include "net/socket.h"

#include "core/error.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

namespace huddle::net {

namespace {

#ifdef MSG_NOSIGNAL
constexpr int kSendFlags = MSG_NOSIGNAL;
#else
constexpr int kSendFlags = 0;
#endif

std::string errno_str(int err) {
  return std::strerror(err);
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw TransportError(fmt::format("fcntl(O_NONBLOCK) failed: {}", errno_str(errno)));
  }
}

void set_socket_options(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
#ifdef SO_NOSIGPIPE
  ::setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof(one));
#endif
}

std::string sockaddr_str(const sockaddr* addr) {
  char host[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return fmt::format("{}:{}", host, ntohs(in->sin_port));
  }
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return fmt::format("[{}]:{}", host, ntohs(in6->sin6_port));
  }
  return "unknown address";
}

// Milliseconds to wait in poll(): the idle timeout capped by the absolute deadline (>= 0).
int poll_ms(const Wait& wait, bool* hit_deadline) {
  auto ms = wait.idle.count();
  *hit_deadline = false;
  if (wait.deadline != Clock::time_point::max()) {
    // Rounded up: poll() must not wake before the deadline has passed.
    const auto left = std::chrono::ceil<Duration>(wait.deadline - Clock::now()).count();
    if (left <= ms) {
      ms = std::max<std::int64_t>(left, 0);
      *hit_deadline = true;
    }
  }
  return static_cast<int>(std::min<std::int64_t>(ms, 1 << 30));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { ::freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const Endpoint& endpoint, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string port = std::to_string(endpoint.port);
  const int rc = ::getaddrinfo(endpoint.host.empty() ? nullptr : endpoint.host.c_str(),
                               port.c_str(), &hints, &result);
  if (rc != 0) {
    throw TransportError(fmt::format("cannot resolve {}: {}", endpoint.str(), ::gai_strerror(rc)));
  }
  return AddrInfoPtr(result);
}

// Waits for a socket to become readable/writable. Returns false on timeout.
bool wait_fd(int fd, short events, const Wait& wait, bool* hit_deadline, const std::string& peer) {
  pollfd pfd{fd, events, 0};
  for (;;) {
    const int rc = ::poll(&pfd, 1, poll_ms(wait, hit_deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR)
      throw TransportError(fmt::format("peer {}: poll failed: {}", peer, errno_str(errno)));
  }
}

}  // namespace

std::string format_duration(Duration d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return fmt::format("{}s", ms / 1000);
  if (ms < 1000) return fmt::format("{}ms", ms);
  return fmt::format("{:g}s", static_cast<double>(ms) / 1000.0);
}

std::string Endpoint::str() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

Endpoint parse_endpoint(std::string_view text) {
  Endpoint ep;
  std::string_view port_text;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      throw InputError(fmt::format("address '{}': expected [IPV6]:PORT", text));
    }
    ep.host = std::string(text.substr(1, close - 1));
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      throw InputError(fmt::format("address '{}': expected HOST:PORT", text));
    }
    ep.host = std::string(text.substr(0, colon));
    if (ep.host.find(':') != std::string::npos) {
      throw InputError(
          fmt::format("address '{}': IPv6 addresses need brackets: [ADDR]:PORT", text));
    }
    port_text = text.substr(colon + 1);
  }
  if (ep.host.empty()) throw InputError(fmt::format("address '{}': empty host", text));
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port > 65535) {
    throw InputError(
        fmt::format("address '{}': port '{}' is not a number in 0..65535", text, port_text));
  }
  ep.port = static_cast<std::uint16_t>(port);
  return ep;
}

// ---- Socket ----

Socket::Socket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}

Socket::Socket(Socket&& other) noexcept : fd_(other.fd_), peer_(std::move(other.peer_)) {
  other.fd_ = -1;
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    peer_ = std::move(other.peer_);
    other.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() {
  close();
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Socket Socket::connect(const Endpoint& endpoint, Duration timeout) {
  const Wait wait = Wait::total(timeout);
  AddrInfoPtr addrs = resolve(endpoint, false);
  std::string last_error = "no address";
  for (addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = errno_str(errno);
      continue;
    }
    Socket sock(fd, endpoint.str());
    set_nonblocking(fd);
    set_socket_options(fd);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = errno_str(errno);
        continue;
      }
      bool hit_deadline = false;
      if (!wait_fd(fd, POLLOUT, wait, &hit_deadline, sock.peer_)) {
        throw TransportError(fmt::format("peer {}: timed out after {} connecting", endpoint.str(),
                                         format_duration(timeout)));
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last_error = errno_str(err);
        continue;
      }
    }
    return sock;
  }
  throw TransportError(fmt::format("peer {}: cannot connect: {}", endpoint.str(), last_error));
}

void Socket::send_all(std::span<const std::byte> data, const Wait& wait, std::string_view what) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    if (fd_ < 0) throw TransportError(fmt::format("peer {}: connection closed", peer_));
    const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, kSendFlags);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      bool hit_deadline = false;
      if (!wait_fd(fd_, POLLOUT, wait, &hit_deadline, peer_)) {
        throw TransportError(
            fmt::format("peer {}: timed out after {} sending {} (peer not reading)", peer_,
                        format_duration(wait.idle), what));
      }
      continue;
    }
    throw TransportError(fmt::format("peer {}: connection lost sending {}: {}", peer_, what,
                                     n < 0 ? errno_str(errno) : "send returned 0"));
  }
}

void Socket::recv_exact(std::span<std::byte> data, const Wait& wait, std::string_view what) {
  std::size_t got = 0;
  while (got < data.size()) {
    if (fd_ < 0) throw TransportError(fmt::format("peer {}: connection closed", peer_));
    const ssize_t n = ::recv(fd_, data.data() + got, data.size() - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      if (got == 0)
        throw TransportError(
            fmt::format("peer {}: peer closed the connection while we waited for {}", peer_, what));
      throw TransportError(
          fmt::format("peer {}: peer closed the connection after {} of {} bytes of {}", peer_, got,
                      data.size(), what));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      bool hit_deadline = false;
      if (!wait_fd(fd_, POLLIN, wait, &hit_deadline, peer_)) {
        throw TransportError(fmt::format("peer {}: timed out after {} waiting for {}", peer_,
                                         format_duration(wait.idle), what));
      }
      continue;
    }
    throw TransportError(
        fmt::format("peer {}: connection lost receiving {}: {}", peer_, what, errno_str(errno)));
  }
}

// ---- ShutdownHandle ----

ShutdownHandle::ShutdownHandle(const Socket& socket) {
  if (!socket.valid()) return;
  fd_ = ::fcntl(socket.fd(), F_DUPFD_CLOEXEC, 0);
  if (fd_ < 0) {
    throw TransportError(
        fmt::format("peer {}: cannot duplicate the socket: {}", socket.peer(), errno_str(errno)));
  }
}

ShutdownHandle::ShutdownHandle(ShutdownHandle&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

ShutdownHandle& ShutdownHandle::operator=(ShutdownHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

ShutdownHandle::~ShutdownHandle() {
  if (fd_ >= 0) ::close(fd_);
}

void ShutdownHandle::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

// ---- Listener ----

Listener::Listener(Listener&& other) noexcept
    : fd_(other.fd_), host_(std::move(other.host_)), port_(other.port_) {
  wake_pipe_[0] = other.wake_pipe_[0];
  wake_pipe_[1] = other.wake_pipe_[1];
  other.fd_ = -1;
  other.wake_pipe_[0] = other.wake_pipe_[1] = -1;
}

Listener& Listener::operator=(Listener&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    host_ = std::move(other.host_);
    port_ = other.port_;
    wake_pipe_[0] = other.wake_pipe_[0];
    wake_pipe_[1] = other.wake_pipe_[1];
    other.fd_ = -1;
    other.wake_pipe_[0] = other.wake_pipe_[1] = -1;
  }
  return *this;
}

Listener::~Listener() {
  close();
}

void Listener::close() {
  for (int* fd : {&fd_, &wake_pipe_[0], &wake_pipe_[1]}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

Listener Listener::bind(const Endpoint& endpoint, int backlog) {
  AddrInfoPtr addrs = resolve(endpoint, true);
  std::string last_error = "no address";
  for (addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    Listener l;
    l.fd_ = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (l.fd_ < 0) {
      last_error = errno_str(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(l.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(l.fd_, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(l.fd_, backlog) != 0) {
      last_error = errno_str(errno);
      continue;
    }
    set_nonblocking(l.fd_);
    if (::pipe2(l.wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw TransportError(
          fmt::format("listen {}: pipe failed: {}", endpoint.str(), errno_str(errno)));
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(l.fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    l.port_ = bound.ss_family == AF_INET6
                  ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                  : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    l.host_ = endpoint.host;
    return l;
  }
  throw TransportError(fmt::format("cannot listen on {}: {}", endpoint.str(), last_error));
}

std::string Listener::address() const {
  return Endpoint{host_, port_}.str();
}

std::optional<Socket> Listener::accept(Duration timeout) {
  const Wait wait = Wait::total(timeout);
  for (;;) {
    if (interrupted()) return std::nullopt;
    pollfd pfds[2] = {{fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    bool hit_deadline = false;
    const int rc = ::poll(pfds, 2, poll_ms(wait, &hit_deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0)
      throw TransportError(fmt::format("listen {}: poll failed: {}", address(), errno_str(errno)));
    if (rc == 0) return std::nullopt;
    if (pfds[1].revents != 0) return std::nullopt;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = ::accept(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    if (fd < 0) {
      // The client may have gone between poll and accept; other errors are the listener's.
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        continue;
      if (errno == EMFILE || errno == ENFILE) {
        throw TransportError(fmt::format("listen {}: out of file descriptors", address()));
      }
      throw TransportError(
          fmt::format("listen {}: accept failed: {}", address(), errno_str(errno)));
    }
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    Socket sock(fd, sockaddr_str(reinterpret_cast<sockaddr*>(&addr)));
    set_nonblocking(fd);
    set_socket_options(fd);
    return sock;
  }
}

void Listener::interrupt() {
  if (wake_pipe_[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_pipe_[1], &byte, 1);
  }
}

bool Listener::interrupted() const {
  if (wake_pipe_[0] < 0) return true;
  pollfd pfd{wake_pipe_[0], POLLIN, 0};
  return ::poll(&pfd, 1, 0) > 0;
}

}  // namespace huddle::net
