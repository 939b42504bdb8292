#!/usr/bin/env python3
"""Tests of scripts/testbed (docs/testbed.md).

  smoke_test.py specs --testbed PATH --clusters DIR
      Every scenario in bench/clusters validates; broken specs are refused naming the field.
      Needs no root.
  smoke_test.py smoke --testbed PATH --huddle BIN --model DIR
      A 2-device testbed runs a tiny model with one strategy and gives the single-device answer;
      `down` then leaves no namespace, link, cgroup or process behind. Skipped (exit 77) without
      root or `ip netns`. Then the same with `up --model DIR`: the worker maps its weights from
      its own copy instead of receiving them. Everything it makes is removed, also when a check
      fails.

Exit status: 0 pass, 1 fail, 77 skipped.
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77
failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what, flush=True)
    if not condition:
        failures.append(what)
    return condition


def run(cmd, timeout=30, **kwargs):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, e.stdout or "", f"timed out after {timeout} s")


def read_npy_f32(path):
    """A little-endian float32 .npy file as (shape, values)."""
    data = Path(path).read_bytes()
    assert data[:6] == b"\x93NUMPY", path
    header_len = struct.unpack("<H", data[8:10])[0]
    header = data[10:10 + header_len].decode("latin1")
    assert "'<f4'" in header and "'fortran_order': False" in header, header
    shape = tuple(int(x) for x in header.split("'shape': (")[1].split(")")[0].split(",") if x.strip())
    body = data[10 + header_len:]
    return shape, struct.unpack(f"<{len(body) // 4}f", body)


# ---------------------------------------------------------------------------------------------


def test_specs(a):
    specs = sorted(glob.glob(os.path.join(a.clusters, "*.json")))
    specs = [s for s in specs if not s.endswith(".cluster.json")]
    check(len(specs) >= 12, f"bench/clusters holds the scenarios ({len(specs)} specs)")
    r = run([a.testbed, "check", *specs])
    check(r.returncode == 0, f"every scenario validates: {r.stderr.strip()}")

    tmp = Path(tempfile.mkdtemp(prefix="testbed-specs-"))
    try:
        # Galaxy env F: speeds in the ratio 1470 : 825 : 403, gflops = cpu x core figure.
        out = tmp / "f.cluster.json"
        r = run([a.testbed, "check", os.path.join(a.clusters, "galaxy-f.json"), "--core-gflops", "10",
                 "--cluster-out", str(out)])
        cluster = json.loads(out.read_text()) if r.returncode == 0 else {"devices": []}
        g = [d["gflops"] for d in cluster["devices"]]
        check(len(g) == 3 and abs(g[0] / g[1] - 1470 / 825) < 1e-3 and abs(g[1] / g[2] - 825 / 403) < 1e-3,
              f"galaxy-f speeds keep the paper's clock ratio ({g})")
        check(all("cores" not in d and "comm_cpu_ns_per_byte" not in d for d in cluster["devices"]),
              "without a CPU-per-byte figure the cluster file says nothing of the devices' cores")
        r = run([a.testbed, "check", os.path.join(a.clusters, "galaxy-f.json"), "--core-gflops", "10",
                 "--comm-cpu-ns-per-byte", "0.6", "--cluster-out", str(out)])
        cluster = json.loads(out.read_text()) if r.returncode == 0 else {"devices": []}
        spec_cpu = [d["cpu"] for d in json.loads(Path(a.clusters, "galaxy-f.json").read_text())["devices"]]
        check([d.get("cores") for d in cluster["devices"]] == spec_cpu and
              all(abs(d["comm_cpu_ns_per_byte"] * d["cores"] - 0.6) < 1e-3 for d in cluster["devices"]),
              f"each device's cores are its quota and its CPU per byte the host's over them: {cluster}")
        # The memory-starved cluster: an even split of its smallest device's share does not fit.
        starved = json.loads(Path(a.clusters, "memory-starved.json").read_text())
        mem = [d["memory_mb"] for d in starved["devices"]]
        check(min(mem) * len(mem) < sum(mem) and min(mem) < max(mem),
              f"memory-starved devices have unequal memory ({mem} MB)")

        broken = {
            "dup.json": ('{"devices":[{"name":"a","cpu":0.5,"memory_mb":64},{"name":"a","cpu":0.5,'
                         '"memory_mb":64}]}', "devices[1].name"),
            "cpu.json": ('{"devices":[{"name":"a","cpu":-1,"memory_mb":64},{"name":"b","cpu":0.5,'
                         '"memory_mb":64}]}', "devices[0].cpu"),
            "link.json": ('{"devices":[{"name":"a","cpu":0.5,"memory_mb":64},{"name":"b","cpu":0.5,'
                          '"memory_mb":64}],"links":[{"between":["a","z"],"mbps":10,"latency_ms":1}]}',
                          "links[0].between"),
            "lat.json": ('{"devices":[{"name":"a","cpu":0.5,"memory_mb":64},{"name":"b","cpu":0.5,'
                         '"memory_mb":64}],"default_link":{"mbps":10,"latency_ms":0.5}}',
                         "default_link.latency_ms"),
            "field.json": ('{"devices":[{"name":"a","cpu":0.5,"memory_mb":64,"gpu":1},{"name":"b",'
                           '"cpu":0.5,"memory_mb":64}]}', "unknown field 'gpu'"),
            "json.json": ('{"devices": [', "not valid JSON"),
        }
        for name, (text, expected) in broken.items():
            (tmp / name).write_text(text)
            r = run([a.testbed, "check", str(tmp / name)])
            check(r.returncode == 1 and expected in r.stderr and name in r.stderr,
                  f"{name} refused naming {expected!r}: {r.stderr.strip()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------


def leftovers(tag):
    """Namespaces, links, cgroups of testbed `tag`, found by name as `down` finds them."""
    prefix = "hd" + hashlib.sha1(tag.encode()).hexdigest()[:6]
    ns = [l.split()[0] for l in run(["ip", "netns", "list"]).stdout.splitlines()
          if l.startswith(f"hd-{tag}_")]
    links = [l for l in run(["ip", "-o", "link", "show"]).stdout.splitlines() if f": {prefix}" in l]
    cgroups = []
    for c in ("cpu", "memory"):
        for root, dirs, _ in os.walk(f"/sys/fs/cgroup/{c}"):
            cgroups += [os.path.join(root, d) for d in dirs if d.startswith(f"hd-{tag}_")]
            if root.count(os.sep) > 8:
                dirs[:] = []
    return ns + links + cgroups


def pid_alive(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.split(") ")[1][0] != "Z"


def test_smoke(a):
    if os.geteuid() != 0:
        print("skipped: the testbed needs root")
        return SKIP
    if shutil.which("ip") is None or run(["ip", "netns", "list"]).returncode != 0:
        print("skipped: 'ip netns' is unavailable")
        return SKIP
    if not Path("/sys/fs/cgroup/cpu/cgroup.procs").exists():
        print("skipped: no cgroup v1 cpu controller")
        return SKIP
    tmp = Path(tempfile.mkdtemp(prefix="testbed-smoke-"))
    tag = f"ci-smoke-{os.getpid()}"
    spec = tmp / f"{tag}.json"
    spec.write_text(json.dumps({
        "description": "CI smoke test: a primary and one worker",
        "devices": [{"name": "P", "cpu": 0.5, "memory_mb": 1024}, {"name": "W", "cpu": 0.5, "memory_mb": 1024}],
        "default_link": {"mbps": 200, "latency_ms": 2},
    }))
    pids = []
    try:
        if os.path.exists("/usr/bin/setpriv"):
            r = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, a.testbed,
                     "up", str(spec), "--huddle", a.huddle, "--core-gflops", "10"])
            check(r.returncode == 1 and "root" in r.stderr, f"up refuses a non-root user: {r.stderr.strip()}")

        r = run([a.testbed, "up", str(spec), "--huddle", a.huddle, "--core-gflops", "10"])
        if not check(r.returncode == 0, f"up succeeds: {r.stderr.strip()[-800:]}"):
            return 1
        args = r.stdout.split()
        check(len(args) == 6 and args[0] == "--workers" and args[1].endswith(":7000"),
              f"up prints a ready --workers argument: {r.stdout.strip()}")
        status = json.loads(run([a.testbed, "status", str(spec)]).stdout)
        pids = status["pids"]
        check(len(status["namespaces"]) == 2 and len(pids) == 1, f"two namespaces and one worker: {status}")
        quotas = sorted(Path(c, "cpu.cfs_quota_us").read_text().strip() for c in status["cgroups"] if "/cpu/" in c)
        limits = sorted(Path(c, "memory.limit_in_bytes").read_text().strip()
                        for c in status["cgroups"] if "/memory/" in c)
        check(quotas == ["50000", "50000"], f"CPU quota of 0.5 core per device: {quotas}")
        check(limits == [str(1 << 30)] * 2, f"memory limit of 1024 MB per device: {limits}")
        cluster_path = tmp / f"{tag}.cluster.json"
        cluster = json.loads(cluster_path.read_text()) if cluster_path.exists() else {}
        # up measured the host's CPU per byte moved (huddle profile) and gives each device that
        # figure over its quota.
        devices = cluster.get("devices", [])
        comm = [d.pop("comm_cpu_ns_per_byte", None) for d in devices]
        check(devices == [{"name": "P", "gflops": 5.0, "memory_bytes": 1 << 30, "cores": 0.5},
                          {"name": "W", "gflops": 5.0, "memory_bytes": 1 << 30, "cores": 0.5}]
              and cluster.get("default_link") == {"bandwidth_bps": 2e8, "latency_s": 0.002},
              f"cluster file beside the spec: {cluster}")
        check(len(comm) == 2 and comm[0] is not None and comm[0] > 0 and comm[0] == comm[1],
              f"each device's CPU per byte moved, at its quota: {comm}")

        r = run([a.testbed, "up", str(spec), "--huddle", a.huddle, "--core-gflops", "10"])
        check(r.returncode == 1 and "already up" in r.stderr, f"a second up is refused: {r.stderr.strip()}")
        check(run([a.testbed, "status", str(spec)]).stdout.count('"pids"') == 1 and
              all(pid_alive(p) for p in pids), "the refused up left the running testbed alone")

        common = ["run", "--model", a.model, "--ids", "1,2,3,4,5,6,7", "--n-predict", "4", "--ignore-eos",
                  "--json", "--threads", "1"]
        ref = run([a.huddle, *common, "--dump-logits", str(tmp / "ref.npy")])
        dist = run([a.testbed, "exec", str(spec), "--", a.huddle, *common, "--dump-logits", str(tmp / "dist.npy"),
                    "--strategy", "galaxy", "--timeout-s", "20", *args])
        if check(ref.returncode == 0 and dist.returncode == 0,
                 f"single-device and testbed runs succeed: {ref.stderr.strip()} {dist.stderr.strip()}"):
            rj, dj = json.loads(ref.stdout), json.loads(dist.stdout)
            check(dj["strategy"] == "galaxy" and len(dj["devices"]) == 2, f"ran galaxy on 2 devices: {dj['devices']}")
            check(rj["generated"] == dj["generated"] and len(rj["generated"]) == 4,
                  f"greedy tokens equal the single-device answer: {dj['generated']} vs {rj['generated']}")
            rs, rv = read_npy_f32(tmp / "ref.npy")
            ds, dv = read_npy_f32(tmp / "dist.npy")
            scale = max(1.0, max(abs(x) for x in rv))
            diff = max(abs(x - y) for x, y in zip(rv, dv)) if rs == ds else float("inf")
            # float32 reassociation across the split: far below 1e-4 of the logits' scale.
            check(diff <= 1e-4 * scale, f"prompt logits {rs} match within 1e-4 x {scale:.3g} (max diff {diff:.3g})")
            check(not dj["devices"][1]["weights_mapped_locally"], "without --model the worker received its weights")

        # up --model: the worker maps its slices from its own copy (each tensor's digest is the primary's).
        r = run([a.testbed, "up", str(spec), "--huddle", a.huddle, "--core-gflops", "10", "--model", str(tmp)])
        check(r.returncode == 1 and "no model directory" in r.stderr, f"up --model refuses a non-model: {r.stderr.strip()}")
        check(run([a.testbed, "down", str(spec)]).returncode == 0, "down before up --model")
        r = run([a.testbed, "up", str(spec), "--huddle", a.huddle, "--core-gflops", "10", "--cpu-period-ms", "0.5"])
        check(r.returncode == 1 and "1 to 1000 ms" in r.stderr, f"up refuses a period under 1 ms: {r.stderr.strip()}")
        # --cpu-period-ms: the same 0.5 core as 5 ms of every 10 ms.
        r = run([a.testbed, "up", str(spec), "--huddle", a.huddle, "--core-gflops", "10", "--model", a.model,
                 "--cpu-period-ms", "10"])
        if check(r.returncode == 0, f"up --model succeeds: {r.stderr.strip()[-800:]}"):
            status = json.loads(run([a.testbed, "status", str(spec)]).stdout)
            cpu = [c for c in status["cgroups"] if "/cpu/" in c]
            periods = sorted((Path(c, "cpu.cfs_period_us").read_text().strip(),
                              Path(c, "cpu.cfs_quota_us").read_text().strip()) for c in cpu)
            check(periods == [("10000", "5000")] * 2, f"--cpu-period-ms 10: 5 ms of every 10 ms: {periods}")
            status = json.loads(run([a.testbed, "status", str(spec)]).stdout)
            pids += status["pids"]
            check(status.get("model") == str(Path(a.model).resolve()), f"status names the model: {status.get('model')}")
            local = run([a.testbed, "exec", str(spec), "--", a.huddle, *common, "--strategy", "galaxy",
                         "--timeout-s", "20", *r.stdout.split()])
            if check(local.returncode == 0, f"testbed run with --model succeeds: {local.stderr.strip()}"):
                lj = json.loads(local.stdout)
                check(lj["devices"][1]["weights_mapped_locally"], f"the worker mapped its weights: {lj['devices']}")
                check(ref.returncode == 0 and lj["generated"] == json.loads(ref.stdout)["generated"],
                      f"and gives the single-device tokens: {lj['generated']}")
    finally:
        r = run([a.testbed, "down", str(spec)])
        check(r.returncode == 0, f"down succeeds: {r.stdout.strip()} {r.stderr.strip()}")
        left = leftovers(tag)
        if left:  # never leave anything behind, even when down itself is broken
            run([a.testbed, "down", str(spec)])
        check(not left, f"down leaves no namespace, link or cgroup: {left}")
        check(not any(pid_alive(p) for p in pids), f"down leaves no worker process: {pids}")
        check(not Path(f"/run/huddle-testbed/{tag}").exists(), "down removes the state directory")
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("specs", "smoke"))
    p.add_argument("--testbed", required=True)
    p.add_argument("--clusters")
    p.add_argument("--huddle")
    p.add_argument("--model")
    a = p.parse_args()
    code = test_specs(a) if a.mode == "specs" else test_smoke(a)
    if code == 0 and failures:
        code = 1
    print(f"{len(failures)} failure(s)" if code != SKIP else "", flush=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
