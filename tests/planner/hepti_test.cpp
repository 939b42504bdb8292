// Hepti: the MILP against brute force on small instances, mode selection, dropping idle
// devices, the deadline, and the 2D-tiled form the runtime refuses.
#include "core/error.h"
#include "planner/hepti_planner.h"
#include "planner_test_util.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <random>

namespace huddle {
namespace {

// Best objective over every integer split (both blocks integral); +inf if none is feasible.
double brute_force(const SplitProblem& p) {
  const std::size_t n = p.devices.size();
  double best = std::numeric_limits<double>::infinity();
  std::array<std::vector<double>, 2> x{std::vector<double>(n), std::vector<double>(n)};
  const auto feasible = [&] {
    for (std::size_t i = 0; i < n; ++i) {
      const SplitDevice& d = p.devices[i];
      if (d.mem_fixed + d.mem_per_unit[0] * x[0][i] + d.mem_per_unit[1] * x[1][i] > d.mem_budget)
        return false;
    }
    return true;
  };
  std::function<void(std::size_t, std::size_t, std::int64_t)> rec =
      [&](std::size_t b, std::size_t i, std::int64_t left) {
        if (i + 1 == n) {
          if (left < p.devices[i].min_units[b]) return;
          x[b][i] = static_cast<double>(left);
          if (b == 0) return rec(1, 0, p.units[1]);
          if (!feasible()) return;
          const double t = split_objective(p, x);
          if (!p.deadline_s || t <= *p.deadline_s) best = std::min(best, t);
          return;
        }
        for (std::int64_t v = p.devices[i].min_units[b]; v <= left; ++v) {
          x[b][i] = static_cast<double>(v);
          rec(b, i + 1, left - v);
        }
      };
  rec(0, 0, p.units[0]);
  return best;
}

TEST(HeptiMilp, MatchesBruteForceOnRandomInstances) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 60; ++trial) {
    SplitProblem p;
    const std::size_t n = 2 + static_cast<std::size_t>(trial % 3);
    p.units = {3 + trial % 4, 5 + trial % 7};
    p.comm = {u(rng) * 1e-3, u(rng) * 1e-3};
    if (trial % 5 == 4) p.deadline_s = u(rng) * 8e-3;
    for (std::size_t i = 0; i < n; ++i) {
      SplitDevice d;
      d.cost = {u(rng) * 1e-3, u(rng) * 1e-3};
      d.fixed = {u(rng) * 1e-4, u(rng) * 1e-4};
      d.mem_per_unit = {u(rng) * 1e8, u(rng) * 1e8};
      d.mem_fixed = u(rng) * 1e8;
      d.mem_budget = d.mem_fixed + u(rng) * 6e8;
      d.min_units = {i == 0 ? 1 : 0, i == 0 ? 1 : 0};
      p.devices.push_back(d);
    }
    const double expected = brute_force(p);
    const SplitSolution s = solve_split(p);
    ASSERT_EQ(s.feasible, std::isfinite(expected)) << "trial " << trial;
    if (!s.feasible) {
      ++infeasible;
      continue;
    }
    ++feasible;
    EXPECT_NEAR(s.objective, expected, 1e-9 * expected + 1e-12) << "trial " << trial;
    for (std::size_t b = 0; b < 2; ++b) {
      double sum = 0;
      for (double v : s.x[b]) {
        EXPECT_EQ(v, std::round(v));
        sum += v;
      }
      EXPECT_EQ(sum, static_cast<double>(p.units[b]));
    }
  }
  EXPECT_GT(feasible, 20);  // the instances exercise both outcomes
  EXPECT_GT(infeasible, 0);
}

