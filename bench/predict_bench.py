#!/usr/bin/env python3
"""Predicted vs measured prefill latency on local processes (issue 4's benchmark).

Starts N-1 `huddle worker` processes on 127.0.0.1, profiles them with `huddle profile` (this
process is device 0), then runs a prompt under several strategies and shares with
`huddle run --cluster PROFILE`, which prints the cost model's prediction for the plan it runs
(`predicted_ms`). Prints one Markdown table: median measured prefill (runs after the first), its
min-max, the prediction and the error, and the median absolute error over all cases.

  env -u OPENBLAS_CORETYPE python3 bench/predict_bench.py --huddle build/huddle \
      --model /tmp/models/gpt2 --devices 2 --runs 7
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def start_worker(huddle, key, threads):
    p = subprocess.Popen([huddle, "worker", "--listen", "127.0.0.1:0", "--key-file", key,
                          "--threads", str(threads)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if "listening on" not in line:
        p.kill()
        sys.exit(f"worker did not start: {line!r}")
    return p, line.split("listening on", 1)[1].split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--huddle", default="build/huddle")
    ap.add_argument("--model", required=True)
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=7, help="requests per case; the first is a warm-up")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--json", help="also write every case here")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="huddle-predict-"))
    key = str(tmp / "key")
    subprocess.run([a.huddle, "keygen", "-o", key], check=True, stdout=subprocess.DEVNULL)
    workers = [start_worker(a.huddle, key, a.threads) for _ in range(a.devices - 1)]
    addresses = ",".join(w[1] for w in workers)
    common = ["--workers", addresses, "--key-file", key]
    try:
        cluster = tmp / "cluster.json"
        p = subprocess.run([a.huddle, "profile", *common, "--model", a.model, "--seq-len",
                            str(a.seq_len), "--threads", str(a.threads), "-o", str(cluster)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(p.stderr)
        profile_s = json.loads(cluster.read_text())["profile"]["seconds"]
        ids = ",".join(str(i * 37 % 30000 + 1) for i in range(a.seq_len))
        n = a.devices
        uneven = ",".join(str(n - i + 1) for i in range(n))  # e.g. 3,2,1 on 3 devices
        cases = [("local", []), ("megatron", []), ("megatron", ["--shares", uneven]),
                 ("sp", []), ("sp", ["--shares", uneven]), ("galaxy", []),
                 ("galaxy", ["--shares", uneven]), ("hepti", []), ("auto", [])]
        rows = []
        for strategy, extra in cases:
            cmd = [a.huddle, "run", "--model", a.model, "--ids", ids, "--threads", str(a.threads),
                   *common, "--cluster", str(cluster), "--strategy", strategy, *extra,
                   "--repeat", str(a.runs), "--replan-threshold", "1e9", "--json"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                rows.append({"strategy": strategy, "args": extra, "error": r.stderr.strip()[-300:]})
                continue
            j = json.loads(r.stdout)
            runs = j["prefill_ms_runs"][1:]
            measured = statistics.median(runs)
            predicted = j["predicted_ms"]
            rows.append({"strategy": strategy, "ran": j["strategy"], "args": extra,
                         "devices": len(j["devices"]) or 1, "measured_ms": measured,
                         "min_ms": min(runs), "max_ms": max(runs), "predicted_ms": predicted,
                         "error": (predicted - measured) / measured})
    finally:
        for w, _ in workers:
            w.terminate()
            w.wait()

    print(f"model {a.model}, {a.devices} devices (this process + {a.devices - 1} local workers), "
          f"{a.threads} thread(s) each, {a.seq_len}-token prefill, {a.runs - 1} measured runs; "
          f"profiled in {profile_s:.1f} s\n")
    print("| strategy | ran | devices | measured ms (min-max) | predicted ms | error |")
    print("|---|---|---|---|---|---|")
    errors = []
    for r in rows:
        label = r["strategy"] + (" " + " ".join(r["args"]) if r["args"] else "")
        if "error" in r and isinstance(r["error"], str):
            print(f"| {label} | failed: {r['error']} | | | | |")
            continue
        errors.append(abs(r["error"]))
        print(f"| {label} | {r['ran']} | {r['devices']} | {r['measured_ms']:.1f} "
              f"({r['min_ms']:.1f}-{r['max_ms']:.1f}) | {r['predicted_ms']:.1f} | "
              f"{r['error'] * 100:+.1f}% |")
    if errors:
        print(f"\nmedian absolute error {statistics.median(errors) * 100:.1f}% over {len(errors)} "
              f"cases (max {max(errors) * 100:.1f}%); load average {os.getloadavg()[0]:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
