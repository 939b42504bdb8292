// Auto: the fastest candidate by the cost model; local when distribution does not pay.
#include "core/error.h"
#include "planner/planners.h"
#include "planner_test_util.h"

#include <gtest/gtest.h>

namespace huddle {
namespace {

TEST(Auto, PicksTheFastestCandidate) {
  const testing::PaperModel m = testing::paper_model("gpt2", "gpt2-large");
  const ClusterSpec c = testing::nano_cluster("LMM", testing::kAmpleBytes, {1e10, 0.0001});
  const PlanRequest request{*m.cost, c, 128, std::nullopt};
  const PlanResult r = run_planner("auto", request);
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.strategy, "auto");
  EXPECT_GT(r.plan->num_devices(), 1);  // a big model on fast links: distribution pays
  for (const std::string name : {"local", "megatron", "sp", "galaxy", "hepti"}) {
    const PlanResult other = run_planner(name, request);
    EXPECT_LE(r.prediction.latency_s, other.prediction.latency_s * (1 + 1e-12)) << name;
  }
}

TEST(Auto, FallsBackToLocalOnSlowLinks) {
  const testing::PaperModel m = testing::paper_model("bert", "bert-base");
  const ClusterSpec c =
      testing::nano_cluster("LMS", testing::kAmpleBytes, {1e5, 0.05});  // 100 kbit/s, 50 ms
  const PlanResult r = run_planner("auto", PlanRequest{*m.cost, c, 16, std::nullopt});
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->strategy, "local");
  EXPECT_EQ(r.plan->num_devices(), 1);
}

TEST(Auto, LeavesOutADeviceBehindASlowLink) {
  const testing::PaperModel m = testing::paper_model("gpt2", "gpt2-large");
  ClusterSpec c = testing::nano_cluster("LLL", testing::kAmpleBytes, {1e10, 0.0001});
  c.set_link(0, 2, {1e4, 0.5});
  c.set_link(1, 2, {1e4, 0.5});
  const PlanResult r = run_planner("auto", PlanRequest{*m.cost, c, 128, std::nullopt});
  ASSERT_TRUE(r.plan);
  for (const std::string& d : r.plan->devices) EXPECT_NE(d, c.device(2).name);
}

TEST(Auto, NothingFitsListsEveryCandidate) {
  const testing::PaperModel m = testing::paper_model("gpt2", "gpt2-large");
  const ClusterSpec c = testing::nano_cluster("LM", 100000000);
  try {
    run_planner("auto", PlanRequest{*m.cost, c, 128, std::nullopt});
    FAIL();
  } catch (const PlanError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("local on 1 device"), std::string::npos) << what;
    EXPECT_NE(what.find("galaxy on 2 devices"), std::string::npos) << what;
  }
}

TEST(Planners, UnknownNameAndBadOptions) {
  const testing::PaperModel m = testing::paper_model("bert", "bert-base");
  const ClusterSpec c = testing::nano_cluster("LM", testing::kAmpleBytes);
  EXPECT_THROW(run_planner("fastest", PlanRequest{*m.cost, c, 16, std::nullopt}), UsageError);
  EXPECT_THROW(run_planner("galaxy", PlanRequest{*m.cost, c, 0, std::nullopt}), UsageError);
  EXPECT_THROW(run_planner("galaxy", PlanRequest{*m.cost, c, 100000, std::nullopt}), UsageError);
  EXPECT_THROW(run_planner("hepti", PlanRequest{*m.cost, c, 16, -1.0}), UsageError);
}

}  // namespace
}  // namespace huddle
