// Hostile input for the ONNX reader: a fixture with random bytes flipped (fixed seed, 400
// variants; those that load are also run) and truncated at many lengths. Loading must succeed or
// throw a typed huddle::Error: never crash, hang, or throw anything else. CI runs this under
// AddressSanitizer + UBSan.
#include "core/error.h"
#include "onnx/onnx_model.h"
#include "runtime/executor.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

namespace huddle {
namespace {

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// 0 loaded (and, with `run`, ran on zero inputs), 1 typed error. A model that loads must also
// run: shape inference guards every kernel precondition, so a corrupt model cannot reach one.
int try_load(const std::filesystem::path& path, bool run = false) {
  try {
    const auto model = onnx_import::OnnxModel::load(path);
    if (run) {
      std::map<std::string, Tensor> inputs;
      for (const auto& in : model.inputs()) {
        if (shape_numel(in.shape) > (1 << 24)) return 1;  // a flipped dimension: too big to run
        inputs[in.name] = Tensor::zeros(DType::F32, in.shape);
      }
      Executor executor(model.graph(), model.weights(), 0);
      executor.run(inputs);
    }
    return 0;
  } catch (const Error&) {
    return 1;
  }
}

TEST(OnnxHostile, FlippedBytesLoadOrFailWithATypedError) {
  for (const std::string name : {"yolo-tiny", "vgg-tiny"}) {
    const std::string good = read_bytes(testing::fixture("cnn/" + name + ".onnx"));
    ASSERT_GT(good.size(), 1000u);
    testing::TempDir dir;
    std::mt19937 rng(20261125);
    int loaded = 0, refused = 0;
    for (int variant = 0; variant < 200; ++variant) {
      std::string bytes = good;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int f = 0; f < flips; ++f) {
        // Half the flips land in the first 4 KB, where the graph structure (not weights) is.
        const std::size_t span =
            (rng() % 2) ? std::min<std::size_t>(4096, bytes.size()) : bytes.size();
        bytes[rng() % span] = static_cast<char>(rng() & 0xff);
      }
      const auto path = dir / "flipped.onnx";
      std::ofstream(path, std::ios::binary)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      (try_load(path, /*run=*/true) == 0 ? loaded : refused) +=
          1;  // anything else fails the test by escaping
    }
    std::printf("%s: %d variants loaded, %d refused with a typed error\n", name.c_str(), loaded,
                refused);
    EXPECT_EQ(loaded + refused, 200);
    EXPECT_GT(refused, 0);  // corruption is noticed
  }
}

TEST(OnnxHostile, TruncationsAreRefused) {
  const std::string good = read_bytes(testing::fixture("cnn/vgg-tiny.onnx"));
  testing::TempDir dir;
  int refused = 0, total = 0;
  for (std::size_t len = 1; len < good.size(); len += good.size() / 97 + 1) {
    std::ofstream(dir / "cut.onnx", std::ios::binary)
        .write(good.data(), static_cast<std::streamsize>(len));
    refused += try_load(dir / "cut.onnx");
    ++total;
  }
  // A prefix can parse as a smaller valid message only if it cuts between fields; the graph's
  // outputs and opset come at the end, so no prefix loads.
  EXPECT_EQ(refused, total);
}

}  // namespace
}  // namespace huddle
