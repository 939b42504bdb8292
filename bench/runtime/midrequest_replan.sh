#!/bin/bash
# A re-plan within one request (root, cgroup v1 cpu controller): a primary and 2 workers at 0.6
# core each, galaxy profiled first, a 64-token prompt and NP (48) greedy tokens; worker 2's quota
# is cut to 0.1 core once its weights are in, so the cut lands before the request's first step.
# Prints the decode time per token, the re-plans (`replans` of --json) and the session's lines.
#   HUDDLE=build/huddle MODEL=/tmp/models/gpt2 NP=48 EXTRA="--no-recover" bench/runtime/midrequest_replan.sh
# (EXTRA=--no-recover: the session neither recovers nor switches plans, the stale plan's time.)
set -e
H=${HUDDLE:-build/huddle}
M=${MODEL:-/tmp/models/gpt2}
D=/tmp/midreq; rm -rf $D; mkdir -p $D
$H keygen -o $D/key 2>/dev/null || head -c 32 /dev/urandom > $D/key
for i in 0 1 2; do mkdir -p /sys/fs/cgroup/cpu/hm-$i; echo 100000 > /sys/fs/cgroup/cpu/hm-$i/cpu.cfs_period_us; echo 60000 > /sys/fs/cgroup/cpu/hm-$i/cpu.cfs_quota_us; done
for i in 1 2; do
  sh -c "echo \$\$ > /sys/fs/cgroup/cpu/hm-$i/tasks; exec $H worker --listen 127.0.0.1:0 --key-file $D/key --threads 1 --timeout-s 60" > $D/w$i.out 2> $D/w$i.err &
done
sleep 1.5
W1=$(grep -o "127.0.0.1:[0-9]*" $D/w1.out | head -1); W2=$(grep -o "127.0.0.1:[0-9]*" $D/w2.out | head -1)
trap 'for i in 0 1 2; do rmdir /sys/fs/cgroup/cpu/hm-$i 2>/dev/null || true; done' EXIT
( while ! grep -q "MB of weights" $D/w2.err 2>/dev/null; do sleep 0.05; done; echo 10000 > /sys/fs/cgroup/cpu/hm-2/cpu.cfs_quota_us; echo cut >&2 ) &
IDS=$(seq -s, 1 64)
sh -c "echo \$\$ > /sys/fs/cgroup/cpu/hm-0/tasks; exec $H run --model $M --ids $IDS --n-predict ${NP:-48} --ignore-eos --workers $W1,$W2 --key-file $D/key --threads 1 --json --strategy galaxy --timeout-s 60 $EXTRA" > $D/run.json 2> $D/run.err
python3 -c "
import json; j=json.load(open('$D/run.json')); print('decode ms/token', j.get('decode_ms_per_token'), 'prefill', j.get('prefill_ms')); print(json.dumps(j.get('replans'), indent=0)[:600])"
grep -E "position|re-plan|planner" $D/run.err | cut -c1-300 | head
pkill -f "huddle worker --listen 127.0.0.1:0 --key-file $D/key" || true
sleep 0.5; for i in 0 1 2; do rmdir /sys/fs/cgroup/cpu/hm-$i 2>/dev/null || true; done
