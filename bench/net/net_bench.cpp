// Loopback bandwidth and round-trip latency through the secure channel (handshake, framing,
// ChaCha20-Poly1305), next to plain TCP on the same sockets, plus a ring all-gather over a
// 3-rank TCP mesh. For the profiler's link model and to see what the encryption costs.
//
//   build-net/bench/net/net_bench [--runs 7] [--mb 256] [--message-kb 1024] [--pings 2000]
//
// Each figure is the median over --runs repetitions with the min and max beside it. Both ends
// run in this process (two threads), so on a 2-core machine sender, receiver and crypto share
// the cores: loopback figures are an upper bound on what the CPU allows, not a network figure.
#include "collectives/ring.h"
#include "core/error.h"
#include "net/session.h"
#include "net/tcp_transport.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace huddle {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Stat {
  double median, min, max;
};

Stat stat_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown cpu";
}

// A connected pair of byte pipes: either plain sockets or secure channels.
struct Pipe {
  std::function<void(std::span<const std::byte>)> send;   // a -> b
  std::function<void(std::span<std::byte>)> recv;         // b receives
  std::function<void(std::span<const std::byte>)> reply;  // b -> a
  std::function<void(std::span<std::byte>)> recv_reply;   // a receives
};

struct Plain {
  net::Socket a, b;
  Pipe pipe() {
    const net::Wait w = net::Wait::idle_for(net::Duration(10000));
    return Pipe{[this, w](auto d) { a.send_all(d, w, "bench"); },
                [this, w](auto d) { b.recv_exact(d, w, "bench"); },
                [this, w](auto d) { b.send_all(d, w, "bench"); },
                [this, w](auto d) { a.recv_exact(d, w, "bench"); }};
  }
};

struct Secure {
  std::unique_ptr<net::SecureChannel> a, b;
  Pipe pipe() {
    return Pipe{[this](auto d) { a->send(1, d); }, [this](auto d) { b->recv_into(1, d); },
                [this](auto d) { b->send(2, d); }, [this](auto d) { a->recv_into(2, d); }};
  }
};

std::pair<net::Socket, net::Socket> socket_pair() {
  net::Listener l = net::Listener::bind(net::Endpoint{"127.0.0.1", 0});
  net::Socket a = net::Socket::connect(net::Endpoint{"127.0.0.1", l.port()}, net::Duration(2000));
  std::optional<net::Socket> b = l.accept(net::Duration(2000));
  if (!b) throw TransportError("bench: accept timed out");
  return {std::move(a), std::move(*b)};
}

Secure secure_pair(const net::PresharedKey& key, net::ChannelOptions o) {
  auto [a, b] = socket_pair();
  Secure s;
  std::thread t([&, &b = b] { s.b = net::SecureChannel::respond(std::move(b), key, o); });
  s.a = net::SecureChannel::initiate(std::move(a), key, o);
  t.join();
  return s;
}

// MB/s for `total` bytes sent as messages of `message` bytes, acknowledged at the end.
double bandwidth_run(Pipe& p, std::size_t total, std::size_t message) {
  std::vector<std::byte> out(message, std::byte{7}), in(message);
  std::byte ack{};
  const std::size_t count = total / message;
  const auto t0 = Clock::now();
  std::thread receiver([&] {
    for (std::size_t i = 0; i < count; ++i) p.recv(in);
    p.reply(std::span(&ack, 1));
  });
  for (std::size_t i = 0; i < count; ++i) p.send(out);
  p.recv_reply(std::span(&ack, 1));
  receiver.join();
  return static_cast<double>(count * message) / 1e6 / seconds_since(t0);
}

// Mean round trip in microseconds of a 64-byte ping-pong.
double latency_run(Pipe& p, int pings) {
  std::vector<std::byte> msg(64), in(64);
  std::thread echo([&] {
    for (int i = 0; i < pings; ++i) {
      p.recv(in);
      p.reply(in);
    }
  });
  const auto t0 = Clock::now();
  for (int i = 0; i < pings; ++i) {
    p.send(msg);
    p.recv_reply(msg);
  }
  const double s = seconds_since(t0);
  echo.join();
  return s / pings * 1e6;
}

void measure(const char* name, Pipe p, int runs, std::size_t total, std::size_t message,
             int pings) {
  std::vector<double> bw, lat;
  for (int r = 0; r < runs; ++r) bw.push_back(bandwidth_run(p, total, message));
  for (int r = 0; r < runs; ++r) lat.push_back(latency_run(p, pings));
  const Stat b = stat_of(bw), l = stat_of(lat);
  fmt::print(
      "{:<22} bandwidth {:8.0f} MB/s (min {:.0f}, max {:.0f})   round trip {:7.1f} us (min {:.1f}, "
      "max {:.1f})\n",
      name, b.median, b.min, b.max, l.median, l.min, l.max);
}

