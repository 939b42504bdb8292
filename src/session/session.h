// Session: a live cluster seen from the device that holds the requests (the primary) — the
// loaded model, the workers and their key, the plan and what it was made from — handing out one
// StepRunner that `huddle run` and `huddle serve` drive for as many requests as they like.
//
// The runner survives lost devices (docs/distributed.md, "Surviving a lost device"): when a step
// fails on a link, the session probes the workers (session/worker_probe.h), re-plans on those
// left with the same strategy family (session/survivor_plan.h), starts a new cluster (weights
// sent again, or mapped from a worker's own copy), re-feeds every token since the last reset and
// returns the failed step's output. Each recovery is logged and kept (recoveries()), and appears
// in the trace. Between requests the session can re-plan from re-estimated device speeds
// (after_request()), and it takes in workers that join (SessionOptions::joins; admission.cpp):
// at the start of a request each is profiled, the plan is made again with it (survivor_plan.h,
// plan_with) and the cluster restarts on every device, the joiners included.
#pragma once

#include "model/model.h"
#include "net/key.h"
#include "plan/lowering.h"
#include "planner/cost_model.h"
#include "planner/online_estimator.h"
#include "runtime/cluster.h"
#include "runtime/executor.h"
#include "runtime/session.h"
#include "runtime/trace.h"
#include "session/plan_choice.h"
#include "session/surviving_runner.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace huddle {

// A recovery with what the session made of it.
struct SessionRecovery : Recovery {
  std::string strategy;  // of the new plan
  int devices = 1;       // of the new plan
};

struct SessionOptions {
  std::vector<std::string> workers;      // "host:port", devices 1..n; empty: this device alone
  std::optional<net::PresharedKey> key;  // required with workers
  PlanChoice plan;                       // how to choose the plan (its timeout, link: profiling)
  std::string save_plan;                 // write the chosen plan here ("" = not)
  std::int64_t plan_tokens = 128;        // the prompt length planners plan for
  std::int64_t context = 0;              // positions on this device alone (0: the model's)
  bool trace = false;                    // record per-op spans on every device
  bool recover = true;                   // go on without a lost worker (else the error ends it)
  // Re-estimate speeds from the steps: after_request() re-plans, and so does a request in
  // progress when a device's CPU quota changes (switch_plan, by `replan_threshold`).
  bool online_replan = false;
  double replan_threshold = 0.1;
  std::function<void(const std::string&)> log;  // one line per event; default: stderr
  // Told of each recovery once the session runs on the devices left (on the runner's thread;
  // not for one while the session starts, before the constructor returns).
  std::function<void(const SessionRecovery&)> on_recovery;
  // Workers that asked to join since the last call, "host:port" (net::JoinListener::take); any
  // thread may queue them. Called on the runner's thread at every reset — the start of a request,
  // or a server's keep-alive — never within one. Needs `key`. Empty: no joins.
  std::function<std::vector<std::string>()> joins;
  // Told, on the runner's thread, once the session runs on a new cluster after taking joiners in:
  // `admitted` are the joiners it uses (empty when every one went again while it started).
  std::function<void(const std::vector<std::string>& admitted)> on_join;
};

class Session final : private Rebuilder {
 public:
  // Chooses the plan (plan_choice.h) and starts the cluster: UsageError, PlanError, LoadError
  // from the choice; TransportError naming a worker that cannot be reached, refuses the key or
  // is busy. A worker that accepted the session and is lost while it starts (setup, weights) is
  // recovered from as in a step (a recovery with no tokens re-fed).
  // `model` must outlive the session.
  Session(const Model& model, SessionOptions options);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Steps on the live devices; see above. One caller at a time.
  StepRunner& runner() { return runner_; }

  const Plan& plan() const { return planned_.plan; }
  const Planned& planned() const { return planned_; }
  // The plan's prediction on its cluster (ms of a plan_tokens prefill), when there is a cluster.
  std::optional<double> predicted_ms() const { return predicted_ms_; }
  // "primary", then the workers the plan runs on.
  std::vector<std::string> device_names() const;
  std::vector<DeviceReport> devices() const;
  // Every device's report of the last step (device 0 first); alone, this device's measure of
  // the `wall_s` it took.
  std::vector<StepReport> step_reports(double wall_s);
  // Whether the reports of the following steps carry every device's op spans (StepReport::ops),
  // for a live timeline; off by default (each worker then sends a message more per step).
  void set_op_spans(bool on) { op_spans_ = on; }
  // Bytes each device sent on the mesh since the runner's last reset (device 0 first).
  const std::vector<std::uint64_t>& bytes_sent() const { return bytes_sent_; }
  const std::vector<SessionRecovery>& recoveries() const { return recoveries_; }
  // [{"lost": [...], "reason", "recovery_ms", "replayed_tokens", "strategy", "devices"}, ...]
  nlohmann::json recoveries_json() const;

