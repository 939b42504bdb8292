// ClientConnection: whether the HTTP client of the request being served has gone away, so that
// generation nobody will read stops between decode steps (a non-streamed request writes nothing
// until it ends, so no failed write would tell).
//
// cpp-httplib 0.11 (Debian's) gives a handler neither the socket nor a way to ask (upstream's
// later Request::is_connection_closed()). It does give the connection's addresses
// (remote_addr/remote_port, local_addr/local_port), and those four identify one established TCP
// connection: its socket's inode is looked up in the kernel's table (/proc/net/tcp or tcp6), and
// the descriptor whose link names that inode is found under /proc/self/fd. Only links are read:
// no system call touches other connections' descriptors, which their threads may be closing.
// The socket is asked as upstream asks: readable with nothing to read (end of stream)
// or an error means the client closed or reset the connection; bytes waiting to be read (a
// pipelined request) mean it is still there. A client that only half-closes (shutdown(SHUT_WR))
// while it waits for the answer counts as gone, as with upstream.
//
// Valid on the connection's thread while its handler (or content provider) runs: cpp-httplib
// closes the socket only after that, so the descriptor found stays this connection's.
#pragma once

#include <string>

namespace httplib {
struct Request;
}

namespace huddle::serve {

class ClientConnection {
 public:
  // Finds the request's socket. When none matches (no /proc, another transport), gone() is
  // always false: the request then runs to its end as before.
  explicit ClientConnection(const httplib::Request& req);
  // The socket whose peer is remote_addr:remote_port and whose own port is local_port, or -1.
  static int find_socket(const std::string& remote_addr, int remote_port,
                         const std::string& local_addr, int local_port);

  bool found() const { return fd_ >= 0; }
  // True once the client closed or reset the connection. Two system calls at most (poll, and a
  // peek when readable): cheap enough for every decode step.
  bool gone() const;

 private:
  int fd_ = -1;
};

}  // namespace huddle::serve
