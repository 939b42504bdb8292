// The channels-last layout pass (graph/channels_last.h): on the three CNN fixtures and on a small
// graph built to reach every rule (concat and slice with permuted axes, broadcasting against a
// per-channel weight and a scalar, a channels-last graph output also read in NCHW, pooling,
// a reshape of a 1x1 value), the rewritten graph gives the NCHW graph's outputs under the same
// names and shapes, within the fixtures' tolerance of the float64 references; every conv and
// pool runs channels-last, and no value is converted between two channels-last ops.
#include "graph/channels_last.h"
#include "cnn_fixtures.h"
#include "onnx/fuse.h"
#include "onnx/onnx_model.h"
#include "onnx_builder.h"
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include <random>

namespace huddle {
namespace {

using huddle::to_channels_last;
using onnx_import::OnnxModel;
using testing::max_abs_diff;

bool channels_last_op(const Op& op) {
  return op.kind == OpKind::Conv2d || op.kind == OpKind::MaxPool || op.kind == OpKind::AvgPool ||
         op.kind == OpKind::GlobalAvgPool;
}

struct Conversions {
  int transposes = 0;  // layout conversions that move bytes
  int reshapes = 0;    // conversions of values whose two layouts are the same bytes
};

// Checks the rewritten graph's structure and counts its layout conversions.
Conversions check_structure(const Graph& g) {
  std::vector<int> producer(g.values().size(), -1);
  for (std::size_t i = 0; i < g.ops().size(); ++i)
    producer[static_cast<std::size_t>(g.ops()[i].output)] = static_cast<int>(i);
  Conversions c;
  for (const Op& op : g.ops()) {
    if (channels_last_op(op)) {
      EXPECT_TRUE(op.attrs.channels_last) << op.name;
      // A channels-last op never reads a value just converted from another channels-last op.
      const int p = producer[static_cast<std::size_t>(op.inputs[0])];
      if (p >= 0 && g.ops()[static_cast<std::size_t>(p)].kind == OpKind::Transpose) {
        const Op& t = g.ops()[static_cast<std::size_t>(p)];
        const int pp = producer[static_cast<std::size_t>(t.inputs[0])];
        EXPECT_TRUE(pp < 0 || !g.ops()[static_cast<std::size_t>(pp)].attrs.channels_last)
            << op.name << " reads " << t.name;
      }
    }
    // Conversions are named after the value ("<v>/nhwc", "<v>/nchw"), or take back the name of a
    // graph output computed channels-last as "<v>/nhwc".
    const bool conversion = op.name.ends_with("/nhwc") || op.name.ends_with("/nchw") ||
                            g.value(op.inputs[0]).name == op.name + "/nhwc";
    if (conversion && op.kind == OpKind::Transpose) ++c.transposes;
    if (conversion && op.kind == OpKind::Reshape) ++c.reshapes;
  }
  return c;
}

void expect_same_outputs(const Graph& nchw, const Graph& nhwc, const WeightMap& weights,
                         const std::map<std::string, Tensor>& inputs, double tol) {
  Executor a(nchw, weights, 0), b(nhwc, weights, 0);
  const auto want = a.run(inputs);
  const auto got = b.run(inputs);
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, t] : want) {
    const auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    EXPECT_EQ(it->second.shape(), t.shape()) << name;
    EXPECT_LE(max_abs_diff(it->second, t), tol) << name;
  }
}

class ChannelsLastFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ChannelsLastFixture, MatchesTheReferenceAndTheNchwGraph) {
  const nlohmann::json entry = testing::cnn_entry(GetParam());
  const OnnxModel model = OnnxModel::load(testing::cnn_model(GetParam()));
  const Graph g = to_channels_last(model.graph());
  const Conversions c = check_structure(g);
  std::printf("%s: %zu ops -> %zu, %d transposes, %d reshapes\n", GetParam().c_str(),
              model.graph().ops().size(), g.ops().size(), c.transposes, c.reshapes);
  // vgg and resnet: the image in; the pooled [N,C,1,1] before the flatten is the same bytes in
  // both layouts (a reshape). yolo: the image in, its two heads out, and its resize (an NCHW op)
  // between two transposes.
  const std::map<std::string, std::pair<int, int>> expected = {
      {"vgg-tiny", {1, 1}}, {"resnet-tiny", {1, 1}}, {"yolo-tiny", {5, 0}}};
  EXPECT_EQ(c.transposes, expected.at(GetParam()).first);
  EXPECT_EQ(c.reshapes, expected.at(GetParam()).second);
  Executor executor(g, model.weights(), 0);
  const auto outputs = executor.run(testing::cnn_input(entry));
  for (const auto& out : entry["outputs"]) {
    const Tensor ref = io::read_npy(testing::fixture("cnn/" + out["file"].get<std::string>()));
    const auto it = outputs.find(out["onnx_name"].get<std::string>());
    ASSERT_NE(it, outputs.end()) << out["onnx_name"];
    EXPECT_LE(max_abs_diff(it->second, ref), out["tol_abs"].get<double>()) << out["onnx_name"];
  }
  const double tol = entry["outputs"][0]["tol_abs"].get<double>();
  expect_same_outputs(model.graph(), g, model.weights(), testing::cnn_input(entry), tol);

