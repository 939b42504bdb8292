#!/usr/bin/env python3
"""Issue 17's benchmarks (a benchmark, not a test; not registered with ctest).

1. recovery: a primary and W local workers (`huddle worker`, 127.0.0.1) run one request; the last
   worker is killed (SIGKILL) mid-decode, after about --kill-after tokens; `huddle run --json`'s
   `recoveries[0].recovery_ms` is read, and the parts are timed from the processes' stderr lines
   as this script receives them:
     detect  = kill -> the primary's "a step failed" line   (NOT in recovery_ms)
     probe   = "a step failed" -> "lost ...; re-planning"   (end the broken session, probe the workers)
     restart = "lost" -> the surviving worker's "session ...: device" line (re-plan, new mesh,
               weights re-sent or mapped from the worker's own --model copy)
     replay  = that line -> "recovered" (re-prefill of prompt + tokens so far, the failed step)
   recovery_ms ~= probe + restart + replay; total = detect + recovery_ms.
   The kill is timed from the last worker's "session ...: device" line (every worker's weights
   are in place and the steps start): calibration runs (no kill) give prefill and decode ms, the kill comes at
   prefill + (kill_after + 0.5) decode steps. `replayed_tokens` tells where it landed; a trial
   whose kill missed the decode (replayed_tokens <= prompt) is reported and left out.
   Every trial's ids are compared with the calibration run's (same greedy ids after recovery).

2. replan: a primary and 2 workers, each in its own cgroup v1 cpu group (root) with a CPU quota;
   `huddle run --repeat N --strategy galaxy` (profiles the workers first). Worker 2's quota is cut
   as soon as its session is ready (after the profile), so the plan is stale from request 1 on.
     replan: --replan-threshold 0.1 (default): the session re-plans between requests;
     stale:  --replan-threshold 100: keeps the plan made for the old quota;
     fresh:  the quota is cut before the run: the profile sees it; the plan is kept
             (--replan-threshold 100), so it is the plan made for the new conditions.
   The figure is the median prefill over the last --tail requests of each run (prefill_ms_runs).

Usage (root for part 2; the commands of docs/benchmarks.md, "Adapting and surviving"):
  build/huddle synth --arch gpt2 --preset gpt2 -o /tmp/rec/gpt2
  build/huddle synth --arch llama --preset llama-1b -o /tmp/rec/llama-1b
  bench/runtime/recovery_bench.py --huddle build/huddle --part recovery \
      --model gpt2=/tmp/rec/gpt2 --model llama-1b=/tmp/rec/llama-1b \
      --n-predict gpt2=32 --n-predict llama-1b=32 --kill-after 4 --timeout-s 60 --trials 5
  bench/runtime/recovery_bench.py --huddle build/huddle --part replan --model gpt2=/tmp/rec/gpt2 \
      --replan-trials 5 --repeat 8 --tail 4 --timeout-s 60 [--period-us 10000]
--timeout-s 60: a worker mapping llama-1b's 4.4 GB from its own copy takes more than the default
10 s before its session is ready. The cgroups (huddle-rb-<pid>-{p,w1,w2} under
/sys/fs/cgroup/cpu) and every process started are removed on exit, also on failure.
"""

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CG_ROOT = "/sys/fs/cgroup/cpu"


def log(msg):
    print(msg, flush=True)


