// `huddle plan` through its library entry point (plan_to_string).
#include "cli/plan_command.h"
#include "core/error.h"
#include "model/model.h"
#include "plan/plan.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

std::string write_cluster(const testing::TempDir& dir, const std::string& text) {
  const std::string path = (dir / "cluster.json").string();
  std::ofstream(path) << text;
  return path;
}

constexpr const char* kCluster = R"({
  "devices": [{"name": "L", "gflops": 40.0, "memory_bytes": 2000000000},
              {"name": "M", "gflops": 20.0, "memory_bytes": 2000000000}],
  "default_link": {"bandwidth_bps": 1e9, "latency_s": 0.0005}})";

TEST(PlanCommand, JsonReportAndPlanFile) {
  const testing::TempDir dir;
  cli::PlanOptions o;
  o.cluster_file = write_cluster(dir, kCluster);
  o.model_dir = testing::fixture_model("llama-tiny").string();
  o.strategy = "galaxy";
  o.seq_len = 32;
  o.json = true;
  o.output = (dir / "plan.json").string();
  const nlohmann::json j = nlohmann::json::parse(cli::plan_to_string(o));
  EXPECT_EQ(j["strategy"], "galaxy");
  EXPECT_TRUE(j["runnable"].get<bool>());
  EXPECT_GT(j["predicted_ms"].get<double>(), 0);
  ASSERT_EQ(j["devices"].size(), 2u);
  std::int64_t heads = 0, columns = 0, tokens = 0;
  for (const auto& d : j["devices"]) {
    heads += d["heads"].get<std::int64_t>();
    columns += d["ffn_columns"].get<std::int64_t>();
    tokens += d["tokens"].get<std::int64_t>();
    EXPECT_GT(d["memory_bytes"].get<std::int64_t>(), 0);
    EXPECT_GT(d["predicted_ms"].get<double>(), 0);
  }
  const Model model = Model::load(testing::fixture_model("llama-tiny"));
  EXPECT_EQ(heads, model.config().heads);
  EXPECT_EQ(columns, model.config().ffn);
  EXPECT_EQ(tokens, 32);
  EXPECT_EQ(j["devices"][0]["name"], "L");
  EXPECT_GT(j["devices"][0]["heads"].get<int>(), j["devices"][1]["heads"].get<int>() - 1);
  const Plan plan = Plan::load(o.output);  // what `huddle run --plan` reads
  plan.validate(model.config(), o.output);
  EXPECT_EQ(plan.devices, (std::vector<std::string>{"L", "M"}));
  EXPECT_TRUE(plan.vocab.empty());  // on these devices the head is cheap beside its transfers
  EXPECT_FALSE(j["devices"][0].contains("head_rows"));
}

// On slow devices joined by a fast link the planner splits the head by vocabulary, and the
// report gives each device's rows of it (JSON "head_rows", and a line of the text).
TEST(PlanCommand, ReportsTheHeadsRowsPerDevice) {
  const testing::TempDir dir;
  cli::PlanOptions o;
  o.cluster_file = write_cluster(dir, R"({
    "devices": [{"name": "L", "gflops": 0.4, "memory_bytes": 2000000000},
                {"name": "M", "gflops": 0.2, "memory_bytes": 2000000000}],
    "default_link": {"bandwidth_bps": 1e9, "latency_s": 0.00001}})");
  o.model_dir = testing::fixture_model("llama-tiny").string();
  o.strategy = "galaxy";
  o.seq_len = 32;
  o.output = (dir / "plan.json").string();
  const std::string text = cli::plan_to_string(o);
  const Plan plan = Plan::load(o.output);
  ASSERT_EQ(plan.vocab.size(), 2u);
  EXPECT_NE(
      text.find(fmt::format("LM head split by vocabulary, rows per device: L {}, M {}",
                            plan.vocab[0].second, plan.vocab[1].second - plan.vocab[1].first)),
      std::string::npos)
      << text;
  o.json = true;
  const nlohmann::json j = nlohmann::json::parse(cli::plan_to_string(o));
  std::int64_t rows = 0;
  for (const auto& d : j["devices"]) rows += d["head_rows"].get<std::int64_t>();
  EXPECT_EQ(rows, Model::load(o.model_dir).config().vocab_size);
}

// HPipe on a cluster with a fast island {A, B} behind 1 Gbit/s links: a one-token prompt leaves
// a pipeline nothing to overlap, so the island runs its layers tensor-parallel, and the report
// shows the group stage (text: its members and shares; JSON: "devices" and "shares").
TEST(PlanCommand, HpipeReportsAnIslandStage) {
  const testing::TempDir dir;
  cli::PlanOptions o;
  o.cluster_file = write_cluster(dir, R"({
    "devices": [{"name": "P", "gflops": 1, "memory_bytes": 1000000000},
                {"name": "A", "gflops": 20, "memory_bytes": 1000000000},
                {"name": "B", "gflops": 20, "memory_bytes": 1000000000}],
    "links": [{"from": "A", "to": "B", "bandwidth_bps": 1e11, "latency_s": 0.000001}],
    "default_link": {"bandwidth_bps": 1e9, "latency_s": 0.00005}})");
  o.model_dir = testing::fixture_model("gpt2-tiny").string();
  o.strategy = "hpipe";
  o.seq_len = 1;
  const std::string text = cli::plan_to_string(o);
  EXPECT_TRUE(testing::contains(text, "island [A (20), B (20)] tensor-parallel runs")) << text;
  EXPECT_TRUE(testing::contains(text, "hybrid: tensor-parallel island stages {A, B}")) << text;
  o.json = true;
  o.output = (dir / "plan.json").string();
  const nlohmann::json j = nlohmann::json::parse(cli::plan_to_string(o));
  const nlohmann::json& last = j["pipeline"]["stages"].back();
  EXPECT_EQ(last["devices"], (nlohmann::json{"A", "B"}));
  EXPECT_EQ(last["shares"], (nlohmann::json{20.0, 20.0}));
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const Plan plan = Plan::load(o.output);
  plan.validate(model.config(), o.output);
  EXPECT_TRUE(plan.pipeline->stages.back().grouped());
}

TEST(PlanCommand, TextReport) {
  const testing::TempDir dir;
  cli::PlanOptions o;
  o.cluster_file = write_cluster(dir, kCluster);
  o.model_dir = testing::fixture_model("gpt2-tiny").string();
  const std::string text = cli::plan_to_string(o);  // auto
  EXPECT_NE(text.find("strategy auto"), std::string::npos) << text;
  EXPECT_NE(text.find("predicted latency"), std::string::npos) << text;
  EXPECT_NE(text.find("L "), std::string::npos) << text;
}

TEST(PlanCommand, ErrorsNameTheirSource) {
  const testing::TempDir dir;
  cli::PlanOptions o;
  o.cluster_file = write_cluster(dir, R"({"devices": [{"name": "L", "gflops": 40.0}]})");
  o.model_dir = testing::fixture_model("gpt2-tiny").string();
  try {
    cli::plan_to_string(o);
    FAIL();
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("devices[0].memory_bytes: missing"), std::string::npos)
        << e.what();
  }
  o.cluster_file = write_cluster(dir, "{not json");
  EXPECT_THROW(cli::plan_to_string(o), LoadError);
  o.cluster_file = write_cluster(dir, kCluster);
  o.strategy = "nope";
  EXPECT_THROW(cli::plan_to_string(o), UsageError);
}

}  // namespace
}  // namespace huddle
