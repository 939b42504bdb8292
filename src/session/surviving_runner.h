// SurvivingRunner: a StepRunner that outlives the devices under it. It remembers every token fed
// since the last reset; when a step fails on a link (TransportError: a worker died, or its link
// was cut) it asks its Rebuilder for a new runner on the devices left, feeds that runner the
// remembered tokens and the failed step's in one step (re-prefill), and returns what the failed
// step would have returned. Callers (generate(), the server's engine) never see the failure.
// The same replay moves a request to another plan between two of its steps when the Rebuilder
// says one is due (a device slowed down: Session::switch_plan).
#pragma once

#include "core/error.h"
#include "runtime/step_runner.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace huddle {

// One recovery, as the session reports it (`huddle run --json`'s "recoveries").
struct Recovery {
  std::vector<std::string> lost;  // the devices given up (worker addresses)
  std::string reason;             // the error that revealed the loss
  double recovery_ms = 0;         // from the failure to the failed step's output on the new runner
  std::int64_t replayed_tokens = 0;  // tokens re-fed to rebuild the KV caches
  double start_us = 0;               // steady clock, microseconds (the trace's clock)
};

// What a SurvivingRunner runs on and recovers through (the Session).
class Rebuilder {
 public:
  virtual ~Rebuilder() = default;
  // The runner steps go to now (replaced by rebuild()).
  virtual StepRunner& active() = 0;
  // Called after `error` from active(): finds the devices that are gone, makes a new active
  // runner (at position 0) on the rest, and returns what was given up. Throws when it cannot
  // (no device named as lost, or the model fits on none of the rest), with a message saying why.
  virtual std::vector<std::string> rebuild(const TransportError& error) = 0;
  // Told of each finished recovery.
  virtual void recovered(const Recovery& recovery) = 0;
  // Asked before each step after the first of a request: true when it has just made a new
  // active runner (at position 0) on a better plan, which the step then replays the request
  // into. By default never.
  virtual bool switch_plan() { return false; }
};

class SurvivingRunner final : public StepRunner {
 public:
  // `rebuilder` must outlive the runner. `enabled` false: errors pass through unchanged.
  SurvivingRunner(Rebuilder& rebuilder, bool enabled) : rebuilder_(rebuilder), enabled_(enabled) {}

  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override;
  void reset() override;
  std::int64_t position() const override { return static_cast<std::int64_t>(history_.size()); }
  std::int64_t max_positions() const override { return rebuilder_.active().max_positions(); }

 private:
  // Runs `step` on the active runner; on a TransportError rebuilds (again, while rebuilding
  // fails on a link too) and runs `replay` on the new runner instead.
  Tensor survive(const std::function<Tensor()>& step, const std::function<Tensor()>& replay);

  Rebuilder& rebuilder_;
  bool enabled_;
  std::vector<std::int32_t> history_;  // every id fed since the last reset
};

}  // namespace huddle
