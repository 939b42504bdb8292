#include "session/session.h"

#include "core/error.h"
#include "core/process_memory.h"
#include "planner/planners.h"
#include "session/survivor_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace huddle {

Session::Session(const Model& model, SessionOptions options)
    : model_(model), options_(std::move(options)), runner_(*this, runner_enabled()) {
  if (!options_.workers.empty() && !options_.key)
    throw UsageError("workers need the cluster's key (--key-file)");
  if (options_.joins && !options_.key)
    throw UsageError("joining workers need the cluster's key (--key-file)");
  planned_ = choose_plan(options_.plan, model_, options_.plan_tokens, options_.workers,
                         options_.key ? &*options_.key : nullptr);
  if (!options_.save_plan.empty()) planned_.plan.save(options_.save_plan);
  cost_ = std::make_unique<CostModel>(model_.config(), model_.graph(), planned_.plan.wire);
  if (planned_.cluster && plan_in_cluster(planned_.plan, *planned_.cluster)) {
    try {
      predicted_ms_ =
          cost_->predict(planned_.plan, *planned_.cluster, options_.plan_tokens).latency_s * 1e3;
    } catch (const PlanError& e) {
      log(fmt::format("no prediction: {}", e.what()));
    }
  }
  try {
    start();
  } catch (const TransportError& e) {
    // A worker that accepted the session and then went (while the weights travel) is lost like
    // one that dies mid-request; one never reached is a configuration error.
    if (!runner_enabled() || !opened_) throw;
    const auto began = std::chrono::steady_clock::now();
    Recovery recovery;
    recovery.reason = e.what();
    recovery.start_us = std::chrono::duration<double, std::micro>(began.time_since_epoch()).count();
    recovery.lost = rebuild(e);
    recovery.recovery_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
    recovered(recovery);
  }
  constructed_ = true;
}

Session::~Session() {
  try {
    finish();
  } catch (const Error&) {
    // Best effort: the workers may already be gone.
  }
}

void Session::start() {
  const Plan& plan = planned_.plan;
  cluster_.reset();
  local_.reset();
  assigned_.reset();
  workers_.clear();
  if (plan.num_devices() == 1) {
    // An operator-assignment plan runs its lowered program (ops on cpu1 run on one thread).
    if (plan.op_assigned()) assigned_ = lower(model_.graph(), model_.config(), plan, 0);
    const std::int64_t context = options_.context > 0
                                     ? std::min(options_.context, model_.config().max_positions)
                                     : model_.config().max_positions;
    local_ = std::make_unique<Executor>(assigned_ ? assigned_->graph : model_.graph(),
                                        model_.weights(), context);
    local_->set_observer(meter_.observer(options_.trace ? local_trace_.observer() : OpObserver{}),
                         options_.trace);
  } else {
    workers_ = plan_workers(planned_);
    if (workers_.empty()) {
      throw UsageError(
          fmt::format("the plan has {} devices; give its workers (--workers or --local-devices)",
                      plan.num_devices()));
    }
    if (plan.num_devices() != static_cast<int>(workers_.size()) + 1) {
      throw UsageError(
          fmt::format("the plan has {} devices but {} are given (this primary and {} workers)",
                      plan.num_devices(), workers_.size() + 1, workers_.size()));
    }
    ClusterOptions cluster_options;
    cluster_options.workers = workers_;
    cluster_options.key = *options_.key;
    cluster_options.timeout =
        net::Duration(static_cast<std::int64_t>(options_.plan.timeout_s * 1000));
    cluster_options.trace = options_.trace;
    cluster_options.link = options_.plan.link;
    // A session that recovers probes the workers itself; their accounts only decorate the log,
    // and an idle worker's silence would add its whole wait to every recovery.
    if (options_.recover) cluster_options.failure_report_wait = net::Duration(100);
    opened_ = false;
    cluster_options.on_opened = [this] { opened_ = true; };
    cluster_ = std::make_unique<Cluster>(model_, plan, std::move(cluster_options));
  }
  bytes_sent_.assign(static_cast<std::size_t>(plan.num_devices()), 0);
  estimator_.reset();
  if (options_.online_replan && cluster_ && planned_.cluster &&
      is_adaptive_planner(planned_.planner)) {
    estimator_.emplace(*cost_, *planned_.cluster);
  }
  advised_quota_revision_ = 0;
}

StepRunner& Session::inner() {
  if (cluster_) return cluster_->runner();
  if (local_) return *local_;
  // A recovery that could not be made leaves no devices: every later step says why.
  throw TransportError(fmt::format("the session has no devices left: {}", broken_));
}

Tensor Session::Active::forward(std::span<const std::int32_t> ids, bool all_rows) {
  // Set on every step: a recovery may have started another cluster since the last one.
  if (session_.cluster_)
    session_.cluster_->set_op_spans(session_.op_spans_);
  else
    session_.meter_.begin_step(session_.op_spans_);
  Tensor out = session_.inner().forward(ids, all_rows);
  session_.observe_step(static_cast<std::int64_t>(ids.size()));
  return out;
}

void Session::Active::reset() {
  session_.admit_joined();
  session_.inner().reset();
  std::fill(session_.bytes_sent_.begin(), session_.bytes_sent_.end(), 0);
}

