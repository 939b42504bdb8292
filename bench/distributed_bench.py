#!/usr/bin/env python3
"""Distributed prefill benchmark: one process vs N processes on this machine, every strategy.

Runs `huddle run --local-devices N --strategy S --threads T --json --trace ... --repeat R+1
--replan-threshold 1e9` (one session and one plan per strategy; its first run is a warm-up) and reports the median prefill latency (and
min..max) of the other R runs, the speedup over one process, and the communication time the
overlap left exposed (from the trace; the device with the most; averaged over the session's runs).

  bench/distributed_bench.py --model /tmp/models/gpt2 [--tokens 128] [--devices 2] [--runs 5] [--decode 32]

With --rounds R every configuration runs R sessions, the configurations interleaved round by
round (A B C A B C ...), so that a host whose speed drifts during the sitting slows each alike;
the figures are over every session's runs.

With --decode N every run also decodes N tokens (`--n-predict`): the table adds the median decode
step (ms per token) and its speedup over one process; the exposed-communication columns then
include the decode steps' too.

The `concurrent` row runs N one-process sessions side by side (no communication at all) and
reports N x (one process's time) / (their median time): the most a perfect N-way split could gain
on this host, where N processes share its memory system and whatever else runs on its cores.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile


def run_once(args, strategy, devices, ids, trace, wire, chunks):
    cmd = [args.huddle, "run", "--model", args.model, "--ids", ids, "--threads", str(args.threads), "--json",
           "--repeat", str(args.runs + 1), "--n-predict", str(args.decode)]
    if devices > 1:
        # One plan per session (as bench/suite.py): re-planning between runs would mix plans.
        cmd += ["--local-devices", str(devices), "--strategy", strategy, "--trace", trace, "--wire", wire,
                "--gather-chunks", str(chunks), "--replan-threshold", "1e9"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_concurrent(args, devices, ids):
    """N independent one-process sessions at once; every session's runs after its warm-up."""
    cmd = [args.huddle, "run", "--model", args.model, "--ids", ids, "--threads", str(args.threads), "--json",
           "--repeat", str(args.runs + 1)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                              text=True) for _ in range(devices)]
    runs = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"concurrent session failed with exit {proc.returncode}")
        runs += json.loads(out.strip().splitlines()[-1])["prefill_ms_runs"][1:]
    return runs


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
    p.add_argument("--gather-chunks", default="1",
                   help="chunk counts of the all-gathers to run each strategy with (e.g. 1,4)")
    p.add_argument("--rounds", type=int, default=1,
                   help="sessions per configuration, interleaved across configurations")
    p.add_argument("--decode", type=int, default=0,
                   help="also decode this many tokens per run and report the decode step's median ms")
    p.add_argument("--json-out", help="also write the results as JSON here")
    args = p.parse_args()

    with open(os.path.join(args.model, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    rng = random.Random(42)
    ids = ",".join(str(rng.randrange(vocab)) for _ in range(args.tokens))
    trace = os.path.join(tempfile.mkdtemp(prefix="huddle-bench-"), "trace.json")

    plan = [("local", 1, "f32", 1), ("concurrent", args.devices, "f32", 1)] + [(s, args.devices, w, int(c)) for s in args.strategies.split(",")
                                       for w in args.wires.split(",")
                                       for c in args.gather_chunks.split(",")]
    prefill = {cfg: [] for cfg in plan}
    decode = {cfg: [] for cfg in plan}
    exposed = {cfg: [] for cfg in plan}
    layers = {cfg: [] for cfg in plan}
    sent = {cfg: 0 for cfg in plan}
    for rnd in range(args.rounds):
        for cfg in plan:
            strategy, devices, wire, chunks = cfg
            if strategy == "concurrent":
                prefill[cfg] += run_concurrent(args, devices, ids)
                print(f"  round {rnd + 1}: {devices} concurrent one-process sessions: "
                      f"{statistics.median(prefill[cfg]):.1f} ms", file=sys.stderr)
                continue
            # One session per configuration and round: its first run warms up and is dropped.
            r = run_once(args, strategy, devices, ids, trace, wire, chunks)
            prefill[cfg] += r["prefill_ms_runs"][1:]
            if args.decode > 0:
                decode[cfg] += r["decode_ms_per_token_runs"][1:]
            # The trace covers every run of the session, warm-up included: exposed comm per run.
            exposed[cfg].append(max(r.get("exposed_comm_ms", [0.0])) / (args.runs + 1))
            # Per layer, on the device with the most exposed communication (slot 0: outside blocks).
            by_layer = r.get("exposed_comm_ms_by_layer", [])
            if by_layer:
                worst = max(by_layer, key=sum)
                layers[cfg].append([t / (args.runs + 1) for t in worst[1:]])
            sent[cfg] = max([d.get("bytes_sent", 0) for d in r.get("devices", [])] or [0])
            print(f"  round {rnd + 1}: {strategy} ({wire}, {chunks} chunks): "
                  f"{statistics.median(r['prefill_ms_runs'][1:]):.1f} ms", file=sys.stderr)
    rows = []
    for cfg in plan:
        strategy, devices, wire, chunks = cfg
        rows.append({"strategy": strategy, "devices": devices, "wire": wire, "gather_chunks": chunks,
                     "bytes_sent": sent[cfg], "prefill_ms": statistics.median(prefill[cfg]),
                     "min_ms": min(prefill[cfg]), "max_ms": max(prefill[cfg]),
                     "decode_ms": statistics.median(decode[cfg]) if decode[cfg] else None,
                     "decode_min_ms": min(decode[cfg]) if decode[cfg] else None,
                     "decode_max_ms": max(decode[cfg]) if decode[cfg] else None,
                     "exposed_comm_ms": statistics.median(exposed[cfg]) if exposed[cfg] else 0.0,
                     # per block: the median over sessions of each layer's exposed time per run
                     "exposed_comm_ms_by_layer": [statistics.median(col) for col in zip(*layers[cfg])]})

    base = rows[0]["prefill_ms"]
    base_decode = rows[0]["decode_ms"]
    print(f"# {args.model}, {args.tokens}-token prompt, {args.threads} thread(s) per process, "
          f"median of {args.runs} runs after a warm-up per session, {args.rounds} interleaved session(s) "
          f"per configuration" + (f", {args.decode} tokens decoded per run" if args.decode else ""))
    print("| strategy | wire | gather chunks | processes | prefill ms (min..max) | speedup vs 1 process "
          "| exposed comm ms (max over devices) | per layer ms (mean, min..max) "
          "| MB sent (device with most, whole session) | decode ms per token (min..max) | decode speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    def decode_text(r):
        if r["decode_ms"] is None:
            return " |"
        return (f"{r['decode_ms']:.1f} ({r['decode_min_ms']:.1f}..{r['decode_max_ms']:.1f}) | "
                f"{base_decode / r['decode_ms']:.2f}x")

    for r in rows:
        if r["strategy"] == "concurrent":
            # Not one request's latency: N requests at once, so the ceiling is N x base / time.
            print(f"| {r['devices']} concurrent one-process sessions (ceiling) | | | {r['devices']} | "
                  f"{r['prefill_ms']:.1f} ({r['min_ms']:.1f}..{r['max_ms']:.1f}) | "
                  f"{r['devices'] * base / r['prefill_ms']:.2f}x | | | | | |")
            continue
        per = r["exposed_comm_ms_by_layer"]
        per_text = f"{statistics.mean(per):.2f} ({min(per):.2f}..{max(per):.2f})" if per else ""
        print(f"| {r['strategy']} | {r['wire']} | {r['gather_chunks']} | {r['devices']} | {r['prefill_ms']:.1f} "
              f"({r['min_ms']:.1f}..{r['max_ms']:.1f}) | {base / r['prefill_ms']:.2f}x | "
              f"{r['exposed_comm_ms']:.1f} | {per_text} | {r['bytes_sent'] / 1e6:.1f} | {decode_text(r)} |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"model": args.model, "tokens": args.tokens, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