  // After each request with online_replan and a planner's plan: asks the re-estimated cluster
  // whether another plan is faster by more than SessionOptions::replan_threshold for
  // `prompt_tokens`, and if so starts it. Returns the decision when it re-planned. Not after the
  // last request.
  std::optional<nlohmann::json> after_request(std::int64_t prompt_tokens, bool last);

  // The re-plans made within requests (switch_plan), as after_request() describes its own, with
  // "during_request" (the request's number, from 1) and "at_position" instead of
  // "after_request".
  const std::vector<nlohmann::json>& replans_during_requests() const { return replans_during_; }

  // Ends the session. With tracing on, every device's spans (device 0 first), device 0's with a
  // "recovery" span per recovery.
  std::vector<std::vector<Span>> finish();

 private:
  // Steps of the current cluster or local executor, metered for bytes_sent and the estimator.
  class Active final : public StepRunner {
   public:
    explicit Active(Session& session) : session_(session) {}
    Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override;
    void reset() override;
    std::int64_t position() const override { return session_.inner().position(); }
    std::int64_t max_positions() const override { return session_.inner().max_positions(); }

   private:
    Session& session_;
  };

  // Rebuilder (recovery.cpp).
  StepRunner& active() override { return active_; }
  std::vector<std::string> rebuild(const TransportError& error) override;
  void recovered(const Recovery& recovery) override;
  // Before a step within a request: when a device's CPU quota changed since the last look and
  // the estimate then finds a plan faster by more than the threshold, starts it (the runner
  // then re-feeds the request's tokens, as after a lost device) and returns true.
  bool switch_plan() override;
  // Starts `advice`'s plan, keeping what the estimator learned.
  void start_advised(const ReplanAdvice& advice);
  static nlohmann::json decision_json(const ReplanAdvice& advice);

  // Starts planned_ (a cluster, or this device alone).
  void start();
  // Takes in the workers options_.joins gives (admission.cpp): profiles each, re-plans with those
  // that answer, restarts the cluster. A joiner that cannot be profiled, or whose plan is
  // refused, is left out (logged); one that goes while the new cluster starts is recovered from
  // as a lost worker. Only at position 0, so nothing is lost.
  void admit_joined();
  // The cluster's runner or this device's executor; TransportError once a failed recovery has
  // left neither.
  StepRunner& inner();
  // rebuild() without the bookkeeping of a failure (recovery.cpp).
  std::vector<std::string> rebuild_on_survivors(const TransportError& error);
  void observe_step(std::int64_t tokens);
  void log(const std::string& line) const;
  bool runner_enabled() const {
    return options_.recover && (!options_.workers.empty() || options_.joins);
  }

  const Model& model_;
  SessionOptions options_;
  Planned planned_;
  std::vector<std::string> workers_;  // the plan's, devices 1..n-1
  std::optional<double> predicted_ms_;
  std::unique_ptr<CostModel> cost_;
  std::optional<OnlineEstimator> estimator_;
  int completed_requests_ = 0;
  int advised_quota_revision_ = 0;  // the estimate's quota_revision() switch_plan last acted on
  std::vector<nlohmann::json> replans_during_;
  std::vector<std::uint64_t> bytes_sent_;
  // This device alone: the executor (over the lowered program of an assigned plan).
  std::optional<Program> assigned_;
  StepMeter meter_;
  TraceRecorder local_trace_;
  std::unique_ptr<Executor> local_;
  std::unique_ptr<Cluster> cluster_;
  std::vector<SessionRecovery> recoveries_;
  Active active_{*this};
  SurvivingRunner runner_;
  bool op_spans_ = false;
  bool finished_ = false;
  bool opened_ = false;  // every worker of the cluster being started accepted its session
  bool constructed_ = false;
  std::string broken_;  // why the last recovery failed ("" while the session runs)
};

}  // namespace huddle
