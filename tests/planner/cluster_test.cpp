// Cluster files: the minimal and rich forms, and clear errors for wrong or missing fields.
#include "planner/cluster.h"
#include "core/error.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

nlohmann::json minimal() {
  return nlohmann::json::parse(R"({
    "devices": [{"name": "L", "gflops": 40.0, "memory_bytes": 2000000000},
                {"name": "M", "gflops": 20.0, "memory_bytes": 1000000000},
                {"name": "S", "gflops": 10.0, "memory_bytes": 500000000}],
    "links": [{"from": "L", "to": "M", "bandwidth_bps": 1e8, "latency_s": 0.002}],
    "default_link": {"bandwidth_bps": 1e9, "latency_s": 0.0005}})");
}

void expect_error(const nlohmann::json& j, const std::string& needle) {
  try {
    ClusterSpec::from_json(j, "cluster.json");
    FAIL() << "accepted a cluster that should be refused (" << needle << ")";
  } catch (const LoadError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cluster.json"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(ClusterFile, MinimalForm) {
  const ClusterSpec c = ClusterSpec::from_json(minimal(), "cluster.json");
  ASSERT_EQ(c.size(), 3);
  EXPECT_EQ(c.device(0).name, "L");  // the primary
  EXPECT_EQ(c.device(1).memory_bytes, 1000000000);
  EXPECT_EQ(c.device(2).speed(BlockType::Mlp), 10.0);  // per-block speeds default to gflops
  EXPECT_EQ(c.link(0, 1).bandwidth_bps, 1e8);
  EXPECT_EQ(c.link(1, 0).latency_s, 0.002);    // symmetric unless both directions are given
  EXPECT_EQ(c.link(0, 2).bandwidth_bps, 1e9);  // default
  EXPECT_DOUBLE_EQ(c.link(0, 1).transfer_s(1e6), 0.002 + 8e6 / 1e8);
}

TEST(ClusterFile, RichFormAndAsymmetricLinks) {
  nlohmann::json j = minimal();
  j["devices"][1]["gflops_by_block"] = {{"attention", 15.0}, {"mlp", 25.0}};
  j["devices"][1]["measured_at"] = "2024-01-01";  // profiler extras are ignored
  j["devices"][1]["quota_share"] = 0.6;
  j["links"].push_back({{"from", "M"}, {"to", "L"}, {"bandwidth_bps", 5e7}, {"latency_s", 0.001}});
  const ClusterSpec c = ClusterSpec::from_json(j, "cluster.json");
  EXPECT_EQ(c.device(1).speed(BlockType::Attention), 15.0);
  EXPECT_EQ(c.device(1).speed(BlockType::Mlp), 25.0);
  EXPECT_EQ(c.device(1).speed(BlockType::Connection), 20.0);
  EXPECT_EQ(c.link(0, 1).bandwidth_bps, 1e8);
  EXPECT_EQ(c.link(1, 0).bandwidth_bps, 5e7);
  // Round trip through to_json.
  const ClusterSpec back = ClusterSpec::from_json(c.to_json(), "again");
  EXPECT_EQ(back.link(1, 0).bandwidth_bps, 5e7);
  EXPECT_EQ(back.device(1).speed(BlockType::Mlp), 25.0);
  EXPECT_EQ(back.device(1).quota_share, 0.6);
  EXPECT_EQ(back.device(0).quota_share, 0.0);  // not given: unknown
  j["devices"][1]["quota_share"] = 1.5;
  expect_error(j, "quota_share");
}

TEST(ClusterFile, WrongOrMissingFields) {
  auto j = minimal();
  j["devices"][1].erase("gflops");
  expect_error(j, "devices[1].gflops: missing");
  j = minimal();
  j["devices"][0]["memory_bytes"] = "2GB";
  expect_error(j, "devices[0].memory_bytes: expected a number");
  j = minimal();
  j["devices"][2]["gflops"] = -1;
  expect_error(j, "devices[2].gflops: must be > 0");
  j = minimal();
  j["devices"][2]["name"] = "L";
  expect_error(j, "appears twice");
  j = minimal();
  j["links"][0]["to"] = "X";
  expect_error(j, "links[0].to: no device is called 'X'");
  j = minimal();
  j["links"][0].erase("latency_s");
  expect_error(j, "links[0].latency_s: missing");
  j = minimal();
  j["default_link"]["bandwidth_bps"] = 0;
  expect_error(j, "default_link.bandwidth_bps: must be > 0");
  j = minimal();
  j["devices"] = nlohmann::json::array();
  expect_error(j, "at least one device");
  expect_error(nlohmann::json::array(), "expected a JSON object");
  j = minimal();
  j.erase("devices");
  expect_error(j, "devices: missing");
}

TEST(ClusterFile, MissingLinkWithoutDefaultIsAPlanError) {
  auto j = minimal();
  j.erase("default_link");
  const ClusterSpec c = ClusterSpec::from_json(j, "cluster.json");
  EXPECT_EQ(c.link(1, 0).bandwidth_bps, 1e8);
  try {
    c.link(1, 2);
    FAIL();
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("from 'M' to 'S'"), std::string::npos) << e.what();
  }
}

// A cluster file nested deep enough used to crash the reader (a recursive dump() into the error
// message); the parser now refuses it before anything recurses.
TEST(ClusterFile, DeeplyNestedFileIsRefused) {
  const std::size_t depth = 1'000'000;
  const std::string text =
      R"({"devices": )" + std::string(depth, '[') + std::string(depth, ']') + "}";
  testing::TempDir dir;
  const std::string path = (dir / "deep.json").string();
  std::ofstream(path) << text;
  try {
    ClusterSpec::load(path);
    FAIL() << "accepted a cluster nested a million deep";
  } catch (const LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("deep.json: JSON nested deeper than 64"),
              std::string::npos)
        << e.what();
  }
}

TEST(ClusterFile, UnreadableFiles) {
  EXPECT_THROW(ClusterSpec::load("/nonexistent/cluster.json"), LoadError);
}

TEST(ClusterFile, Subset) {
  const ClusterSpec c = ClusterSpec::from_json(minimal(), "cluster.json");
  const ClusterSpec s = c.subset({1, 0});
  ASSERT_EQ(s.size(), 2);
  EXPECT_EQ(s.device(0).name, "M");
  EXPECT_EQ(s.link(0, 1).bandwidth_bps, 1e8);
}

}  // namespace
}  // namespace huddle
