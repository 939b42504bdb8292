#!/usr/bin/env python3
"""Hepti's mode switch under a real memory squeeze (issue 17, docs/planner.md).

  memory_squeeze_test.py --huddle BIN [--work DIR]

A worker runs in a cgroup (v1 memory controller) of its own; the primary runs `huddle run
--strategy hepti --repeat N` against it on a GPT-2-small-shaped synth model (random weights),
so every device holds all MLP weights (weight-stationary). After the first request a second
process in the worker's cgroup takes nearly all the room the cgroup has left, as another app on
that device would; the primary must see the worker's free memory fall in its step reports and
switch to a 1d-tiled plan (each device half the MLP weights) at the next request boundary, with
nothing killed by the kernel's OOM killer; when that process exits, back to weight-stationary.
Every request's greedy ids must equal the first's (the same answer in every mode).

Exit status: 0 pass, 1 fail, 77 skipped (not root, or no cgroup v1 memory controller).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKIP = 77
CGROUP = Path("/sys/fs/cgroup/memory")
# Takes memory 1 MB at a time (every page touched, so charged to the cgroup) until the cgroup
# has `room` bytes left, then holds it.
HOG = r"""
import sys, time
group, room = sys.argv[1], int(sys.argv[2])
def left():
    limit = int(open(group + "/memory.limit_in_bytes").read())
    return limit - int(open(group + "/memory.usage_in_bytes").read())
blocks = []
while left() > room + (1 << 20):
    b = bytearray(1 << 20)
    for i in range(0, len(b), 4096):
        b[i] = 1
    blocks.append(b)
print("ready", len(blocks), flush=True)
time.sleep(600)
"""
# The cgroup's room the squeeze leaves: less than a weight-stationary GPT-2 small plan needs of
# the worker beyond its weights (the planner's figure: about 40 MB for the KV cache and
# activations of a 64-token request), more than the worker really grows by within a request.
ROOM = 16 << 20
LIMIT = 1 << 30  # the worker's cgroup


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--huddle", required=True)
    p.add_argument("--work", default=None)
    a = p.parse_args()
    if os.geteuid() != 0 or not (CGROUP / "cgroup.procs").exists():
        print("skipped: needs root and the cgroup v1 memory controller")
        return SKIP
    own_work = a.work is None
    work = Path(a.work or tempfile.mkdtemp(prefix="huddle-squeeze-"))
    group = CGROUP / f"huddle-squeeze-{os.getpid()}"
    procs = []
    failures = []

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            failures.append(what)
        return ok

    def in_group(cmd, **kw):
        """Starts `cmd` inside the worker's cgroup (the child joins it before exec)."""
        def join():
            (group / "cgroup.procs").write_text(str(os.getpid()))
        proc = subprocess.Popen(cmd, preexec_fn=join, **kw)
        procs.append(proc)
        return proc

    try:
        model = work / "gpt2"
        if not (model / "config.json").exists():
            subprocess.run([a.huddle, "synth", "--arch", "gpt2", "--preset", "gpt2", "-o",
                            str(model)], check=True, capture_output=True, timeout=120)
        key = work / "cluster.key"
        key.write_text(os.urandom(32).hex() + "\n")
        key.chmod(0o600)
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(LIMIT))
        port = 7400 + os.getpid() % 500
        worker = in_group([a.huddle, "worker", "--listen", f"127.0.0.1:{port}", "--key-file",
                           str(key), "--threads", "1"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        ids = ",".join(str(1 + (i * 97) % 50000) for i in range(64))
        # The devices as equals, the worker with twice its cgroup's memory: the headroom the
        # session keeps free on it (5% of that) is then larger than what a weight-stationary
        # split can give up by holding fewer heads, so the squeeze must switch the mode. Speed
        # re-plans are kept out (--replan-threshold 100): memory alone decides here.
        cluster = work / "cluster.json"
        cluster.write_text(json.dumps({
            "devices": [{"name": "primary", "gflops": 40.0, "memory_bytes": 8e9},
                        {"name": f"127.0.0.1:{port}", "gflops": 40.0,
                         "memory_bytes": 2 * LIMIT}],
            "default_link": {"bandwidth_bps": 1e9, "latency_s": 0.0002}}))
        primary = subprocess.Popen(
            [a.huddle, "run", "--model", str(model), "--ids", ids, "--n-predict", "8",
             "--workers", f"127.0.0.1:{port}", "--key-file", str(key), "--strategy", "hepti",
             "--cluster", str(cluster), "--replan-threshold", "100", "--threads", "1",
             "--repeat", "7", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(primary)
        hog = None
        log = []
        deadline = time.time() + 300
        for line in primary.stderr:
            log.append(line)
            print("  | " + line.rstrip(), flush=True)
            if "after request 1:" in line:
                # The primary waits while the squeeze builds up (requests take a fraction of a
                # second), so the next request runs under it from its first step.
                primary.send_signal(signal.SIGSTOP)
                hog = in_group([sys.executable, "-c", HOG, str(group), str(ROOM)],
                               stdout=subprocess.PIPE, text=True)
                ready = hog.stdout.readline().split()
                check(ready[:1] == ["ready"], "a second process in the worker's cgroup took "
                      f"{ready[1] if len(ready) > 1 else '?'} MB, leaving {ROOM >> 20} MB")
                primary.send_signal(signal.SIGCONT)
            if "after request 4:" in line and hog is not None:
                hog.send_signal(signal.SIGTERM)
                hog.wait(timeout=10)
            if time.time() > deadline:
                primary.kill()
                break
        out, _ = primary.communicate(timeout=60)
        if not check(primary.returncode == 0, f"huddle run exits 0 (got {primary.returncode})"):
            return 1
        result = json.loads(out.splitlines()[0])
        replans = result.get("replans", [])
        to_1d = [r for r in replans if r.get("mode_after") == "1d-tiled"]
        back = [r for r in replans if r.get("mode_before") == "1d-tiled" and
                r.get("mode_after") == "weight-stationary" and r.get("cause") == "memory returned"]
        check(len(to_1d) >= 1 and to_1d[0]["cause"] == "memory" and
              to_1d[0]["mode_before"] == "weight-stationary",
              "the squeeze switched weight-stationary -> 1d-tiled, cause memory: "
              + json.dumps(to_1d[:1]))
        check(len(back) >= 1 and back[0]["after_request"] > to_1d[0]["after_request"]
              if to_1d else False,
              "memory back: 1d-tiled -> weight-stationary: " + json.dumps(back[:1]))
        check(any("mode weight-stationary -> 1d-tiled" in l for l in log),
              "the log names the switch and its cause")
        check(worker.poll() is None, "the worker is alive (not OOM-killed)")
        oom = (group / "memory.oom_control").read_text()
        check("oom_kill 0" in oom or "oom_kill" not in oom, "no OOM kill in the cgroup: "
              + oom.replace("\n", ", "))
        runs = result.get("generated_runs", [])
        one = subprocess.run([a.huddle, "run", "--model", str(model), "--ids", ids,
                              "--n-predict", "8", "--threads", "1", "--json"],
                             capture_output=True, text=True, timeout=120)
        reference = json.loads(one.stdout.splitlines()[0])["generated"] if one.returncode == 0 \
            else None
        check(len(runs) == 7 and all(r == reference for r in runs),
              f"all {len(runs)} requests, in every mode, give one device's greedy ids")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if group.exists():
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
        if own_work:
            shutil.rmtree(work, ignore_errors=True)
    print("PASS" if not failures else f"{len(failures)} FAILED", flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
