// A real distributed session while a stream of hostile connections hits a worker: random bytes,
// half-open connections, a HELLO sent a byte at a time or cut short, and, from a peer holding
// the key, a frame header announcing 4 GiB, a malformed OPEN and a link for a session that does
// not exist. Every session must give the single-device greedy ids, and the worker must serve the
// next session after.
//
// The primary (a Cluster) and two workers (net::Server with the worker handler, what
// `huddle worker` runs) live in this process and talk over loopback TCP.
#include "core/error.h"
#include "model/model.h"
#include "net/handshake.h"
#include "net/server.h"
#include "net/session.h"
#include "net/wire.h"
#include "planner/strategies.h"
#include "runtime/cluster.h"
#include "runtime/generate.h"
#include "runtime/worker.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <sodium.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <deque>
#include <fstream>
#include <memory>
#include <thread>

namespace huddle {
namespace {

using net::Duration;

net::ChannelOptions worker_channel() {
  net::ChannelOptions o;
  o.handshake_timeout = Duration(2000);
  o.io_timeout = Duration(10000);
  return o;
}

class InProcessWorker {
 public:
  explicit InProcessWorker(const net::PresharedKey& key) {
    WorkerOptions w;
    w.key = key;
    w.channel = worker_channel();
    net::ServerOptions s;
    s.channel = w.channel;
    s.log = [](const std::string&) {};  // the refusals are expected; stats count them
    server_ = std::make_unique<net::Server>(net::Listener::bind({"127.0.0.1", 0}), key, s,
                                            make_worker_handler(std::move(w)));
    server_->start();
  }
  net::Server& server() { return *server_; }
  net::Endpoint endpoint() const { return {"127.0.0.1", server_->port()}; }
  std::string address() const { return endpoint().str(); }

 private:
  std::unique_ptr<net::Server> server_;
};

// Attacks `target` from three threads until stop(): counts the connections it made.
class HostileStream {
 public:
  HostileStream(net::Endpoint target, const net::PresharedKey& key)
      : target_(std::move(target)), key_(key) {
    threads_.emplace_back([this] { bursts(); });
    threads_.emplace_back([this] { half_open(); });
    threads_.emplace_back([this] { slow_hello(); });
  }
  ~HostileStream() { stop(); }
  void stop() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int connections() const { return connections_.load(); }

 private:
  // Connects, or returns an invalid socket when the worker cannot be reached right now.
  net::Socket connect() {
    try {
      net::Socket s = net::Socket::connect(target_, Duration(2000));
      ++connections_;
      return s;
    } catch (const TransportError&) {
      return {};
    }
  }

  static void send(net::Socket& s, std::span<const std::byte> bytes) {
    try {
      s.send_all(bytes, net::Wait::idle_for(Duration(1000)), "hostile bytes");
    } catch (const TransportError&) {
    }
  }

  // One hostile connection after another, each of a different kind.
  void bursts() {
    for (int i = 0; !stop_.load(); ++i) {
      switch (i % 5) {
        case 0: {  // random bytes (never the magic: the first is 'G')
          net::Socket s = connect();
          std::vector<std::byte> junk(1500);
          randombytes_buf(junk.data(), junk.size());
          junk[0] = std::byte{'G'};
          if (s.valid()) send(s, junk);
          break;
        }
        case 1: {  // a HELLO cut short after its magic and version
          net::Socket s = connect();
          net::wire::Hello h;
          const auto hello = net::wire::encode(h);
          std::vector<std::byte> bytes(hello.begin(), hello.begin() + 8);
          for (int k = 0; k < 4; ++k) bytes.push_back(std::byte{0xff});
          if (s.valid()) send(s, bytes);
          break;
        }
        case 2: {  // with the key: a frame header announcing 4 GiB
          net::Socket s = connect();
          if (!s.valid()) break;
          try {
            net::run_handshake(s, key_, net::wire::Role::kInitiator, Duration(2000));
            net::wire::FrameHeader header;
            header.length = 0xFFFFFFF0u;
            header.kind = static_cast<std::uint16_t>(net::wire::FrameKind::kData);
            header.tag = net::wire::kTagOpen;
            send(s, net::wire::encode(header));
          } catch (const TransportError&) {
          }
          break;
        }
        case 3: {  // with the key: an OPEN with a non-zero reserved field
          try {
            ++connections_;
            auto ch = net::SecureChannel::connect(target_, key_, worker_channel());
            net::wire::Open open;
            open.kind = static_cast<std::uint32_t>(net::wire::OpenKind::kSession);
            open.reserved = 7;
            ch->send(net::wire::kTagOpen, net::wire::encode(open));
            ch->recv();  // the refusal
          } catch (const TransportError&) {
          }
          break;
        }
        case 4: {  // with the key: a mesh link for a session that does not exist
          try {
            ++connections_;
            net::open_link(target_, key_, worker_channel(), 99, 1, 3);
          } catch (const TransportError&) {
          }
          break;
        }
      }
      std::this_thread::sleep_for(Duration(5));
    }
  }

