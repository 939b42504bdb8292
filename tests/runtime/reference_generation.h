// Shared check of the in-process distributed tests: greedy generation of a fixture model's
// reference prompt under a plan gives the reference's ids.
#pragma once

#include "model/model.h"
#include "plan/plan.h"
#include "runtime/generate.h"
#include "runtime/in_process_cluster.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

namespace huddle::testing {

// `name`: the fixture model (references/<name>.generate.json holds the prompt and greedy ids).
inline void expect_reference_greedy(const Model& model, const Plan& plan, const std::string& name) {
  std::ifstream in(fixture("references/" + name + ".generate.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  GenerationResult result;
  run_in_process(model, plan, [&](StepRunner& runner) {
    GenerationOptions options;
    options.n_predict = 16;
    result = generate(runner, ref["prompt"].get<std::vector<std::int32_t>>(), options);
  });
  EXPECT_EQ(result.generated, ref["greedy"].get<std::vector<std::int32_t>>());
}

}  // namespace huddle::testing
