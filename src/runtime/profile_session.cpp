#include "runtime/profile_session.h"

#include "core/error.h"
#include "net/session.h"
#include "profile/memory_probe.h"
#include "runtime/cluster_protocol.h"
#include "runtime/mesh.h"

#include <fmt/format.h>

#include <malloc.h>

#include <algorithm>
#include <chrono>

namespace huddle {
namespace {

std::string text_of(const net::Message& m) {
  return std::string(reinterpret_cast<const char*>(m.payload.data()), m.payload.size());
}

void send_json(net::Transport& t, int peer, std::uint32_t tag, const nlohmann::json& j) {
  const std::string text = j.dump();
  t.send(peer, tag, std::as_bytes(std::span(text)));
}

nlohmann::json recv_json(net::Transport& t, int peer, std::uint32_t tag, const char* what) {
  const net::Message m = t.recv(peer);
  if (m.tag != tag) {
    throw TransportError(
        fmt::format("{}: expected {}, got tag {:#x}", t.peer_name(peer), what, m.tag));
  }
  try {
    return nlohmann::json::parse(text_of(m));
  } catch (const nlohmann::json::exception& e) {
    throw TransportError(fmt::format("{}: malformed {}: {}", t.peer_name(peer), what, e.what()));
  }
}

nlohmann::json link_json(const profile::LinkMeasurement& m) {
  return {{"latency_s", m.latency_s},
          {"bandwidth_bps", m.bandwidth_bps},
          {"duplex_bandwidth_bps", m.duplex_bandwidth_bps},
          {"duplex_latency_s", m.duplex_latency_s},
          {"bulk_bytes", m.bulk_bytes}};
}

// What one device measured of itself.
struct DeviceMeasurement {
  std::int64_t memory_bytes = 0;
  profile::ComputeProfile compute;
};

DeviceMeasurement measure_self(const profile::ProbeShapes& shapes, double budget_s) {
  DeviceMeasurement d;
  d.memory_bytes = profile::available_memory_bytes();  // before the probe's own buffers
  const std::int64_t room = d.memory_bytes > 0 ? d.memory_bytes / 4 : std::int64_t{64} << 20;
  d.compute = profile::probe_compute(shapes, budget_s, room);
  malloc_trim(0);  // give the probe's buffers back, so the next measurement sees them free
  return d;
}

// The primary's view of a profiling session.
class Profiler {
 public:
  explicit Profiler(const ProfileOptions& o) : o_(o) {
    world_ = static_cast<int>(o.workers.size()) + 1;
    names_ = o.names;
    if (names_.empty()) {
      names_.push_back("primary");
      names_.insert(names_.end(), o.workers.begin(), o.workers.end());
    }
    if (static_cast<int>(names_.size()) != world_) {
      throw UsageError(fmt::format("{} device names for {} devices", names_.size(), world_));
    }
    if (world_ > 1) connect();
  }

  ~Profiler() {
    if (!transport_) return;
    try {
      for (int r = 1; r < world_; ++r)
        send_json(*transport_, r, kProfileCommandTag, {{"op", "end"}});
      await_session_end(controls_);
    } catch (const Error&) {
      // Best effort: a worker that failed has closed its link already.
    }
  }

