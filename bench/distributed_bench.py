#!/usr/bin/env python3
"""Distributed prefill benchmark: one process vs N processes on this machine, every strategy.

Runs `huddle run --local-devices N --strategy S --threads T --json --trace ... --repeat R+1` (one
session per strategy; its first run is a warm-up) and reports the median prefill latency (and
min..max) of the other R runs, the speedup over one process, and the communication time the
overlap left exposed (from the trace; the device with the most; averaged over the session's runs).

  bench/distributed_bench.py --model /tmp/models/gpt2 [--tokens 128] [--devices 2] [--runs 5]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile


def run_once(args, strategy, devices, ids, trace, wire):
    cmd = [args.huddle, "run", "--model", args.model, "--ids", ids, "--threads", str(args.threads), "--json",
           "--repeat", str(args.runs + 1)]
    if devices > 1:
        cmd += ["--local-devices", str(devices), "--strategy", strategy, "--trace", trace, "--wire", wire]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--huddle", default="build/huddle")
    p.add_argument("--model", required=True)
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--devices", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--strategies", default="megatron,sp,galaxy")
    p.add_argument("--wires", default="f32",
                   help="activation wire formats to run each strategy with (f32,f16,bf16,int8)")
    p.add_argument("--json-out", help="also write the results as JSON here")
    args = p.parse_args()

    with open(os.path.join(args.model, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    rng = random.Random(42)
    ids = ",".join(str(rng.randrange(vocab)) for _ in range(args.tokens))
    trace = os.path.join(tempfile.mkdtemp(prefix="huddle-bench-"), "trace.json")

    rows = []
    plan = [("local", 1, "f32")] + [(s, args.devices, w) for s in args.strategies.split(",")
                                    for w in args.wires.split(",")]
    for strategy, devices, wire in plan:
        # One session per strategy: the first run warms up (page faults, caches) and is dropped.
        r = run_once(args, strategy, devices, ids, trace, wire)
        prefill = r["prefill_ms_runs"][1:]
        # The trace covers every run of the session, warm-up included: exposed comm per run.
        exposed = max(r.get("exposed_comm_ms", [0.0])) / (args.runs + 1)
        rows.append({"strategy": strategy, "devices": devices, "wire": wire,
                     "bytes_sent": max([d.get("bytes_sent", 0) for d in r.get("devices", [])] or [0]),
                     "prefill_ms": statistics.median(prefill),
                     "min_ms": min(prefill), "max_ms": max(prefill), "exposed_comm_ms": exposed})
        print(f"  {strategy} ({wire}): {rows[-1]['prefill_ms']:.1f} ms", file=sys.stderr)

    base = rows[0]["prefill_ms"]
    print(f"# {args.model}, {args.tokens}-token prompt, {args.threads} thread(s) per process, "
          f"median of {args.runs} runs after a warm-up, one session per strategy")
    print("| strategy | wire | processes | prefill ms (min..max) | speedup vs 1 process "
          "| exposed comm ms (max over devices) | MB sent (device with most, whole session) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['strategy']} | {r['wire']} | {r['devices']} | {r['prefill_ms']:.1f} "
              f"({r['min_ms']:.1f}..{r['max_ms']:.1f}) | {base / r['prefill_ms']:.2f}x | "
              f"{r['exposed_comm_ms']:.1f} | {r['bytes_sent'] / 1e6:.1f} |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"model": args.model, "tokens": args.tokens, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
