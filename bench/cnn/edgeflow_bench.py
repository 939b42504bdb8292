#!/usr/bin/python3
"""EdgeFlow against its baselines on the emulated six-device cluster (docs/benchmarks.md, "CNNs
split by rows").

    /usr/bin/python3 bench/cnn/make_models.py vgg16 resnet50 yolov5s   # once (random weights)
    sudo /usr/bin/python3 bench/cnn/edgeflow_bench.py [--runs 5] [--networks 100,1000]
        [--models vgg16,resnet50,yolov5s] [--strategies edgeflow,rows-equal,edgeflow:f16,...]
        [--image] [--out DIR]   (NAME:WIRE runs NAME with rows on the wire as f16, bf16 or int8)

For every network (bench/clusters/edge6-<mbps>.json) and model: `scripts/testbed up` with the
workers holding their own copy of the .onnx file, then for every strategy one `huddle run
--repeat R+1` on the primary through `scripts/testbed exec` (the first run is a warm-up), planned
from the cluster file the testbed derives from its spec (CPU quota x --core-gflops). `local` is
the primary alone (the fastest device); `edgeflow-profiled` is edgeflow planned from the layer
times the primary measures first (`--profile-layers`) instead of FLOP counts;
`edgeflow-calibrated` from each device's speed as delivered in --calibrate-runs runs of a
rows-proportional plan on all devices at once (`huddle run --calibrate N`);
`edgeflow-profiled-calibrated` both. Prints a markdown table (median and min-max of the
measured runs, the planner's prediction, bytes sent per device, ratios to rows-equal and to local)
and writes results.json to --out. Needs root (the testbed).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TESTBED = os.path.join(ROOT, "scripts", "testbed")
STRATEGIES = ["local", "rows-equal", "rows-proportional", "tiles", "edgeflow", "edgeflow-profiled",
              "edgeflow-calibrated"]


def sh(cmd, timeout):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)


def pooled(rounds):
    """One row from the measurements of one strategy in several rounds: their runs pooled."""
    failed = [r for r in rounds if not r["ok"]]
    if failed:
        return failed[0]
    runs = [x for r in rounds for x in r["runs_ms"][1:]]
    row = dict(rounds[-1])
    row.update(median_ms=statistics.median(runs), min_ms=min(runs), max_ms=max(runs),
               round_medians_ms=[r["median_ms"] for r in rounds])
    return row


def measure(a, spec, cluster, args, model, strategy):
    onnx = os.path.join(HERE, "models", model + ".onnx")
    if a.image:  # the camera's 8-bit frame, as `huddle run --image` reads one
        png = os.path.join(HERE, "models", model + ".camera.png")
        with open(png, "rb") as f:
            width = int.from_bytes(f.read(24)[16:20], "big")  # the PNG header's IHDR width
        source = ["--image", png, "--size", width]
    else:
        source = ["--input", os.path.join(HERE, "models", model + ".input.npy")]
    cmd = [TESTBED, "exec", spec, "--", a.huddle, "run", "--model", onnx] + source + ["--json",
           "--repeat", a.runs + 1, "--threads", 1, "--timeout-s", 120, "--cluster", cluster]
    # NAME:WIRE (edgeflow:f16): rows exchanged in that wire format (`--wire`).
    strategy, _, wire = strategy.partition(":")
    if wire:
        cmd += ["--wire", wire]
    # edgeflow-profiled: EdgeFlow planned from layer times measured on the primary first;
    # edgeflow-calibrated: from device speeds measured in runs on all devices at once first.
    calibrate = ["--calibrate", a.calibrate_runs]
    variants = {"edgeflow-profiled": ["--strategy", "edgeflow", "--profile-layers"],
                "edgeflow-calibrated": ["--strategy", "edgeflow"] + calibrate,
                "edgeflow-profiled-calibrated": ["--strategy", "edgeflow", "--profile-layers"] +
                calibrate}
    cmd += variants.get(strategy, ["--strategy", strategy])
    cmd += args
    t0 = time.monotonic()
    try:
        r = sh(cmd, a.timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {a.timeout} s"}
    if r.returncode != 0:
        lines = [l for l in r.stderr.splitlines() if l.startswith("huddle")] or r.stderr.splitlines()[-1:]
        return {"ok": False, "error": (lines or ["?"])[-1][:300]}
    j = json.loads(r.stdout.strip().splitlines()[-1])
    runs = j["run_ms_all"][1:]
    return {"ok": True, "median_ms": statistics.median(runs), "min_ms": min(runs), "max_ms": max(runs),
            "runs_ms": j["run_ms_all"], "predicted_ms": j.get("predicted_ms"),
            "speed_factors": j.get("calibration", {}).get("speed_factors"),
            "bytes_sent": j.get("bytes_sent"), "wall_s": round(time.monotonic() - t0, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--image", action="store_true",
                    help="feed NAME.camera.png (an 8-bit frame; make_models.py) instead of "
                    "NAME.input.npy (seeded standard normal)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure every strategy in this many sessions, in turn, and pool the runs")
    ap.add_argument("--networks", default="100,1000")
    ap.add_argument("--calibrate-runs", type=int, default=5,
                    help="runs timed on all devices before planning edgeflow-calibrated")
    ap.add_argument("--models", default="vgg16,resnet50,yolov5s")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--core-gflops", type=float,
                    help="GFLOP/s of one core of this machine, for the cluster file (default: the "
                         "testbed measures it)")
    ap.add_argument("--huddle", default=os.path.join(ROOT, "build", "huddle"))
    ap.add_argument("--cpu-period-ms", type=float, default=100,
                    help="CFS period of the devices' CPU quotas (scripts/testbed up --cpu-period-ms)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds one huddle run may take")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "edgeflow"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = []
    for mbps in a.networks.split(","):
        spec = os.path.join(ROOT, "bench", "clusters", f"edge6-{mbps}.json")
        for model in a.models.split(","):
            onnx = os.path.join(HERE, "models", model + ".onnx")
            cluster = os.path.join(a.out, f"edge6-{mbps}.cluster.json")
            sh([TESTBED, "down", spec], 120)
            gflops = ["--core-gflops", a.core_gflops] if a.core_gflops else []
            up = sh([TESTBED, "up", spec, "--huddle", a.huddle, "--model", onnx, "--cluster-out", cluster,
                     "--cpu-period-ms", a.cpu_period_ms] + gflops, 180)
            if up.returncode != 0:
                sys.exit(f"testbed up {spec}: {up.stderr[-500:]}")
            args = up.stdout.split()
            try:
                # The strategies are measured in --rounds rounds, each a session of its own, in
                # turn, and their runs pooled: this host's speed drifts by 10-30 % within minutes,
                # and a drift then falls on every strategy alike.
                strategies = a.strategies.split(",")
                rounds = {s: [] for s in strategies}
                for _ in range(a.rounds):
                    for strategy in strategies:
                        rounds[strategy].append(measure(a, spec, cluster, args, model, strategy))
                        print(json.dumps({"strategy": strategy, **rounds[strategy][-1]}),
                              file=sys.stderr, flush=True)
                for strategy in strategies:
                    results.append({"network_mbps": int(mbps), "model": model, "strategy": strategy,
                                    **pooled(rounds[strategy])})
                with open(os.path.join(a.out, "results.json"), "w") as f:
                    json.dump(results, f, indent=1)
            finally:
                sh([TESTBED, "down", spec], 120)
    print("| network | model | strategy | median ms (min-max) | predicted ms | vs rows-equal | vs local | "
          "MB sent per device |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        if not r["ok"]:
            print(f"| {r['network_mbps']} Mbit/s | {r['model']} | {r['strategy']} | failed: {r['error']} | | | | |")
            continue
        same = {x["strategy"]: x for x in results
                if x["network_mbps"] == r["network_mbps"] and x["model"] == r["model"] and x["ok"]}
        ratio = lambda s: f"{r['median_ms'] / same[s]['median_ms']:.2f}" if s in same else "–"
        sent = " / ".join(f"{b / 1e6:.1f}" for b in (r["bytes_sent"] or []))
        if len(r.get("round_medians_ms", [])) > 1:
            sent += " [rounds: " + ", ".join(f"{m:.0f}" for m in r["round_medians_ms"]) + " ms]"
        print(f"| {r['network_mbps']} Mbit/s | {r['model']} | {r['strategy']} | {r['median_ms']:.0f} "
              f"({r['min_ms']:.0f}-{r['max_ms']:.0f}) | {r['predicted_ms']:.0f} | {ratio('rows-equal')} | "
              f"{ratio('local')} | {sent} |")


if __name__ == "__main__":
    main()