  ClusterProfile run() {
    const auto start = std::chrono::steady_clock::now();
    ClusterProfile out;
    std::vector<DeviceSpec> devices;
    nlohmann::json device_details = nlohmann::json::array();
    // Every device measures at the same time, as they compute during inference: devices that
    // share a machine (--local-devices, the testbed) see each other's load, as they will then.
    for (int r = 1; r < world_; ++r)
      send_json(*transport_, r, kProfileCommandTag, {{"op", "compute"}});
    const DeviceMeasurement own = measure_self(o_.shapes, o_.compute_budget_s);
    for (int r = 0; r < world_; ++r) {
      DeviceMeasurement m;
      if (r == 0) {
        m = own;
      } else {
        const nlohmann::json reply = recv_json(*transport_, r, kProfileReplyTag, "compute profile");
        try {
          m.memory_bytes = reply.at("memory_bytes").get<std::int64_t>();
          m.compute = profile::ComputeProfile::from_json(reply.at("compute"));
        } catch (const std::exception& e) {
          throw TransportError(
              fmt::format("{}: malformed compute profile: {}", transport_->peer_name(r), e.what()));
        }
      }
      memory_.push_back(m.memory_bytes);
      DeviceSpec d;
      d.name = names_[static_cast<std::size_t>(r)];
      d.gflops = m.compute.mlp_gflops;
      d.memory_bytes = std::max<std::int64_t>(m.memory_bytes, 1);
      d.attention_gflops = m.compute.attention_gflops;
      d.mlp_gflops = m.compute.mlp_gflops;
      d.connection_gflops = m.compute.connection_gflops;
      d.curves = m.compute.curves;
      d.cores = m.compute.threads * m.compute.cpu_share;
      d.quota_share = m.compute.quota_share;
      d.comm_cpu_s_per_byte = m.compute.comm_cpu_ns_per_byte * 1e-9;
      devices.push_back(d);
      nlohmann::json detail = m.compute.to_json();
      detail["name"] = d.name;
      device_details.push_back(detail);
      log(fmt::format(
          "{}: GEMM {:.1f} GFLOP/s (+{:.0f} us/op, weights {:.1f}), GEMV {:.1f}, attention "
          "{:.1f}, element-wise {:.1f}; fit error {:.1f}%; {:.0f} MB free; {:.2f} s",
          d.name, d.curves->gemm.gflops, d.curves->gemm.overhead_s * 1e6,
          d.curves->weights_of_gemm().gflops, d.curves->gemv.gflops, d.curves->attention.gflops,
          d.curves->elementwise.gflops, m.compute.fit_error * 100,
          static_cast<double>(m.memory_bytes) / 1e6, m.compute.seconds));
    }
    // Every ordered pair; the cluster gets a link entry per direction.
    nlohmann::json link_details = nlohmann::json::array();
    for (int from = 0; from < world_; ++from) {
      for (int to = 0; to < world_; ++to) {
        if (from == to) continue;
        const profile::LinkMeasurement m = measure(from, to);
        links_.push_back({from, to, m});
        nlohmann::json detail = link_json(m);
        detail["from"] = names_[static_cast<std::size_t>(from)];
        detail["to"] = names_[static_cast<std::size_t>(to)];
        link_details.push_back(detail);
        log(fmt::format(
            "{} -> {}: {:.1f} Mbit/s, {:.3f} ms; both ways at once {:.1f} Mbit/s, {:.3f} ms",
            names_[static_cast<std::size_t>(from)], names_[static_cast<std::size_t>(to)],
            m.bandwidth_bps / 1e6, m.latency_s * 1e3, m.duplex_bandwidth_bps / 1e6,
            m.duplex_latency_s * 1e3));
      }
    }
    out.cluster = build_cluster(devices);
    out.details = {
        {"shapes", o_.shapes.to_json()},
        {"devices", device_details},
        {"links", link_details},
        {"seconds",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()}};
    return out;
  }

 private:
  struct Measured {
    int from, to;
    profile::LinkMeasurement m;
  };

  void log(const std::string& line) const {
    if (o_.log) o_.log(line);
  }

  void connect() {
    OpenedSession session = open_sessions(o_.workers, o_.key, o_.timeout);
    controls_ = std::move(session.controls);
    const std::uint64_t session_id = session.id;
    const std::vector<std::string>& endpoint_names = session.endpoints;
    for (int r = 1; r < world_; ++r) {
      const nlohmann::json setup = {{"rank", r},
                                    {"world", world_},
                                    {"session_id", session_id},
                                    {"endpoints", endpoint_names},
                                    {"timeout_ms", o_.timeout.count()},
                                    {"shapes", o_.shapes.to_json()},
                                    {"budget_s", o_.compute_budget_s}};
      const std::string text = setup.dump();
      controls_[static_cast<std::size_t>(r - 1)]->send(kProfileTag, std::as_bytes(std::span(text)));
    }
    transport_ = open_primary_mesh(session.workers, o_.key, session.channel, session_id, o_.timeout,
                                   o_.link);
  }

