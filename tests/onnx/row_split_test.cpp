// Row-split CNNs (EdgeFlow's execution units and forwarding tables): the three fixtures split by
// output rows across 2, 3 and 4 in-process devices — equal rows, uneven rows, zero-row units and
// overlapping (redundantly computed) ranges — give the float64 references within the manifest's
// tolerance; odd heights with stride-2 layers, pooling and resize match the single device.
#include "cnn_fixtures.h"
#include "core/error.h"
#include "onnx/onnx_model.h"
#include "onnx_builder.h"
#include "plan/lowering_rows.h"
#include "plan/plan.h"
#include "plan/row_graph.h"
#include "runtime/executor.h"
#include "runtime/in_process_cluster.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>

namespace huddle {
namespace {

using onnx_import::OnnxModel;
using RangesOf = std::function<std::vector<Range>(const rows::RowLayer&, std::size_t layer)>;

Plan row_plan(const rows::RowGraph& rg, int devices, const RangesOf& ranges_of) {
  Plan plan;
  plan.strategy = "test";
  plan.model = PlanModel::of(rg);
  for (int d = 0; d < devices; ++d) plan.devices.push_back(fmt::format("d{}", d));
  plan.token_shares.assign(static_cast<std::size_t>(devices), 1.0);
  std::vector<std::vector<Range>> ranges;
  for (std::size_t l = 0; l < rg.layers.size(); ++l) ranges.push_back(ranges_of(rg.layers[l], l));
  plan.rows = RowPlan::of_ranges(rg, ranges);
  plan.validate(rg, "test plan");
  return Plan::from_json(plan.to_json(), "round trip");  // what a worker would receive
}

std::vector<double> shares(int devices, bool uneven) {
  std::vector<double> s;
  for (int d = 0; d < devices; ++d) s.push_back(uneven ? 1.0 + 2.0 * (d % 3) : 1.0);
  return s;
}

// Named splits of every layer over `devices`.
RangesOf split(const std::string& kind, int devices) {
  if (kind == "equal" || kind == "uneven") {
    return [=](const rows::RowLayer& l, std::size_t) {
      return split_ranges(l.rows, shares(devices, kind == "uneven"));
    };
  }
  if (kind == "zero-rows") {
    // The last device gets nothing anywhere; device 1 nothing in every other layer.
    return [=](const rows::RowLayer& l, std::size_t layer) {
      std::vector<double> s(static_cast<std::size_t>(devices), 1.0);
      s.back() = 0;
      if (layer % 2 == 1 && devices > 2) s[1] = 0;
      return split_ranges(l.rows, s);
    };
  }
  // "overlap": uneven ranges widened by two rows each side (halo rows computed twice).
  return [=](const rows::RowLayer& l, std::size_t) {
    std::vector<Range> r = split_ranges(l.rows, shares(devices, true));
    for (auto& [b, e] : r) {
      if (e > b) {
        b = std::max<std::int64_t>(0, b - 2);
        e = std::min(l.rows, e + 2);
      }
    }
    return r;
  };
}

struct Case {
  std::string model, split;
  int devices;
};

class RowSplitFixture : public ::testing::TestWithParam<Case> {};

TEST_P(RowSplitFixture, MatchesTheFloat64Reference) {
  const Case c = GetParam();
  const nlohmann::json entry = testing::cnn_entry(c.model);
  const OnnxModel model = OnnxModel::load(testing::fixture("cnn/" + c.model + ".onnx"));
  const rows::RowGraph rg = rows::build_row_graph(model.graph());
  ASSERT_GT(rg.layers.size(), 5u);
  const Plan plan = row_plan(rg, c.devices, split(c.split, c.devices));
  std::vector<StepReport> reports;
  const auto outputs =
      run_in_process(model.graph(), model.weights(), plan, testing::cnn_input(entry), &reports);
  ASSERT_EQ(outputs.size(), entry["outputs"].size());
  for (const auto& out : entry["outputs"]) {
    const Tensor ref = io::read_npy(testing::fixture("cnn/" + out["file"].get<std::string>()));
    const auto it = outputs.find(out["onnx_name"].get<std::string>());
    ASSERT_NE(it, outputs.end()) << out["onnx_name"];
    EXPECT_LE(testing::max_abs_diff(it->second, ref), out["tol_abs"].get<double>())
        << c.model << " " << c.split << " on " << c.devices;
  }
  EXPECT_EQ(reports.size(), static_cast<std::size_t>(c.devices));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* m : {"vgg-tiny", "resnet-tiny", "yolo-tiny"}) {
    for (int d : {2, 3, 4}) {
      for (const char* s : {"equal", "uneven", "zero-rows", "overlap"}) out.push_back({m, s, d});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cnn, RowSplitFixture, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& p) {
                           std::string n = fmt::format("{}_{}_{}", p.param.model, p.param.split,
                                                       p.param.devices);
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// A graph with odd heights everywhere: 3x3 stride-2 conv at 13 rows, a max pool with ceil
// padding, a dilated conv, a linear resize, a residual add and a channel concat.
std::filesystem::path odd_model(const std::filesystem::path& dir) {
  testing::OnnxBuilder b;
  b.input("x", {1, 2, 13, 9});
  auto weights = [](std::int64_t n, float scale) {
    std::vector<float> w;
    for (std::int64_t i = 0; i < n; ++i) w.push_back(scale * static_cast<float>((i * 37) % 17 - 8));
    return w;
  };
  b.init("w1", {4, 2, 3, 3}, weights(72, 0.05f));
  b.init("b1", {4}, {0.1f, -0.2f, 0.3f, 0.0f});
  auto* c1 = b.node("Conv", {"x", "w1", "b1"}, {"c1"});
  testing::OnnxBuilder::attr_ints(c1, "strides", {2, 2});
  testing::OnnxBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});  // 13 -> 7 rows
  b.node("Relu", {"c1"}, {"r1"});
  b.init("w2", {4, 4, 3, 3}, weights(144, 0.03f));
  auto* c2 = b.node("Conv", {"r1", "w2"}, {"c2"});
  testing::OnnxBuilder::attr_ints(c2, "pads", {2, 2, 2, 2});
  testing::OnnxBuilder::attr_ints(c2, "dilations", {2, 2});  // 7 -> 7 rows
  b.node("Add", {"r1", "c2"}, {"sum"});
  auto* p = b.node("MaxPool", {"sum"}, {"pool"});
  testing::OnnxBuilder::attr_ints(p, "kernel_shape", {2, 2});
  testing::OnnxBuilder::attr_ints(p, "strides", {2, 2});
  testing::OnnxBuilder::attr_int(p, "ceil_mode", 1);  // 7 -> 4 rows
  b.init("scales", {4}, {1.0f, 1.0f, 1.75f, 1.75f});
  auto* rs = b.node("Resize", {"pool", "", "scales"}, {"up"});  // 4 -> 7 rows
  testing::OnnxBuilder::attr_string(rs, "mode", "linear");
  testing::OnnxBuilder::attr_int(b.node("Concat", {"up", "sum"}, {"cat"}), "axis", 1);
  b.output("cat");
  return b.save(dir / "odd.onnx");
}

TEST(RowSplit, OddHeightsStridesPoolsAndResizeMatchOneDevice) {
  testing::TempDir dir;
  const OnnxModel model = OnnxModel::load(odd_model(dir.path()));
  Tensor x = Tensor::empty(DType::F32, {1, 2, 13, 9});
  for (std::int64_t i = 0; i < x.numel(); ++i)
    x.f32()[i] = static_cast<float>((i * 7919) % 23) / 11.0f - 1.0f;
  Executor one(model.graph(), model.weights(), 0);
  const Tensor want = one.run({{"x", x}}).at("cat");
  const rows::RowGraph rg = rows::build_row_graph(model.graph());
  for (int devices : {2, 3, 4}) {
    for (const char* s : {"equal", "uneven", "zero-rows", "overlap"}) {
      const Plan plan = row_plan(rg, devices, split(s, devices));
      const Tensor got = run_in_process(model.graph(), model.weights(), plan, {{"x", x}}).at("cat");
      EXPECT_LE(testing::max_abs_diff(got, want), 1e-5) << s << " on " << devices;
    }
  }
}

}  // namespace
}  // namespace huddle