  // Holds up to 4 connections that never send a byte, replacing the oldest now and then.
  void half_open() {
    std::deque<net::Socket> held;
    while (!stop_.load()) {
      net::Socket s = connect();
      if (s.valid()) held.push_back(std::move(s));
      if (held.size() > 4) held.pop_front();
      std::this_thread::sleep_for(Duration(100));
    }
  }

  // A genuine HELLO, one byte every 20 ms (the worker's handshake deadline runs out first).
  void slow_hello() {
    while (!stop_.load()) {
      net::Socket s = connect();
      if (!s.valid()) {
        std::this_thread::sleep_for(Duration(50));
        continue;
      }
      net::wire::Hello h;
      const auto hello = net::wire::encode(h);
      for (std::size_t k = 0; k < hello.size() && !stop_.load(); ++k) {
        send(s, std::span(hello).subspan(k, 1));
        std::this_thread::sleep_for(Duration(20));
      }
    }
  }

  net::Endpoint target_;
  net::PresharedKey key_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::vector<std::thread> threads_;
};

struct Reference {
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> greedy;
};

Reference reference(const std::string& name) {
  std::ifstream in(testing::fixture("references/" + name + ".generate.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  return {j["prompt"].get<std::vector<std::int32_t>>(),
          j["greedy"].get<std::vector<std::int32_t>>()};
}

// One session on the workers: the greedy ids of the reference prompt.
std::vector<std::int32_t> run_session(const Model& model, const Plan& plan,
                                      const net::PresharedKey& key,
                                      const std::vector<std::string>& workers,
                                      const Reference& ref) {
  ClusterOptions options;
  options.workers = workers;
  options.key = key;
  options.timeout = Duration(10000);
  Cluster cluster(model, plan, options);
  GenerationOptions g;
  g.n_predict = static_cast<int>(ref.greedy.size());
  const std::vector<std::int32_t> ids = generate(cluster.runner(), ref.prompt, g).generated;
  cluster.finish();
  return ids;
}

TEST(HostileSession, SessionsFinishWithTheReferenceIdsWhileAWorkerIsAttacked) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const Reference ref = reference("gpt2-tiny");
  const Plan plan = make_plan("galaxy", model.config(), {"primary", "w1", "w2"}, {2, 1, 1});
  const net::PresharedKey key = net::PresharedKey::random();
  InProcessWorker w1(key), w2(key);
  const std::vector<std::string> workers = {w1.address(), w2.address()};
  {
    HostileStream attack(w1.endpoint(), key);
    // Let the attack get going (bounded), so that the sessions run in the middle of it.
    for (int i = 0; i < 200 && attack.connections() < 20; ++i)
      std::this_thread::sleep_for(Duration(10));
    for (int session = 0; session < 3; ++session) {
      EXPECT_EQ(run_session(model, plan, key, workers, ref), ref.greedy) << "session " << session;
    }
    EXPECT_GE(attack.connections(), 20);
    attack.stop();
  }
  EXPECT_GT(w1.server().stats().connections_refused, 0u);
  // The attacked worker serves the next session.
  EXPECT_EQ(run_session(model, plan, key, workers, ref), ref.greedy);
  EXPECT_EQ(w1.server().stats().sessions_failed, 0u);
}

}  // namespace
}  // namespace huddle
