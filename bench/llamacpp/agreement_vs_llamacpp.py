#!/usr/bin/python3
"""Top-1 agreement of quantised weights with F32, Huddle's and llama.cpp's, on the same GGUF files.

The issue's bar for Q8_0 is 99 % top-1 agreement with F32 over 512 positions. This measures what
llama.cpp (node-llama-cpp 3.21.1, bench/llamacpp/prompt_logits.mjs) reaches on the same weights,
so Huddle's figure can be read against the format's own. The model is the trained fixture
(tests/fixtures/models/llama-trained, a byte-level Llama) and its 512 held-out bytes:

1. `huddle quantize --type T` writes it as GGUF for T in f32 and --types;
2. a copy of each file gets a byte vocabulary in its metadata (tokenizer.ggml.model "llama",
   256 byte tokens "<0x00>".."<0xFF>"), which llama.cpp needs to build a context; the weights
   are the same bytes;
3. Huddle runs each file (`huddle run --dump-logits`), llama.cpp each copy, one prefill of the
   512 ids each; each engine's quantised argmax is compared with the same engine's F32 argmax.

A benchmark, not a test (it needs the npm peer). Usage:
  agreement_vs_llamacpp.py --huddle build/huddle [--types q8_0,q4_0] [--threads 1]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "models", "llama-trained")
IDS = os.path.join(ROOT, "tests", "fixtures", "references", "llama-trained.512.ids.json")

GGUF_UINT32, GGUF_INT32, GGUF_FLOAT32, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 8, 9
TOKEN_TYPE_BYTE = 6


def gguf_string(s):
    raw = s.encode()
    return struct.pack("<Q", len(raw)) + raw


def byte_vocab_kv():
    """The metadata entries of a 256-token byte vocabulary, and their count."""
    tokens = [f"<0x{b:02X}>" for b in range(256)]
    kv = gguf_string("tokenizer.ggml.model") + struct.pack("<I", GGUF_STRING) + gguf_string("llama")
    kv += gguf_string("tokenizer.ggml.tokens") + struct.pack("<IIQ", GGUF_ARRAY, GGUF_STRING, 256)
    kv += b"".join(gguf_string(t) for t in tokens)
    kv += gguf_string("tokenizer.ggml.scores") + struct.pack("<IIQ", GGUF_ARRAY, GGUF_FLOAT32, 256)
    kv += struct.pack("<256f", *([0.0] * 256))
    kv += gguf_string("tokenizer.ggml.token_type") + struct.pack("<IIQ", GGUF_ARRAY, GGUF_INT32, 256)
    kv += struct.pack("<256i", *([TOKEN_TYPE_BYTE] * 256))
    return kv, 4


def with_byte_vocab(src, dst):
    """Copies GGUF file src to dst with the byte vocabulary added to its metadata. The tensor data
    keeps its offsets relative to the data section, which is re-aligned after the longer header."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "cli"))
    from gguf_kquant_check import split_gguf, write_gguf  # the tests' GGUF reader and writer
    data = open(src, "rb").read()
    kv, n_kv, infos, start, align = split_gguf(data)
    # huddle quantize marks a directory without tokenizer.json as tokenizer.ggml.model "none".
    none = gguf_string("tokenizer.ggml.model") + struct.pack("<I", GGUF_STRING) + gguf_string("none")
    if kv.count(none) != 1:
        sys.exit(f"{src}: expected one tokenizer.ggml.model 'none' entry")
    kv, n_kv = kv.replace(none, b""), n_kv - 1
    extra, n_extra = byte_vocab_kv()
    sizes = {0: 4, 1: 2, 8: 34 / 32, 2: 18 / 32}  # bytes per element: F32, F16, Q8_0, Q4_0
    tensors = []
    for name, ne, t, off in infos:
        n = int(np.prod(ne))
        tensors.append((name, ne, t, data[start + off:start + off + int(n * sizes[t])]))
    write_gguf(dst, kv + extra, n_kv + n_extra, tensors, align)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--huddle", required=True)
    p.add_argument("--types", default="q8_0,q4_0")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    ids = json.load(open(IDS))
    ids_arg = ",".join(map(str, ids))
    argmax = {"huddle": {}, "llama.cpp": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for t in ["f32"] + a.types.split(","):
            plain = os.path.join(tmp, f"{t}.gguf")
            vocab = os.path.join(tmp, f"{t}.vocab.gguf")
            subprocess.run([a.huddle, "quantize", "--type", t, FIXTURE, plain], check=True,
                           capture_output=True)
            with_byte_vocab(plain, vocab)
            out = os.path.join(tmp, f"{t}.npy")
            subprocess.run([a.huddle, "run", "--model", plain, "--ids", ids_arg, "--n-predict", "1",
                            "--threads", str(a.threads), "--dump-logits", out], check=True,
                           capture_output=True)
            argmax["huddle"][t] = np.load(out).argmax(-1)
            r = subprocess.run(["node", os.path.join(HERE, "prompt_logits.mjs"), "--model", vocab,
                                "--ids", ids_arg, "--threads", str(a.threads)],
                               capture_output=True, text=True, cwd=HERE)
            if r.returncode != 0:
                sys.exit(f"llama.cpp on {vocab} failed:\n{r.stderr[-2000:]}")
            argmax["llama.cpp"][t] = np.array(json.loads(r.stdout.strip().splitlines()[-1])["argmax"])
    n = len(ids)
    print(f"trained fixture, {n} held-out positions, one prefill per file")
    print("| weights | Huddle: top-1 agreement with its F32 | llama.cpp: with its F32 |\n|---|---|---|")
    for t in a.types.split(","):
        cells = []
        for engine in ("huddle", "llama.cpp"):
            same = int((argmax[engine][t] == argmax[engine]["f32"]).sum())
            cells.append(f"{100 * same / n:.1f} % ({same} of {n})")
        print(f"| {t} | {cells[0]} | {cells[1]} |")
    for t in ["f32"] + a.types.split(","):
        same = int((argmax["huddle"][t] == argmax["llama.cpp"][t]).sum())
        print(f"{t} argmax, Huddle against llama.cpp: {same} of {n} equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
