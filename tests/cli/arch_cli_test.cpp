// `huddle run` of the Llama-family fixtures (tests/fixtures/make_arch_fixtures.py) across real
// processes on 127.0.0.1: galaxy over fixed shares and hpipe planned from a cluster file whose
// devices each hold too little memory for the whole model (so the plan has three stages). Workers
// rebuild the graph from config.json, so rope scaling, the sliding window and the fused-weight
// slices must reach them. Logits within 1e-4 x max|ref| of the float64 reference, greedy ids
// identical.
#include "io/npy.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace huddle {
namespace {

using testing::contains;
using testing::fixture;
using testing::ids_arg;
using testing::run_huddle;

struct Case {
  std::string model;
  std::string strategy;
};

class ArchCli : public ::testing::TestWithParam<Case> {};

// 300 kB per device: every fixture needs about 0.4-0.5 MB in all.
void write_small_cluster(const std::filesystem::path& path) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& [name, gflops] : {std::pair{"L", 100.0}, {"M", 60.0}, {"S", 25.0}}) {
    devices.push_back({{"name", name}, {"gflops", gflops}, {"memory_bytes", 300000}});
  }
  std::ofstream(path) << nlohmann::json{{"devices", devices},
                                        {"default_link",
                                         {{"bandwidth_bps", 1e9}, {"latency_s", 0.0005}}}}
                             .dump();
}

TEST_P(ArchCli, MatchesTheReferenceAcrossProcesses) {
  const Case& c = GetParam();
  testing::TempDir dir;
  std::vector<std::string> split = {"--local-devices", "3", "--strategy", c.strategy};
  if (c.strategy == "hpipe") {
    write_small_cluster(dir / "cluster.json");
    split.insert(split.end(), {"--cluster", (dir / "cluster.json").string()});
  } else {
    split.insert(split.end(), {"--shares", "5,3,1"});
  }
  std::ifstream in(fixture("references/" + c.model + ".generate.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  std::vector<std::string> args = {"run",
                                   "--model",
                                   testing::fixture_model(c.model).string(),
                                   "--ids",
                                   ids_arg(ref["prompt"].get<std::vector<std::int32_t>>()),
                                   "--n-predict",
                                   "16",
                                   "--dump-logits",
                                   (dir / "out.npy").string(),
                                   "--threads",
                                   "1",
                                   "--json"};
  args.insert(args.end(), split.begin(), split.end());
  const auto r = run_huddle(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["strategy"], c.strategy);
  EXPECT_EQ(j["devices"].size(), 3u);
  if (c.strategy == "hpipe") {
    EXPECT_TRUE(contains(r.err, "on 3 of 3 devices")) << r.err;
  }
  EXPECT_EQ(j["generated"], ref["greedy"]);
  // The prompt's logits: the generation prompt is the 40-token reference prompt.
  ASSERT_EQ(ref["prompt"].get<std::vector<std::int32_t>>(),
            testing::read_ids(fixture("references/" + c.model + ".40.ids.json")));
  const Tensor out = io::read_npy(dir / "out.npy");
  const Tensor expected = io::read_npy(fixture("references/" + c.model + ".40.npy"));
  ASSERT_EQ(out.shape(), expected.shape());
  EXPECT_LE(testing::relative_error(out, expected), 1e-4);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const std::string model : {"llama3-tiny", "llama-linear-tiny", "llama-dynamic-tiny",
                                  "qwen2-tiny", "mistral-tiny", "phi3-tiny"}) {
    for (const std::string strategy : {"galaxy", "hpipe"}) cases.push_back({model, strategy});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Strategies, ArchCli, ::testing::ValuesIn(all_cases()), [](const auto& p) {
  std::string name = p.param.model + "_" + p.param.strategy;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
});

// A config.json that asks for math Huddle does not do exits 1 naming the file and the field.
TEST(ArchCli, UnsupportedConfigExitsOneNamingTheField) {
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}},
       "rope_scaling.rope_type 'yarn' is not supported"},
      {{{"final_logit_softcapping", 30.0}}, "field 'final_logit_softcapping' is not understood"}};
  for (const auto& [patch, message] : cases) {
    testing::TempDir dir;
    testing::copy_model(testing::fixture_model("llama3-tiny"), dir / "m");
    std::ifstream in(dir / "m" / "config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    in.close();
    for (const auto& [key, value] : patch.items()) config[key] = value;
    std::ofstream(dir / "m" / "config.json") << config.dump();
    const auto r = run_huddle({"run", "--model", (dir / "m").string(), "--ids", "5,6,7"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "config.json")) << r.err;
    EXPECT_TRUE(contains(r.err, message)) << r.err;
  }
}

}  // namespace
}  // namespace huddle
