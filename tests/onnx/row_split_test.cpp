// Row-split CNNs (EdgeFlow's execution units and forwarding tables): the three fixtures split by
// output rows across 2, 3 and 4 in-process devices — equal rows, uneven rows, zero-row units and
// overlapping (redundantly computed) ranges — give the float64 references within the manifest's
// tolerance; odd heights with stride-2 layers, pooling and resize match the single device. The
// fixtures' Gemm heads are column layers split by the same splits (over output columns); a
// VGG-like head (three linears of odd widths, both weight layouts, activations between) split by
// columns matches one device, with zero-column devices, and each device holds only its columns'
// weights.
#include "cnn_fixtures.h"
#include "core/error.h"
#include "onnx/onnx_model.h"
#include "onnx_builder.h"
#include "plan/lowering.h"
#include "plan/lowering_rows.h"
#include "plan/plan.h"
#include "plan/row_graph.h"
#include "runtime/executor.h"
#include "runtime/in_process_cluster.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <random>

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

// Row exchanges in a lossy wire format (docs/distributed.md, "Activations on the wire"): the
// fixtures' outputs stay within the format's stated tolerance of the exact split run, and the
// format is used (the outputs differ from it).
TEST(RowSplit, LossyWireFormatsStayWithinTheirTolerance) {
  for (const std::string name : {"resnet-tiny", "yolo-tiny"}) {
    const nlohmann::json entry = testing::cnn_entry(name);
    const OnnxModel model = OnnxModel::load(testing::fixture("cnn/" + name + ".onnx"));
    const rows::RowGraph rg = rows::build_row_graph(model.graph());
    Plan plan = row_plan(rg, 3, split("uneven", 3));
    const auto exact =
        run_in_process(model.graph(), model.weights(), plan, testing::cnn_input(entry));
    for (const auto& [wire, tol] :
         {std::pair{WireFormat::F16, 2e-3}, std::pair{WireFormat::BF16, 1e-2},
          std::pair{WireFormat::Int8, 4e-2}}) {
      plan.wire = wire;
      const auto got =
          run_in_process(model.graph(), model.weights(), plan, testing::cnn_input(entry));
      for (const auto& [output, want] : exact) {
        const double error = testing::relative_error(got.at(output), want);
        EXPECT_LE(error, tol) << name << " " << wire_format_name(wire) << " " << output;
        EXPECT_GT(error, 0.0) << name << " " << wire_format_name(wire) << ": exact, format unused?";
      }
    }
  }
}

// A camera's image as the model reads it: 8-bit pixels normalised per channel (NCHW), so each
// channel takes at most 256 values.
Tensor image_like(const Shape& shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t = Tensor::empty(DType::F32, shape);
  const std::int64_t plane = shape[2] * shape[3];
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const std::int64_t c = (i / plane) % shape[1];
    const float p = static_cast<float>(rng() % 256) / 255.0f;
    t.f32()[i] =
        (p - 0.45f + 0.01f * static_cast<float>(c)) / (0.22f + 0.003f * static_cast<float>(c));
  }
  return t;
}

// A graph input that takes at most 256 values per channel (an image) travels palette-coded
// (OpAttrs::palette): the outputs match one device's as every split's do (a wrongly decoded
// input would not), and device 0 sends a quarter of the input's bytes where a random input of
// the same shape costs it all of them.
TEST(RowSplit, AnImageInputTravelsPaletteCodedAndExactly) {
  const nlohmann::json entry = testing::cnn_entry("yolo-tiny");
  const OnnxModel model = OnnxModel::load(testing::fixture("cnn/yolo-tiny.onnx"));
  const rows::RowGraph rg = rows::build_row_graph(model.graph());
  const Plan split3 = row_plan(rg, 3, split("uneven", 3));
  const Plan one = row_plan(rg, 1, split("equal", 1));
  const auto random_input = testing::cnn_input(entry);
  const std::string name = random_input.begin()->first;
  const Tensor& x = random_input.begin()->second;
  const std::map<std::string, Tensor> image = {{name, image_like(x.shape(), 5)}};
  std::vector<StepReport> image_reports, random_reports;
  const auto split_out =
      run_in_process(model.graph(), model.weights(), split3, image, &image_reports);
  run_in_process(model.graph(), model.weights(), split3, random_input, &random_reports);
  // The one-device run shares no exchange: the split's outputs match it as any split's do.
  const auto one_out = run_in_process(model.graph(), model.weights(), one, image);
  for (const auto& [output, want] : one_out) {
    EXPECT_LE(testing::relative_error(split_out.at(output), want), 1e-5) << output;
  }
  const auto input_bytes = static_cast<double>(x.numel() * 4);
  const auto sent_image = static_cast<double>(image_reports[0].bytes_sent);
  const auto sent_random = static_cast<double>(random_reports[0].bytes_sent);
  // Devices 1 and 2 read 8/9 of the input's rows (shares 1 : 3 : 5): 3/4 of those bytes saved.
  EXPECT_GT(sent_random - sent_image, 0.5 * input_bytes)
      << "image " << sent_image << ", random " << sent_random << ", input " << input_bytes;
}

