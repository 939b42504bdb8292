// Session's recovery from lost devices (the Rebuilder side of its SurvivingRunner).
#include "core/error.h"
#include "session/session.h"
#include "session/survivor_plan.h"
#include "session/worker_probe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace huddle {

std::vector<std::string> Session::rebuild(const TransportError& error) {
  if (!broken_.empty()) throw error;  // an earlier recovery failed: nothing left to rebuild
  try {
    return rebuild_on_survivors(error);
  } catch (const Error& e) {
    cluster_.reset();  // half-started or broken: the session cannot step any more
    local_.reset();
    broken_ = e.what();
    throw;
  }
}

std::vector<std::string> Session::rebuild_on_survivors(const TransportError& error) {
  if (!cluster_ && workers_.empty()) throw error;  // this device alone has no link to lose
  log(fmt::format("a step failed: {}; probing the workers", error.what()));
  const net::Duration timeout(static_cast<std::int64_t>(options_.plan.timeout_s * 1000));
  std::vector<std::string> given_up;
  std::string why = error.what();
  bool retried = false;
  for (;;) {
    // The broken session ends first, so the workers left are free for the next one.
    try {
      if (cluster_) cluster_->finish();
    } catch (const Error&) {
    }
    cluster_.reset();
    const std::vector<std::string> lost = unreachable_workers(workers_, *options_.key, timeout);
    if (lost.empty()) {
      // Every worker answers. After a loss, a new cluster may still fail to start on a survivor
      // that waits out its own timeout in the broken session (its peer hung rather than died):
      // one more start. Otherwise nobody can be named, and the error stands.
      if (given_up.empty() || retried) {
        throw TransportError(fmt::format(
            "{} (every worker of the session still answers, so none can be given up)", why));
      }
      retried = true;
    } else {
      log(fmt::format("lost {}; re-planning on the devices left", fmt::join(lost, ", ")));
      given_up.insert(given_up.end(), lost.begin(), lost.end());
      // PlanError naming what does not fit when nothing is left that can hold the model.
      planned_ = plan_without(planned_, lost, model_, options_.plan_tokens);
    }
    try {
      start();
      return given_up;
    } catch (const TransportError& e) {  // another device went while the new cluster started
      why = e.what();
      log(fmt::format("the new cluster failed to start: {}", why));
    }
  }
}

void Session::recovered(const Recovery& recovery) {
  SessionRecovery r;
  static_cast<Recovery&>(r) = recovery;
  r.strategy = planned_.plan.strategy;
  r.devices = planned_.plan.num_devices();
  log(fmt::format("recovered from losing {} in {:.1f} ms: {} on {} device(s), {} tokens re-fed",
                  fmt::join(r.lost, ", "), r.recovery_ms, r.strategy, r.devices,
                  r.replayed_tokens));
  recoveries_.push_back(r);
  if (options_.on_recovery && constructed_) options_.on_recovery(r);
}

}  // namespace huddle
