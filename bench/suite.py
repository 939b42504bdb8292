#!/usr/bin/env python3
"""The benchmark suite over the emulated cluster (docs/benchmarks.md, "Emulated cluster suite").

  scripts/bench-suite [--quick] [--scenarios galaxy-f,bw-10] [--strategies galaxy,auto]
                      [--workloads gpt2-128,bert-base-512] [--repeat 5] [--huddle BIN] [--out DIR]
  scripts/bench-suite --report-only [--out DIR]     # re-render results.{md,csv} and plots

For every scenario (bench/clusters/<name>.json) and model: `scripts/testbed up` (workers map the
model from their own copy), then for every prompt length: `huddle profile` of the testbed at that
model and length through `scripts/testbed exec` (--cluster-source profile, the default; the
testbed is rebuilt after it), and for every strategy `huddle plan` (predicted latency) and one
`huddle run --repeat R+1 --cluster <that file>` through `scripts/testbed exec` (the first run is
a warm-up), then `scripts/testbed down` (also on errors and signals). A run that fails (OOM kill,
a planner's refusal, a timeout) is recorded with its error and the testbed is rebuilt.

Strategies: local (the primary alone), megatron and sp (even --shares), galaxy, hepti, the
pipelines hpipe, uniform-slices and gpipe, and auto (planned from the cluster file); any of them
as NAME:WIRE (galaxy:f16) runs with activations on the wire in that format (`--wire`). Every run gets --cluster, so `huddle run --json` reports its
plan's predicted_ms. With --cluster-source spec the cluster file is the one `scripts/testbed up`
derives from the spec (cpu quota x --core-gflops, the cgroup limit). Writes results.json (every
run with its command line, every profile), results.csv, results.md and latency.svg /
speedup_vs_bandwidth.svg to --out.
Needs root (the testbed). Run it through scripts/bench-suite, which unsets OPENBLAS_CORETYPE.
"""
import argparse
import csv
import datetime
import hashlib
import importlib.util
import json
import math
import os
import platform
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from importlib.machinery import SourceFileLoader
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTBED = REPO / "scripts" / "testbed"
STRATEGIES = ["local", "megatron", "sp", "galaxy", "hepti", "hpipe", "uniform-slices", "gpipe", "auto"]
WIRES = ["f32", "f16", "bf16", "int8"]  # "galaxy:f16": galaxy with `--wire f16`
# Planned from the cluster file; the others use even shares.
PLANNED = {"galaxy", "hepti", "hpipe", "uniform-slices", "gpipe", "auto"}
MODELS = {"gpt2": ("gpt2", "gpt2"), "bert-base": ("bert", "bert-base"),
          "llama-1b": ("llama", "llama-1b")}  # name: (arch, preset)
GALAXY = ["galaxy-a", "galaxy-b", "galaxy-c", "galaxy-d", "galaxy-e", "galaxy-f"]
BW = ["bw-10", "bw-50", "bw-100", "bw-500", "bw-1000"]
ALL_WORKLOADS = ["gpt2-128", "gpt2-512", "bert-base-128", "bert-base-512", "llama-1b-128", "llama-1b-512"]
# The default scope: every workload on the Galaxy environments and the memory-starved cluster; the
# bandwidth sweep with 128-token prompts only (a 512-token prefill moves 4x the bytes: minutes per
# run at 10 Mbit/s).
BASE_WORKLOADS = ["gpt2-128", "gpt2-512", "bert-base-128", "bert-base-512"]
SCOPE = {**{s: BASE_WORKLOADS for s in GALAXY + ["memory-starved"]},
         **{s: ["gpt2-128", "bert-base-128"] for s in BW},
         # HPipe's topology: two fast islands joined by a slow link (bench/clusters/islands.json)
         "islands": ["gpt2-128", "gpt2-512", "llama-1b-128", "llama-1b-512"],
         # the same with 10 Gbit/s islands, where hpipe may run an island tensor-parallel
         "islands-fast": ["gpt2-128", "llama-1b-128"]}
QUICK = {"galaxy-a": ["gpt2-128"], "galaxy-f": ["gpt2-128"], "memory-starved": ["gpt2-128"]}


def load_testbed():
    """scripts/testbed as a module: its spec parser and core GFLOP/s measurement, not copies."""
    loader = SourceFileLoader("testbed", str(TESTBED))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("testbed", loader))
    loader.exec_module(module)
    return module


testbed = load_testbed()


