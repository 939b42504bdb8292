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

}  // namespace

void run_in_process(const Model& model, const Plan& plan,
                    const std::function<void(StepRunner&)>& drive) {
  const int n = plan.num_devices();
  net::InprocCluster cluster(n);
  std::vector<Program> programs;
  std::vector<WeightMap> weights;
  for (int r = 0; r < n; ++r) {
    programs.push_back(lower(model.graph(), model.config(), plan, r));
    weights.push_back(extract_weights(programs.back(), model.weights()));
    localize_weights(programs.back());
  }
  const Pipeline* pipeline = plan.pipeline ? &*plan.pipeline : nullptr;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> workers;
  for (int r = 1; r < n; ++r) {
    workers.emplace_back([&, r] {
      try {
        Executor executor(programs[static_cast<std::size_t>(r)].graph,
                          weights[static_cast<std::size_t>(r)], model.config().max_positions,
                          DeviceGroup{&cluster.rank(r), plan.token_shares});
        follow_primary(cluster.rank(r), executor, nullptr, pipeline);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        cluster.rank(r).close();
      }
    });
  }
  try {
    Executor executor(programs[0].graph, weights[0], model.config().max_positions,
                      DeviceGroup{&cluster.rank(0), plan.token_shares});
    PrimarySession session(cluster.rank(0), executor, nullptr, pipeline, output_width(model));
    drive(session);
    session.end();
  } catch (...) {
    errors[0] = std::current_exception();
    cluster.rank(0).close();
  }
  for (auto& t : workers) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::map<std::string, Tensor> run_in_process(const Graph& graph, const WeightMap& weights,
                                             const Plan& plan,
                                             const std::map<std::string, Tensor>& inputs,
                                             std::vector<StepReport>* reports) {
  const int n = plan.num_devices();
  net::InprocCluster cluster(n);
  std::vector<Program> programs;
  std::vector<WeightMap> program_weights;
  for (int r = 0; r < n; ++r) {
    programs.push_back(lower_rows(graph, plan, r));
    program_weights.push_back(extract_weights(programs.back(), weights));
    localize_weights(programs.back());
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> workers;
  for (int r = 1; r < n; ++r) {
    workers.emplace_back([&, r] {
      try {
        Executor executor(programs[static_cast<std::size_t>(r)].graph,
                          program_weights[static_cast<std::size_t>(r)], 1,
                          DeviceGroup{&cluster.rank(r), plan.token_shares});
        follow_primary(cluster.rank(r), executor);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
        cluster.rank(r).close();
      }
    });
  }
  std::map<std::string, Tensor> out;
  try {
    Executor executor(programs[0].graph, program_weights[0], 1,
                      DeviceGroup{&cluster.rank(0), plan.token_shares});
    PrimarySession session(cluster.rank(0), executor);
    out = session.run(inputs);
    if (reports) *reports = session.last_reports();
    session.end();
  } catch (...) {
    errors[0] = std::current_exception();
    cluster.rank(0).close();
  }
  for (auto& t : workers) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

}  // namespace huddle
