#include "runtime/in_process_cluster.h"

#include "net/inproc_transport.h"
#include "plan/lowering.h"
#include "plan/lowering_rows.h"
#include "runtime/executor.h"
#include "runtime/session.h"

#include <exception>
#include <thread>

namespace huddle {
namespace {

// The width of the model's first output (the logits, or an encoder's hidden states).
std::int64_t output_width(const Model& model) {
  const Graph& g = model.graph();
  return g.outputs().empty() ? 0 : g.value(g.outputs().front()).shape.back();
}

using DeviceBody = std::function<void(Executor&, net::Transport&)>;

// Lowers every device's program of `plan` (with `lower_for`), then runs `follow` on devices
// 1..n-1 and `lead` on device 0, each on its own thread with an Executor of its program and its
// weights; returns when all have stopped and rethrows the first device's error, if any.
void run_devices(const Plan& plan, const std::function<Program(int)>& lower_for,
                 const WeightMap& model_weights, std::int64_t max_positions,
                 const DeviceBody& follow, const DeviceBody& lead) {
  const int n = plan.num_devices();
  net::InprocCluster cluster(n);
  std::vector<Program> programs;
  std::vector<WeightMap> weights;
  for (int r = 0; r < n; ++r) {
    programs.push_back(lower_for(r));
    weights.push_back(extract_weights(programs.back(), model_weights));
    localize_weights(programs.back());
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  auto device = [&](int r, const DeviceBody& body) {
    const auto i = static_cast<std::size_t>(r);
    try {
      Executor executor(programs[i].graph, weights[i], max_positions,
                        DeviceGroup{&cluster.rank(r), plan.token_shares});
      body(executor, cluster.rank(r));
    } catch (...) {
      errors[i] = std::current_exception();
      cluster.rank(r).close();
    }
  };
  std::vector<std::thread> workers;
  for (int r = 1; r < n; ++r) workers.emplace_back([&, r] { device(r, follow); });
  device(0, lead);
  for (auto& t : workers) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace

void run_in_process(const Model& model, const Plan& plan,
                    const std::function<void(StepRunner&)>& drive) {
  const Pipeline* pipeline = plan.pipeline ? &*plan.pipeline : nullptr;
  run_devices(
      plan, [&](int r) { return lower(model.graph(), model.config(), plan, r); }, model.weights(),
      model.config().max_positions,
      [&](Executor& executor, net::Transport& transport) {
        follow_primary(transport, executor, nullptr, pipeline);
      },
      [&](Executor& executor, net::Transport& transport) {
        PrimarySession session(transport, executor, nullptr, pipeline, output_width(model));
        drive(session);
        session.end();
      });
}

std::map<std::string, Tensor> run_in_process(const Graph& graph, const WeightMap& weights,
                                             const Plan& plan,
                                             const std::map<std::string, Tensor>& inputs,
                                             std::vector<StepReport>* reports) {
  std::map<std::string, Tensor> out;
  run_devices(
      plan, [&](int r) { return lower(graph, ModelConfig{}, plan, r); }, weights, 1,
      [](Executor& executor, net::Transport& transport) { follow_primary(transport, executor); },
      [&](Executor& executor, net::Transport& transport) {
        PrimarySession session(transport, executor);
        out =
            outputs_by_model_name(graph, lower(graph, ModelConfig{}, plan, 0), session.run(inputs));
        if (reports) *reports = session.last_reports();
        session.end();
      });
  return out;
}

}  // namespace huddle
