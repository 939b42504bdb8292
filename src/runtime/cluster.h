// Cluster: a distributed session seen from the primary. Connecting to the workers, shipping each
// its program's weights and waiting until all are ready happens in the constructor; runner() then
// drives steps like a single-device executor.
#pragma once

#include "model/model.h"
#include "net/key.h"
#include "net/tcp_transport.h"
#include "plan/lowering.h"
#include "plan/plan.h"
#include "runtime/executor.h"
#include "runtime/session.h"
#include "runtime/trace.h"

#include <memory>
#include <string>
#include <vector>

namespace huddle {

struct ClusterOptions {
  std::vector<std::string> workers;  // "host:port", plan devices 1..n-1 in order
  net::PresharedKey key = net::PresharedKey::random();
  net::Duration timeout{10000};  // a peer silent this long is an error
  bool trace = false;            // record per-op spans on every device
  net::LinkEmulation link;       // delay on every mesh message the primary sends (testbed)
};

struct DeviceReport {
  std::string name;
  std::size_t weight_bytes = 0;
  std::size_t rss_bytes = 0;            // resident memory once the weights are in place
  bool weights_mapped_locally = false;  // from the worker's own copy of the model
};

class Cluster {
 public:
  // TransportError naming the worker that cannot be reached, refuses the key, is busy, or fails
  // to set up (its reason is passed on).
  Cluster(const Model& model, const Plan& plan, ClusterOptions options);
  ~Cluster();

  StepRunner& runner() { return *session_; }
  const std::vector<DeviceReport>& devices() const { return devices_; }
  // Every device's report of the last step (device 0 first): compute and wall time, bytes sent,
  // free memory.
  const std::vector<StepReport>& last_reports() const { return session_->last_reports(); }

  // Ends the session. With tracing on, returns every device's spans (device 0 first).
  std::vector<std::vector<Span>> finish();

 private:
  const Model& model_;
  Plan plan_;
  ClusterOptions options_;
  std::vector<std::unique_ptr<net::SecureChannel>> controls_;  // session channels, one per worker
  std::unique_ptr<net::TcpTransport> transport_;
  Program program_;
  StepMeter meter_;  // before the executor and session that use it
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<PrimarySession> session_;
  TraceRecorder recorder_;
  std::vector<DeviceReport> devices_;
  bool finished_ = false;
};

}  // namespace huddle
