// A session of n ranks in one process, over the in-process or the TCP transport, for the
// transport and collectives tests; run_ranks() runs one function per rank in its own thread.
#pragma once

#include "core/error.h"
#include "net/inproc_transport.h"
#include "net/tcp_transport.h"

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace huddle::net::testing {

enum class TransportKind { kInproc, kTcp };

inline std::string kind_name(TransportKind k) {
  return k == TransportKind::kInproc ? "Inproc" : "Tcp";
}

// Runs fn(rank) for every rank in its own thread; rethrows the first exception after all end.
inline void run_ranks(int n, const std::function<void(int)>& fn) {
  std::mutex m;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        std::lock_guard lock(m);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

class TestCluster {
 public:
  TestCluster(TransportKind kind, int n, Duration timeout = Duration(5000),
              LinkEmulation link = {}) {
    if (kind == TransportKind::kInproc) {
      InprocOptions o;
      o.timeout = timeout;
      o.link = link;
      inproc_ = std::make_unique<InprocCluster>(n, o);
      return;
    }
    const PresharedKey key = PresharedKey::random();
    std::vector<Listener> listeners;
    std::vector<Endpoint> endpoints;
    for (int r = 0; r < n; ++r) {
      listeners.push_back(Listener::bind(Endpoint{"127.0.0.1", 0}));
      endpoints.push_back(Endpoint{"127.0.0.1", listeners.back().port()});
    }
    tcp_.resize(static_cast<std::size_t>(n));
    run_ranks(n, [&](int r) {
      MeshConfig cfg;
      cfg.rank = r;
      cfg.endpoints.assign(endpoints.begin(), endpoints.end());
      cfg.session_id = 77;
      cfg.channel.handshake_timeout = Duration(5000);
      cfg.connect_timeout = Duration(10000);
      cfg.timeout = timeout;
      cfg.link = link;
      ListenerAcceptor acceptor(listeners[static_cast<std::size_t>(r)], key, cfg.channel);
      tcp_[static_cast<std::size_t>(r)] = connect_mesh(cfg, key, &acceptor);
    });
  }

  int size() const { return inproc_ ? inproc_->size() : static_cast<int>(tcp_.size()); }

  Transport& rank(int r) {
    if (inproc_) return inproc_->rank(r);
    return *tcp_[static_cast<std::size_t>(r)];
  }

  // Rank r "dies": its connections drop without a goodbye.
  void kill(int r) {
    if (inproc_) {
      inproc_->kill(r);
      return;
    }
    TcpTransport& t = *tcp_[static_cast<std::size_t>(r)];
    for (int p = 0; p < t.size(); ++p) {
      if (p != r) t.link(p).shutdown();
    }
  }

 private:
  std::unique_ptr<InprocCluster> inproc_;
  std::vector<std::unique_ptr<TcpTransport>> tcp_;
};

}  // namespace huddle::net::testing