  // Residual adds fused into the conv before them: every Add of resnet-tiny's blocks (and the
  // Relu after each), yolo-tiny's one bottleneck Add.
  int fused = 0;
  const Graph f = onnx_import::fuse_residual_adds(g, &fused);
  const int adds = entry["ops"].contains("Add") ? entry["ops"]["Add"].get<int>() : 0;
  EXPECT_EQ(fused, adds);
  const std::map<std::string, int> removed = {
      {"vgg-tiny", 0}, {"resnet-tiny", 2 * adds}, {"yolo-tiny", adds}};
  EXPECT_EQ(g.ops().size() - f.ops().size(), static_cast<std::size_t>(removed.at(GetParam())));
  int residual_convs = 0;
  for (const Op& op : f.ops()) residual_convs += op.attrs.residual ? 1 : 0;
  EXPECT_EQ(residual_convs, fused);
  expect_same_outputs(model.graph(), f, model.weights(), testing::cnn_input(entry), tol);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ChannelsLastFixture,
                         ::testing::Values("vgg-tiny", "resnet-tiny", "yolo-tiny"),
                         [](const auto& p) {
                           std::string s = p.param;
                           for (char& ch : s) ch = ch == '-' ? '_' : ch;
                           return s;
                         });

std::vector<float> random_values(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(ChannelsLast, EveryRuleKeepsTheNchwAnswer) {
  std::mt19937 rng(3);
  testing::OnnxBuilder b;
  b.input("x", {1, 3, 6, 5});
  b.init("w1", {4, 3, 3, 3}, random_values(rng, 4 * 3 * 9));
  b.init("w2", {2, 3, 1, 1}, random_values(rng, 2 * 3));
  b.init("scale", {1, 4, 1, 1}, random_values(rng, 4));
  b.init("shift", {1}, {0.25f});
  b.init_ints("starts", {1, 0});
  b.init_ints("ends", {5, 6});
  b.init_ints("axes", {1, 2});
  b.init_ints("steps", {1, 2});
  auto* c1 = b.node("Conv", {"x", "w1"}, {"y1"});
  testing::OnnxBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});
  b.node("Conv", {"x", "w2"}, {"y2"});
  testing::OnnxBuilder::attr_int(b.node("Concat", {"y1", "y2"}, {"cat"}), "axis", 1);
  b.node("Slice", {"cat", "starts", "ends", "axes", "steps"}, {"sliced"});  // [1,4,3,5]
  b.node("Mul", {"sliced", "scale"}, {"scaled"});
  b.node("Add", {"scaled", "shift"}, {"shifted"});  // a graph output, read channels-last too
  auto* pool = b.node("MaxPool", {"shifted"}, {"pooled"});
  testing::OnnxBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  b.node("GlobalAveragePool", {"pooled"}, {"gap"});
  b.node("Flatten", {"gap"}, {"flat"});
  testing::OnnxBuilder::attr_ints(b.node("Transpose", {"shifted"}, {"t"}), "perm", {0, 1, 3, 2});
  // A residual block whose residual is a graph output (so not overwritten in place).
  b.init("w3", {4, 4, 3, 3}, random_values(rng, 4 * 4 * 9));
  testing::OnnxBuilder::attr_ints(b.node("Conv", {"shifted", "w3"}, {"y3"}), "pads", {1, 1, 1, 1});
  b.node("Add", {"shifted", "y3"}, {"sum"});
  b.node("Relu", {"sum"}, {"res"});
  b.output("shifted");
  b.output("flat");
  b.output("t");
  b.output("res");
  const auto path = std::filesystem::path(::testing::TempDir()) / "channels_last_rules.onnx";
  b.save(path);
  const OnnxModel model = OnnxModel::load(path);
  const Graph g = to_channels_last(model.graph());
  const Conversions c = check_structure(g);
  // Transposes: x in; "shifted" back to NCHW (a graph output, also read by the transpose op);
  // "res" out. Reshapes: the [1,C,1,1] scale, and the pooled [1,1,1,C] before the flatten.
  EXPECT_EQ(c.transposes, 3);
  EXPECT_EQ(c.reshapes, 2);
  std::size_t concat_axis = 0;
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::Concat) concat_axis = static_cast<std::size_t>(op.attrs.axis);
  }
  EXPECT_EQ(concat_axis, 3u);  // channels, channels-last
  EXPECT_TRUE(g.find("shifted/nhwc").has_value());
  std::map<std::string, Tensor> in;
  in["x"] = Tensor::from_f32({1, 3, 6, 5}, random_values(rng, 3 * 6 * 5));
  expect_same_outputs(model.graph(), g, model.weights(), in, 1e-5);
  int fused = 0;
  const Graph f = onnx_import::fuse_residual_adds(g, &fused);
  EXPECT_EQ(fused, 1);
  expect_same_outputs(model.graph(), f, model.weights(), in, 1e-5);
}

}  // namespace
}  // namespace huddle
