#!/usr/bin/python3
"""Exports real-size CNNs with random weights to bench/cnn/models/ (never committed).

Needs Debian's python3-torch, python3-torchvision, python3-onnx, python3-numpy. For each model it
writes NAME.onnx (opset 13, static 1x3x224x224, BatchNorm kept as nodes: the exporter's own
Conv+BN folding is off, so Huddle's load-time fusion is what runs), NAME.input.npy (seeded
standard normal) and NAME.torch.npy (torch float32 output, for an accuracy check).
"""
import os
import sys

import numpy as np
import torch
import torchvision

MODELS = {
    "vgg16": lambda: torchvision.models.vgg16(),
    "resnet50": lambda: torchvision.models.resnet50(),
    "mobilenet_v2": lambda: torchvision.models.mobilenet_v2(),
    "mobilenet_v3_small": lambda: torchvision.models.mobilenet_v3_small(),
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
    os.makedirs(out, exist_ok=True)
    names = sys.argv[1:] or list(MODELS)
    for i, name in enumerate(names):
        torch.manual_seed(100 + i)
        model = MODELS[name]().eval()
        x = torch.from_numpy(np.random.default_rng(200 + i).standard_normal((1, 3, 224, 224)).astype(np.float32))
        with torch.no_grad():
            y = model(x).numpy()
        path = os.path.join(out, name + ".onnx")
        torch.onnx.export(model, x, path, opset_version=13, input_names=["input"], output_names=["logits"],
                          do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
        np.save(os.path.join(out, name + ".input.npy"), x.numpy())
        np.save(os.path.join(out, name + ".torch.npy"), y)
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB, output {y.shape}")


if __name__ == "__main__":
    main()