def log(msg):
    print(f"[{datetime.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def loadavg():
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def sh(cmd, timeout=None):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def tail(text, n=600):
    text = (text or "").strip()
    return text if len(text) <= n else "..." + text[-n:]


# ---------------------------------------------------------------------------------------------
# The testbed


class Testbed:
    """One scenario's testbed with one model: up on enter, down on exit (signals held off)."""

    def __init__(self, ctx, scenario, model):
        self.ctx, self.scenario, self.model = ctx, scenario, model
        self.spec = REPO / "bench" / "clusters" / f"{scenario}.json"
        # the primary's threads: ceil(cpu), as the testbed gives its workers
        self.threads = math.ceil(testbed.load_spec(self.spec)["devices"][0]["cpu"])
        self.names = [d["name"] for d in testbed.load_spec(self.spec)["devices"]]
        self.spec_cluster = ctx.work / f"{scenario}.cluster.json"  # cpu x core GFLOP/s, cgroup limits
        self.cluster = self.spec_cluster  # what the runs plan from: the spec's or a profile (below)
        self.args = []

    def up(self):
        cmd = [TESTBED, "up", self.spec, "--huddle", self.ctx.huddle, "--core-gflops", self.ctx.core_gflops,
               "--model", self.ctx.model_dir(self.model), "--cluster-out", self.spec_cluster,
               "--cpu-period-ms", self.ctx.cpu_period_ms]
        r = sh(cmd, timeout=120)
        if r.returncode != 0 and "already up" in r.stderr:  # left behind by an interrupted run
            log(f"{self.scenario}: a testbed of that name was left up; taking it down first")
            self.down()
            r = sh(cmd, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"testbed up {self.scenario} failed: {tail(r.stderr)}")
        self.args = r.stdout.split()

    def down(self):
        old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            r = sh([TESTBED, "down", self.spec], timeout=120)
            if r.returncode != 0:
                log(f"warning: testbed down {self.scenario}: {tail(r.stderr)}")
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def restart(self):
        self.down()
        self.up()

    def status(self):
        r = sh([TESTBED, "status", self.spec], timeout=60)
        return json.loads(r.stdout) if r.returncode == 0 else {"devices": {}}

    def __enter__(self):
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()


# ---------------------------------------------------------------------------------------------
# One measurement


def profile(ctx, tb, wl):
    """`huddle profile` of the testbed at the workload's model and prompt length, run on the
    primary through `scripts/testbed exec` (so through its cgroups, namespace and shaped links);
    the cluster file it writes is what every run of the workload plans and predicts from.
    The testbed is then rebuilt, so that the runs start from fresh workers as without a profile
    (the probes' buffers would otherwise stay in the workers' cgroups). Returns the record."""
    out = ctx.work / f"{tb.scenario}.{wl['model']}.{wl['tokens']}.profile.json"
    out.unlink(missing_ok=True)
    cmd = [TESTBED, "exec", tb.spec, "--", ctx.huddle, "profile"] + tb.args + [
        "--model", ctx.model_dir(wl["model"]), "--seq-len", wl["tokens"], "--names", ",".join(tb.names),
        # A slow device probes long prompts for well over the default 10 s peer timeout
        # (0.2 of a core at gpt2's 512 tokens).
        "--threads", 1, "--timeout-s", 120, "-o", out]
    rec = {"command": shlex.join(str(c) for c in cmd), "loadavg_before": loadavg()}
    t0 = time.monotonic()
    try:
        r = sh(cmd, timeout=300)
        rc, err = r.returncode, r.stderr
    except subprocess.TimeoutExpired:
        rc, err = 124, "timed out after 300 s"
    rec["wall_s"] = round(time.monotonic() - t0, 2)
    rec["log"] = [l for l in err.strip().splitlines() if l.startswith("huddle")]
    if rc != 0 or not out.is_file():
        rec.update(ok=False, error=tail(err, 600))
        tb.restart()
        return rec, None
    j = json.loads(out.read_text())
    details = {d["name"]: d for d in j.get("profile", {}).get("devices", [])}
    rec.update(ok=True, file=j, devices=[
        {"name": d["name"], "gflops": d["gflops"], "gflops_by_block": d.get("gflops_by_block"),
         "op_curves": d.get("op_curves"), "memory_bytes": d["memory_bytes"],
         **{k: details.get(d["name"], {}).get(k) for k in ("cpu_share", "fit_error", "seconds", "samples")}}
        for d in j["devices"]],
        links=[{k: l[k] for k in ("from", "to", "bandwidth_bps", "latency_s")} for l in j.get("links", [])])
    tb.restart()
    return rec, out


def strategy_and_wire(strategy):
    """"galaxy:f16" -> ("galaxy", ["--wire", "f16"]): a strategy with activations in a wire format."""
    name, _, wire = strategy.partition(":")
    return name, (["--wire", wire] if wire else [])


def plan(ctx, tb, wl, strategy):
    strategy, wire = strategy_and_wire(strategy)
    cmd = [ctx.huddle, "plan", "--cluster", tb.cluster, "--model", ctx.model_dir(wl["model"]), "--strategy",
           strategy, "--seq-len", wl["tokens"], "--json"] + wire
    r = sh(cmd, timeout=120)
    if r.returncode != 0:
        return {"ok": False, "error": tail(r.stderr or r.stdout)}
    j = json.loads(r.stdout)
    return {"ok": True, "predicted_ms": j["predicted_ms"], "mode": j["mode"], "strategy": j["strategy"],
            "devices": [{k: d[k] for k in ("name", "heads", "ffn_columns", "tokens", "memory_bytes")}
                        for d in j["devices"]], "notes": j.get("notes", [])}


def run_command(ctx, tb, wl, strategy, trace):
    strategy, wire = strategy_and_wire(strategy)
    cmd = [TESTBED, "exec", tb.spec, "--", ctx.huddle, "run", "--model", ctx.model_dir(wl["model"]),
           "--ids", "@IDS", "--json", "--repeat", ctx.repeat + 1, "--threads", tb.threads, "--timeout-s", 60,
           "--trace", trace, "--strategy", strategy] + wire
    # Every strategy gets the cluster file (so `huddle run --json` reports predicted_ms) and the
    # workers (the file lists them all). local, megatron and sp get even --shares: with --shares
    # `huddle run` runs that fixed split (not the planner registry's baseline, whose memory check
    # would refuse megatron on memory-starved instead of letting it run into the OOM killer).
    cmd += ["--cluster", tb.cluster] + tb.args
    if strategy not in PLANNED:
        cmd += ["--shares", ",".join(["1"] * len(tb.names))]
    if strategy in PLANNED and ctx.can_pin_plan:  # measure the planner's plan, not online re-planning
        cmd += ["--replan-threshold", "1e9"]
    return [str(c) for c in cmd]


def measure(ctx, tb, wl, strategy):
    trace = ctx.work / "trace.json"
    cmd = run_command(ctx, tb, wl, strategy, trace)
    row = {"scenario": tb.scenario, "workload": wl["name"], "model": wl["model"], "tokens": wl["tokens"],
           "strategy": strategy, "command": shlex.join(cmd), "loadavg_before": loadavg(),
           "cluster_source": ctx.cluster_source if tb.cluster != tb.spec_cluster else "spec",
           "started": datetime.datetime.now().isoformat(timespec="seconds")}
    row["plan"] = plan(ctx, tb, wl, strategy)
    before = tb.status()["devices"]
    t0 = time.monotonic()
    try:
        r = sh([wl["ids"] if c == "@IDS" else c for c in cmd], timeout=ctx.run_timeout)
        rc, out, err = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, "", f"timed out after {ctx.run_timeout} s {e.stderr or ''}"
    row["wall_s"] = round(time.monotonic() - t0, 2)
    row["loadavg_after"] = loadavg()
    after = tb.status()["devices"]
    row["oom_kills"] = {n: (d.get("oom_kills") or 0) - (before.get(n, {}).get("oom_kills") or 0)
                        for n, d in after.items() if (d.get("oom_kills") or 0) > (before.get(n, {}).get("oom_kills") or 0)}
    row["memory_peak_mb"] = {n: round(d.get("memory_peak_bytes", 0) / 2**20, 1) for n, d in after.items()}
    trace.unlink(missing_ok=True)
    result = None
    if rc == 0:
        try:
            result = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            err = f"unreadable output: {tail(out)} {err}"
    if result is None:
        msg = [l for l in (err or "").strip().splitlines() if l.startswith("huddle")] or [tail(err)]
        row.update(ok=False, returncode=rc, error=tail(msg[-1], 400), stderr=tail(err, 2000))
        if row["oom_kills"]:
            row["error"] = f"OOM kill on {', '.join(row['oom_kills'])}; {row['error']}"
        return row
    runs = result.get("prefill_ms_runs", [result["prefill_ms"]])
    measured = runs[1:] if len(runs) > 1 else runs
    q = statistics.quantiles(measured, n=4) if len(measured) > 1 else [measured[0]] * 3
    n_runs = len(runs)
    row.update(ok=True, returncode=0, runs_ms=[round(x, 3) for x in runs], warmup_ms=round(runs[0], 3),
               median_ms=statistics.median(measured), min_ms=min(measured), max_ms=max(measured),
               q1_ms=q[0], q3_ms=q[2], strategy_ran=result.get("strategy"),
               devices_used=max(1, len(result.get("devices", []))),
               # the trace covers every run of the session, warm-up included: per run
               exposed_comm_ms=[x / n_runs for x in result.get("exposed_comm_ms", [])],
               # huddle reports bytes_sent per device for the session's last request
               bytes_sent=[d.get("bytes_sent") for d in result.get("devices", [])] or None,
               run_predicted_ms=result.get("predicted_ms"), replans=result.get("replans"),
               devices=result.get("devices", []), load_ms=result.get("load_ms"))
    if row["bytes_sent"] is not None and all(b is None for b in row["bytes_sent"]):
        row["bytes_sent"] = None
    return row


# ---------------------------------------------------------------------------------------------
# Derived figures and reports


def derive(rows, scenarios):
    """Speedup over local, scaling efficiency, prediction error: filled into every row."""
    local = {(r["scenario"], r["workload"]): r for r in rows if r["strategy"] == "local" and r["ok"]}
    for r in rows:
        sc = scenarios[r["scenario"]]
        r["ideal_speedup"] = sc["ideal_speedup"]
        base = local.get((r["scenario"], r["workload"]))
        r["speedup"] = base["median_ms"] / r["median_ms"] if r["ok"] and base else None
        r["efficiency"] = r["speedup"] / sc["ideal_speedup"] if r["speedup"] else None
        p = r["plan"]
        r["plan_predicted_ms"] = p["predicted_ms"] if p["ok"] else None
        # the run's own prediction (`huddle run --json` with --cluster: the plan it ran) when it
        # has one, else `huddle plan`'s for the same strategy
        r["predicted_ms"] = r.get("run_predicted_ms") or r["plan_predicted_ms"]
        r["prediction_error"] = ((r["predicted_ms"] - r["median_ms"]) / r["median_ms"]
                                 if r["predicted_ms"] and r["ok"] else None)
        r["exposed_comm_max_ms"] = max(r["exposed_comm_ms"]) if r.get("exposed_comm_ms") else None
        sent = [b for b in (r.get("bytes_sent") or []) if b is not None]
        r["mb_sent_per_run"] = [b / 1e6 for b in sent] if sent else None  # the last request's


def fmt(x, spec=".1f", none="–"):
    return none if x is None else format(x, spec)


def short_error(r):
    return f"OOM kill on {', '.join(r['oom_kills'])}" if r.get("oom_kills") else r["error"][:100]


def short_plan(r):
    p = r["plan"]
    if not p["ok"]:
        return "refused"
    mode = p["mode"].replace("weight-stationary", "ws").replace("tensor+sequence", "t+s")
    if mode.startswith("local"):
        return "local"
    return f"{mode}, {len(p['devices'])} dev" if "dev" not in mode else mode


def result_cell(r):
    if not r["ok"]:
        return "failed"
    return f"{r['median_ms']:.1f} ({r['min_ms']:.0f}–{r['max_ms']:.0f})"


GOALS = [("≥ 1.3×", "heterogeneous D–F: galaxy or hepti ≥ 1.3× faster than even megatron"),
         ("≥ 86%", "homogeneous 2 devices (galaxy-a, 1000 Mbit/s): scaling efficiency ≥ 86%"),
         ("≤ 5%", "bw-10: auto ≤ 5% slower than local"),
         ("even megatron cannot", "memory-starved: galaxy/hepti run where even megatron cannot")]


def goals(rows, scenarios):
    """The issue's goals, each as (text, figure, verdict or None when not measured)."""
    by = {(r["scenario"], r["workload"], r["strategy"]): r for r in rows}
    out = []
    for sc in ("galaxy-d", "galaxy-e", "galaxy-f"):
        for wl in ALL_WORKLOADS:
            meg = by.get((sc, wl, "megatron"))
            best = [by.get((sc, wl, s)) for s in ("galaxy", "hepti")]
            best = [b for b in best if b and b["ok"]]
            if not meg or not meg["ok"] or not best:
                continue
            b = min(best, key=lambda x: x["median_ms"])
            ratio = meg["median_ms"] / b["median_ms"]
            out.append((f"{sc} {wl}: best of galaxy/hepti ≥ 1.3× even megatron",
                        f"{b['strategy']} {b['median_ms']:.1f} ms vs megatron {meg['median_ms']:.1f} ms: {ratio:.2f}×",
                        ratio >= 1.3))
    for wl in ALL_WORKLOADS:
        cands = [by.get(("galaxy-a", wl, s)) for s in ("megatron", "sp", "galaxy", "hepti")]
        cands = [c for c in cands if c and c["ok"] and c["efficiency"]]
        if not cands:
            continue
        g = by.get(("galaxy-a", wl, "galaxy"))
        b = max(cands, key=lambda x: x["efficiency"])
        gtxt = f"galaxy {g['efficiency']:.0%}" if g and g["ok"] and g["efficiency"] else "galaxy failed"
        out.append((f"galaxy-a {wl}: 2-device scaling efficiency ≥ 86% at 1000 Mbit/s",
                    f"{gtxt}; best {b['strategy']} {b['efficiency']:.0%} ({b['speedup']:.2f}× of ideal 2×)",
                    b["efficiency"] >= 0.86))
    for wl in ALL_WORKLOADS:
        a, l = by.get(("bw-10", wl, "auto")), by.get(("bw-10", wl, "local"))
        if not a or not l or not l["ok"]:
            continue
        if not a["ok"]:
            out.append((f"bw-10 {wl}: auto ≤ 5% slower than local", f"auto failed: {short_error(a)}", False))
            continue
        slower = a["median_ms"] / l["median_ms"] - 1
        same = " (the same single-device plan as local: the gap is noise between two sessions)" \
            if short_plan(a) == "local" and slower > 0.05 else ""
        out.append((f"bw-10 {wl}: auto ≤ 5% slower than local",
                    f"auto {a['median_ms']:.1f} ms ({short_plan(a)}) vs local {l['median_ms']:.1f} ms: "
                    f"{slower:+.1%}{same}", slower <= 0.05))
    for wl in ALL_WORKLOADS:
        meg = by.get(("memory-starved", wl, "megatron"))
        ms = [by.get(("memory-starved", wl, s)) for s in ("galaxy", "hepti")]
        ms = [m for m in ms if m]
        if not meg or not ms:
            continue
        ran = [m["strategy"] for m in ms if m["ok"]]
        fig = (f"megatron {'ran' if meg['ok'] else 'failed (' + short_error(meg) + ')'}; "
               + ", ".join(f"{m['strategy']} " + (f"ran {m['median_ms']:.1f} ms" if m["ok"] else f"failed ({short_error(m)})")
                           for m in ms))
        out.append((f"memory-starved {wl}: galaxy/hepti run where even megatron cannot", fig,
                    bool(ran) and not meg["ok"]))
    return out


def prediction_table(rows):
    """Per strategy: the cost model's error over the runs that completed."""
    L = ["| strategy | runs | median error | middle half | range | median abs. error |", "|---|---|---|---|---|---|"]
    for s in STRATEGIES:
        e = sorted(r["prediction_error"] for r in rows if r["strategy"] == s and r.get("prediction_error") is not None)
        if not e:
            continue
        q = statistics.quantiles(e, n=4) if len(e) > 1 else [e[0]] * 3
        L.append(f"| {s} | {len(e)} | {statistics.median(e):+.0%} | {q[0]:+.0%} .. {q[2]:+.0%} | "
                 f"{e[0]:+.0%} .. {e[-1]:+.0%} | {statistics.median(abs(x) for x in e):.0%} |")
    return L


def profile_table(name, sc, profiles, core_gflops):
    """Profiled vs spec figures of one scenario: a column per profiled workload."""
    recs = [(w, profiles[w]) for w in ALL_WORKLOADS if w in profiles]
    if not recs:
        return []
    L = ["Profiled (`huddle profile`, one per workload) vs spec (cpu quota × "
         f"{core_gflops:g} GFLOP/s per core; the cgroup's memory limit). Per device: GFLOP/s, "
         "measured CPU share, free MB; per link: Mbit/s and ms (both directions, min–max). "
         "Profile wall time in the last row.", ""]
    L.append("| | spec | " + " | ".join(w for w, _ in recs) + " |")
    L.append("|---|---|" + "---|" * len(recs))
    for d in sc["devices"]:
        cells = []
        for _, rec in recs:
            pd = next((x for x in rec.get("devices", []) if x["name"] == d["name"]), None)
            cells.append("failed" if pd is None else
                         f"{pd['gflops']:.1f}, {fmt(pd.get('cpu_share'), '.2f')}, {pd['memory_bytes'] / 1e6:.0f} MB")
        L.append(f"| {d['name']} | {d['cpu'] * core_gflops:.1f}, {d['cpu']:g}, {d['memory_mb'] * 2**20 / 1e6:.0f} MB | "
                 + " | ".join(cells) + " |")
    spec_links = {frozenset(l["between"]) if "between" in l else None: l for l in sc.get("links", [])}
    default = sc["default_link"]
    names = [d["name"] for d in sc["devices"]]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            sl = spec_links.get(frozenset((a, b)), default)
            cells = []
            for _, rec in recs:
                ls = [l for l in rec.get("links", []) if {l["from"], l["to"]} == {a, b}]
                if not ls:
                    cells.append("–")
                    continue
                bw = [l["bandwidth_bps"] / 1e6 for l in ls]
                lat = [l["latency_s"] * 1e3 for l in ls]
                cells.append(f"{min(bw):.1f}–{max(bw):.1f} Mbit/s, {min(lat):.2f}–{max(lat):.2f} ms")
            L.append(f"| {a}–{b} | {sl['mbps']:g} Mbit/s, {sl['latency_ms']:g} ms | " + " | ".join(cells) + " |")
    L.append("| wall time | | " + " | ".join(f"{rec['wall_s']:.1f} s" for _, rec in recs) + " |")
    return L + [""]


def summary_table(rows):
    """One row per scenario and workload, one column per strategy: median ms (speedup over local)."""
    order = {s: i for i, s in enumerate(SCOPE)}
    keys = sorted({(r["scenario"], r["workload"]) for r in rows},
                  key=lambda k: (order.get(k[0], 99), ALL_WORKLOADS.index(k[1])))
    by = {(r["scenario"], r["workload"], r["strategy"]): r for r in rows}
    L = ["| scenario | workload | " + " | ".join(STRATEGIES) + " |", "|---|---|" + "---|" * len(STRATEGIES)]
    for sc, wl in keys:
        cells = []
        for s in STRATEGIES:
            r = by.get((sc, wl, s))
            cells.append("" if r is None else "failed" if not r["ok"] else
                         f"{r['median_ms']:.0f} ({r['speedup']:.2f}×)" if r["speedup"] else f"{r['median_ms']:.0f}")
        L.append(f"| {sc} | {wl} | " + " | ".join(cells) + " |")
    return L


def write_markdown(path, data):
    rows, scenarios, meta = data["rows"], data["scenarios"], data["meta"]
    L = ["# Emulated cluster suite: results", "",
         f"{meta['date']}, commit {meta['commit']}, `{meta['huddle']}` (sha256 {meta['huddle_sha256'][:12]}), "
         + ("the runs planned and predicted from a `huddle profile` of the testbed per workload "
            f"(spec cluster files, for comparison, at {meta['core_gflops']:.1f} GFLOP/s per core)"
            if meta.get("cluster_source") == "profile" else
            f"the runs planned from the spec's cluster files at {meta['core_gflops']:.1f} GFLOP/s per core")
         + f", {meta['repeat']} measured runs "
         f"after one warm-up per session, load average {meta['loadavg_start']} at the start and "
         f"{meta.get('loadavg_end')} at the end (a shared 2-core machine: other jobs ran meanwhile).", "",
         f"Command: `{meta['command']}`", "",
         "Latency: median prefill ms (min–max) of the measured runs. Speedup: over `local` (the primary "
         "alone) on the same scenario. Efficiency: speedup / ideal, ideal = sum of the devices' CPU / the "
         "primary's (n for a homogeneous cluster). Predicted: the `predicted_ms` of `huddle run --json` "
         "(the cost model on the plan that ran, with the run's --cluster), or `huddle plan`'s for the "
         "same strategy where the run failed; error = "
         "(predicted − measured) / measured. Exposed comm: per prefill, the device with most. "
         "MB sent: per device, in the last measured prefill (`bytes_sent`, when the binary reports it).", ""]
    L += ["## Summary", "", "Median prefill ms (speedup over local on the same scenario).", ""]
    L += summary_table(rows)
    L += ["", "## Cost model", "", "Prediction error, (predicted − measured) / measured, per strategy:", ""]
    L += prediction_table(rows)
    L += ["", "## Goals", ""]
    checks = goals(rows, scenarios)
    L += ["| goal | cases passing | verdict |", "|---|---|---|"]
    for key, text in GOALS:
        mine = [ok for t, _, ok in checks if key in t]
        if mine:
            L.append(f"| {text} | {sum(mine)} of {len(mine)} | {'PASS' if all(mine) else 'MISS'} |")
    L += ["", "| case | figure | verdict |", "|---|---|---|"]
    for text, fig, ok in checks:
        L.append(f"| {text} | {fig} | {'PASS' if ok else 'MISS'} |")
    for name in sorted(scenarios, key=lambda s: list(SCOPE).index(s) if s in SCOPE else 99):
        sc = scenarios[name]
        srows = [r for r in rows if r["scenario"] == name]
        if not srows:
            continue
        wls = [w for w in ALL_WORKLOADS if any(r["workload"] == w for r in srows)]
        L += ["", f"## {name}", "", f"{sc['summary']}; ideal speedup {sc['ideal_speedup']:.2f}×.", ""]
        L += profile_table(name, sc, data.get("profiles", {}).get(name, {}), meta["core_gflops"])
        L.append("| strategy | " + " | ".join(f"{w}: ms (min–max) | speedup" for w in wls) + " |")
        L.append("|---|" + "---|---|" * len(wls))
        for s in STRATEGIES:
            cells = []
            for w in wls:
                r = next((r for r in srows if r["workload"] == w and r["strategy"] == s), None)
                cells += ["", ""] if r is None else [result_cell(r), fmt(r["speedup"], ".2f") + ("×" if r["speedup"] else "")]
            if any(cells):
                L.append(f"| {s} | " + " | ".join(cells) + " |")
        L += ["", "<details><summary>details</summary>", "",
              "| workload | strategy | plan | efficiency | predicted ms | error | exposed comm ms | MB sent per device | error message |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in srows:
            mb = "/".join(f"{x:.1f}" for x in r["mb_sent_per_run"]) if r.get("mb_sent_per_run") else "–"
            errors = ([] if r["ok"] else [f"run: {r['error']}"]) + \
                     ([] if r["plan"]["ok"] else [f"plan: {r['plan']['error']}"])
            L.append(f"| {r['workload']} | {r['strategy']} | {short_plan(r)} | {fmt(r['efficiency'], '.0%')} | "
                     f"{fmt(r['predicted_ms'])} | {fmt(r['prediction_error'], '+.0%')} | "
                     f"{fmt(r['exposed_comm_max_ms'])} | {mb} | "
                     f"{'; '.join(errors).replace('|', '/')} |")
        L += ["", "</details>"]
    Path(path).write_text("\n".join(L) + "\n")


CSV_FIELDS = ["scenario", "workload", "model", "tokens", "strategy", "ok", "error", "median_ms", "min_ms", "max_ms",
              "q1_ms", "q3_ms", "runs_ms", "speedup", "ideal_speedup", "efficiency", "cluster_source", "predicted_ms",
              "plan_predicted_ms", "prediction_error", "exposed_comm_ms", "mb_sent_per_run", "plan_mode", "loadavg_before", "command"]


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in rows:
            vals = dict(r, plan_mode=r["plan"].get("mode", r["plan"].get("error", "")))
            w.writerow(["" if vals.get(k) is None else
                        ";".join(f"{x:.3f}" if isinstance(x, float) else str(x) for x in vals[k])
                        if isinstance(vals.get(k), list) else
                        f"{vals[k]:.4f}" if isinstance(vals.get(k), float) else vals.get(k) for k in CSV_FIELDS])


def write_plots(out, data):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("warning: no matplotlib (scripts/bench-suite installs python3-matplotlib); no plots")
        return
    matplotlib.rcParams["svg.fonttype"] = "none"
    rows = data["rows"]
    wls = [w for w in ALL_WORKLOADS if any(r["workload"] == w for r in rows)]
    scen = [s for s in SCOPE if any(r["scenario"] == s for r in rows)]
    fig, axes = plt.subplots(len(wls), 1, figsize=(max(8, 1.1 * len(scen) + 2), 3.2 * len(wls)), squeeze=False)
    width = 0.8 / len(STRATEGIES)
    for ax, wl in zip(axes[:, 0], wls):
        sc_here = [s for s in scen if any(r["scenario"] == s and r["workload"] == wl for r in rows)]
        for i, s in enumerate(STRATEGIES):
            xs, ys, failed = [], [], []
            for j, sc in enumerate(sc_here):
                r = next((r for r in rows if (r["scenario"], r["workload"], r["strategy"]) == (sc, wl, s)), None)
                if r is None:
                    continue
                x = j + (i - (len(STRATEGIES) - 1) / 2) * width
                if r["ok"]:
                    xs.append(x)
                    ys.append(r["median_ms"])
                else:
                    failed.append(x)
            ax.bar(xs, ys, width, label=s, color=f"C{i}")
            # failed runs: a cross at the bottom of the axes, in the strategy's colour
            ax.plot(failed, [0.03] * len(failed), "x", color=f"C{i}", markersize=8, mew=2,
                    transform=ax.get_xaxis_transform())
        heights = [r["median_ms"] for r in rows if r["workload"] == wl and r["ok"]]
        if heights and max(heights) > 10 * min(heights):  # the slow-link runs dwarf the rest
            ax.set_yscale("log")
            ax.set_ylim(bottom=min(heights) / 2)
        else:
            ax.set_ylim(bottom=0)
        ax.set_xticks(range(len(sc_here)), sc_here, fontsize=8)
        ax.set_ylabel("prefill ms (median)")
        ax.set_title(f"{wl}: latency per scenario and strategy (× at the bottom: failed)", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0, 0].legend(ncol=len(STRATEGIES), fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.12))
    fig.tight_layout()
    fig.savefig(Path(out) / "latency.svg")
    plt.close(fig)

    bw_rows = [r for r in rows if r["scenario"].startswith("bw-") and r["ok"] and r["speedup"]]
    if bw_rows:
        bwls = [w for w in wls if any(r["workload"] == w for r in bw_rows)]
        fig, axes = plt.subplots(1, len(bwls), figsize=(5.5 * len(bwls), 4), squeeze=False)
        for ax, wl in zip(axes[0], bwls):
            for i, s in enumerate(STRATEGIES):
                pts = sorted((data["scenarios"][r["scenario"]]["mbps"], r["speedup"]) for r in bw_rows
                             if r["workload"] == wl and r["strategy"] == s)
                if pts:
                    ax.plot(*zip(*pts), "o-", label=s, color=f"C{i}")
            ax.set_xscale("log")
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ax.set_xlabel("link bandwidth, Mbit/s (galaxy-f's devices)")
            ax.set_ylabel("speedup over local")
            ax.set_title(f"{wl}: speedup vs bandwidth", fontsize=10)
            ax.grid(alpha=0.3, which="both")
        axes[0, 0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(Path(out) / "speedup_vs_bandwidth.svg")
        plt.close(fig)


def report(out):
    data = json.loads((Path(out) / "results.json").read_text())
    derive(data["rows"], data["scenarios"])
    write_csv(Path(out) / "results.csv", data["rows"])
    write_markdown(Path(out) / "results.md", data)
    write_plots(out, data)
    (Path(out) / "results.json").write_text(json.dumps(data, indent=1) + "\n")
    for text, fig, ok in goals(data["rows"], data["scenarios"]):
        print(f"{'PASS' if ok else 'MISS'}  {text}: {fig}")


# ---------------------------------------------------------------------------------------------


class Context:
    pass


def scenario_info(name):
    spec = testbed.load_spec(REPO / "bench" / "clusters" / f"{name}.json")
    cpus = [d["cpu"] for d in spec["devices"]]
    mbps = {l["mbps"] for l in spec["links"].values()} | {spec["default"]["mbps"]}
    return {"devices": spec["devices"], "default_link": spec["default"],
            "links": [dict(l, between=sorted(k)) for k, l in spec["links"].items()],
            "mbps": min(mbps), "ideal_speedup": sum(cpus) / cpus[0],
            "summary": f"{len(cpus)} devices, CPU " + " + ".join(f"{d['name']} {d['cpu']:g}" for d in spec["devices"])
                       + " cores, memory " + "/".join(str(d["memory_mb"]) for d in spec["devices"])
                       + f" MB, links {'/'.join(f'{m:g}' for m in sorted(mbps))} Mbit/s "
                       f"{spec['default']['latency_ms']} ms"}


def git_commit():
    r = sh(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])
    dirty = sh(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    return r.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="galaxy-a, galaxy-f, memory-starved; gpt2-128; 2 runs")
    p.add_argument("--scenarios", help="comma-separated (default: all in scope)")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--workloads", help=f"comma-separated of {','.join(ALL_WORKLOADS)} (default: per scenario)")
    p.add_argument("--repeat", type=int, help="measured runs per session, after one warm-up (default 5; quick 2)")
    p.add_argument("--huddle", default=str(REPO / "build" / "huddle"))
    p.add_argument("--models-dir", default="/tmp/models", help="synthesised models live here (made if missing)")
    p.add_argument("--cluster-source", choices=["profile", "spec"], default="profile",
                   help="what the runs plan from: a `huddle profile` of the testbed per workload "
                        "(default) or the cluster file the testbed derives from the spec")
    p.add_argument("--core-gflops", type=float,
                   help="single-core GFLOP/s for the spec's cluster files (default: measure)")
    p.add_argument("--cpu-period-ms", type=float, default=100,
                   help="CFS period of the devices' CPU quotas (scripts/testbed up --cpu-period-ms)")
    p.add_argument("--run-timeout", type=int, default=600, help="seconds one huddle run may take")
    p.add_argument("--out", help="output directory (default bench/results; quick: bench/results/quick)")
    p.add_argument("--report-only", action="store_true", help="re-render the reports from --out/results.json")
    a = p.parse_args()
    out = Path(a.out or REPO / "bench" / "results" / ("quick" if a.quick else ""))
    if a.report_only:
        report(out)
        return
    if os.geteuid() != 0:
        sys.exit("bench-suite: the testbed needs root")
    os.environ.pop("OPENBLAS_CORETYPE", None)  # see docs/benchmarks.md: it slows sgemm here

    scope = QUICK if a.quick else SCOPE
    scenarios = a.scenarios.split(",") if a.scenarios else list(scope)
    strategies = a.strategies.split(",")
    for s in strategies:
        name, wire = strategy_and_wire(s)
        if name not in STRATEGIES or (wire and wire[1] not in WIRES):
            sys.exit(f"bench-suite: unknown strategy '{s}' (known: {', '.join(STRATEGIES)}, each "
                     f"optionally :{'|:'.join(WIRES)} for activations in that wire format)")
    for s in scenarios:
        if not (REPO / "bench" / "clusters" / f"{s}.json").is_file():
            sys.exit(f"bench-suite: no scenario bench/clusters/{s}.json")
    if "local" not in strategies:
        log("note: without 'local' there is no speedup")

    ctx = Context()
    ctx.repeat = a.repeat or (2 if a.quick else 5)
    ctx.run_timeout = a.run_timeout
    ctx.cluster_source = a.cluster_source
    out.mkdir(parents=True, exist_ok=True)
    ctx.work = REPO / "bench" / "results" / "tmp"  # git-ignored scratch: cluster files, traces, binary
    ctx.work.mkdir(parents=True, exist_ok=True)
    src = Path(a.huddle).resolve()
    if sh([src, "plan", "--help"]).returncode != 0:
        sys.exit(f"bench-suite: {src} has no 'plan' command (an old build?); pass --huddle")
    if a.cluster_source == "profile" and sh([src, "profile", "--help"]).returncode != 0:
        sys.exit(f"bench-suite: {src} has no 'profile' command (an old build?); pass --huddle "
                 "or --cluster-source spec")
    # A private copy: others rebuild build/ while the suite runs.
    ctx.huddle = ctx.work / "huddle"
    shutil.copy2(src, ctx.huddle)
    ctx.can_pin_plan = "--replan-threshold" in sh([ctx.huddle, "run", "--help"]).stdout
    ctx.model_dir = lambda m: Path(a.models_dir) / m
    def workloads(name):
        return a.workloads.split(",") if a.workloads else scope.get(name, ALL_WORKLOADS)

    for w in {w for s in scenarios for w in workloads(s)}:
        if w.rsplit("-", 1)[0] not in MODELS or not w.rsplit("-", 1)[-1].isdigit():
            sys.exit(f"bench-suite: workload '{w}' is not MODEL-TOKENS with MODEL one of {', '.join(MODELS)}")
    for m in {w.rsplit("-", 1)[0] for s in scenarios for w in workloads(s)}:
        if not (ctx.model_dir(m) / "config.json").is_file():
            arch, preset = MODELS[m]
            log(f"synthesising {m} into {ctx.model_dir(m)}")
            r = sh([ctx.huddle, "synth", "--arch", arch, "--preset", preset, "-o", ctx.model_dir(m)])
            if r.returncode != 0:
                sys.exit(f"bench-suite: synth {m}: {r.stderr}")
    ctx.cpu_period_ms = a.cpu_period_ms
    if a.core_gflops:
        ctx.core_gflops = a.core_gflops
    else:
        bench = src.parent / "bench" / "kernels" / "bench_sgemm"
        log(f"measuring single-core GFLOP/s with {bench}")
        ctx.core_gflops = testbed.measure_core_gflops(bench)
    log(f"core GFLOP/s for the cluster files: {ctx.core_gflops:g}")

    argv = " ".join(shlex.quote(x) for x in sys.argv[1:])
    data = {"meta": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "commit": git_commit(),
                     "command": f"scripts/bench-suite {argv}".strip(), "huddle": str(src),
                     "huddle_sha256": hashlib.sha256(ctx.huddle.read_bytes()).hexdigest(),
                     "host": f"{platform.node()}, {os.cpu_count()} CPUs, {platform.platform()}",
                     "core_gflops": ctx.core_gflops, "repeat": ctx.repeat, "warmup_runs": 1,
                     "loadavg_start": loadavg(), "env": "OPENBLAS_CORETYPE unset", "ids_seed": 42,
                     "plan_pinned": ctx.can_pin_plan, "cluster_source": ctx.cluster_source,
                     "ids": {}},
            "scenarios": {}, "profiles": {}, "rows": []}
    rng_ids = {}

    def ids_for(model, tokens):
        key = f"{model}-{tokens}"
        if key not in rng_ids:
            vocab = json.loads((ctx.model_dir(model) / "config.json").read_text())["vocab_size"]
            rng = random.Random(42)
            rng_ids[key] = ",".join(str(rng.randrange(vocab)) for _ in range(tokens))
            data["meta"]["ids"][key] = rng_ids[key]
        return rng_ids[key]

    def save():
        data["meta"]["loadavg_end"] = loadavg()
        (out / "results.json").write_text(json.dumps(data, indent=1) + "\n")

    t_start = time.monotonic()
    try:
        for name in scenarios:
            info = scenario_info(name)
            data["scenarios"][name] = info
            wls = workloads(name)
            for model in dict.fromkeys(w.rsplit("-", 1)[0] for w in wls):
                try:
                    with Testbed(ctx, name, model) as tb:
                        info["cluster_file"] = json.loads(tb.spec_cluster.read_text())
                        for wl_name in [w for w in wls if w.rsplit("-", 1)[0] == model]:
                            tokens = int(wl_name.rsplit("-", 1)[1])
                            wl = {"name": wl_name, "model": model, "tokens": tokens, "ids": ids_for(model, tokens)}
                            tb.cluster = tb.spec_cluster
                            if ctx.cluster_source == "profile":
                                rec, path = profile(ctx, tb, wl)
                                data["profiles"].setdefault(name, {})[wl_name] = rec
                                if path:
                                    tb.cluster = path
                                    log(f"{name} {wl_name} profile ({rec['wall_s']:.1f} s): " + "; ".join(
                                        f"{d['name']} {d['gflops']:.1f} GFLOP/s, share {d['cpu_share'] or 0:.2f}, "
                                        f"{d['memory_bytes'] / 2**20:.0f} MB" for d in rec["devices"]))
                                else:
                                    log(f"{name} {wl_name}: profile FAILED, planning from the spec's "
                                        f"cluster file: {rec['error']}")
                                save()
                            for s in strategies:
                                row = measure(ctx, tb, wl, s)
                                data["rows"].append(row)
                                save()
                                what = (f"{row['median_ms']:.1f} ms ({row['min_ms']:.0f}..{row['max_ms']:.0f}), "
                                        f"plan {row['plan'].get('predicted_ms', float('nan')):.1f}"
                                        if row["ok"] else f"FAILED: {row['error']}")
                                log(f"{name} {wl_name} {s}: {what} [load {row['loadavg_before'][0]:.1f}, "
                                    f"{row['wall_s']:.0f} s]")
                                if not row["ok"]:  # a worker may be dead or stuck: start afresh
                                    tb.restart()
                except RuntimeError as e:  # the testbed would not come up: recorded, next scenario
                    log(f"{name}: {e}")
                    data.setdefault("errors", []).append(f"{name} {model}: {e}")
    except KeyboardInterrupt:
        log("interrupted: the testbed is down; writing what was measured")
        data["meta"]["interrupted"] = True
    finally:
        data["meta"]["duration_s"] = round(time.monotonic() - t_start)
        save()
        if data["rows"]:
            report(out)
    log(f"done in {data['meta']['duration_s']} s: {out}/results.md")


def _on_signal(_signum, _frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    for _s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(_s, _on_signal)
    main()
