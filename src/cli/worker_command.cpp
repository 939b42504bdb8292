// `huddle worker`: serve distributed sessions until SIGINT or SIGTERM; `huddle keygen`: make a
// pre-shared key file.
#include "cli/command.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "net/join.h"
#include "net/key.h"
#include "net/server.h"
#include "net/session.h"
#include "runtime/worker.h"

#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace huddle::cli {
namespace {

struct WorkerArgs {
  std::string listen;
  std::string join;  // a primary's admission port, "" = wait to be named in --workers
  std::string key_file;
  std::string model_dir;
  double timeout_s = 10;
  int threads = 0;
  int link_latency_ms = 0;
  double link_mbps = 0;
};

// Called from the server's handshake and session threads at once: one line at a time (glibc's
// time-zone state behind localtime is guarded by a lock ThreadSanitizer cannot see).
void log_line(const std::string& line) {
  static std::mutex mutex;
  std::lock_guard guard(mutex);
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &local);
  std::fprintf(stderr, "%s huddle worker: %s\n", stamp, line.c_str());
}

// Announces this worker to the primary at `a.join` (net/join.h): retried with backoff within
// --timeout-s while the primary is not up yet; a refusal (wrong key) is not retried. Throws
// TransportError naming the primary.
void join_primary(const WorkerArgs& a, const net::PresharedKey& key,
                  const net::ChannelOptions& channel, const net::Server& server) {
  const net::Endpoint primary = net::parse_endpoint(a.join);
  const net::JoinAnnouncement announcement =
      net::announcement_for(net::parse_endpoint(server.address()));
  const auto deadline =
      net::Clock::now() + net::Duration(static_cast<std::int64_t>(a.timeout_s * 1000));
  auto joined = net::dial_with_retry(
      [&](const net::ChannelOptions& o) {
        return net::request_join(primary, key, o, announcement);
      },
      channel, deadline, fmt::format("join the primary at {}", primary.str()));
  joined->close("joined");
  log_line(fmt::format("joined the primary at {}", primary.str()));
}

void run_worker(const WorkerArgs& a) {
  kernels::set_num_threads(
      a.threads > 0 ? a.threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  WorkerOptions options;
  options.key = net::load_key_file(a.key_file);
  options.channel.io_timeout = net::Duration(static_cast<std::int64_t>(a.timeout_s * 1000));
  options.channel.handshake_timeout = options.channel.io_timeout;
  if (!a.model_dir.empty()) options.model_dir = a.model_dir;
  options.log = log_line;
  options.link.latency = net::Duration(a.link_latency_ms);
  options.link.bytes_per_second = a.link_mbps * 1e6 / 8;

  // Block the stop signals in every thread; the main thread waits for them below.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  net::ServerOptions server_options;
  server_options.channel = options.channel;
  server_options.log = log_line;
  const std::string fingerprint = options.key.fingerprint();
  const net::PresharedKey key = options.key;
  net::Server server(net::Listener::bind(net::parse_endpoint(a.listen)), options.key,
                     server_options, make_worker_handler(std::move(options)));
  server.start();
  std::printf("huddle worker listening on %s (key %s)\n", server.address().c_str(),
              fingerprint.c_str());
  std::fflush(stdout);
  if (!a.join.empty()) {
    try {
      join_primary(a, key, server_options.channel, server);
    } catch (const Error&) {
      server.stop();  // nobody will open a session on a worker the primary refused
      throw;
    }
  }
  int signal = 0;
  sigwait(&stop, &signal);
  log_line(fmt::format("stopping on signal {}", signal));
  server.stop();
}

}  // namespace

void add_worker_command(CLI::App& app) {
  auto a = std::make_shared<WorkerArgs>();
  CLI::App* cmd =
      app.add_subcommand("worker", "Serve distributed inference sessions (one at a time)");
  cmd->add_option("--listen", a->listen, "Address to listen on, HOST:PORT (port 0: any free port)")
      ->required();
  cmd->add_option("--join", a->join,
                  "Join the running primary whose admission port (huddle serve --admit) is "
                  "HOST:PORT; it then opens sessions on --listen's address");
  cmd->add_option("--key-file", a->key_file, "Pre-shared key file (64 hex characters, mode 0600)")
      ->required();
  cmd->add_option("--model", a->model_dir,
                  "Local copy of the model (a directory, or an ONNX file): read the weights a "
                  "session uses from it instead of receiving them");
  cmd->add_option("--timeout-s", a->timeout_s, "Seconds a silent peer is waited for")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads, "Compute threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--link-latency-ms", a->link_latency_ms,
                  "Emulated latency of each mesh message sent (testbed)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--link-mbps", a->link_mbps, "Emulated send bandwidth, Mbit/s (0: unlimited)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([a] { run_worker(*a); });

  auto key_out = std::make_shared<std::string>();
  CLI::App* keygen =
      app.add_subcommand("keygen", "Write a new random pre-shared key file (mode 0600)");
  keygen->add_option("-o,--output", *key_out, "Key file to create (never overwritten)")->required();
  keygen->callback([key_out] {
    const net::PresharedKey key = net::generate_key_file(*key_out);
    std::printf("wrote %s (key %s)\n", key_out->c_str(), key.fingerprint().c_str());
  });
}

}  // namespace huddle::cli
