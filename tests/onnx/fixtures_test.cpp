// The three CNN fixtures (tests/fixtures/cnn, README there): outputs within manifest.json's
// tol_abs (1e-4 · max|ref|) of the float64 references, on the fused and the unfused graph;
// Huddle's shape inference equal to every node output shape in manifest.json; info figures.
#include "cnn_fixtures.h"
#include "core/error.h"
#include "io/npy.h"
#include "kernels/kernels.h"
#include "onnx/onnx_model.h"
#include "runtime/executor.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

namespace huddle {
namespace {

using onnx_import::ImportOptions;
using onnx_import::OnnxModel;

using testing::cnn_entry;
using testing::cnn_manifest;
using testing::max_abs_diff;

class CnnFixture : public ::testing::TestWithParam<std::string> {};

void check_outputs(const std::string& name, bool fuse) {
  const nlohmann::json entry = cnn_entry(name);
  ImportOptions options;
  options.fuse = fuse;
  const OnnxModel model = OnnxModel::load(testing::fixture("cnn/" + name + ".onnx"), options);
  Executor executor(model.graph(), model.weights(), 0);
  const Tensor input =
      io::read_npy(testing::fixture("cnn/" + entry["input"]["file"].get<std::string>()));
  const auto outputs = executor.run({{entry["input"]["onnx_name"].get<std::string>(), input}});
  ASSERT_EQ(outputs.size(), entry["outputs"].size());
  for (const auto& out : entry["outputs"]) {
    const Tensor ref = io::read_npy(testing::fixture("cnn/" + out["file"].get<std::string>()));
    const auto it = outputs.find(out["onnx_name"].get<std::string>());
    ASSERT_NE(it, outputs.end()) << out["onnx_name"];
    const double err = max_abs_diff(it->second, ref);
    const double tol = out["tol_abs"].get<double>();
    EXPECT_LE(err, tol) << name << " " << out["onnx_name"] << (fuse ? " fused" : " unfused");
    std::printf("%s %s (%s): max abs error %.3g = %.3g x max|ref| (tolerance %.3g)\n", name.c_str(),
                out["onnx_name"].get<std::string>().c_str(), fuse ? "fused" : "unfused", err,
                err / out["max_abs_ref"].get<double>(), tol);
  }
}

TEST_P(CnnFixture, FusedGraphMatchesTheFloat64Reference) {
  check_outputs(GetParam(), true);
}

TEST_P(CnnFixture, UnfusedGraphMatchesTheFloat64Reference) {
  check_outputs(GetParam(), false);
}

TEST_P(CnnFixture, ShapeInferenceEqualsEveryNodeOutputShape) {
  const nlohmann::json entry = cnn_entry(GetParam());
  ImportOptions options;
  options.fuse = false;  // one graph value per ONNX node output
  const OnnxModel model = OnnxModel::load(testing::fixture("cnn/" + GetParam() + ".onnx"), options);
  int checked = 0;
  for (const auto& [tensor, shape] : entry["tensor_shapes"].items()) {
    const auto id = model.graph().find(tensor);
    if (!id) {
      // Constant-folded (Constant nodes and the Concat of constants feeding Resize).
      continue;
    }
    EXPECT_EQ(model.graph().value(*id).shape, shape.get<Shape>()) << tensor;
    ++checked;
  }
  int constants = 0;
  for (const auto& [type, n] : entry["ops"].items()) {
    if (type == "Constant") constants += n.get<int>();
  }
  // Every node output is checked except constant-folded ones (Constants and their Concats).
  const int resize_concats = GetParam() == "yolo-tiny" ? 1 : 0;
  EXPECT_EQ(checked + constants + resize_concats, static_cast<int>(entry["tensor_shapes"].size()));
}

TEST_P(CnnFixture, InfoCountsOpsAndParameters) {
  const nlohmann::json entry = cnn_entry(GetParam());
  const OnnxModel model = OnnxModel::load(testing::fixture("cnn/" + GetParam() + ".onnx"));
  EXPECT_EQ(model.parameter_count(), entry["n_params"].get<std::int64_t>());
  EXPECT_EQ(model.opset(), 13);
  std::map<std::string, int> want;
  for (const auto& [type, n] : entry["ops"].items()) want[type] = n.get<int>();
  EXPECT_EQ(model.op_counts(), want);
  // Fusion leaves no batch norm and no separate activation reading a conv (a ReLU after a
  // residual Add stays an op).
  std::map<ValueId, OpKind> producer;
  int convs = 0;
  for (const Op& op : model.graph().ops()) {
    producer[op.output] = op.kind;
    convs += op.kind == OpKind::Conv2d;
    EXPECT_NE(op.kind, OpKind::BatchNorm) << op.name;
    if (op.kind == OpKind::Relu || op.kind == OpKind::Sigmoid) {
      EXPECT_NE(producer[op.inputs[0]], OpKind::Conv2d) << op.name;
    }
  }
  EXPECT_EQ(convs, want["Conv"]);
}

TEST_P(CnnFixture, SameAnswerOnOneAndTwoThreads) {
  const nlohmann::json entry = cnn_entry(GetParam());
  const OnnxModel model = OnnxModel::load(testing::fixture("cnn/" + GetParam() + ".onnx"));
  const Tensor input =
      io::read_npy(testing::fixture("cnn/" + entry["input"]["file"].get<std::string>()));
  const std::string in_name = entry["input"]["onnx_name"];
  const int before = kernels::num_threads();
  kernels::set_num_threads(1);
  Executor e1(model.graph(), model.weights(), 0);
  const auto one = e1.run({{in_name, input}});
  kernels::set_num_threads(2);
  Executor e2(model.graph(), model.weights(), 0);
  const auto two = e2.run({{in_name, input}});
  const auto again = e2.run({{in_name, input}});  // an executor runs many times
  kernels::set_num_threads(before);
  for (const auto& out : entry["outputs"]) {
    const std::string n = out["onnx_name"];
    // BLAS blocks differently per thread count: equal within float32 reassociation.
    EXPECT_LE(max_abs_diff(one.at(n), two.at(n)), 1e-5 * out["max_abs_ref"].get<double>());
    EXPECT_EQ(two.at(n).to_vector(), again.at(n).to_vector());
  }
}

// The import runs each op making a graph output as soon as its inputs are made
// (onnx/schedule.h): between the last producer of its inputs and it come only other output ops.
// yolo-tiny's first head reads a feature map the file's order would leave waiting until the end.
TEST_P(CnnFixture, OutputOpsRunAsSoonAsTheirInputsAreMade) {
  const OnnxModel model = OnnxModel::load(testing::fixture("cnn/" + GetParam() + ".onnx"));
  const Graph& g = model.graph();
  std::vector<int> producer(g.values().size(), -1);
  std::vector<bool> is_output(g.values().size(), false);
  for (ValueId o : g.outputs()) is_output[static_cast<std::size_t>(o)] = true;
  for (std::size_t i = 0; i < g.ops().size(); ++i) {
    const Op& op = g.ops()[i];
    int last = -1;
    for (ValueId in : op.inputs) last = std::max(last, producer[static_cast<std::size_t>(in)]);
    producer[static_cast<std::size_t>(op.output)] = static_cast<int>(i);
    if (!is_output[static_cast<std::size_t>(op.output)]) continue;
    for (std::size_t k = static_cast<std::size_t>(last + 1); k < i; ++k) {
      EXPECT_TRUE(is_output[static_cast<std::size_t>(g.ops()[k].output)])
          << op.name << " waits behind " << g.ops()[k].name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cnn, CnnFixture,
                         ::testing::Values("vgg-tiny", "resnet-tiny", "yolo-tiny"));

TEST(CnnExecutor, RunRejectsMissingMisshapenAndUnknownInputs) {
  const OnnxModel model = OnnxModel::load(testing::fixture("cnn/vgg-tiny.onnx"));
  Executor executor(model.graph(), model.weights(), 0);
  EXPECT_THROW(executor.run({}), InputError);
  EXPECT_THROW(executor.run({{"input", Tensor::zeros(DType::F32, {1, 3, 32, 32})}}), InputError);
  EXPECT_THROW(executor.run({{"input", Tensor::zeros(DType::I32, {1, 3, 64, 64})}}), InputError);
  EXPECT_THROW(executor.run({{"input", Tensor::zeros(DType::F32, {1, 3, 64, 64})},
                             {"other", Tensor::zeros(DType::F32, {1})}}),
               InputError);
}

TEST(CnnImport, ABatchTheFileDoesNotAllowIsRefused) {
  // The fixtures are exported with a fixed batch of 1: a batch of two is refused clearly (models
  // with a symbolic batch run N > 1: OnnxImport.SymbolicBatchRunsEachImageAsAlone).
  ImportOptions options;
  options.input_shapes["input"] = {2, 3, 64, 64};
  EXPECT_THROW(OnnxModel::load(testing::fixture("cnn/vgg-tiny.onnx"), options), InputError);
}

}  // namespace
}  // namespace huddle