void measure_all_gather(int runs, std::size_t total) {
  constexpr int kRanks = 3;
  const net::PresharedKey key = net::PresharedKey::random();
  std::vector<net::Listener> listeners;
  std::vector<net::Endpoint> endpoints;
  for (int r = 0; r < kRanks; ++r) {
    listeners.push_back(net::Listener::bind(net::Endpoint{"127.0.0.1", 0}));
    endpoints.push_back(net::Endpoint{"127.0.0.1", listeners.back().port()});
  }
  std::vector<std::unique_ptr<net::TcpTransport>> mesh(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      net::MeshConfig cfg;
      cfg.rank = r;
      cfg.endpoints.assign(endpoints.begin(), endpoints.end());
      cfg.timeout = net::Duration(30000);
      net::ListenerAcceptor acceptor(listeners[static_cast<std::size_t>(r)], key, cfg.channel);
      mesh[static_cast<std::size_t>(r)] = net::connect_mesh(cfg, key, &acceptor);
    });
  }
  for (auto& t : threads) t.join();
  const std::int64_t cols = 1024;
  const std::int64_t rows = static_cast<std::int64_t>(total / (cols * sizeof(float)));
  const auto partition = collectives::RowPartition::even(rows, kRanks);
  std::vector<double> secs;
  for (int run = 0; run < runs; ++run) {
    std::vector<Tensor> data;
    for (int r = 0; r < kRanks; ++r) data.push_back(Tensor::zeros(DType::F32, {rows, cols}));
    const auto t0 = Clock::now();
    std::vector<std::thread> ranks;
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        collectives::all_gather(*mesh[static_cast<std::size_t>(r)],
                                data[static_cast<std::size_t>(r)], partition);
      });
    }
    for (auto& t : ranks) t.join();
    secs.push_back(seconds_since(t0));
  }
  const Stat s = stat_of(secs);
  fmt::print(
      "{:<22} {:.0f} MB matrix in {:.1f} ms (min {:.1f}, max {:.1f}); per-rank receive {:.0f} "
      "MB/s\n",
      "all_gather 3 ranks", static_cast<double>(total) / 1e6, 1e3 * s.median, 1e3 * s.min,
      1e3 * s.max, static_cast<double>(total) * 2 / 3 / 1e6 / s.median);
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"Huddle loopback transport benchmark"};
  int runs = 7;
  std::size_t mb = 256;
  std::size_t message_kb = 1024;
  int pings = 2000;
  app.add_option("--runs", runs, "repetitions per figure")->check(CLI::PositiveNumber);
  app.add_option("--mb", mb, "megabytes per bandwidth run")->check(CLI::PositiveNumber);
  app.add_option("--message-kb", message_kb, "message size for bandwidth runs")
      ->check(CLI::PositiveNumber);
  app.add_option("--pings", pings, "round trips per latency run")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  utsname u{};
  ::uname(&u);
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  fmt::print("machine: {} {} {}, {} hardware threads\ncommand: {}\n", u.sysname, u.machine,
             cpu_model(), std::thread::hardware_concurrency(), command);
  fmt::print("{} runs; {} MB in {} KiB messages; {} pings of 64 bytes\n\n", runs, mb, message_kb,
             pings);

  try {
    const std::size_t total = mb << 20;
    const std::size_t message = message_kb << 10;
    {
      auto [a, b] = socket_pair();
      Plain plain{std::move(a), std::move(b)};
      measure("plain TCP", plain.pipe(), runs, total, message, pings);
    }
    const net::PresharedKey key = net::PresharedKey::random();
    net::ChannelOptions o;
    o.io_timeout = net::Duration(30000);
    {
      Secure s = secure_pair(key, o);
      measure("secure channel", s.pipe(), runs, total, message, pings);
    }
    {
      std::vector<double> hs;
      for (int r = 0; r < runs * 5; ++r) {
        const auto t0 = Clock::now();
        Secure s = secure_pair(key, o);
        hs.push_back(seconds_since(t0) * 1e6);
      }
      const Stat h = stat_of(hs);
      fmt::print("{:<22} {:.0f} us (min {:.0f}, max {:.0f}) incl. TCP connect\n", "handshake",
                 h.median, h.min, h.max);
    }
    measure_all_gather(runs, std::min<std::size_t>(total, 64u << 20));
  } catch (const Error& e) {
    fmt::print(stderr, "net_bench: {}\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace huddle

int main(int argc, char** argv) {
  return huddle::run(argc, argv);
}
