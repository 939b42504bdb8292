#!/usr/bin/python3
"""Exports real-size CNNs with random weights to bench/cnn/models/ (never committed).

Needs Debian's python3-torch, python3-torchvision, python3-onnx, python3-numpy. For each model it
writes NAME.onnx (opset 13, static 1x3x224x224 — 640x640 for yolov5s — BatchNorm kept as nodes:
the exporter's own Conv+BN folding is off, so Huddle's load-time fusion is what runs),
NAME.input.npy (seeded standard normal), NAME.torch.npy (torch float32 outputs, for an accuracy
check; several outputs are concatenated flat) and NAME.camera.png, a synthetic 8-bit camera frame
of the input's size (gradients, shapes, sensor noise) for `huddle run --image`: what a camera
gives, where the seeded normal input is a worst case for the wire (no two values alike).

yolov5s is a YOLOv5s-shaped DAG written here (torchvision has none): Conv+BN+SiLU, C3 blocks with
residual bottlenecks, SPPF (chained max pools), nearest 2x upsampling and concatenations of the
FPN/PAN neck, and three 1x1 detection heads (255 channels at strides 8, 16, 32).
"""
import os
import sys

import numpy as np
import torch
import torchvision

class Conv(torch.nn.Module):
    def __init__(self, c1, c2, k=1, s=1, p=None):
        super().__init__()
        self.conv = torch.nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
        self.bn = torch.nn.BatchNorm2d(c2, eps=1e-3)

    def forward(self, x):
        y = self.bn(self.conv(x))
        return y * torch.sigmoid(y)  # SiLU as Sigmoid + Mul, as exporters write it


class Bottleneck(torch.nn.Module):
    def __init__(self, c, shortcut=True):
        super().__init__()
        self.cv1, self.cv2, self.add = Conv(c, c, 1), Conv(c, c, 3), shortcut

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3(torch.nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=True):
        super().__init__()
        h = c2 // 2
        self.cv1, self.cv2, self.cv3 = Conv(c1, h), Conv(c1, h), Conv(2 * h, c2)
        self.m = torch.nn.Sequential(*[Bottleneck(h, shortcut) for _ in range(n)])

    def forward(self, x):
        return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))


class SPPF(torch.nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        h = c1 // 2
        self.cv1, self.cv2 = Conv(c1, h), Conv(4 * h, c2)
        self.pool = torch.nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        a = self.pool(x)
        b = self.pool(a)
        return self.cv2(torch.cat([x, a, b, self.pool(b)], 1))


class YoloV5s(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.b0, self.b1, self.b2 = Conv(3, 32, 6, 2, 2), Conv(32, 64, 3, 2), C3(64, 64, 1)
        self.b3, self.b4 = Conv(64, 128, 3, 2), C3(128, 128, 2)
        self.b5, self.b6 = Conv(128, 256, 3, 2), C3(256, 256, 3)
        self.b7, self.b8, self.b9 = Conv(256, 512, 3, 2), C3(512, 512, 1), SPPF(512, 512)
        self.h10, self.h13 = Conv(512, 256), C3(512, 256, 1, False)
        self.h14, self.h17 = Conv(256, 128), C3(256, 128, 1, False)
        self.h18, self.h20 = Conv(128, 128, 3, 2), C3(256, 256, 1, False)
        self.h21, self.h23 = Conv(256, 256, 3, 2), C3(512, 512, 1, False)
        self.up = torch.nn.Upsample(scale_factor=2, mode="nearest")
        self.d0, self.d1, self.d2 = (torch.nn.Conv2d(c, 255, 1) for c in (128, 256, 512))

    def forward(self, x):
        p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        t10 = self.h10(p5)
        t14 = self.h14(self.h13(torch.cat([self.up(t10), p4], 1)))
        o17 = self.h17(torch.cat([self.up(t14), p3], 1))
        o20 = self.h20(torch.cat([self.h18(o17), t14], 1))
        o23 = self.h23(torch.cat([self.h21(o20), t10], 1))
        return self.d0(o17), self.d1(o20), self.d2(o23)


SIZES = {"yolov5s": 640}
MODELS = {
    "vgg16": lambda: torchvision.models.vgg16(),
    "resnet50": lambda: torchvision.models.resnet50(),
    "mobilenet_v2": lambda: torchvision.models.mobilenet_v2(),
    "mobilenet_v3_small": lambda: torchvision.models.mobilenet_v3_small(),
    "yolov5s": YoloV5s,
}


def save_camera_frame(path, size, seed):
    """A size x size RGB frame: a sky-to-ground gradient, a few flat-shaded boxes and discs, and
    Gaussian sensor noise, quantised to 8 bits as a camera's are."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    img = np.stack([90 + 100 * y, 130 + 60 * y, 200 - 120 * y], axis=-1)
    for _ in range(12):
        cx, cy, r = rng.uniform(0, 1, 2).tolist() + [rng.uniform(0.03, 0.15)]
        colour = rng.uniform(0, 255, 3)
        if rng.uniform() < 0.5:
            mask = (np.abs(x - cx) < r) & (np.abs(y - cy) < 0.7 * r)
        else:
            mask = (x - cx) ** 2 + (y - cy) ** 2 < r * r
        img[mask] = colour * (0.6 + 0.4 * (1 - y[mask]))[:, None]
    img += rng.normal(0, 4, img.shape)
    Image.fromarray(np.clip(np.rint(img), 0, 255).astype(np.uint8)).save(path)


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
    os.makedirs(out, exist_ok=True)
    names = sys.argv[1:] or list(MODELS)
    for i, name in enumerate(names):
        torch.manual_seed(100 + i)
        model = MODELS[name]().eval()
        size = SIZES.get(name, 224)
        x = torch.from_numpy(np.random.default_rng(200 + i).standard_normal((1, 3, size, size)).astype(np.float32))
        with torch.no_grad():
            y = model(x)
        outputs = list(y) if isinstance(y, tuple) else [y]
        names = [f"head{k}" for k in range(len(outputs))] if len(outputs) > 1 else ["logits"]
        y = np.concatenate([o.numpy().ravel() for o in outputs])
        path = os.path.join(out, name + ".onnx")
        torch.onnx.export(model, x, path, opset_version=13, input_names=["input"], output_names=names,
                          do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
        np.save(os.path.join(out, name + ".input.npy"), x.numpy())
        np.save(os.path.join(out, name + ".torch.npy"), y)
        save_camera_frame(os.path.join(out, name + ".camera.png"), size, 300 + i)
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB, output {y.shape}")


if __name__ == "__main__":
    main()
