#!/usr/bin/python3
"""Huddle vs ONNX Runtime on real-size CNNs, one device, the same thread count.

    /usr/bin/python3 bench/cnn/make_models.py            # once: models/ (random weights)
    (cd bench/cnn && ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm install)  # once: onnxruntime-node (CPU)
    /usr/bin/python3 bench/cnn/bench.py --threads 2 --runs 10 [--rounds 3] [models...]

For each model: median and spread (min-max) of the run time over --runs runs after a warm-up, for
`huddle run --repeat` (one process, the Executor re-run) and for onnxruntime-node, the two
alternating --rounds times (each round a fresh process of each, its times pooled) so that a noisy
machine slows both alike; and the max abs difference of each to torch's float32 output relative to
max|torch| (the first output: a model with several, as yolov5s, has them concatenated in the
reference).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def stats(ms):
    return statistics.median(ms), min(ms), max(ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--huddle", default=os.path.join(ROOT, "build", "huddle"))
    ap.add_argument("models", nargs="*", default=["vgg16", "resnet50", "mobilenet_v2", "mobilenet_v3_small"])
    a = ap.parse_args()
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"threads {a.threads}, runs {a.runs} (+1 warm-up) x {a.rounds} rounds")
    print("| model | huddle median ms (min-max) | onnxruntime median ms (min-max) | huddle/ort | "
          "huddle err | ort err |")
    print("|---|---|---|---|---|---|")
    for name in a.models:
        onnx = os.path.join(HERE, "models", name + ".onnx")
        x = os.path.join(HERE, "models", name + ".input.npy")
        ref = np.load(os.path.join(HERE, "models", name + ".torch.npy")).ravel()
        dump = os.path.join(HERE, "models", name + ".huddle")
        h_ms, o_ms = [], []
        for _ in range(a.rounds):
            h = subprocess.run([a.huddle, "run", "--model", onnx, "--input", x, "--threads", str(a.threads),
                                "--repeat", str(a.runs + 1), "--json", "--dump-outputs", dump],
                               check=True, capture_output=True, text=True)
            hj = json.loads(h.stdout)
            h_ms += hj["run_ms_all"][1:]
            o = subprocess.run(["node", os.path.join(HERE, "ort_bench.js"), onnx, x, str(a.threads), str(a.runs)],
                               check=True, capture_output=True, text=True, cwd=HERE)
            oj = json.loads(o.stdout)
            o_ms += oj["ms"]
        h_out = np.load(os.path.join(dump, hj["outputs"][0]["name"] + ".npy")).ravel()
        o_out = np.array(oj["output"], dtype=np.float32)
        scale = float(np.abs(ref).max())
        h_err = float(np.abs(h_out - ref[: h_out.size]).max()) / scale
        o_err = float(np.abs(o_out - ref[: o_out.size]).max()) / scale
        hm, hlo, hhi = stats(h_ms)
        om, olo, ohi = stats(o_ms)
        print(f"| {name} | {hm:.1f} ({hlo:.1f}-{hhi:.1f}) | {om:.1f} ({olo:.1f}-{ohi:.1f}) | {hm / om:.2f} | "
              f"{h_err:.1e} | {o_err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
