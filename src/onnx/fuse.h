// Load-time fusion over an imported Graph: Conv2d + BatchNorm (folded into the conv's weights and
// bias) + activation (Relu, Clip/ReLU6, HardSwish, HardSigmoid, Sigmoid, and SiLU written as
// Mul(x, Sigmoid(x)), HardSwish as Mul(x, HardSigmoid(x; 1/6, 1/2))) become one conv2d op with a
// fused activation. A chain is fused only when each intermediate value has no other reader and is
// not a graph output; the fused op's output keeps the last fused value's name.
#pragma once

#include "graph/graph.h"
#include "model/model.h"

namespace huddle::onnx_import {

struct FuseStats {
  int batch_norms_folded = 0;
  int activations_fused = 0;
};

// Returns the fused graph; folded weights are added to `weights` (names "<op>.folded_w/_b").
Graph fuse_conv_chains(const Graph& graph, WeightMap& weights, FuseStats* stats = nullptr);

}  // namespace huddle::onnx_import
