// resolve_weight (model/model.h): the slices plans cut from whole weights, for block-quantised
// weights in particular.
#include "core/error.h"
#include "core/kquant.h"
#include "core/quant.h"
#include "model/model.h"

#include <gtest/gtest.h>

#include <random>

namespace huddle {
namespace {

WeightMap one_weight(Tensor t) {
  WeightMap weights;
  weights.emplace("w", std::move(t));
  return weights;
}

WeightRef columns(std::int64_t begin, std::int64_t end) {
  WeightRef ref;
  ref.tensor = "w";
  ref.axis = 1;
  ref.begin = begin;
  ref.end = end;
  return ref;
}

// Cuts on super-blocks keep Q4_K's blocks (a view of them); cuts on blocks of 32 inside a
// super-block give Q8_0 of the slice's values; other cuts are refused.
TEST(ResolveWeight, Q4KSlicesKeepTheirBlocksOrBecomeQ8_0) {
  std::mt19937 rng(3);
  const Tensor whole = random_blocks(rng, DType::Q4_K, 5, 768);
  const WeightMap weights = one_weight(whole);
  const Tensor widened = dequantize(whole);

  const Tensor aligned = resolve_weight(weights, columns(256, 768));
  EXPECT_EQ(aligned.dtype(), DType::Q4_K);
  EXPECT_EQ(aligned.shape(), (Shape{5, 512}));
  EXPECT_EQ(dequantize(aligned).to_vector(), widened.cols(256, 768).clone().to_vector());

  const Tensor inside = resolve_weight(weights, columns(128, 416));
  EXPECT_EQ(inside.dtype(), DType::Q8_0);
  EXPECT_EQ(inside.shape(), (Shape{5, 288}));
  const Tensor expected = quantize(widened.cols(128, 416).clone(), DType::Q8_0);
  EXPECT_EQ(dequantize(inside).to_vector(), dequantize(expected).to_vector());

  EXPECT_THROW(resolve_weight(weights, columns(100, 416)), PlanError);
}

}  // namespace
}  // namespace huddle