// The planners cost an image's rows at a byte per value, as they travel; a random input's, and
// every other value's, at four.
TEST(RowSplit, AnImageInputsRowsAreCostedAtAByteAValue) {
  const nlohmann::json entry = testing::cnn_entry("yolo-tiny");
  const OnnxModel model = OnnxModel::load(testing::fixture("cnn/yolo-tiny.onnx"));
  const rows::RowGraph rg = rows::build_row_graph(model.graph());
  const auto random_input = testing::cnn_input(entry);
  const std::string name = random_input.begin()->first;
  const std::map<std::string, Tensor> image = {
      {name, image_like(random_input.begin()->second.shape(), 9)}};
  const rows::RowGraph costed = rows::with_palette_inputs(rg, model.graph(), image);
  const rows::RowGraph unchanged = rows::with_palette_inputs(rg, model.graph(), random_input);
  int image_reads = 0;
  for (std::size_t l = 0; l < rg.layers.size(); ++l) {
    for (std::size_t k = 0; k < rg.layers[l].inputs.size(); ++k) {
      const rows::RowInput& in = rg.layers[l].inputs[k];
      const bool reads_image = in.producer < 0 && model.graph().value(in.value).name == name;
      image_reads += reads_image ? 1 : 0;
      EXPECT_EQ(costed.layers[l].inputs[k].bytes_per_row,
                reads_image ? in.bytes_per_row / 4 : in.bytes_per_row);
      EXPECT_EQ(unchanged.layers[l].inputs[k].bytes_per_row, in.bytes_per_row);
    }
  }
  EXPECT_GT(image_reads, 0);
}

