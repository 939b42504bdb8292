// ONNX import of hand-built models: what is refused (with the node and op type named) and the
// converters the fixtures do not exercise (Gemm alpha/beta, Softmax, Transpose, MatMul, Slice,
// Clip, HardSwish, HardSigmoid, Resize linear with sizes, AveragePool, Sub/Div broadcasting),
// checked against values computed by hand.
#include "core/error.h"
#include "onnx/onnx_model.h"
#include "onnx_builder.h"
#include "runtime/executor.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace huddle {
namespace {

using onnx_import::OnnxModel;
using testing::contains;
using testing::OnnxBuilder;

std::string load_error(const std::filesystem::path& path) {
  try {
    OnnxModel::load(path);
  } catch (const LoadError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a LoadError for " << path;
  return "";
}

std::vector<float> run_one(OnnxBuilder& b, const std::string& input, const Tensor& x,
                           const std::string& output) {
  testing::TempDir dir;
  const OnnxModel m = OnnxModel::load(b.save(dir / "m.onnx"));
  Executor e(m.graph(), m.weights(), 0);
  return e.run({{input, x}}).at(output).to_vector();
}

TEST(OnnxImport, UnsupportedOperatorIsRefusedWithItsTypeAndNode) {
  testing::TempDir dir;
  OnnxBuilder b;
  b.input("x", {1, 4});
  b.node("Relu", {"x"}, {"r"});
  b.node("LeakyRelu", {"r"}, {"y"}, "my_leaky");
  b.output("y");
  const std::string err = load_error(b.save(dir / "m.onnx"));
  EXPECT_TRUE(contains(err, "LeakyRelu") && contains(err, "my_leaky") && contains(err, "m.onnx"))
      << err;
}

TEST(OnnxImport, OpsetOutside11To17IsRefused) {
  testing::TempDir dir;
  for (int opset : {10, 18}) {
    OnnxBuilder b(opset);
    b.input("x", {1, 4});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    const std::string err = load_error(b.save(dir / "m.onnx"));
    EXPECT_TRUE(contains(err, "opset " + std::to_string(opset))) << err;
  }
}

TEST(OnnxImport, BrokenFilesNameTheFile) {
  testing::TempDir dir;
  EXPECT_TRUE(contains(load_error(dir / "missing.onnx"), "missing.onnx"));
  std::ofstream(dir / "empty.onnx").close();
  EXPECT_TRUE(contains(load_error(dir / "empty.onnx"), "empty"));
  std::ofstream(dir / "text.onnx") << "this is not a protobuf at all \xff\xff\xff";
  EXPECT_TRUE(contains(load_error(dir / "text.onnx"), "text.onnx"));
  // Truncated fixture.
  std::ifstream in(testing::fixture("cnn/resnet-tiny.onnx"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "cut.onnx", std::ios::binary).write(bytes.data(), 300000);
  EXPECT_TRUE(contains(load_error(dir / "cut.onnx"), "cut.onnx"));
}

TEST(OnnxImport, ShapeMismatchInsideTheGraphNamesTheNode) {
  testing::TempDir dir;
  OnnxBuilder b;
  b.input("x", {1, 4});
  b.init("w", {1, 3}, {1, 2, 3});
  b.node("Add", {"x", "w"}, {"y"}, "bad_add");
  b.output("y");
  const std::string err = load_error(b.save(dir / "m.onnx"));
  EXPECT_TRUE(contains(err, "bad_add") && contains(err, "broadcast")) << err;
}

TEST(OnnxImport, UnknownAttributesAndComputedWeightsAreRefused) {
  testing::TempDir dir;
  OnnxBuilder b;
  b.input("x", {1, 4});
  OnnxBuilder::attr_int(b.node("Relu", {"x"}, {"y"}, "odd_relu"), "frobnicate", 1);
  b.output("y");
  EXPECT_TRUE(contains(load_error(b.save(dir / "a.onnx")), "frobnicate"));

  OnnxBuilder c;
  c.input("x", {1, 2, 5, 5});
  c.input("w", {3, 2, 3, 3});
  c.node("Conv", {"x", "w"}, {"y"}, "dyn_conv");
  c.output("y");
  const std::string err = load_error(c.save(dir / "b.onnx"));
  EXPECT_TRUE(contains(err, "dyn_conv") && contains(err, "constant")) << err;
}

TEST(OnnxImport, GemmWithAlphaBetaAndSoftmax) {
  OnnxBuilder b;
  b.input("x", {1, 2});
  b.init("w", {2, 3}, {1, 2, 3, 4, 5, 6});  // [K=2, N=3], transB = 0
  b.init("c", {3}, {1, 1, 1});
  auto* g = b.node("Gemm", {"x", "w", "c"}, {"g"});
  OnnxBuilder::attr_float(g, "alpha", 2.0f);
  OnnxBuilder::attr_float(g, "beta", 0.5f);
  OnnxBuilder::attr_int(b.node("Softmax", {"g"}, {"y"}), "axis", -1);
  b.output("y");
  const auto y = run_one(b, "x", Tensor::from_f32({1, 2}, std::vector<float>{1, -1}), "y");
  // g = 2 · [1-4, 2-5, 3-6] + 0.5 = [-5.5, -5.5, -5.5] -> uniform softmax.
  ASSERT_EQ(y.size(), 3u);
  for (float v : y) EXPECT_NEAR(v, 1.0f / 3.0f, 1e-6);
}

TEST(OnnxImport, TransposeMatMulSliceAndActivations) {
  OnnxBuilder b;
  b.input("x", {2, 3});
  OnnxBuilder::attr_ints(b.node("Transpose", {"x"}, {"t"}), "perm", {1, 0});  // [3, 2]
  b.init("m", {2, 2}, {1, 0, 0, -1});
  b.node("MatMul", {"t", "m"}, {"p"});  // [3, 2]: column 1 negated
  b.init_ints("starts", {1});
  b.init_ints("ends", {100});
  b.init_ints("axes", {0});
  b.node("Slice", {"p", "starts", "ends", "axes"}, {"s"});  // rows 1..2
  b.init("lo", {}, {-1.0f});
  b.init("hi", {}, {2.0f});
  b.node("Clip", {"s", "lo", "hi"}, {"c"});
  b.node("HardSwish", {"c"}, {"h"});
  b.output("h");
  // x = [[1, 2, 3], [4, 5, 6]] -> t = [[1,4],[2,5],[3,6]] -> p = [[1,-4],[2,-5],[3,-6]]
  // s = [[2,-5],[3,-6]] -> clip [[2,-1],[2,-1]] -> hardswish
  const auto y =
      run_one(b, "x", Tensor::from_f32({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6}), "h");
  auto hs = [](float v) { return v * std::max(0.0f, std::min(1.0f, v / 6 + 0.5f)); };
  const std::vector<float> want = {hs(2), hs(-1), hs(2), hs(-1)};
  ASSERT_EQ(y.size(), want.size());
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-6) << i;
}

TEST(OnnxImport, ResizeLinearBySizesAveragePoolAndBroadcastSubDiv) {
  OnnxBuilder b;
  b.input("x", {1, 1, 2, 2});
  b.init("roi", {0}, {});
  b.init("scales", {0}, {});
  b.init_ints("sizes", {1, 1, 4, 4});
  auto* r = b.node("Resize", {"x", "roi", "scales", "sizes"}, {"r"});
  OnnxBuilder::attr_string(r, "mode", "linear");
  OnnxBuilder::attr_string(r, "coordinate_transformation_mode", "align_corners");
  auto* p = b.node("AveragePool", {"r"}, {"p"});
  OnnxBuilder::attr_ints(p, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(p, "strides", {2, 2});
  b.init("mean", {1, 1, 1, 1}, {1.0f});
  b.init("two", {1}, {2.0f});
  b.node("Sub", {"p", "mean"}, {"s"});
  b.node("Div", {"s", "two"}, {"y"});
  b.output("y");
  // x = [[0, 3], [6, 9]], align_corners 4x4: rows/cols step 1/3 of the range: value 3·(i + j)...
  // resized[i][j] = 6·i/3 + 3·j/3 = 2i + j; 2x2 average pool: mean of 2i+j over each block.
  const auto y =
      run_one(b, "x", Tensor::from_f32({1, 1, 2, 2}, std::vector<float>{0, 3, 6, 9}), "y");
  const std::vector<float> pooled = {1.5f, 3.5f, 5.5f, 7.5f};
  ASSERT_EQ(y.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (pooled[i] - 1.0f) / 2.0f, 1e-5) << i;
}

TEST(OnnxImport, SymbolicBatchRunsEachImageAsAlone) {
  OnnxBuilder b;
  b.input("x", {1, 3, 9, 9});
  b.model()
      .mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("N");
  std::vector<float> w(4 * 3 * 3 * 3), fc(4 * 5);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::sin(static_cast<float>(i));
  for (std::size_t i = 0; i < fc.size(); ++i) fc[i] = std::cos(static_cast<float>(i));
  b.init("w", {4, 3, 3, 3}, w);
  b.init("fc", {5, 4}, fc);
  auto* conv = b.node("Conv", {"x", "w"}, {"c"});
  OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_ints(conv, "strides", {2, 2});
  b.node("Relu", {"c"}, {"r"});
  auto* pool = b.node("MaxPool", {"r"}, {"p"});
  OnnxBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  OnnxBuilder::attr_int(pool, "ceil_mode", 1);
  b.node("GlobalAveragePool", {"p"}, {"g"});
  b.node("Flatten", {"g"}, {"f"});
  OnnxBuilder::attr_int(b.node("Gemm", {"f", "fc"}, {"y"}), "transB", 1);
  b.output("y");
  testing::TempDir dir;
  const auto path = b.save(dir / "batch.onnx");
  std::vector<float> xs(2 * 3 * 9 * 9);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37f * static_cast<float>(i));
  onnx_import::ImportOptions two;
  two.input_shapes["x"] = {2, 3, 9, 9};
  const OnnxModel m2 = OnnxModel::load(path, two);
  Executor e2(m2.graph(), m2.weights(), 0);
  const auto y2 = e2.run({{"x", Tensor::from_f32({2, 3, 9, 9}, xs)}}).at("y").to_vector();
  const OnnxModel m1 = OnnxModel::load(path);  // symbolic batch defaults to 1
  Executor e1(m1.graph(), m1.weights(), 0);
  ASSERT_EQ(y2.size(), 10u);
  for (int n = 0; n < 2; ++n) {
    const std::vector<float> one(xs.begin() + n * 243, xs.begin() + (n + 1) * 243);
    const auto y1 = e1.run({{"x", Tensor::from_f32({1, 3, 9, 9}, one)}}).at("y").to_vector();
    for (int k = 0; k < 5; ++k)
      EXPECT_NEAR(y2[static_cast<std::size_t>(n * 5 + k)], y1[static_cast<std::size_t>(k)], 1e-5);
  }
}

TEST(OnnxImport, FusedHardSwishAndRelu6ChainsEqualTheUnfusedGraph) {
  OnnxBuilder b;
  b.input("x", {1, 4, 7, 7});
  std::vector<float> w(6 * 4 * 9), w2(6 * 1 * 9), ones(6, 1.0f), bias(6), mean(6), var(6);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.3f * std::sin(static_cast<float>(i));
  for (std::size_t i = 0; i < w2.size(); ++i) w2[i] = 0.5f * std::cos(static_cast<float>(i));
  for (std::size_t i = 0; i < 6; ++i) {
    bias[i] = 0.1f * static_cast<float>(i);
    mean[i] = 0.05f * static_cast<float>(i);
    var[i] = 0.5f + 0.1f * static_cast<float>(i);
  }
  b.init("w", {6, 4, 3, 3}, w);
  b.init("w2", {6, 1, 3, 3}, w2);
  b.init("s", {6}, ones);
  b.init("b", {6}, bias);
  b.init("m", {6}, mean);
  b.init("v", {6}, var);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  b.node("BatchNormalization", {"c", "s", "b", "m", "v"}, {"n"});
  auto* hs = b.node("HardSigmoid", {"n"}, {"g"});
  OnnxBuilder::attr_float(hs, "alpha", 1.0f / 6.0f);
  OnnxBuilder::attr_float(hs, "beta", 0.5f);
  b.node("Mul", {"n", "g"}, {"h"});
  auto* dw = b.node("Conv", {"h", "w2"}, {"d"});  // depthwise, stride 2
  OnnxBuilder::attr_int(dw, "group", 6);
  OnnxBuilder::attr_ints(dw, "strides", {2, 2});
  OnnxBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
  b.init("zero", {}, {0.0f});
  b.init("six", {}, {6.0f});
  b.node("Clip", {"d", "zero", "six"}, {"y"});
  b.output("y");
  testing::TempDir dir;
  const auto path = b.save(dir / "fuse.onnx");
  onnx_import::ImportOptions unfused;
  unfused.fuse = false;
  const OnnxModel a = OnnxModel::load(path), u = OnnxModel::load(path, unfused);
  ASSERT_EQ(a.graph().ops().size(), 2u);  // two conv2d ops: BN, HardSwish and ReLU6 fused
  EXPECT_EQ(a.graph().ops()[0].attrs.act.kind, kernels::Activation::HardSwish);
  EXPECT_EQ(a.graph().ops()[1].attrs.act.kind, kernels::Activation::Clip);
  std::vector<float> xs(4 * 49);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = 2.0f * std::sin(0.7f * static_cast<float>(i));
  const Tensor x = Tensor::from_f32({1, 4, 7, 7}, xs);
  Executor ea(a.graph(), a.weights(), 0), eu(u.graph(), u.weights(), 0);
  const auto ya = ea.run({{"x", x}}).at("y").to_vector();
  const auto yu = eu.run({{"x", x}}).at("y").to_vector();
  ASSERT_EQ(ya.size(), 6u * 4 * 4);
  for (std::size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(ya[i], yu[i], 1e-5) << i;
}

}  // namespace
}  // namespace huddle
