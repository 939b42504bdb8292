#include "session/surviving_runner.h"

#include <fmt/format.h>

namespace huddle {
namespace {

double steady_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Tensor SurvivingRunner::survive(const std::function<Tensor()>& step,
                                const std::function<Tensor()>& replay) {
  try {
    return step();
  } catch (const TransportError& first) {
    if (!enabled_) throw;
    const auto start = std::chrono::steady_clock::now();
    Recovery recovery;
    recovery.reason = first.what();
    recovery.start_us = steady_us();
    recovery.replayed_tokens = static_cast<std::int64_t>(history_.size());
    const TransportError* error = &first;
    std::optional<TransportError> later;
    for (;;) {
      const std::vector<std::string> lost = rebuilder_.rebuild(*error);
      recovery.lost.insert(recovery.lost.end(), lost.begin(), lost.end());
      try {
        Tensor out = replay();
        recovery.recovery_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        rebuilder_.recovered(recovery);
        return out;
      } catch (const TransportError& again) {  // another device went while replaying
        later.emplace(again);
        error = &*later;
      }
    }
  }
}

Tensor SurvivingRunner::forward(std::span<const std::int32_t> ids, bool all_rows) {
  const std::vector<std::int32_t> step(ids.begin(), ids.end());
  const auto replay = [&] {
    // The new runner starts empty: every earlier token and this step's, in one step; the rows
    // this step asked for are the last ones.
    std::vector<std::int32_t> all = history_;
    all.insert(all.end(), step.begin(), step.end());
    Tensor rows = rebuilder_.active().forward(all, all_rows);
    if (!all_rows) return rows;
    const auto n = static_cast<std::int64_t>(history_.size());
    return rows.rows(n, n + static_cast<std::int64_t>(step.size()));
  };
  Tensor out = survive(
      [&] {
        // A planned switch starts a new runner (a device that goes meanwhile is recovered from
        // like any other): the request so far is replayed into it.
        if (enabled_ && !history_.empty() && rebuilder_.switch_plan()) return replay();
        return rebuilder_.active().forward(step, all_rows);
      },
      replay);
  history_.insert(history_.end(), step.begin(), step.end());
  return out;
}

void SurvivingRunner::reset() {
  history_.clear();
  survive(
      [&] {
        rebuilder_.active().reset();
        return Tensor();
      },
      [] { return Tensor(); });  // a new runner starts empty
}

}  // namespace huddle
