// Cluster: a distributed session seen from the primary. Connecting to the workers, shipping each
// its program's weights and waiting until all are ready happens in the constructor; runner() then
// drives steps like a single-device executor.
#pragma once

#include "model/model.h"
#include "net/key.h"
#include "net/tcp_transport.h"
#include "onnx/onnx_model.h"
#include "plan/lowering.h"
#include "plan/plan.h"
#include "runtime/executor.h"
#include "runtime/session.h"
#include "runtime/trace.h"

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace huddle {

struct ClusterOptions {
  std::vector<std::string> workers;  // "host:port", plan devices 1..n-1 in order
  net::PresharedKey key = net::PresharedKey::random();
  net::Duration timeout{10000};  // a peer silent this long is an error
  bool trace = false;            // record per-op spans on every device
  net::LinkEmulation link;       // delay on every mesh message the primary sends (testbed)
  // After a failed step, how long to wait for the workers' own accounts of it (added to the
  // error), all workers together. A worker that is alive but idle sends none, so the wait runs
  // out: a session that recovers from the failure asks for a short one.
  net::Duration failure_report_wait{1000};
  // Called once every worker has accepted the session, before setup and weights: an error after
  // it comes from a worker that was there (one that died, or a cut link), not a wrong address.
  std::function<void()> on_opened;
};

struct DeviceReport {
  std::string name;
  std::size_t weight_bytes = 0;
  std::size_t rss_bytes = 0;            // resident memory once the weights are in place
  bool weights_mapped_locally = false;  // from the worker's own copy of the model
};

class Cluster {
  // Forwards to the session, explaining transport errors with the workers' reports.
  class ExplainingRunner final : public StepRunner {
   public:
    explicit ExplainingRunner(Cluster& cluster) : cluster_(cluster) {}
    Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override;
    void reset() override;
    std::int64_t position() const override { return cluster_.session_->position(); }
    std::int64_t max_positions() const override { return cluster_.session_->max_positions(); }

   private:
    Cluster& cluster_;
  };

 public:
  // TransportError naming the worker that cannot be reached, refuses the key, is busy, or fails
  // to set up (its reason is passed on).
  Cluster(const Model& model, const Plan& plan, ClusterOptions options);
  // An imported CNN with a row-split or operator-assignment plan: workers without a copy of the
  // model file get the file; run() runs it.
  Cluster(const onnx_import::OnnxModel& model, const Plan& plan, ClusterOptions options);
  ~Cluster();

  // One run of an imported CNN on every device (errors explained as forward()'s).
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs);

  // Steps on every device. A step that fails on a link (a peer died, timed out, or closed) throws
  // TransportError with what the workers reported as they failed, so the message names the device
  // that failed first even when the primary noticed on another link (a pipeline stage whose
  // successor died closes its links too).
  StepRunner& runner() { return runner_; }
  const std::vector<DeviceReport>& devices() const { return devices_; }
  // Every device's report of the last step (device 0 first): compute and wall time, bytes sent,
  // free memory.
  const std::vector<StepReport>& last_reports() const { return session_->last_reports(); }
  // Whether the following steps' reports carry every device's op spans (PrimarySession).
  void set_op_spans(bool on) { session_->set_op_spans(on); }

  // Ends the session. With tracing on, returns every device's spans (device 0 first).
  std::vector<std::vector<Span>> finish();

 private:
  // Why workers ended their sessions, as they told this primary on their control channels
  // within `wait` each ("" when none did); for error messages.
  std::string worker_failures(net::Duration wait);

  // Steps 1-5 of the protocol (runtime/cluster_protocol.h); `model_fields` (the model's
  // description and identity: "digests", or an ONNX file's "fingerprint") join the setup.
  void start(const nlohmann::json& model_fields);

  const Model* model_ = nullptr;                  // a checkpoint model, or
  const onnx_import::OnnxModel* onnx_ = nullptr;  // an imported CNN
  std::string model_file_;                        // the CNN's file while it is shipped
  Plan plan_;
  ClusterOptions options_;
  std::vector<std::unique_ptr<net::SecureChannel>> controls_;  // session channels, one per worker
  std::unique_ptr<net::TcpTransport> transport_;
  Program program_;
  StepMeter meter_;  // before the executor and session that use it
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<PrimarySession> session_;
  ExplainingRunner runner_{*this};
  TraceRecorder recorder_;
  std::vector<DeviceReport> devices_;
  bool finished_ = false;
};

}  // namespace huddle