void Session::observe_step(std::int64_t tokens) {
  if (!cluster_) return;
  const std::vector<StepReport>& reports = cluster_->last_reports();
  for (std::size_t d = 0; d < reports.size() && d < bytes_sent_.size(); ++d)
    bytes_sent_[d] += reports[d].bytes_sent;
  // Free memory and CPU quotas are read at every step: a mode switch must act on memory before
  // a device runs out, and a cut quota is news from the step it shows in. Speeds are not timed
  // at every step: decode steps are too short to time; the first request warms caches up (page
  // faults, thread start-up) and would make every device look slow. The step simulator that
  // re-estimates speeds models neither pipelines nor 2D-tiled plans (yet).
  const Plan& plan = planned_.plan;
  if (!estimator_ || plan.pipelined()) return;
  std::vector<DeviceObservation> seen;
  for (std::size_t d = 0; d < reports.size(); ++d) {
    seen.push_back({reports[d].compute_s, reports[d].free_memory_bytes,
                    static_cast<std::int64_t>(cluster_->devices()[d].weight_bytes),
                    reports[d].cpu_share, reports[d].wall_s});
  }
  if (tokens < 8 || completed_requests_ == 0 || plan.tiled_2d()) {
    estimator_->observe_resources(plan, seen);
    return;
  }
  if (!estimator_->observe(plan, tokens, cluster_->runner().position(), seen)) {
    double wall = 0;
    for (const StepReport& r : reports) wall = std::max(wall, r.wall_s);
    log(
        fmt::format("a step of {} tokens took {:.0f} ms, over {:g}x its prediction: a stall, not "
                    "timed",
                    tokens, wall * 1e3, OnlineEstimator::kStallFactor));
  }
}

std::optional<nlohmann::json> Session::after_request(std::int64_t prompt_tokens, bool last) {
  ++completed_requests_;
  if (!estimator_ || last || planned_.plan.pipelined()) return std::nullopt;
  const ReplanAdvice advice = advise_replan(*cost_, *estimator_, planned_.plan, planned_.planner,
                                            prompt_tokens, options_.replan_threshold);
  log(fmt::format("after request {}: {}{}", completed_requests_, advice.reason,
                  advice.replan ? "; re-planning" : ""));
  if (!advice.replan) return std::nullopt;
  nlohmann::json decision = decision_json(advice);
  decision["after_request"] = completed_requests_;
  start_advised(advice);
  return decision;
}

nlohmann::json Session::decision_json(const ReplanAdvice& advice) {
  return {{"reason", advice.reason},
          {"cause", advice.cause},
          {"mode_before", advice.mode_before},
          {"mode_after", advice.mode_after},
          {"predicted_ms_before", advice.current_s * 1e3},
          {"predicted_ms_after", advice.proposed_s * 1e3}};
}

void Session::start_advised(const ReplanAdvice& advice) {
  cluster_->finish();
  planned_.plan = *advice.plan;
  if (planned_.gather_chunks) planned_.plan.gather_chunks = *planned_.gather_chunks;
  OnlineEstimator kept = *estimator_;  // what was learned stays
  const int revision = advised_quota_revision_;
  start();
  estimator_.reset();
  estimator_.emplace(std::move(kept));
  advised_quota_revision_ = revision;
}

bool Session::switch_plan() {
  // Only a changed quota is news a request should not wait out; speeds timed from prefills are
  // acted on between requests (after_request), and pipelined plans are not re-estimated yet.
  if (!estimator_ || !cluster_ || planned_.plan.pipelined() ||
      estimator_->quota_revision() == advised_quota_revision_) {
    return false;
  }
  advised_quota_revision_ = estimator_->quota_revision();
  const std::int64_t position = inner().position();
  const ReplanAdvice advice = advise_replan(*cost_, *estimator_, planned_.plan, planned_.planner,
                                            options_.plan_tokens, options_.replan_threshold);
  log(fmt::format("request {} at position {}: {}{}", completed_requests_ + 1, position,
                  advice.reason, advice.replan ? "; re-planning and re-feeding the request" : ""));
  if (!advice.replan) return false;
  nlohmann::json decision = decision_json(advice);
  decision["during_request"] = completed_requests_ + 1;
  decision["at_position"] = position;
  replans_during_.push_back(std::move(decision));
  start_advised(advice);
  return true;
}

std::vector<std::string> Session::device_names() const {
  std::vector<std::string> names = {"primary"};
  names.insert(names.end(), workers_.begin(), workers_.end());
  return names;
}

std::vector<DeviceReport> Session::devices() const {
  if (cluster_) return cluster_->devices();
  const std::size_t weights =
      assigned_ ? program_weight_bytes(*assigned_, model_.weights()) : model_.weight_bytes();
  return {{"primary", weights, resident_bytes(), true}};
}

std::vector<StepReport> Session::step_reports(double wall_s) {
  if (cluster_) return cluster_->last_reports();
  return {meter_.take(wall_s, 0)};
}

nlohmann::json Session::recoveries_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const SessionRecovery& r : recoveries_) {
    list.push_back({{"lost", r.lost},
                    {"reason", r.reason},
                    {"recovery_ms", r.recovery_ms},
                    {"replayed_tokens", r.replayed_tokens},
                    {"strategy", r.strategy},
                    {"devices", r.devices}});
  }
  return list;
}

std::vector<std::vector<Span>> Session::finish() {
  if (finished_) return {};
  finished_ = true;
  std::vector<std::vector<Span>> spans;
  if (cluster_) {
    spans = cluster_->finish();
  } else if (options_.trace) {
    spans.push_back(local_trace_.spans());
  }
  if (!spans.empty()) {
    for (const SessionRecovery& r : recoveries_) {
      spans.front().push_back({fmt::format("recovery (lost {})", fmt::join(r.lost, ", ")),
                               "recovery", -1, r.start_us, r.recovery_ms * 1e3, r.replayed_tokens});
    }
  }
  return spans;
}

void Session::log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
    return;
  }
  std::fprintf(stderr, "huddle: %s\n", line.c_str());
}

}  // namespace huddle
