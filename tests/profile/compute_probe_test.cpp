#include "profile/compute_probe.h"

#include "core/error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace huddle::profile {
namespace {

ProbeShapes small_shapes() {
  ProbeShapes s;
  s.hidden = 128;
  s.ffn = 512;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.tokens = 32;
  return s;
}

TEST(ComputeProbe, FitsPositiveCurvesThatDescribeTheSamples) {
  const ComputeProfile p = probe_compute(small_shapes(), 0.2, std::int64_t{64} << 20);
  for (const OpCurve* c : {&p.curves.gemm, &p.curves.attention, &p.curves.elementwise}) {
    EXPECT_GT(c->gflops, 0.0);
    EXPECT_GE(c->overhead_s, 0.0);
  }
  EXPECT_GT(p.samples, 20);
  EXPECT_GE(p.fit_error, 0.0);
  EXPECT_GT(p.attention_gflops, 0.0);
  EXPECT_GT(p.mlp_gflops, 0.0);
  EXPECT_GT(p.connection_gflops, 0.0);
  EXPECT_GE(p.threads, 1);
}

// The linears are timed in the model's weight dtype (OutIn, packed), including shapes whose rows
// are not whole Q4_0 blocks (ffn / 4 = 136 here).
TEST(ComputeProbe, QuantisedWeightsAreProbedInTheirDtype) {
  for (DType dtype : {DType::Q4_0, DType::F16}) {
    ProbeShapes s = small_shapes();
    s.ffn = 544;
    s.weight_dtype = dtype;
    const ComputeProfile p = probe_compute(s, 0.1, std::int64_t{64} << 20);
    for (const OpCurve* c : {&p.curves.gemm, &p.curves.gemv}) {
      EXPECT_GT(c->gflops, 0.0) << dtype_name(dtype);
      EXPECT_GE(c->overhead_s, 0.0) << dtype_name(dtype);
    }
  }
}

// The probe's weight dtype is the one holding most of a graph's linear weight bytes.
TEST(ComputeProbe, ShapesTakeTheGraphsLinearWeightDtype) {
  ModelConfig config;
  config.hidden = 64;
  config.ffn = 128;
  config.heads = 2;
  config.kv_heads = 2;
  config.head_dim = 32;
  Graph graph;
  const ValueId x = graph.add_input("x", {kTokens, 64}, DType::F32);
  const ValueId small = graph.add_weight("small", {64, 64}, {"small", {64, 64}}, DType::F16);
  const ValueId large = graph.add_weight("large", {128, 64}, {"large", {128, 64}}, DType::Q8_0);
  OpAttrs out_in;
  out_in.weight_layout = kernels::WeightLayout::OutIn;
  graph.add_op(OpKind::Linear, "a", {x, small}, out_in);
  graph.add_op(OpKind::Linear, "b", {x, large}, out_in);
  EXPECT_EQ(ProbeShapes::of(config, graph, 8).weight_dtype, DType::Q8_0);
  EXPECT_EQ(ProbeShapes::of(config, 8).weight_dtype, DType::F32);
}

TEST(ComputeProbe, ProfileRoundTripsThroughJson) {
  ComputeProfile p;
  p.curves = OpCurves{{50, 1e-5}, {20, 2e-6}, {3, 1e-6}, {10, 1e-6}};
  derive_block_speeds(small_shapes(), p);
  const ComputeProfile q = ComputeProfile::from_json(nlohmann::json::parse(p.to_json().dump()));
  EXPECT_DOUBLE_EQ(q.curves.gemm.gflops, 50);
  EXPECT_NEAR(q.curves.attention.overhead_s, 2e-6, 1e-15);
  EXPECT_DOUBLE_EQ(q.mlp_gflops, p.mlp_gflops);
  // A whole MLP block is slower than its GEMMs alone and faster than its element-wise part.
  EXPECT_LT(p.mlp_gflops, 50);
  EXPECT_GT(p.mlp_gflops, 3);
  nlohmann::json bad = p.to_json();
  bad["op_curves"]["gemm"]["gflops"] = -1;
  EXPECT_THROW(ComputeProfile::from_json(bad), InputError);
}

TEST(ComputeProbe, ShapesRoundTripAndRejectNonsense) {
  const ProbeShapes s = small_shapes();
  const ProbeShapes t = ProbeShapes::from_json(s.to_json());
  EXPECT_EQ(t.hidden, s.hidden);
  EXPECT_EQ(t.kv_heads, s.kv_heads);
  ProbeShapes q = s;
  q.weight_dtype = DType::Q4_0;
  EXPECT_EQ(ProbeShapes::from_json(q.to_json()).weight_dtype, DType::Q4_0);
  nlohmann::json bad = s.to_json();
  bad["weight_dtype"] = "q5_k";
  EXPECT_THROW(ProbeShapes::from_json(bad), InputError);
  bad = s.to_json();
  bad["kv_heads"] = 3;  // does not divide the heads
  EXPECT_THROW(ProbeShapes::from_json(bad), InputError);
  bad = s.to_json();
  bad["hidden"] = 1 << 20;
  EXPECT_THROW(ProbeShapes::from_json(bad), InputError);
}

}  // namespace
}  // namespace huddle::profile