TEST(HeptiMilp, RealModelProblemMatchesBruteForce) {
  // gpt2 preset shapes scaled down: 1D-tiled over 3 unequal devices, columns in 48 units.
  testing::PaperModel m = testing::paper_model("gpt2", "gpt2");
  const ClusterSpec c = testing::nano_cluster("LMS", testing::kAmpleBytes);
  SplitProblem p =
      hepti_problem(PlanRequest{*m.cost, c, 64, std::nullopt}, HeptiMode::Tiled1D, {0, 1, 2});
  // Coarser MLP units so brute force stays small: one unit = 64 columns.
  p.units[1] /= 64;
  for (SplitDevice& d : p.devices) {
    d.cost[1] *= 64;
    d.mem_per_unit[1] *= 64;
  }
  const SplitSolution s = solve_split(p);
  ASSERT_TRUE(s.feasible);
  EXPECT_NEAR(s.objective, brute_force(p), 1e-9 * s.objective);
  // Faster devices get at least as much work.
  EXPECT_GE(s.x[0][0], s.x[0][2]);
  EXPECT_GE(s.x[1][0], s.x[1][1]);
  EXPECT_GE(s.x[1][1], s.x[1][2]);
}

TEST(Hepti, WeightStationaryWhenMemoryAllows) {
  const testing::PaperModel m = testing::paper_model("bert", "bert-large");
  const ClusterSpec c = testing::nano_cluster("LMS", testing::kAmpleBytes);
  const PlanResult r = plan_hepti(PlanRequest{*m.cost, c, 128, std::nullopt});
  EXPECT_EQ(r.mode, "weight-stationary");
  ASSERT_TRUE(r.plan);
  r.plan->validate(m.config, "hepti plan");
  EXPECT_EQ(r.plan->layers[0].attention, BlockSplit::Heads);
  EXPECT_EQ(r.plan->layers[0].mlp, BlockSplit::Tokens);
  // The token fractions follow speed: the fastest device takes the most.
  EXPECT_GE(r.plan->token_shares[0], r.plan->token_shares[1]);
  EXPECT_GE(r.plan->token_shares[1], r.plan->token_shares[2]);
}

TEST(Hepti, OneDTiledWhenTheMlpDoesNotFitEverywhere) {
  const testing::PaperModel m = testing::paper_model("gpt2", "gpt2-large");  // MLP weights ~1.9 GB
  const ClusterSpec c = testing::nano_cluster("LMM", 1500000000);
  const PlanResult r = plan_hepti(PlanRequest{*m.cost, c, 128, std::nullopt});
  EXPECT_EQ(r.mode, "1d-tiled");
  ASSERT_TRUE(r.plan);
  r.plan->validate(m.config, "hepti plan");
  EXPECT_EQ(r.plan->layers[0].mlp, BlockSplit::Columns);
  EXPECT_EQ(r.plan->layers[0].residual, ResidualLayout::Replicated);
  for (std::size_t d = 0; d < r.prediction.devices.size(); ++d) {
    EXPECT_LE(r.prediction.devices[d].memory.total(), c.devices()[d].memory_bytes);
    EXPECT_GE(r.prediction.devices[d].heads, 1);
    EXPECT_GE(r.prediction.devices[d].columns, 1);
  }
  EXPECT_GE(r.prediction.devices[0].columns, r.prediction.devices[1].columns);
}

