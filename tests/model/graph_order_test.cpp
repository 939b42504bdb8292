// A model's graph lists its weights in the order its ops first use them, whatever compiler built
// the engine: a primary sends a worker its weights in graph order, and a worker built by another
// compiler must expect the same order (two calls' arguments evaluated in another order once put
// a layer norm's bias before its weight under gcc and after it under clang).
#include "graph/graph.h"
#include "model/model.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace huddle {
namespace {

class GraphOrder : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphOrder, WeightsComeInTheOrderOfFirstUse) {
  const Model model = Model::load(testing::fixture_model(GetParam()));
  const Graph& graph = model.graph();
  std::vector<bool> seen(graph.values().size(), false);
  ValueId last = -1;
  for (const Op& op : graph.ops()) {
    for (const ValueId id : op.inputs) {
      if (graph.value(id).kind != ValueKind::Weight || seen[static_cast<std::size_t>(id)]) continue;
      seen[static_cast<std::size_t>(id)] = true;
      EXPECT_GT(id, last) << "op '" << op.name << "' uses weight '" << graph.value(id).name
                          << "' first, but it was made before the weights used earlier";
      last = id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GraphOrder,
                         ::testing::Values("gpt2-tiny", "bert-tiny", "llama-tiny", "qwen2-tiny",
                                           "mistral-tiny", "phi3-tiny", "llama3-tiny"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace huddle
