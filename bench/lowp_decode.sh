#!/usr/bin/env bash
# Decode tokens/s of huddle with weights kept as F32, F16, Q8_0 and Q4_0 (docs/weights.md), on a
# synthetic ~1.1B Llama, and of llama.cpp on the same weights when GGUF files are given.
#
#   bench/lowp_decode.sh [MODEL_DIR] [THREADS]
#     MODEL_DIR  a model directory (default: /tmp/llama-1b, made by `huddle synth` if absent)
#     THREADS    compute threads (default: all cores)
#   LLAMA_BENCH=/path/to/llama-bench GGUF_DIR=dir-with-<dtype>.gguf  also runs llama.cpp's
#     llama-bench -p 0 -n 64 on each GGUF file (made by `huddle quantize`, issue 15's GGUF part).
#
# Prints one line per dtype: load ms, prefill ms of 16 tokens, decode ms/token and tokens/s
# (median of --repeat 3 runs as huddle reports the last), and the weight bytes kept.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-/tmp/llama-1b}
THREADS=${2:-$(nproc)}
HUDDLE=${HUDDLE:-build/huddle}
if [ ! -d "$MODEL" ]; then
  "$HUDDLE" synth --arch llama --preset llama-1b -o "$MODEL"
fi
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) threads=$THREADS load=$(cut -d' ' -f1-2 /proc/loadavg)"
for dtype in f32 f16 q8_0 q4_0; do
  "$HUDDLE" run --model "$MODEL" --ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 --n-predict 32 \
    --ignore-eos --threads "$THREADS" --weight-dtype "$dtype" --json |
    /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
d = j["decode_ms_per_token"]
print(f"huddle {sys.argv[1]:5s} load {j[\"load_ms\"]:8.0f} ms  prefill {j[\"prefill_ms\"]:8.1f} ms  "
      f"decode {d:7.2f} ms/token  {1000.0 / d:6.2f} tokens/s  weights {j[\"weight_bytes\"] / 1e9:.2f} GB")
' "$dtype"
done
if [ -n "${LLAMA_BENCH:-}" ] && [ -n "${GGUF_DIR:-}" ]; then
  for f in "$GGUF_DIR"/*.gguf; do
    "$LLAMA_BENCH" -m "$f" -p 0 -n 64 -t "$THREADS"
  done
fi
