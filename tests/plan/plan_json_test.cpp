// Plan files from outside the program: refused with a PlanError naming the file when they are
// not JSON, repeat a key, or nest deep enough to crash a recursive walk; saved plans load back.
#include "core/error.h"
#include "model/model.h"
#include "plan/plan.h"
#include "planner/strategies.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace huddle {
namespace {

class PlanFile : public ::testing::Test {
 protected:
  // Plan::load's error for a file holding `text` ("(accepted)" when it loads).
  std::string load_error(const std::string& text) {
    std::ofstream(path_) << text;
    try {
      Plan::load(path_);
    } catch (const PlanError& e) {
      return e.what();
    }
    return "(accepted)";
  }

  testing::TempDir dir_;
  std::string path_ = (dir_ / "plan.json").string();
};

TEST_F(PlanFile, MalformedDuplicateAndDeeplyNestedFilesAreRefusedNamingTheFile) {
  EXPECT_NE(load_error(R"({"devices": [)").find(path_ + ": malformed JSON"), std::string::npos);
  EXPECT_NE(load_error(R"({"devices": ["a"], "devices": ["b"]})")
                .find(path_ + ": duplicate key 'devices'"),
            std::string::npos);
  // Before the bound this crashed: the error for "devices" printed the value (a recursive dump).
  const std::size_t depth = 1'000'000;
  const std::string error =
      load_error(R"({"devices": )" + std::string(depth, '[') + std::string(depth, ']') + "}");
  EXPECT_NE(error.find(path_ + ": JSON nested deeper than 64"), std::string::npos) << error;
}

TEST_F(PlanFile, SavedPlansLoadBack) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  for (const std::string strategy : {"galaxy", "pipeline"}) {
    const Plan plan = make_plan(strategy, model.config(), {"a", "b"}, {2, 1});
    plan.save(path_);
    EXPECT_EQ(Plan::load(path_).to_json(), plan.to_json()) << strategy;
  }
}

}  // namespace
}  // namespace huddle
