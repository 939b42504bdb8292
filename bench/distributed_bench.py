#!/usr/bin/env python3
"""Distributed prefill benchmark: one process vs N processes on this machine, every strategy.

Runs `huddle run --local-devices N --strategy S --threads T --json --trace ...` repeatedly and
reports the median prefill latency (and min..max), the speedup over one process, and the
communication time the overlap left exposed (from the trace, per device: max over devices).

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


def run_once(args, strategy, devices, ids, trace):
    cmd = [args.huddle, "run", "--model", args.model, "--ids", ids, "--threads", str(args.threads), "--json"]
    if devices > 1:
        cmd += ["--local-devices", str(devices), "--strategy", strategy, "--trace", trace]
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
    p.add_argument("--json-out", help="also write the results as JSON here")
    args = p.parse_args()

    with open(os.path.join(args.model, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    rng = random.Random(42)
    ids = ",".join(str(rng.randrange(vocab)) for _ in range(args.tokens))
    trace = os.path.join(tempfile.mkdtemp(prefix="huddle-bench-"), "trace.json")

    rows = []
    plan = [("local", 1)] + [(s, args.devices) for s in args.strategies.split(",")]
    for strategy, devices in plan:
        run_once(args, strategy, devices, ids, trace)  # warm-up (page cache, allocator)
        prefill, exposed = [], []
        for _ in range(args.runs):
            r = run_once(args, strategy, devices, ids, trace)
            prefill.append(r["prefill_ms"])
            exposed.append(max(r.get("exposed_comm_ms", [0.0])))
        rows.append({"strategy": strategy, "devices": devices, "prefill_ms": statistics.median(prefill),
                     "min_ms": min(prefill), "max_ms": max(prefill),
                     "exposed_comm_ms": statistics.median(exposed)})
        print(f"  {strategy}: {rows[-1]['prefill_ms']:.1f} ms", file=sys.stderr)

    base = rows[0]["prefill_ms"]
    print(f"# {args.model}, {args.tokens}-token prompt, {args.threads} thread(s) per process, "
          f"median of {args.runs} runs after a warm-up")
    print("| strategy | processes | prefill ms (min..max) | speedup vs 1 process | exposed comm ms (max over devices) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['strategy']} | {r['devices']} | {r['prefill_ms']:.1f} ({r['min_ms']:.1f}..{r['max_ms']:.1f}) | "
              f"{base / r['prefill_ms']:.2f}x | {r['exposed_comm_ms']:.1f} |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"model": args.model, "tokens": args.tokens, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
