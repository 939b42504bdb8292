// A plan from every planner runs on in-process devices and gives the single-device reference
// answer (the float64 references in tests/fixtures, tolerance 1e-4 x max|ref| as in
// tests/runtime/distributed_test.cpp).
#include "io/npy.h"
#include "model/model.h"
#include "net/inproc_transport.h"
#include "plan/lowering.h"
#include "planner/planners.h"
#include "runtime/executor.h"
#include "runtime/in_process_cluster.h"
#include "runtime/session.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <exception>
#include <thread>

namespace huddle {
namespace {

ClusterSpec cluster_of(std::int64_t memory_bytes, double bandwidth_bps) {
  std::vector<DeviceSpec> devices;
  const double speeds[] = {14.7, 8.25, 4.03};
  for (int i = 0; i < 3; ++i) {
    DeviceSpec d;
    d.name = fmt::format("dev{}", i);
    d.gflops = speeds[i];
    d.memory_bytes = memory_bytes;
    devices.push_back(d);
  }
  return ClusterSpec::uniform(devices, {bandwidth_bps, 1e-5});
}

class EveryPlanner : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPlanner, GivesTheReferenceAnswer) {
  const Model model = Model::load(testing::fixture_model(GetParam()));
  const CostModel cost(model.config(), model.graph());
  const std::int64_t all = cost.footprint().total_weight_bytes(model.config());
  const ClusterSpec ample = cluster_of(std::int64_t{1} << 40, 1e12);
  // Every device can hold about half the model: the MLP (~58%) cannot be replicated (Hepti goes
  // 1D-tiled) and Galaxy must keep each share within it.
  const ClusterSpec tight = cluster_of(all / 2 + (std::int64_t{1} << 18), 1e12);
  struct Case {
    std::string planner;
    const ClusterSpec* cluster;
    std::string mode;  // expected, "" for any
  };
  const std::vector<Case> cases = {{"local", &ample, ""},
                                   {"megatron", &ample, ""},
                                   {"sp", &ample, ""},
                                   {"galaxy", &ample, ""},
                                   {"galaxy", &tight, ""},
                                   {"hepti", &ample, "weight-stationary"},
                                   {"hepti", &tight, "1d-tiled"},
                                   {"auto", &ample, ""}};
  const std::string stem = "references/" + GetParam() + ".16";
  const auto ids = testing::read_ids(testing::fixture(stem + ".ids.json"));
  const Tensor reference = io::read_npy(testing::fixture(stem + ".npy"));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.planner + (c.cluster == &tight ? " (tight memory)" : ""));
    const PlanResult result =
        run_planner(c.planner, PlanRequest{cost, *c.cluster, 16, std::nullopt});
    if (!c.mode.empty()) {
      EXPECT_EQ(result.mode, c.mode);
    }
    const Plan& plan = result.runnable();
    plan.validate(model.config(), c.planner);
    for (std::size_t d = 0; d < result.prediction.devices.size(); ++d) {
      EXPECT_LE(result.prediction.devices[d].memory.total(),
                c.cluster->device(static_cast<int>(d)).memory_bytes);
    }
    Tensor out;
    run_in_process(model, plan,
                   [&](StepRunner& runner) { out = runner.forward(ids, true).clone(); });
    ASSERT_EQ(out.shape(), reference.shape());
    EXPECT_LE(testing::relative_error(out, reference), 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EveryPlanner,
                         ::testing::Values("gpt2-tiny", "bert-tiny", "llama-tiny"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace huddle