TEST(RowSplit, TheFixturesGemmHeadsAreColumnLayers) {
  for (const char* m : {"vgg-tiny", "resnet-tiny"}) {
    const OnnxModel model = OnnxModel::load(testing::fixture(std::string("cnn/") + m + ".onnx"));
    const rows::RowGraph rg = rows::build_row_graph(model.graph());
    ASSERT_FALSE(rg.layers.empty());
    const rows::RowLayer& head = rg.layers.back();
    EXPECT_TRUE(head.columns) << m;
    EXPECT_EQ(head.kind, OpKind::Linear) << m;
    EXPECT_EQ(head.rows, 10) << m;  // logits [1, 10]: ten columns
    EXPECT_EQ(head.inputs.size(), 1u) << m;
    EXPECT_EQ(head.inputs[0].map.kind, rows::RowMap::Kind::Whole) << m;
    for (std::size_t l = 0; l + 1 < rg.layers.size(); ++l) EXPECT_FALSE(rg.layers[l].columns);
  }
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

// A VGG-like head: conv -> pool -> Flatten -> Gemm (transB, 13 outputs, bias) -> Relu -> Gemm
// ([K, O] weight, 7 outputs, beta 1) -> Clip -> MatMul ([7, 5] weight) -> Softmax.
std::filesystem::path head_model(const std::filesystem::path& dir) {
  testing::OnnxBuilder b;
  b.input("x", {1, 2, 7, 6});
  auto weights = [](std::int64_t n, float scale) {
    std::vector<float> w;
    for (std::int64_t i = 0; i < n; ++i) w.push_back(scale * static_cast<float>((i * 37) % 17 - 8));
    return w;
  };
  b.init("cw", {3, 2, 3, 3}, weights(54, 0.05f));
  auto* c = b.node("Conv", {"x", "cw"}, {"conv"});
  testing::OnnxBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
  auto* p = b.node("MaxPool", {"conv"}, {"pool"});  // [1, 3, 3, 3]
  testing::OnnxBuilder::attr_ints(p, "kernel_shape", {2, 2});
  testing::OnnxBuilder::attr_ints(p, "strides", {2, 2});
  b.node("Flatten", {"pool"}, {"flat"});  // [1, 27]
  b.init("w6", {13, 27}, weights(13 * 27, 0.02f));
  b.init("b6", {13}, weights(13, 0.1f));
  testing::OnnxBuilder::attr_int(b.node("Gemm", {"flat", "w6", "b6"}, {"fc6"}), "transB", 1);
  b.node("Relu", {"fc6"}, {"relu6"});
  b.init("w7", {13, 7}, weights(13 * 7, 0.03f));
  b.init("b7", {7}, weights(7, 0.05f));
  b.node("Gemm", {"relu6", "w7", "b7"}, {"fc7"});
  b.init("lo", {}, {-0.2f});
  b.init("hi", {}, {0.3f});
  b.node("Clip", {"fc7", "lo", "hi"}, {"clip7"});
  b.init("w8", {7, 5}, weights(35, 0.04f));
  b.node("MatMul", {"clip7", "w8"}, {"fc8"});
  b.node("Softmax", {"fc8"}, {"prob"});
  b.output("prob");
  b.output("fc8");
  return b.save(dir / "head.onnx");
}

Tensor head_input() {
  Tensor x = Tensor::empty(DType::F32, {1, 2, 7, 6});
  for (std::int64_t i = 0; i < x.numel(); ++i)
    x.f32()[i] = static_cast<float>((i * 7919) % 23) / 11.0f - 1.0f;
  return x;
}

TEST(RowSplit, ColumnSplitHeadMatchesOneDevice) {
  testing::TempDir dir;
  const OnnxModel model = OnnxModel::load(head_model(dir.path()));
  const Tensor x = head_input();
  Executor one(model.graph(), model.weights(), 0);
  const auto want = one.run({{"x", x}});
  const rows::RowGraph rg = rows::build_row_graph(model.graph());
  std::vector<std::string> columns;
  for (const rows::RowLayer& l : rg.layers) {
    if (l.columns) columns.push_back(fmt::format("{}:{}", l.name, l.rows));
  }
  EXPECT_EQ(columns, (std::vector<std::string>{"fc6:13", "relu6:13", "fc7:7", "clip7:7", "fc8:5"}));
  // The Flatten is folded into fc6: each device with fc6 columns gathers the pool's rows whole
  // from their holders and flattens them itself (device 0 does not send the flattened value).
  ASSERT_EQ(rg.folded.size(), 1u);
  EXPECT_EQ(model.graph().ops()[rg.folded[0]].name, "flat");
  const rows::RowLayer& fc6 = rg.layers[rg.layers.size() - 5];
  ASSERT_EQ(fc6.inputs.size(), 1u);
  EXPECT_EQ(model.graph().value(fc6.inputs[0].value).name, "pool");
  EXPECT_EQ(fc6.inputs[0].reshape, static_cast<int>(rg.folded[0]));
  EXPECT_EQ(fc6.inputs[0].map.in_rows, 3);         // the pool's height
  EXPECT_EQ(fc6.inputs[0].bytes_per_row, 27 * 4);  // read whole: all its bytes
  EXPECT_GE(fc6.inputs[0].producer, 0);
  for (int devices : {2, 3, 4}) {
    for (const char* s : {"equal", "uneven", "zero-rows", "overlap"}) {
      const Plan plan = row_plan(rg, devices, split(s, devices));
      const auto got = run_in_process(model.graph(), model.weights(), plan, {{"x", x}});
      for (const char* out : {"prob", "fc8"}) {
        EXPECT_LE(testing::max_abs_diff(got.at(out), want.at(out)), 1e-6)
            << out << " " << s << " on " << devices;
      }
    }
    // Device 0 computes no column anywhere: every column comes back to it for the outputs.
    const Plan none_on_0 = row_plan(rg, devices, [&](const rows::RowLayer& l, std::size_t) {
      std::vector<double> share(static_cast<std::size_t>(devices), 1.0);
      if (l.columns) share[0] = 0;
      return split_ranges(l.rows, share);
    });
    const auto got = run_in_process(model.graph(), model.weights(), none_on_0, {{"x", x}});
    EXPECT_LE(testing::max_abs_diff(got.at("prob"), want.at("prob")), 1e-6) << devices;
  }
}

// 13 columns over 3 devices, the middle one with none (and the last with none of fc8): it holds
// no weight of those layers, the others exactly their columns' rows, columns and bias entries.
// Every device's program is channels-last (graph/channels_last.h): its units convolve and pool
// [N,H,W,C] bands, every 4-D row exchange moves channels-last rows (so sender and receiver agree),
// and a value goes through a transpose only where NCHW enters or leaves (the image on device 0,
// an NCHW-only op such as yolo's resize, the outputs): never NHWC -> NCHW -> NHWC between units.
TEST(RowSplit, ProgramsAreChannelsLastOnEveryDevice) {
  for (const std::string name : {"vgg-tiny", "resnet-tiny", "yolo-tiny"}) {
    const OnnxModel model = OnnxModel::load(testing::fixture("cnn/" + name + ".onnx"));
    const rows::RowGraph rg = rows::build_row_graph(model.graph());
    const Plan plan = row_plan(rg, 3, split("uneven", 3));
    for (int rank = 0; rank < 3; ++rank) {
      const Program program = lower_rows(model.graph(), plan, rank);
      const Graph& g = program.graph;
      std::vector<const Op*> producer(g.values().size(), nullptr);
      for (const Op& op : g.ops()) producer[static_cast<std::size_t>(op.output)] = &op;
      int exchanges = 0, gathers = 0;
      for (const Op& op : g.ops()) {
        const bool four_d = g.value(op.output).shape.size() == 4;
        if (op.kind == OpKind::Conv2d || op.kind == OpKind::MaxPool) {
          EXPECT_TRUE(op.attrs.channels_last) << name << " " << op.name;
        }
        if (op.kind == OpKind::RowExchange && four_d) {
          // Only a graph output's gather onto device 0 travels NCHW, its layout as an output:
          // device 0 then holds it without transposing the whole.
          EXPECT_NE(op.attrs.channels_last, op.attrs.gather_nchw) << name << " " << op.name;
          if (op.attrs.gather_nchw) {
            EXPECT_TRUE(op.attrs.recvs.empty() || rank == 0) << name << " " << op.name;
            ++gathers;
            if (rank == 0) {
              EXPECT_NE(std::find(g.outputs().begin(), g.outputs().end(), op.output),
                        g.outputs().end())
                  << name << " " << op.name;
            }
          }
          ++exchanges;
        }
        // A conversion into a channels-last reader starts from NCHW data made as NCHW.
        if (!op.attrs.channels_last) continue;
        for (ValueId in : op.inputs) {
          const Op* t = producer[static_cast<std::size_t>(in)];
          if (t == nullptr || t->kind != OpKind::Transpose) continue;
          const Op* source = producer[static_cast<std::size_t>(t->inputs[0])];
          EXPECT_TRUE(source == nullptr || source->kind == OpKind::Resize)
              << name << " device " << rank << ": " << op.name << " reads " << t->name;
        }
      }
      EXPECT_GT(exchanges, 0) << name << " device " << rank;
      // yolo-tiny's two heads are 4-D outputs; the others end in a vector.
      EXPECT_EQ(gathers, name == "yolo-tiny" ? 2 : 0) << name << " device " << rank;
    }
  }
}

TEST(RowSplit, ZeroColumnDeviceHoldsNoHeadWeights) {
  testing::TempDir dir;
  const OnnxModel model = OnnxModel::load(head_model(dir.path()));
  const rows::RowGraph rg = rows::build_row_graph(model.graph());
  const std::map<std::string, std::vector<Range>> head = {{"fc6", {{0, 6}, {6, 6}, {6, 13}}},
                                                          {"relu6", {{0, 6}, {6, 6}, {6, 13}}},
                                                          {"fc7", {{0, 2}, {2, 2}, {2, 7}}},
                                                          {"clip7", {{0, 2}, {2, 2}, {2, 7}}},
                                                          {"fc8", {{0, 5}, {5, 5}, {5, 5}}}};
  const Plan plan = row_plan(rg, 3, [&](const rows::RowLayer& l, std::size_t) {
    if (const auto it = head.find(l.name); it != head.end()) return it->second;
    return split_ranges(l.rows, {1.0, 1.0, 1.0});
  });
  const auto got = run_in_process(model.graph(), model.weights(), plan, {{"x", head_input()}});
  Executor one(model.graph(), model.weights(), 0);
  EXPECT_LE(testing::max_abs_diff(got.at("prob"), one.run({{"x", head_input()}}).at("prob")), 1e-6);
  // Weight floats per device: the conv's 54 everywhere (every device has conv rows); fc6's
  // [13, 27] + 13, fc7's [13, 7] + 7 and fc8's [7, 5] split by columns.
  const std::int64_t conv = 54;
  const std::vector<std::int64_t> want = {conv + 6 * 27 + 6 + 13 * 2 + 2 + 7 * 5, conv,
                                          conv + 7 * 27 + 7 + 13 * 5 + 5};
  for (int rank = 0; rank < 3; ++rank) {
    Program program = lower_rows(model.graph(), plan, rank);
    EXPECT_EQ(program_weight_bytes(program),
              static_cast<std::size_t>(want[static_cast<std::size_t>(rank)]) * sizeof(float))
        << "device " << rank;
    // What a worker keeps: the slices, copied out of the model's tensors.
    const WeightMap weights = extract_weights(program, model.weights());
    localize_weights(program);
    EXPECT_EQ(program_weight_bytes(program, weights), program_weight_bytes(program)) << rank;
  }
}

TEST(RowSplit, ColumnEntriesRoundTripAndMalformedOnesAreNamed) {
  testing::TempDir dir;
  const OnnxModel model = OnnxModel::load(head_model(dir.path()));
  const rows::RowGraph rg = rows::build_row_graph(model.graph());
  const Plan plan = row_plan(rg, 3, split("uneven", 3));
  nlohmann::json j = plan.to_json();
  std::size_t fc6 = 0;
  for (std::size_t i = 0; i < j["rows"].size(); ++i) {
    if (j["rows"][i]["op"] == "fc6") fc6 = i;
  }
  ASSERT_TRUE(j["rows"][fc6].contains("columns")) << j["rows"][fc6].dump();
  EXPECT_FALSE(j["rows"][fc6].contains("ranges"));
  EXPECT_EQ(Plan::from_json(j, "again").to_json(), j);
  EXPECT_TRUE(Plan::from_json(j, "again").rows->ops[fc6].columns);
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit,
                           const std::vector<std::string>& words) {
    nlohmann::json bad = j;
    edit(bad["rows"][fc6]);
    try {
      Plan::from_json(bad, "bad.json").validate(rg, "bad.json");
      ADD_FAILURE() << "accepted " << bad["rows"][fc6].dump();
    } catch (const PlanError& e) {
      for (const std::string& w : words)
        EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << w << " in " << e.what();
    }
  };
  const std::string entry = fmt::format("[{}]", fc6);  // "rows: [i].columns[d]" or "rows[i]"
  refused(
      [](nlohmann::json& e) {
        e["columns"][2] = {9, 14};
      },
      {entry, "fc6", "columns [9, 14)", "13 columns"});
  refused([](nlohmann::json& e) { e["columns"][1] = {5, 3}; }, {entry, "[5, 3]", "columns"});
  refused(
      [](nlohmann::json& e) {
        e["columns"][0] = {0, 0};
      },
      {entry, "fc6", "no device computes column 0"});
  refused([](nlohmann::json& e) { e["columns"].erase(2); }, {entry, "2 ranges of columns"});
  refused([](nlohmann::json& e) { e["columns"][0] = {1}; }, {entry, "[begin, end]"});
  refused([](nlohmann::json& e) { e["ranges"] = e["columns"]; }, {entry, "not both"});
  refused(
      [](nlohmann::json& e) {
        e["ranges"] = e["columns"];
        e.erase("columns");
      },
      {entry, "fc6", "column layer", "\"columns\""});
  nlohmann::json rows_as_columns = j;
  rows_as_columns["rows"][0]["columns"] = rows_as_columns["rows"][0]["ranges"];
  rows_as_columns["rows"][0].erase("ranges");
  EXPECT_THROW(Plan::from_json(rows_as_columns, "x").validate(rg, "x"), PlanError);
}

}  // namespace
}  // namespace huddle
