#!/usr/bin/python3
"""What Q8_0 and Q4_0 weights cost in accuracy: mean KL divergence from the F32 model's next-token
distribution, top-1 agreement, and perplexity, over a fixed text (this repository's README,
tokenized by the model's tokenizer), one prefill each.

Runs `huddle run --model DIR --prompt-file TEXT --n-predict 1 --weight-dtype D --dump-logits`
for D in f32 and each of --types; every dtype multiplies the same weights (quantised at load).
On a random-weight model (`huddle synth`) perplexity itself means little; its ratio to F32's and
the KL do. A benchmark, not a test.

Usage: quant_quality.py --huddle build/huddle --model /tmp/huddle-llamacpp/llama-1b
       [--types q8_0,q4_0] [--tokens 512] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def log_softmax(z):
    z = z.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--huddle", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--types", default="q8_0,q4_0")
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    a = p.parse_args()
    with open(os.path.join(HERE, "..", "..", "README.md"), encoding="utf-8") as f:
        text = f.read()
    ids = json.loads(subprocess.run([a.huddle, "tokenize", "--model", a.model, "--text", text,
                                     "--json"], check=True, capture_output=True,
                                    text=True).stdout)[:a.tokens]
    if len(ids) < a.tokens:
        sys.exit(f"the text has only {len(ids)} tokens")
    ids_arg = ",".join(map(str, ids))
    logp = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in ["f32"] + a.types.split(","):
            out = os.path.join(tmp, f"{dtype}.npy")
            subprocess.run([a.huddle, "run", "--model", a.model, "--ids", ids_arg, "--n-predict",
                            "1", "--weight-dtype", dtype, "--threads", str(a.threads),
                            "--dump-logits", out], check=True, capture_output=True)
            logp[dtype] = log_softmax(np.load(out))
    nxt = np.array(ids[1:])
    rows = np.arange(len(nxt))

    def ppl(lp):
        return float(np.exp(-lp[rows, nxt].mean()))

    ref = logp["f32"]
    print(f"model {a.model}, {len(ids)} tokens of README.md, one prefill per dtype")
    print("| weights | mean KL(F32 ‖ q) nats | top-1 agreement | perplexity (F32: "
          f"{ppl(ref):.2f}) |\n|---|---|---|---|")
    for dtype in a.types.split(","):
        lq = logp[dtype]
        kl = float((np.exp(ref) * (ref - lq)).sum(axis=-1).mean())
        agree = float((ref.argmax(-1) == lq.argmax(-1)).mean())
        print(f"| {dtype} | {kl:.5f} | {100 * agree:.1f} % | {ppl(lq):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