TEST(Hepti, IdleDevicesAreDroppedAndTheProblemSolvedAgain) {
  const testing::PaperModel m = testing::paper_model("gpt2", "gpt2-large");
  std::vector<DeviceSpec> devices = testing::nano_cluster("LM", 1500000000).devices();
  DeviceSpec crawl = testing::nano('S', "crawler", 1500000000);
  crawl.gflops = crawl.attention_gflops = crawl.mlp_gflops = crawl.connection_gflops = 0.001;
  devices.push_back(crawl);
  // Three devices are needed for memory only if the crawler is kept; give the others room.
  devices[0].memory_bytes = devices[1].memory_bytes = 2500000000;
  const ClusterSpec c = ClusterSpec::uniform(devices, {1e9, 0.0005});
  const PlanResult r = plan_hepti(PlanRequest{*m.cost, c, 128, std::nullopt});
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->num_devices(), 2);
  bool noted = false;
  for (const std::string& n : r.notes) noted = noted || n.find("'crawler'") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(Hepti, DeadlineIsRespectedOrRefused) {
  const testing::PaperModel m = testing::paper_model("bert", "bert-large");
  const ClusterSpec c = testing::nano_cluster("LM", testing::kAmpleBytes);
  EXPECT_NO_THROW(plan_hepti(PlanRequest{*m.cost, c, 128, 100.0}));
  try {
    plan_hepti(PlanRequest{*m.cost, c, 128, 1e-4});
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("deadline of 0.100 ms"), std::string::npos) << e.what();
  }
}

TEST(Hepti, TwoDTiledFromSixteenDevicesIsARunnablePlan) {
  const testing::PaperModel m = testing::paper_model("gpt2", "gpt2-large");
  const ClusterSpec c = testing::nano_cluster(std::string(16, 'M'), 1000000000);
  const PlanResult r = plan_hepti(PlanRequest{*m.cost, c, 128, std::nullopt});
  EXPECT_EQ(r.mode, "2d-tiled");
  ASSERT_TRUE(r.plan);
  ASSERT_TRUE(r.plan->grid);
  EXPECT_EQ(*r.plan->grid, (Grid{4, 4}));
  EXPECT_EQ(r.document["grid"]["rows"].get<int>() * r.document["grid"]["cols"].get<int>(), 16);
  EXPECT_EQ(r.prediction.devices.size(), 16u);
  for (const DevicePrediction& d : r.prediction.devices) EXPECT_LE(d.memory.total(), 1000000000);
  // The document is the plan: it loads and validates against the model.
  const Plan back = Plan::from_json(r.document, "plan.json");
  EXPECT_NO_THROW(back.validate(m.cost->config(), "plan.json"));
  EXPECT_EQ(back.to_json(), r.document);
}

TEST(Hepti, ModeCanBeForced) {
  const testing::PaperModel m = testing::paper_model("gpt2", "gpt2-large");
  const ClusterSpec c = testing::nano_cluster("LMMS", testing::kAmpleBytes);
  PlanRequest request{*m.cost, c, 128, std::nullopt};
  EXPECT_EQ(plan_hepti(request).mode, "weight-stationary");  // ample memory: Hepti's own choice
  request.mode = "2d";
  const PlanResult two_d = plan_hepti(request);
  EXPECT_EQ(two_d.mode, "2d-tiled");
  ASSERT_TRUE(two_d.plan && two_d.plan->grid);
  EXPECT_EQ(*two_d.plan->grid, (Grid{2, 2}));
  // Faster grid columns get more heads; the hidden split follows the rows' speeds.
  const LayerPlan& l = two_d.plan->layers.front();
  EXPECT_GE(l.heads[0].second - l.heads[0].first, l.heads[1].second - l.heads[1].first);
  request.mode = "1d";
  const PlanResult one_d = plan_hepti(request);
  EXPECT_EQ(one_d.mode, "1d-tiled");
  ASSERT_TRUE(one_d.plan);
  EXPECT_FALSE(one_d.plan->grid);
  request.mode = "3d";
  EXPECT_THROW(plan_hepti(request), UsageError);
  request.mode = "2d";
  EXPECT_THROW(run_planner("galaxy", request), UsageError);
  EXPECT_EQ(run_planner("hepti", request).mode, "2d-tiled");
}

TEST(Hepti, NothingFitsIsRefused) {
  const testing::PaperModel m = testing::paper_model("gpt2", "gpt2-large");
  const ClusterSpec c = testing::nano_cluster("LM", 300000000);
  try {
    plan_hepti(PlanRequest{*m.cost, c, 128, std::nullopt});
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("memory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace huddle
