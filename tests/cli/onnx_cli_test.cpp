// `huddle run` / `huddle info` on ONNX models through the real binary: --input, --dump-outputs,
// --json, --image, and the exits for bad input (1, message naming the file or node).
#include "io/npy.h"
#include "onnx/cnn_fixtures.h"
#include "onnx/onnx_builder.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

namespace huddle {
namespace {

using testing::contains;
using testing::fixture;
using testing::run_huddle;

std::string model(const std::string& name) {
  return testing::cnn_model(name);
}
std::string input(const std::string& name) {
  return testing::cnn_input_file(name);
}

using testing::max_abs_diff;

TEST(OnnxCli, DumpOutputsWritesEachOutputByName) {
  testing::TempDir dir;
  const auto r = run_huddle({"run", "--model", model("yolo-tiny"), "--input", input("yolo-tiny"),
                             "--dump-outputs", (dir / "out").string(), "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [name, ref] : {std::pair{"head_12x12", "yolo-tiny.output0.npy"},
                                  std::pair{"head_24x24", "yolo-tiny.output1.npy"}}) {
    const Tensor got = io::read_npy(dir / "out" / (std::string(name) + ".npy"));
    const Tensor want = io::read_npy(fixture("cnn/" + std::string(ref)));
    EXPECT_LE(max_abs_diff(got, want), 1e-4 * 9.187) << name;
  }
}

TEST(OnnxCli, JsonListsOutputsShapesAndTopFive) {
  const auto r = run_huddle(
      {"run", "--model", model("vgg-tiny"), "--input", "input=" + input("vgg-tiny"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_EQ(j["outputs"][0]["name"], "logits");
  EXPECT_EQ(j["outputs"][0]["shape"], (std::vector<int>{1, 10}));
  // Top-5 of the float64 reference logits.
  const Tensor ref = io::read_npy(fixture("cnn/vgg-tiny.output0.npy"));
  std::vector<int> order(10);
  for (int i = 0; i < 10; ++i) order[static_cast<std::size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ref.f32()[a] > ref.f32()[b]; });
  order.resize(5);
  EXPECT_EQ(j["outputs"][0]["top5"].get<std::vector<int>>(), order);
}

TEST(OnnxCli, InfoListsInputsOutputsOpsAndParameters) {
  const auto r = run_huddle({"info", model("resnet-tiny"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters"], 152954);
  EXPECT_EQ(j["op_counts"]["Conv"], 11);
  EXPECT_EQ(j["inputs"][0]["name"], "input");
  EXPECT_EQ(j["inputs"][0]["shape"], (std::vector<int>{1, 3, 64, 64}));
  const auto text = run_huddle({"info", model("yolo-tiny")});
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_TRUE(contains(text.out, "output head_24x24 [1, 24, 24, 24]")) << text.out;
}

TEST(OnnxCli, ImageInputIsDecodedResizedAndRun) {
  // A 5x3 binary PPM (stb reads PNM) resized to the model's 64x64 input.
  testing::TempDir dir;
  {
    std::ofstream ppm(dir / "tiny.ppm", std::ios::binary);
    ppm << "P6\n5 3\n255\n";
    for (int i = 0; i < 15; ++i)
      ppm << static_cast<char>(i * 17) << static_cast<char>(255 - i * 17) << '\x80';
  }
  const auto r = run_huddle({"run", "--model", model("vgg-tiny"), "--image",
                             (dir / "tiny.ppm").string(), "--size", "64", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["outputs"][0]["top5"].size(), 5u);
  const auto wrong_size = run_huddle({"run", "--model", model("vgg-tiny"), "--image",
                                      (dir / "tiny.ppm").string(), "--size", "32"});
  EXPECT_EQ(wrong_size.exit_code, 1);
  const auto not_image =
      run_huddle({"run", "--model", model("vgg-tiny"), "--image", input("vgg-tiny")});
  EXPECT_EQ(not_image.exit_code, 1);
  EXPECT_TRUE(contains(not_image.err, "vgg-tiny.input.npy")) << not_image.err;
}

TEST(OnnxCli, BadInputExitsWithOneAndNamesTheCause) {
  testing::TempDir dir;
  // Missing input file.
  auto r =
      run_huddle({"run", "--model", model("vgg-tiny"), "--input", (dir / "nope.npy").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "nope.npy")) << r.err;
  // Misshapen input: another fixture's 96x96 image.
  r = run_huddle({"run", "--model", model("vgg-tiny"), "--input", input("yolo-tiny")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "yolo-tiny.input.npy") && contains(r.err, "64")) << r.err;
  // Unknown input name.
  r = run_huddle({"run", "--model", model("vgg-tiny"), "--input", "image=" + input("vgg-tiny")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "image")) << r.err;
  // Truncated and corrupt models.
  std::ifstream in(model("resnet-tiny"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "cut.onnx", std::ios::binary).write(bytes.data(), 1000);
  r = run_huddle({"run", "--model", (dir / "cut.onnx").string(), "--input", input("resnet-tiny")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "cut.onnx")) << r.err;
  EXPECT_FALSE(contains(r.err, "unexpected")) << r.err;
  r = run_huddle({"info", (dir / "missing.onnx").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "missing.onnx")) << r.err;
  // Neither --input nor --image, or flags of the other kind of model: usage.
  EXPECT_EQ(run_huddle({"run", "--model", model("vgg-tiny")}).exit_code, 2);
  EXPECT_EQ(
      run_huddle({"run", "--model", model("vgg-tiny"), "--input", input("vgg-tiny"), "--ids", "1"})
          .exit_code,
      2);
  EXPECT_EQ(run_huddle({"run", "--model", fixture("models/gpt2-tiny").string(), "--ids", "1",
                        "--input", input("vgg-tiny")})
                .exit_code,
            2);
}

TEST(OnnxCli, UnsupportedOperatorAndOpsetExitWithOne) {
  testing::TempDir dir;
  {
    testing::OnnxBuilder b;
    b.input("input", {1, 3, 64, 64});
    b.node("Relu", {"input"}, {"r"});
    b.node("Elu", {"r"}, {"y"}, "the_elu");
    b.output("y");
    b.save(dir / "elu.onnx");
  }
  auto r =
      run_huddle({"run", "--model", (dir / "elu.onnx").string(), "--input", input("vgg-tiny")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "Elu") && contains(r.err, "the_elu")) << r.err;
  {
    testing::OnnxBuilder b(18);
    b.input("input", {1, 3, 64, 64});
    b.node("Relu", {"input"}, {"y"});
    b.output("y");
    b.save(dir / "opset18.onnx");
  }
  r = run_huddle({"info", (dir / "opset18.onnx").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "opset 18")) << r.err;
}

}  // namespace
}  // namespace huddle