  profile::LinkMeasurement measure(int from, int to) {
    // Bulk transfers stay well inside both devices' free memory.
    std::size_t max_bytes = o_.link_probe.max_bytes;
    for (const int d : {from, to}) {
      const std::int64_t m = memory_[static_cast<std::size_t>(d)];
      if (m > 0) max_bytes = std::min(max_bytes, static_cast<std::size_t>(m / 8));
    }
    max_bytes = std::max<std::size_t>(max_bytes, std::size_t{64} << 10);
    profile::LinkProbeOptions probe = o_.link_probe;
    probe.max_bytes = max_bytes;
    const nlohmann::json echo = {{"op", "echo"}, {"peer", from}, {"max_bytes", max_bytes}};
    const nlohmann::json measure = {{"op", "measure"}, {"peer", to}, {"max_bytes", max_bytes}};
    if (from == 0) {
      send_json(*transport_, to, kProfileCommandTag, echo);
      const profile::LinkMeasurement m = profile::measure_link(*transport_, to, probe);
      recv_json(*transport_, to, kProfileReplyTag, "end of its echo");
      return m;
    }
    if (to == 0) {
      send_json(*transport_, from, kProfileCommandTag, measure);
      profile::echo_link(*transport_, from, max_bytes);
    } else {
      send_json(*transport_, to, kProfileCommandTag, echo);
      send_json(*transport_, from, kProfileCommandTag, measure);
    }
    const nlohmann::json reply = recv_json(*transport_, from, kProfileReplyTag, "link measurement");
    if (to != 0) recv_json(*transport_, to, kProfileReplyTag, "end of its echo");
    try {
      profile::LinkMeasurement m;
      m.latency_s = reply.at("latency_s").get<double>();
      m.bandwidth_bps = reply.at("bandwidth_bps").get<double>();
      m.duplex_bandwidth_bps = reply.at("duplex_bandwidth_bps").get<double>();
      m.duplex_latency_s = reply.at("duplex_latency_s").get<double>();
      m.bulk_bytes = reply.at("bulk_bytes").get<std::size_t>();
      if (!(m.latency_s >= 0) || !(m.bandwidth_bps > 0) || !(m.duplex_bandwidth_bps > 0))
        throw InputError("out of range");
      return m;
    } catch (const std::exception& e) {
      throw TransportError(
          fmt::format("{}: malformed link measurement: {}", transport_->peer_name(from), e.what()));
    }
  }

  ClusterSpec build_cluster(const std::vector<DeviceSpec>& devices) const {
    nlohmann::json j = ClusterSpec::uniform(devices, LinkSpec{1e9, 0}).to_json();
    j.erase("default_link");
    nlohmann::json links = nlohmann::json::array();
    for (const Measured& l : links_) {
      links.push_back({{"from", names_[static_cast<std::size_t>(l.from)]},
                       {"to", names_[static_cast<std::size_t>(l.to)]},
                       {"bandwidth_bps", l.m.bandwidth_bps},
                       {"duplex_bandwidth_bps", l.m.duplex_bandwidth_bps},
                       {"duplex_latency_s", l.m.duplex_latency_s},
                       {"latency_s", l.m.latency_s}});
    }
    j["links"] = links;
    return ClusterSpec::from_json(j, "profile");
  }

