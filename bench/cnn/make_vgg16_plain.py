#!/usr/bin/python3
"""Writes a VGG-16-shaped ONNX model with random weights, without torch (python3-onnx, numpy).

    make_vgg16_plain.py OUT.onnx [--head-only] [--seed 1]

VGG-16 as torchvision has it (configuration D, no BatchNorm): 13 3x3 convolutions with ReLU in
five blocks, each ending in a 2x2 max pool, then Flatten and the classifier fc6 (25088 -> 4096),
ReLU, fc7 (4096 -> 4096), ReLU, fc8 (4096 -> 1000) as Gemm with transB=1 (torch's export; the
dropouts are identities at inference and left out). Input "input" [1, 3, 224, 224], output
"logits". With --head-only the model is just the head: input [1, 512, 7, 7] -> Flatten -> fc6 ->
ReLU -> fc7 -> ReLU -> fc8, to time the fully connected layers alone. He-initialised weights keep
activations finite. Also writes OUT.input.npy (seeded standard normal). Never committed.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCKS = [[64, 64], [128, 128], [256, 256, 256], [512, 512, 512], [512, 512, 512]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--head-only", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    nodes, inits = [], []

    def weight(name, shape, fan_in):
        w = (rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in)))
        inits.append(numpy_helper.from_array(w, name))
        return name

    def bias(name, n):
        inits.append(numpy_helper.from_array(np.zeros(n, np.float32), name))
        return name

    x = "input"
    shape = [1, 512, 7, 7] if args.head_only else [1, 3, 224, 224]
    if not args.head_only:
        c = 3
        for b, block in enumerate(BLOCKS):
            for i, o in enumerate(block):
                name = f"conv{b + 1}_{i + 1}"
                w = weight(name + ".weight", (o, c, 3, 3), c * 9)
                nodes.append(helper.make_node("Conv", [x, w, bias(name + ".bias", o)], [name],
                                              kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
                nodes.append(helper.make_node("Relu", [name], [name + ".relu"]))
                x, c = name + ".relu", o
            nodes.append(helper.make_node("MaxPool", [x], [f"pool{b + 1}"], kernel_shape=[2, 2],
                                          strides=[2, 2]))
            x = f"pool{b + 1}"
    nodes.append(helper.make_node("Flatten", [x], ["flat"], axis=1))
    x, k = "flat", 512 * 7 * 7
    for name, o, relu in [("fc6", 4096, True), ("fc7", 4096, True), ("fc8", 1000, False)]:
        w = weight(name + ".weight", (o, k), k)
        out = name if relu else "logits"
        nodes.append(helper.make_node("Gemm", [x, w, bias(name + ".bias", o)], [out], transB=1))
        x, k = out, o
        if relu:
            nodes.append(helper.make_node("Relu", [x], [name + ".relu"]))
            x = name + ".relu"
    graph = helper.make_graph(nodes, "vgg16_plain",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, args.out)
    np.save(args.out.removesuffix(".onnx") + ".input.npy",
            rng.standard_normal(shape, dtype=np.float32))


if __name__ == "__main__":
    main()
