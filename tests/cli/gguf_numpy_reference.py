#!/usr/bin/python3
"""Checks `huddle quantize` output byte for byte against an independent numpy implementation.

Written from the specifications, sharing no code with Huddle:
- a GGUF reader following ggml's docs/gguf.md (header, typed metadata, tensor infos, alignment);
- safetensors read with numpy;
- ggml's reference quantisers (quantize_row_q8_0_ref, quantize_row_q4_0_ref in ggml-quants.c):
  Q8_0 d = amax/127, q = roundf(x/d); Q4_0 d = max/-8 (the signed value of largest magnitude),
  q = min(15, (int8)(x/d + 8.5)), element i in the low nibble of byte i, i+16 in the high nibble;
  f16 scales rounded to nearest even;
- llama.cpp's convert_hf_to_gguf.py LlamaModel.permute for llama's q_proj / k_proj;
- llama.cpp's choices: 1-D tensors F32, rows that are not whole blocks of 32 F16.

Usage: gguf_numpy_reference.py HUDDLE_BINARY FIXTURE_MODELS_DIR. Exit 0 when every tensor of every
(model, type) matches, 1 otherwise (naming each mismatch).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0 = 0, 1, 2, 8
TYPE_IDS = {"f32": GGML_F32, "f16": GGML_F16, "q8_0": GGML_Q8_0, "q4_0": GGML_Q4_0}
FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[base + b : base + e], dtype="<f4").reshape(info["shape"])
    return out


def tensor_nbytes(ne, t):
    numel = int(np.prod(ne))
    return {GGML_F32: 4 * numel, GGML_F16: 2 * numel, GGML_Q8_0: numel // 32 * 34,
            GGML_Q4_0: numel // 32 * 18}[t]


def read_gguf(path):
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)[0]
        pos += struct.calcsize("<" + fmt)
        return v

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos : pos + n].decode("utf-8", errors="surrogateescape")
        pos += n
        return s

    scalars = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
               12: "d"}

    def value(t):
        if t in scalars:
            return take(scalars[t])
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        raise ValueError(f"value type {t}")

    assert data[:4] == b"GGUF"
    pos = 4
    version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    assert version == 3, version
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        ne = [take("Q") for _ in range(take("I"))]
        t = take("I")
        infos.append((name, ne, t, take("Q")))
    align = meta.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, t, off in infos:
        assert off % align == 0, name
        tensors[name] = (ne, t, data[start + off : start + off + tensor_nbytes(ne, t)])
    return meta, tensors


def f16_bytes(x):
    return x.astype("<f2").tobytes()


def q8_0_bytes(x):
    b = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (b * inv[:, None]).astype(np.float32)
    q = np.sign(v) * np.floor(np.abs(v.astype(np.float64)) + 0.5)  # roundf: half away from 0
    out = np.zeros(len(b), dtype=[("d", "<f2"), ("q", "i1", 32)])
    out["d"] = d.astype(np.float16)
    out["q"] = q.astype(np.int8)
    return out.tobytes()


def q4_0_bytes(x):
    b = x.reshape(-1, 32).astype(np.float32)
    first_max = np.abs(b).argmax(axis=1)  # ggml keeps the first of equal magnitudes
    mx = b[np.arange(len(b)), first_max]
    d = (mx / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = ((b * inv[:, None]).astype(np.float32) + np.float32(8.5)).astype(np.float32)
    xi = np.minimum(15, np.trunc(v).astype(np.int8)).astype(np.uint8)
    out = np.zeros(len(b), dtype=[("d", "<f2"), ("q", "u1", 16)])
    out["d"] = d.astype(np.float16)
    out["q"] = xi[:, :16] | (xi[:, 16:] << 4)
    return out.tobytes()


def llama_permute(w, n_head):
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(
        w.shape)


LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf):
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
           "output_norm.weight", "lm_head.weight": "output.weight"}
    if hf in top:
        return top[hf]
    parts = hf.split(".", 3)
    assert parts[0] == "model" and parts[1] == "layers", hf
    return f"blk.{parts[2]}.{LAYER_NAMES[parts[3]]}"


def expected_tensors(model_dir, type_name):
    config = json.load(open(os.path.join(model_dir, "config.json")))
    arch = config["model_type"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    out = {}
    for hf, w in read_safetensors(os.path.join(model_dir, "model.safetensors")).items():
        if hf == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue
        if arch == "llama" and ".q_proj." in hf:
            w = llama_permute(w, heads)
        if arch == "llama" and ".k_proj." in hf:
            w = llama_permute(w, kv_heads)
        ne = list(reversed(w.shape))
        t = TYPE_IDS[type_name]
        if w.ndim == 1:
            t = GGML_F32
        elif t in (GGML_Q8_0, GGML_Q4_0) and w.shape[-1] % 32 != 0:
            t = GGML_F16
        data = {GGML_F32: lambda a: a.astype("<f4").tobytes(), GGML_F16: f16_bytes,
                GGML_Q8_0: q8_0_bytes, GGML_Q4_0: q4_0_bytes}[t](np.ascontiguousarray(w))
        out[gguf_name(hf)] = (ne, t, data)
    return config, out


def check(huddle, models_dir, model, type_name, tmp):
    path = os.path.join(tmp, f"{model}.{type_name}.gguf")
    subprocess.run([huddle, "quantize", "--type", type_name, os.path.join(models_dir, model), path],
                   check=True, stdout=subprocess.DEVNULL)
    meta, got = read_gguf(path)
    config, want = expected_tensors(os.path.join(models_dir, model), type_name)
    errors = []
    arch = config["model_type"]
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    for key, value in [("general.architecture", arch), ("general.file_type", FILE_TYPES[type_name]),
                       (f"{arch}.block_count", config["num_hidden_layers"]),
                       (f"{arch}.embedding_length", config["hidden_size"]),
                       (f"{arch}.feed_forward_length", config["intermediate_size"]),
                       (f"{arch}.context_length", config["max_position_embeddings"]),
                       (f"{arch}.attention.head_count", config["num_attention_heads"]),
                       (f"{arch}.attention.head_count_kv", config["num_key_value_heads"]),
                       (f"{arch}.rope.dimension_count", head_dim)]:
        if meta.get(key) != value:
            errors.append(f"metadata {key} = {meta.get(key)!r}, want {value!r}")
    for key, value in [(f"{arch}.rope.freq_base", config["rope_theta"]),
                       (f"{arch}.attention.layer_norm_rms_epsilon", config["rms_norm_eps"])]:
        if meta.get(key) != float(np.float32(value)):
            errors.append(f"metadata {key} = {meta.get(key)!r}, want f32 {value!r}")
    if sorted(got) != sorted(want):
        errors.append(f"tensor names {sorted(got)} != {sorted(want)}")
    for name in sorted(set(got) & set(want)):
        (ne, t, data), (wne, wt, wdata) = got[name], want[name]
        if ne != wne or t != wt:
            errors.append(f"{name}: ne {ne} type {t}, want ne {wne} type {wt}")
        elif data != wdata:
            diff = sum(a != b for a, b in zip(data, wdata))
            errors.append(f"{name}: {diff} of {len(data)} bytes differ")
    return errors


def main():
    huddle, models_dir = sys.argv[1], sys.argv[2]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("llama-tiny", "qwen2-tiny"):
            for type_name in ("f32", "f16", "q8_0", "q4_0"):
                errors = check(huddle, models_dir, model, type_name, tmp)
                status = "ok" if not errors else f"{len(errors)} mismatches"
                print(f"{model} {type_name}: {status}")
                for e in errors:
                    print("  " + e)
                failures += len(errors)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