  const ProfileOptions& o_;
  int world_ = 1;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<net::SecureChannel>> controls_;
  std::unique_ptr<net::TcpTransport> transport_;
  std::vector<std::int64_t> memory_;
  std::vector<Measured> links_;
};

// Worker: the setup of a profiling session.
struct ProfileSetup {
  MeshPlace place;
  profile::ProbeShapes shapes;
  double budget_s = 1;
};

ProfileSetup parse_profile_setup(const net::Message& m, const net::OpenRequest& open,
                                 const std::string& peer) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text_of(m));
    ProfileSetup s;
    s.place.rank = j.at("rank").get<int>();
    s.place.world = j.at("world").get<int>();
    s.place.session_id = j.at("session_id").get<std::uint64_t>();
    s.place.endpoints = j.at("endpoints").get<std::vector<std::string>>();
    const int timeout_ms = j.at("timeout_ms").get<int>();
    s.place.timeout = net::Duration(timeout_ms);
    s.shapes = profile::ProbeShapes::from_json(j.at("shapes"));
    s.budget_s = j.at("budget_s").get<double>();
    if (s.place.world < 2 || s.place.rank < 1 || s.place.rank >= s.place.world ||
        static_cast<int>(s.place.endpoints.size()) != s.place.world ||
        s.place.session_id != open.session_id || timeout_ms <= 0 || !(s.budget_s > 0) ||
        s.budget_s > 60) {
      throw InputError("inconsistent rank, world, endpoints, session, timeout or budget");
    }
    return s;
  } catch (const std::exception& e) {
    throw TransportError(fmt::format("{}: bad profiling setup: {}", peer, e.what()));
  }
}

}  // namespace

nlohmann::json ClusterProfile::to_json() const {
  nlohmann::json j = cluster.to_json();
  j["profile"] = details;
  return j;
}

ClusterProfile profile_cluster(const ProfileOptions& options) {
  Profiler profiler(options);
  return profiler.run();
}

void serve_profile(net::SecureChannel& control, const net::Message& setup,
                   std::unique_ptr<net::TcpTransport>& transport, const net::OpenRequest& open,
                   net::LinkAcceptor& acceptor, const WorkerOptions& options) {
  const ProfileSetup s = parse_profile_setup(setup, open, control.name());
  transport = join_mesh(s.place, acceptor, options.key, options.channel, options.link);
  net::Transport& t = *transport;
  if (options.log) {
    options.log(fmt::format("session {}: profiling, device {} of {}", s.place.session_id,
                            s.place.rank, s.place.world));
  }
  for (;;) {
    const nlohmann::json command = recv_json(t, 0, kProfileCommandTag, "a profiling command");
    try {
      const std::string op = command.at("op").get<std::string>();
      if (op == "end") break;
      if (op == "compute") {
        const DeviceMeasurement m = measure_self(s.shapes, s.budget_s);
        send_json(t, 0, kProfileReplyTag,
                  {{"memory_bytes", m.memory_bytes}, {"compute", m.compute.to_json()}});
        continue;
      }
      const int peer = command.at("peer").get<int>();
      const auto max_bytes = command.at("max_bytes").get<std::size_t>();
      if (peer < 0 || peer >= s.place.world || peer == s.place.rank || max_bytes < 1024 ||
          max_bytes > (std::size_t{1} << 30)) {
        throw InputError(fmt::format("peer {} or max_bytes {} out of range", peer, max_bytes));
      }
      if (op == "echo") {
        profile::echo_link(t, peer, max_bytes);
        send_json(t, 0, kProfileReplyTag, nlohmann::json::object());
      } else if (op == "measure") {
        profile::LinkProbeOptions probe;
        probe.max_bytes = max_bytes;
        send_json(t, 0, kProfileReplyTag, link_json(profile::measure_link(t, peer, probe)));
      } else {
        throw InputError(fmt::format("unknown op '{}'", op));
      }
    } catch (const nlohmann::json::exception& e) {
      throw TransportError(
          fmt::format("{}: malformed profiling command: {}", t.peer_name(0), e.what()));
    } catch (const InputError& e) {
      throw TransportError(fmt::format("{}: bad profiling command: {}", t.peer_name(0), e.what()));
    }
  }
  if (options.log) options.log(fmt::format("session {}: profiling ended", s.place.session_id));
}

}  // namespace huddle
