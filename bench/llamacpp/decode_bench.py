#!/usr/bin/python3
"""Decode (and prefill) speed of Huddle against llama.cpp on the same GGUF files.

Makes a synth preset (default `huddle synth --arch llama --preset llama-1b`; `--arch qwen2
--preset qwen2-0.5b` for a Qwen2-0.5B-shaped model), F32 random weights, writes it with `huddle quantize` at each --types, then for each thread count runs the
same prompt ids and greedy decode `--repeats` times in both engines, one after the other:
- Huddle: `huddle run --model X.gguf --ids ... --n-predict N --ignore-eos --threads T --json`
  (decode_ms_per_token, prefill_ms);
- llama.cpp: node-llama-cpp 3.21.1's prebuilt CPU binary (greedy.mjs: decode_tok_s over the tokens
  after the first, prefill_ms).
With --devices 2 (or more) it also runs Huddle across that many local worker processes over
loopback TCP, one thread each (`--local-devices D --strategy S --threads 1`), beside llama.cpp on
one thread: the project's measure, several devices against llama.cpp on one.
Prints median and min..max per cell, the machine and the commands; a benchmark, not a test.

Usage: decode_bench.py --huddle build/huddle [--arch llama --preset llama-1b]
       [--work /tmp/huddle-llamacpp] [--types f16,q8_0,q4_0[,q4_k_m]]
       [--threads 1,2] [--prompt 32] [-n 32] [--repeats 3] [--devices 2 --strategy megatron --pin]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def run_devices(a, gguf, ids, devices):
    """Huddle on `devices` devices, one thread each: local worker processes (--local-devices), or
    with --pin, workers started here each on its own core (taskset) and the primary on core 0,
    as separate devices would be (unpinned, the kernel may put both on one core while the other
    runs something else, since each wakes the other at every collective)."""
    cmd = [a.huddle, "run", "--model", gguf, "--ids", ids, "--n-predict", str(a.n),
           "--ignore-eos", "--threads", "1", "--strategy", a.strategy, "--json"]
    if not a.pin:
        return run(cmd + ["--local-devices", str(devices)]).stdout
    key = os.path.join(a.work, "bench.key")
    if not os.path.exists(key):
        run([a.huddle, "keygen", "-o", key])
    workers, addresses = [], []
    try:
        for d in range(1, devices):
            w = subprocess.Popen(["taskset", "-c", str(d % os.cpu_count()), a.huddle, "worker",
                                  "--listen", "127.0.0.1:0", "--key-file", key, "--threads", "1"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            workers.append(w)
            line = w.stdout.readline()  # "huddle worker listening on HOST:PORT ..."
            addresses.append(line.split("listening on ")[1].split()[0])
        return run(["taskset", "-c", "0"] + cmd +
                   ["--workers", ",".join(addresses), "--key-file", key]).stdout
    finally:
        for w in workers:
            w.terminate()
            w.wait()


def cell(values):
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}..{max(values):.2f})"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--huddle", required=True)
    p.add_argument("--work", default="/tmp/huddle-llamacpp")
    p.add_argument("--arch", default="llama", help="synth architecture: llama or qwen2")
    p.add_argument("--preset", default="llama-1b", help="synth preset of that architecture")
    p.add_argument("--types", default="f16,q8_0,q4_0")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--prompt", type=int, default=32)
    p.add_argument("-n", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--devices", default="", help="also Huddle on these device counts, 1 thread each")
    p.add_argument("--strategy", default="megatron", help="Huddle's strategy with --devices")
    p.add_argument("--pin", action="store_true",
                   help="with --devices: each device's process on its own core (taskset)")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    src = os.path.join(a.work, a.preset)
    if not os.path.exists(os.path.join(src, "config.json")):
        run([a.huddle, "synth", "--arch", a.arch, "--preset", a.preset, "-o", src])
        # node-llama-cpp tokenizes while loading, so the file needs a vocabulary: the tiny
        # fixture's byte-level BPE (llama-tiny's where the architecture's has none), padded to
        # the preset's embeddings by `huddle quantize`.
        models = os.path.join(HERE, "..", "..", "tests", "fixtures", "models")
        fixture = os.path.join(models, f"{a.arch}-tiny")
        if not os.path.exists(os.path.join(fixture, "tokenizer.json")):
            fixture = os.path.join(models, "llama-tiny")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(fixture, name), src)
    ids = ",".join(str((i * 7919) % 31000 + 100) for i in range(a.prompt))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if
                l.startswith("model name")), platform.processor())
    print(f"machine: {cpu}, {os.cpu_count()} cpus; model {a.preset} synth; prompt {a.prompt} ids, "
          f"{a.n} greedy tokens, {a.repeats} runs per cell (median (min..max))")
    rows = []
    for t in a.types.split(","):
        gguf = os.path.join(a.work, f"{a.preset}.{t}.gguf")
        if not os.path.exists(gguf) and t == "q4_k_m":
            # llama.cpp's usual download: Q4_K matrices, Q6_K head and (in some layers) attention
            # values and down projections, as llama.cpp's Q4_K_M chooses, written by the k-quant
            # check's numpy quantiser from an F32 file.
            f32 = os.path.join(a.work, f"{a.preset}.f32.gguf")
            if not os.path.exists(f32):
                run([a.huddle, "quantize", "--type", "f32", src, f32])
            run(["/usr/bin/python3", os.path.join(HERE, "..", "..", "tests", "cli",
                                                  "gguf_kquant_check.py"), "--rewrite", f32, gguf])
        elif not os.path.exists(gguf):
            run([a.huddle, "quantize", "--type", t, src, gguf])
        for threads in map(int, a.threads.split(",")):
            h_dec, h_pre, l_dec, l_pre = [], [], [], []
            for _ in range(a.repeats):
                out = json.loads(run([a.huddle, "run", "--model", gguf, "--ids", ids,
                                      "--n-predict", str(a.n), "--ignore-eos", "--threads",
                                      str(threads), "--json"]).stdout.splitlines()[0])
                h_dec.append(1000.0 / out["decode_ms_per_token"])
                h_pre.append(out["prefill_ms"])
                peer = json.loads(run(["node", os.path.join(HERE, "greedy.mjs"), "--model", gguf,
                                       "--ids", ids, "-n", str(a.n), "--threads", str(threads)],
                                      cwd=HERE).stdout.strip().splitlines()[-1])
                l_dec.append(peer["decode_tok_s"])
                l_pre.append(peer["prefill_ms"])
            rows.append((t, threads, cell(h_dec), cell(l_dec), cell(h_pre), cell(l_pre)))
            print(f"{t} x{threads}: huddle {cell(h_dec)} tok/s, llama.cpp {cell(l_dec)} tok/s; "
                  f"prefill huddle {cell(h_pre)} ms, llama.cpp {cell(l_pre)} ms", flush=True)
        for devices in [int(d) for d in a.devices.split(",") if d]:
            h_dec, h_pre = [], []
            for _ in range(a.repeats):
                out = json.loads(run_devices(a, gguf, ids, devices).splitlines()[0])
                h_dec.append(1000.0 / out["decode_ms_per_token"])
                h_pre.append(out["prefill_ms"])
            label = f"{devices} devices ({a.strategy}), 1 thread each"
            if a.pin:
                label += ", one core each"
            rows.append((t, label, cell(h_dec), "-", cell(h_pre), "-"))
            print(f"{t} {label}: huddle {cell(h_dec)} tok/s; prefill {cell(h_pre)} ms", flush=True)
    print("\n| weights | threads | Huddle decode tok/s | llama.cpp decode tok/s | Huddle prefill ms "
          "| llama.cpp prefill ms |\n|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(map(str, r)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
