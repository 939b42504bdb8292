#!/usr/bin/python3
"""llama.cpp loads `huddle quantize` output and decodes what Huddle decodes.

For llama-tiny (byte-level BPE tokenizer in the file) at f32, f16, q8_0 and q4_0: `huddle quantize`, then 16 greedy tokens from the fixture's prompt with
`huddle run --model X.gguf` and with llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU binary,
bench/llamacpp/greedy.mjs) on the same file. The ids must be equal at f32, f16 and q8_0. At q4_0
llama.cpp multiplies Q4_0 weights by Q8_0-quantised activations while Huddle widens the weights
to f32, so a near-tie may flip late in the sequence: q4_0 must agree on the first 8 tokens and is
reported in full. qwen2-tiny is left out: it has no tokenizer, and node-llama-cpp 3.21.1 tokenizes
while loading, which aborts on a vocabulary of type "none" (GGML_ASSERT "Tokenizer not
initialized" in llama-vocab.cpp); llama.cpp itself loads such files.

Usage: peer_check.py HUDDLE_BINARY FIXTURES_DIR. Exit 77 (skipped) when node or the npm install
(`scripts/node-deps`) is missing, 1 on a mismatch.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    huddle, fixtures = sys.argv[1], sys.argv[2]
    if shutil.which("node") is None:
        print("SKIP: node is not installed (llama.cpp runs through node-llama-cpp)")
        return 77
    if not os.path.isdir(os.path.join(HERE, "node_modules", "node-llama-cpp")):
        print(f"SKIP: node-llama-cpp is not installed; run scripts/node-deps")
        return 77
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("llama-tiny",):
            prompt = json.load(open(os.path.join(fixtures, "references", model + ".generate.json")))[
                "prompt"]
            ids = ",".join(map(str, prompt))
            for type_name in ("f32", "f16", "q8_0", "q4_0"):
                gguf = os.path.join(tmp, f"{model}.{type_name}.gguf")
                subprocess.run([huddle, "quantize", "--type", type_name,
                                os.path.join(fixtures, "models", model), gguf],
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                ours = json.loads(subprocess.run(
                    [huddle, "run", "--model", gguf, "--ids", ids, "--n-predict", "16",
                     "--ignore-eos", "--threads", "1", "--json"],
                    check=True, capture_output=True, text=True).stdout.splitlines()[0])["generated"]
                peer = subprocess.run(["node", os.path.join(HERE, "greedy.mjs"), "--model", gguf,
                                       "--ids", ids, "-n", "16", "--threads", "1"],
                                      capture_output=True, text=True, cwd=HERE)
                if peer.returncode != 0:
                    print(f"{model} {type_name}: llama.cpp failed to run it:\n{peer.stderr[-3000:]}")
                    failures += 1
                    continue
                theirs = json.loads(peer.stdout.strip().splitlines()[-1])["generated"]
                need = 8 if type_name == "q4_0" else 16
                ok = ours[:need] == theirs[:need]
                same = sum(a == b for a, b in zip(ours, theirs))
                print(f"{model} {type_name}: {'ok' if ok else 'MISMATCH'} ({same}/16 equal)\n"
                      f"  huddle    {ours}\n  llama.cpp {theirs}")
                failures += 0 if ok else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