class Proc:
    """A child whose stderr lines are time-stamped (time.monotonic()) as they arrive."""

    def __init__(self, argv, env, stdout=subprocess.DEVNULL, cgroup=None, merged=False):
        if cgroup:
            argv = ["sh", "-c", 'echo $$ > "$0"/cgroup.procs && exec "$@"', cgroup] + argv
        if merged:  # a worker: its "listening on" line is on stdout, its log on stderr
            self.p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, bufsize=1)
            self.p.stderr = self.p.stdout
        else:
            self.p = subprocess.Popen(argv, env=env, stdout=stdout, stderr=subprocess.PIPE,
                                      text=True, bufsize=1)
        self.lines = []  # (t, line)
        self.cv = threading.Condition()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stderr:
            with self.cv:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.cv.notify_all()
        with self.cv:
            self.lines.append((time.monotonic(), None))  # EOF
            self.cv.notify_all()

    def wait_line(self, pattern, timeout, after=0):
        """The first (t, line) at index >= after matching pattern, and its index."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        with self.cv:
            i = after
            while True:
                while i < len(self.lines):
                    t, line = self.lines[i]
                    if line is None:
                        raise RuntimeError(f"process ended before /{pattern}/: {self.tail()}")
                    if rx.search(line):
                        return t, line, i
                    i += 1
                left = end - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"timeout waiting for /{pattern}/: {self.tail()}")
                self.cv.wait(left)

    def find(self, pattern):
        rx = re.compile(pattern)
        with self.cv:
            for t, line in self.lines:
                if line is not None and rx.search(line):
                    return t, line
        return None

    def tail(self, n=6):
        with self.cv:
            return " | ".join(l for _, l in self.lines[-n:] if l is not None)

    def stop(self):
        if self.p.poll() is None:
            try:
                self.p.kill()
            except ProcessLookupError:
                pass
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def start_worker(huddle, key, env, threads, model=None, cgroup=None):
    argv = [huddle, "worker", "--listen", "127.0.0.1:0", "--key-file", key, "--threads",
            str(threads)]
    if model:
        argv += ["--model", model]
    w = Proc(argv, env, cgroup=cgroup, merged=True)
    _, line, _ = w.wait_line(r"listening on", 30)
    w.addr = re.search(r"listening on (\S+)", line).group(1)
    return w


def med_range(xs, fmt="{:.1f}"):
    if not xs:
        return "-"
    return (fmt + " (" + fmt + "-" + fmt + ")").format(statistics.median(xs), min(xs), max(xs))


def machine_line():
    load = os.getloadavg()
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} cores, {mem}, {platform.platform()}, "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


# ---------------------------------------------------------------- part 1: recovery after a kill


def run_primary(args, env, model_dir, workers, extra, prompt, n_predict, run_flags):
    argv = [args.huddle, "run", "--model", model_dir, "--ids", ",".join(map(str, prompt)),
            "--n-predict", str(n_predict), "--ignore-eos", "--workers",
            ",".join(w.addr for w in workers), "--key-file", args.key, "--threads",
            str(args.threads), "--json", "--timeout-s", str(args.timeout_s)] + run_flags + extra
    return argv, Proc(argv, env, stdout=subprocess.PIPE)


def finish_primary(p, timeout):
    # Not communicate(): it would read stderr too, away from the time-stamping thread.
    timer = threading.Timer(timeout, p.p.kill)
    timer.start()
    try:
        out = p.p.stdout.read()
        p.p.wait()
    finally:
        timer.cancel()
    p.t.join(timeout=5)
    if p.p.returncode != 0:
        raise RuntimeError(f"huddle run exited {p.p.returncode}: {p.tail()}")
    return json.loads(out)


def recovery_cell(args, env, name, model_dir, local_copy, extra):
    prompt = list(range(1, args.prompt_len + 1))
    n_predict = args.n_predict[name] if name in args.n_predict else args.n_predict_default
    wmodel = model_dir if local_copy else None
    shares = ",".join(["1"] * (args.workers + 1))
    flags = ["--strategy", "galaxy", "--shares", shares]
    cell = {"model": name, "local_copy": local_copy, "trials": [], "skipped": []}

    def fresh_workers():
        return [start_worker(args.huddle, args.key, env, args.threads, wmodel)
                for _ in range(args.workers)]

    # Calibration: no kill, twice (a first session may pay for a cold page cache); the faster
    # prefill and decode time the kill, and the ids are the reference.
    calib = []
    for _ in range(2):
        workers = fresh_workers()
        p = None
        try:
            argv, p = run_primary(args, env, model_dir, workers, extra, prompt, n_predict, flags)
            calib.append(finish_primary(p, args.run_timeout))
        finally:
            for proc in workers + ([p] if p else []):
                proc.stop()
    ref = calib[-1]
    if calib[0]["generated"] != ref["generated"]:
        raise RuntimeError("two runs without a kill gave different ids")
    cell["command"] = " ".join(argv)
    ref = dict(ref, prefill_ms=min(c["prefill_ms"] for c in calib),
               decode_ms_per_token=min(c["decode_ms_per_token"] for c in calib))
    cell["calibration"] = [{k: c[k] for k in ("prefill_ms", "decode_ms_per_token")}
                           for c in calib]
    delay = (ref["prefill_ms"] + (args.kill_after + 0.5) * ref["decode_ms_per_token"]) / 1e3
    cell["kill_delay_s"] = delay
    log(f"  calibration: prefill {ref['prefill_ms']:.1f} ms, decode "
        f"{ref['decode_ms_per_token']:.1f} ms/token; kill {delay * 1e3:.0f} ms after the victim "
        f"is ready")
    attempts = 0
    while len(cell["trials"]) < args.trials and attempts < args.trials + 4:
        attempts += 1
        workers = fresh_workers()
        victim = workers[-1]
        p = None
        try:
            argv, p = run_primary(args, env, model_dir, workers, extra, prompt, n_predict, flags)
            # Every worker ready (weights in place): the primary's steps start.
            t_ready = max(w.wait_line(r"session \d+: device", args.run_timeout)[0]
                          for w in workers)
            time.sleep(max(0.0, delay - (time.monotonic() - t_ready)))
            t_kill = time.monotonic()
            os.kill(victim.p.pid, signal.SIGKILL)
            victim.p.wait()
            t_dead = time.monotonic()
            res = finish_primary(p, args.run_timeout)
        finally:
            for proc in workers + ([p] if p else []):
                proc.stop()
        recs = res.get("recoveries", [])
        if not recs:
            cell["skipped"].append("no recovery reported")
            continue
        r = recs[0]
        t_fail = p.find(r"a step failed")
        t_lost = p.find(r"; re-planning on the devices left")
        t_rec = p.find(r"recovered from losing")
        survivor = workers[0]
        # The survivor's second session line: its new session is ready.
        ready_lines = [t for t, l in survivor.lines if l and re.search(r"session \d+: device", l)]
        trial = {
            "recovery_ms": r["recovery_ms"],
            "replayed_tokens": r["replayed_tokens"],
            "devices_after": r["devices"],
            "same_ids": res["generated"] == ref["generated"],
            "reason": r["reason"],
            "reaped_ms": (t_dead - t_kill) * 1e3,
            "mapped_locally": [d.get("weights_mapped_locally") for d in res.get("devices", [])],
        }
        trial["log"] = [f"{(t - t_kill) * 1e3:+.1f} ms {who}: {l}" for who, proc in
                        (("primary", p), ("survivor", survivor), ("victim", victim))
                        for t, l in proc.lines if l]
        trial["log"].sort(key=lambda x: float(x.split(" ms")[0]))
        if args.verbose:
            log("\n".join("    " + x for x in trial["log"]))
        if t_fail and t_lost and t_rec and len(ready_lines) >= 2:
            trial["detect_ms"] = (t_fail[0] - t_kill) * 1e3
            trial["probe_ms"] = (t_lost[0] - t_fail[0]) * 1e3
            trial["restart_ms"] = (ready_lines[1] - t_lost[0]) * 1e3
            trial["replay_ms"] = (t_rec[0] - ready_lines[1]) * 1e3
            trial["total_ms"] = trial["detect_ms"] + r["recovery_ms"]
        if r["replayed_tokens"] <= len(prompt):
            cell["skipped"].append(f"kill not in the decode (replayed {r['replayed_tokens']})")
            log(f"  trial: kill landed before the decode (replayed {r['replayed_tokens']}); again")
            continue
        cell["trials"].append(trial)
        log("  trial {}: recovery_ms {:.1f}, detect {}, probe {}, restart {}, replay {}, "
            "replayed {} tokens, same ids {}".format(
                len(cell["trials"]), r["recovery_ms"],
                *(f"{trial.get(k, float('nan')):.1f}" for k in
                  ("detect_ms", "probe_ms", "restart_ms", "replay_ms")),
                r["replayed_tokens"], trial["same_ids"]))
    return cell


def recovery_table(cells):
    rows = ["| model | workers' weights | trials | recovery_ms | detect ms | probe ms | "
            "restart ms | re-prefill ms | detect + recovery ms | tokens re-fed | same ids |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        t = c["trials"]
        col = lambda k: [x[k] for x in t if k in x]  # noqa: E731
        rows.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            c["model"], "own copy (--model)" if c["local_copy"] else "re-sent by the primary",
            len(t), med_range(col("recovery_ms")), med_range(col("detect_ms")),
            med_range(col("probe_ms")), med_range(col("restart_ms")),
            med_range(col("replay_ms")), med_range(col("total_ms")),
            med_range(col("replayed_tokens"), "{:.0f}"),
            f"{sum(x['same_ids'] for x in t)}/{len(t)}"))
    return "\n".join(rows)


# ---------------------------------------------------------------- part 2: re-plan after a slowdown


class Cgroups:
    def __init__(self, names, period_us=100000):
        self.paths = {}
        self.period_us = period_us
        tag = f"huddle-rb-{os.getpid()}"
        for n in names:
            path = os.path.join(CG_ROOT, f"{tag}-{n}")
            os.mkdir(path)
            self.paths[n] = path
            self.set(n, 1.0)

    def set(self, name, cores):
        path, period_us = self.paths[name], self.period_us
        with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
            f.write(str(period_us))
        with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(int(cores * period_us)) if cores > 0 else "-1")

    def remove(self):
        for path in self.paths.values():
            for _ in range(50):
                try:
                    with open(os.path.join(path, "cgroup.procs")) as f:
                        pids = [int(x) for x in f.read().split()]
                    for pid in pids:  # only ours live here
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)


def replan_run(args, env, cg, mode):
    """One `huddle run --repeat`; returns its JSON."""
    quota = args.quota
    cg.set("p", quota[0])
    cg.set("w1", quota[1])
    cg.set("w2", args.cut if mode == "fresh" else quota[2])
    workers = [start_worker(args.huddle, args.key, env, args.threads, args.replan_model_dir,
                            cgroup=cg.paths[n]) for n in ("w1", "w2")]
    p = None
    try:
        prompt = list(range(1, args.replan_prompt + 1))
        argv = [args.huddle, "run", "--model", args.replan_model_dir, "--ids",
                ",".join(map(str, prompt)), "--n-predict", "1", "--ignore-eos", "--workers",
                ",".join(w.addr for w in workers), "--key-file", args.key, "--threads",
                str(args.threads), "--json", "--repeat", str(args.repeat), "--strategy",
                args.strategy, "--replan-threshold", "100" if mode in ("stale", "fresh") else
                str(args.replan_threshold), "--timeout-s", str(args.timeout_s)]
        p = Proc(argv, env, stdout=subprocess.PIPE, cgroup=cg.paths["p"])
        if mode != "fresh":
            workers[1].wait_line(r"session \d+: device", args.run_timeout)
            cg.set("w2", args.cut)
        res = finish_primary(p, args.run_timeout)
        res["_argv"] = argv
        res["_log"] = [l for _, l in p.lines if l and "after request" in l]
        return res
    finally:
        for proc in workers + ([p] if p else []):
            proc.stop()


def replan_part(args, env):
    cg = Cgroups(["p", "w1", "w2"], args.period_us)
    runs = {"replan": [], "stale": [], "fresh": []}
    try:
        for trial in range(args.replan_trials):
            for mode in ("replan", "stale", "fresh"):
                try:
                    res = replan_run(args, env, cg, mode)
                except RuntimeError as e:  # reported, not fatal: the other runs still count
                    log(f"  {mode} #{trial + 1}: failed: {e}")
                    runs.setdefault("failed", []).append(f"{mode} #{trial + 1}: {e}")
                    continue
                pr = res["prefill_ms_runs"]
                tail = pr[-args.tail:]
                rp = [(x.get("after_request"), x.get("cause"),
                       round(x.get("predicted_ms_before", 0)), round(x.get("predicted_ms_after", 0)))
                      for x in res.get("replans", [])]
                same = all(g == res["generated_runs"][0] for g in res["generated_runs"])
                runs[mode].append({"prefill_ms_runs": pr, "tail_median": statistics.median(tail),
                                   "replans": res.get("replans", []), "same_ids": same,
                                   "command": " ".join(res["_argv"]), "log": res["_log"]})
                log(f"  {mode} #{trial + 1}: prefill ms {[round(x) for x in pr]}, last "
                    f"{args.tail} median {statistics.median(tail):.1f}, replans {rp}")
    finally:
        cg.remove()
    return runs


def replan_table(runs):
    med = {m: [r["tail_median"] for r in runs[m]] for m in ("replan", "stale", "fresh")}
    rows = ["| run | sittings | prefill ms, last requests (median of medians, min-max) | "
            "re-plans (request: cause) |", "|---|---|---|---|"]
    label = {"replan": "stale plan, re-planned online (--replan-threshold 0.1)",
             "stale": "stale plan kept (--replan-threshold 100)",
             "fresh": "fresh plan: profiled after the cut, kept (--replan-threshold 100)"}
    for m in ("replan", "stale", "fresh"):
        rp = "; ".join(",".join(f"after {x.get('after_request')}: {x.get('cause')}"
                                for x in r["replans"])
                       or "none" for r in runs[m])
        rows.append(f"| {label[m]} | {len(med[m])} | {med_range(med[m])} | {rp} |")
    out = "\n".join(rows)
    if runs.get("failed"):
        out += "\n\nfailed runs: " + "; ".join(runs["failed"])
    if med["replan"] and med["stale"] and med["fresh"]:
        r, s, f = (statistics.median(med[m]) for m in ("replan", "stale", "fresh"))
        out += (f"\n\nstale / re-planned: {s / r:.2f}x (goal >= 1.3x); re-planned / fresh: "
                f"{r / f:.2f} (goal <= 1.10)")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--huddle", default="build/huddle")
    ap.add_argument("--model", action="append", default=[],
                    help="NAME=DIR, a model for the recovery part (repeat)")
    ap.add_argument("--extra", action="append", default=[],
                    help="NAME=ARGS: more `huddle run` arguments for that model, e.g. "
                    "llama-1b='--weight-dtype q8_0'")
    ap.add_argument("--part", choices=["recovery", "replan", "all"], default="all")
    ap.add_argument("--copies", choices=["both", "local", "sent"], default="both")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--n-predict-default", type=int, default=32)
    ap.add_argument("--n-predict", action="append", default=[], help="NAME=N")
    ap.add_argument("--kill-after", type=int, default=8, help="tokens decoded before the kill")
    ap.add_argument("--timeout-s", type=float, default=10)
    ap.add_argument("--run-timeout", type=float, default=600)
    # part 2
    ap.add_argument("--replan-model", default="gpt2", help="NAME of a --model for part 2")
    ap.add_argument("--replan-trials", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("--tail", type=int, default=4, help="last requests counted")
    ap.add_argument("--replan-prompt", type=int, default=128)
    ap.add_argument("--strategy", default="galaxy")
    ap.add_argument("--replan-threshold", type=float, default=0.1)
    ap.add_argument("--quota", default="0.6,0.6,0.6", help="cores: primary, worker 1, worker 2")
    ap.add_argument("--period-us", type=int, default=100000,
                    help="cpu.cfs_period_us (the testbed's 100 ms by default)")
    ap.add_argument("--cut", type=float, default=0.1, help="worker 2's quota after the cut")
    ap.add_argument("--verbose", action="store_true", help="print each trial's timed log lines")
    ap.add_argument("--json-out", help="write every measurement here")
    args = ap.parse_args()
    args.huddle = os.path.abspath(args.huddle)
    models = dict(m.split("=", 1) for m in args.model)
    extras = {k: v.split() for k, v in (e.split("=", 1) for e in args.extra)}
    args.n_predict = {k: int(v) for k, v in (e.split("=", 1) for e in args.n_predict)}
    args.quota = [float(x) for x in args.quota.split(",")]
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)  # docs/benchmarks.md: let Huddle pick the core type

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    log(f"# recovery_bench {started}")
    log("# command: " + " ".join([sys.argv[0]] + sys.argv[1:]))
    log("# machine: " + machine_line())
    tmp = tempfile.mkdtemp(prefix="huddle-rb-")
    args.key = os.path.join(tmp, "key")
    subprocess.run([args.huddle, "keygen", "-o", args.key], check=True,
                   stdout=subprocess.DEVNULL)
    os.chmod(args.key, 0o600)
    results = {"started": started, "machine": machine_line(), "argv": sys.argv}
    if args.part in ("recovery", "all"):
        cells = []
        copies = {"both": [False, True], "local": [True], "sent": [False]}[args.copies]
        for name, d in models.items():
            for local_copy in copies:
                log(f"## recovery: {name}, workers' weights "
                    f"{'from their own copy' if local_copy else 're-sent'}")
                c = recovery_cell(args, env, name, d, local_copy, extras.get(name, []))
                log("  command (one trial): " + c["command"])
                cells.append(c)
        results["recovery"] = cells
        log("\n" + recovery_table(cells) + "\n")
    if args.part in ("replan", "all"):
        if os.geteuid() != 0:
            sys.exit("part replan needs root (cgroup v1 cpu)")
        args.replan_model_dir = models[args.replan_model]
        log(f"## replan: {args.replan_model}, {args.strategy}, quotas {args.quota}, worker 2 cut "
            f"to {args.cut} core, CFS period {args.period_us} us")
        results["replan"] = replan_part(args, env)
        for m in ("replan", "stale", "fresh"):
            if results["replan"][m]:
                log(f"  command ({m}): " + results["replan"][m][0]["command"])
        log("\n" + replan_table(results["replan"]) + "\n")
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    log("# finished " + results["finished"] + "; machine: " + machine_line())
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
