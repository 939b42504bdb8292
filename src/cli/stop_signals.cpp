#include "cli/stop_signals.h"

#include "core/error.h"

#include <cerrno>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

namespace huddle::cli {
namespace {

int g_write_fd = -1;  // the pipe the handler writes to

void on_stop_signal(int signal) {
  const auto byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const auto n = ::write(g_write_fd, &byte, 1);
}

}  // namespace

StopSignals::StopSignals() {
  if (::pipe2(fds_, O_CLOEXEC) != 0) throw Error("cannot create a pipe for the stop signals");
  g_write_fd = fds_[1];
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

StopSignals::~StopSignals() {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::close(fds_[0]);
  ::close(fds_[1]);
}

int StopSignals::wait() {
  unsigned char byte = 0;
  while (::read(fds_[0], &byte, 1) < 0 && errno == EINTR) {
  }
  return byte;
}

void StopSignals::wake() {
  const unsigned char byte = 0;
  [[maybe_unused]] const auto n = ::write(fds_[1], &byte, 1);
}

}  // namespace huddle::cli
