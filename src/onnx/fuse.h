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

// A channels-last conv2d (graph/channels_last.h) whose output only an Add reads, with a residual
// of the output's shape as the Add's other operand, and the activation that alone reads the
// sum, become one conv2d with a residual input (the ResNet and YOLO bottleneck's end):
// y = residual_act(act(conv(x) + bias) + r), computed by oneDNN's sum post-op on r's buffer.
// The fused op takes the place of the last op it absorbs, and its output keeps that op's name.
// For whole-tensor graphs only (row-split planners see the Add); a conv whose activation has no
// oneDNN post-op (hard_sigmoid) is left alone. `fused`, when given, counts the adds absorbed.
Graph fuse_residual_adds(const Graph& graph, int* fused = nullptr);

}  // namespace huddle::onnx_import
