// Session's admission of workers that join (huddle worker --join; docs/distributed.md, "Devices
// that join"): profiled next to this primary, planned in with the same family, and used from
// the cluster that starts at the next request.
#include "core/error.h"
#include "runtime/profile_session.h"
#include "session/session.h"
#include "session/survivor_plan.h"
#include "session/worker_probe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace huddle {
namespace {

// The joiner and this primary measured side by side at the model's shapes (a profiling session
// on the joiner, as `huddle profile` runs): TransportError when it cannot be reached or fails.
JoinedDevice profile_joined_worker(const std::string& address, const Model& model,
                                   const net::PresharedKey& key, const PlanChoice& choice,
                                   std::int64_t prompt_tokens) {
  ProfileOptions options;
  options.workers = {address};
  options.key = key;
  options.timeout = net::Duration(static_cast<std::int64_t>(choice.timeout_s * 1000));
  options.link = choice.link;
  options.shapes = profile::ProbeShapes::of(model.config(), prompt_tokens);
  options.compute_budget_s = 0.5;
  const ClusterProfile profiled = profile_cluster(options);
  return {address, profiled.cluster.device(1), profiled.cluster.device(0),
          profiled.cluster.link(0, 1)};
}

}  // namespace

void Session::admit_joined() {
  if (!options_.joins || !broken_.empty()) return;
  const std::vector<std::string> joined = options_.joins();
  if (joined.empty()) return;
  // One that went since it joined refuses the probe at once (profiling would retry it until the
  // timeout).
  const std::vector<std::string> gone =
      unreachable_workers(joined, *options_.key,
                          net::Duration(static_cast<std::int64_t>(options_.plan.timeout_s * 1000)));
  Planned next = planned_;
  std::vector<std::string> admitted;
  for (const std::string& address : joined) {
    if (std::find(gone.begin(), gone.end(), address) != gone.end()) {
      log(fmt::format("not admitting {}: it no longer answers", address));
      continue;
    }
    if (std::find(next.all_workers.begin(), next.all_workers.end(), address) !=
        next.all_workers.end()) {
      log(fmt::format("{} joined again; it is already one of the workers", address));
      continue;
    }
    try {
      const JoinedDevice device = profile_joined_worker(address, model_, *options_.key,
                                                        options_.plan, options_.plan_tokens);
      next = plan_with(next, device, model_, options_.plan_tokens);
      log(fmt::format(
          "{} joined: {:.1f} GFLOP/s ({:.2f}x this device's), {} MiB free", address,
          device.measured.gflops,
          device.primary.gflops > 0 ? device.measured.gflops / device.primary.gflops : 0.0,
          device.measured.memory_bytes >> 20));
      admitted.push_back(address);
    } catch (const Error& e) {  // gone again, not a worker, or no plan takes it
      log(fmt::format("not admitting {}: {}", address, e.what()));
    }
  }
  if (admitted.empty()) return;
  // The running cluster ends (its workers take the next session), and the next one starts on
  // every device.
  if (cluster_) {
    try {
      cluster_->finish();
    } catch (const Error&) {
    }
  }
  const Planned before = planned_;
  planned_ = std::move(next);
  try {
    start();
  } catch (const TransportError& e) {
    if (runner_enabled()) {
      // A joiner (or another worker) went between its profile and this start: as after a loss.
      const std::vector<std::string> lost = rebuild(e);
      log(fmt::format("{} went before the new cluster started", fmt::join(lost, ", ")));
      std::erase_if(admitted, [&](const std::string& a) {
        return std::find(lost.begin(), lost.end(), a) != lost.end();
      });
    } else {
      log(fmt::format("the cluster with {} failed to start: {}; going on without",
                      fmt::join(admitted, ", "), e.what()));
      planned_ = before;
      start();
      return;
    }
  }
  if (!admitted.empty()) {
    log(fmt::format("{} on {} device(s) from now on, with {}", planned_.plan.strategy,
                    planned_.plan.num_devices(), fmt::join(admitted, ", ")));
  }
  if (options_.on_join) options_.on_join(admitted);
}

}  // namespace huddle
