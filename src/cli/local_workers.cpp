#include "cli/local_workers.h"

#include "core/cpu_affinity.h"
#include "core/error.h"
#include "net/key.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace huddle::cli {
namespace {

// Reads one line from `fd` within `timeout_s`; empty on timeout or end of file.
std::string read_line(int fd, double timeout_s) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char c = 0;
    if (::read(fd, &c, 1) != 1) break;
    if (c == '\n') return line;
    line += c;
  }
  return {};
}

}  // namespace

LocalWorkers::LocalWorkers(int count, double peer_timeout_s, int threads, double start_timeout_s) {
  try {
    start(count, peer_timeout_s, threads, start_timeout_s);
  } catch (...) {
    stop();
    throw;
  }
}

void LocalWorkers::start(int count, double peer_timeout_s, int threads, double start_timeout_s) {
  char pattern[] = "/tmp/huddle-local-XXXXXX";
  if (::mkdtemp(pattern) == nullptr)
    throw Error(fmt::format("cannot create a temporary directory: {}", std::strerror(errno)));
  dir_ = pattern;
  key_file_ = dir_ / "cluster.key";
  net::generate_key_file(key_file_);
  const std::string timeout = fmt::format("{}", peer_timeout_s);
  // Each device on cores of its own where this process may use enough of them, as separate
  // devices would be: unpinned, the kernel moves the processes (and their channels' helper
  // threads) onto one core while the other idles, since each wakes the other at every
  // collective (galaxy, gpt2, 2 processes on 2 cores: 177-184 ms pinned against 215-265
  // unpinned, docs/benchmarks.md). Device d (0: this process) takes the d-th `threads` of them.
  const std::vector<std::vector<int>> cores =
      device_cores(allowed_cpus(), count + 1, std::max(threads, 1));
  const bool pin = !cores.empty();
  for (int i = 0; i < count; ++i) {
    int out[2];
    if (::pipe(out) != 0) throw Error(fmt::format("pipe: {}", std::strerror(errno)));
    std::vector<std::string> args = {
        "/proc/self/exe",   "worker",      "--listen", "127.0.0.1:0", "--key-file",
        key_file_.string(), "--timeout-s", timeout,    "--threads",   std::to_string(threads)};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) {
      // A primary that dies without running its destructors (killed, or SIGPIPE on its output)
      // takes its workers with it instead of leaving them listening for ever. (The signal
      // follows the forking thread: LocalWorkers is made on the main thread.)
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(0);  // the primary died before prctl
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      const int devnull = ::open("/dev/null", O_RDONLY);
      ::dup2(devnull, 0);
      if (pin) pin_this_thread(cores[static_cast<std::size_t>(i) + 1]);
      ::execv("/proc/self/exe", argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    pids_.push_back(pid);
    // "huddle worker listening on 127.0.0.1:PORT (key ...)"
    const std::string line = read_line(out[0], start_timeout_s);
    ::close(out[0]);
    constexpr std::string_view marker = "listening on ";
    const auto at = line.find(marker);
    if (at == std::string::npos) {
      throw Error(fmt::format("local worker {} (pid {}) did not start: '{}'", i + 1, pid, line));
    }
    const auto begin = at + marker.size();
    addresses_.push_back(line.substr(begin, line.find(' ', begin) - begin));
  }
  if (pin) pin_this_process(cores[0]);
}

LocalWorkers::~LocalWorkers() {
  stop();
}

void LocalWorkers::stop() {
  for (pid_t pid : pids_) ::kill(pid, SIGTERM);
  for (pid_t pid : pids_) {
    int status = 0;
    for (int tries = 0; tries < 50; ++tries) {  // up to 5 s, then force
      if (::waitpid(pid, &status, WNOHANG) == pid) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (tries == 49) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
      }
    }
  }
  pids_.clear();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

}  // namespace huddle::cli
