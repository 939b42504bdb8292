#!/usr/bin/python3
"""Huddle reads the block types of llama.cpp's K-quant files (Q4_K, Q5_K, Q6_K, and Q5_0, Q5_1 and
Q8_0 where rows are not whole super-blocks) exactly, and llama.cpp reads the same files.

Written from ggml's block layouts (ggml-common.h; docs/gguf.md), sharing no code with Huddle. For
a random Llama with rows of 256 and one with rows of 384, each as Q4_K_M and as Q5_K_M:
1. `huddle synth` makes it (llama-tiny's tokenizer) and `huddle quantize --type f32` writes it
   as an F32 GGUF.
2. numpy rewrites it with the types llama.cpp's Q4_K_M (Q5_K_M) chooses (kquant_type: Q4_K or
   Q5_K, Q6_K for the head and some attention values and down projections; Q5_0, Q5_1 and Q8_0
   where rows are not whole super-blocks), with quantisers of its own (any valid blocks do), and writes
   a second file where those matrices are F32 of numpy's own decoding of the blocks.
3. Huddle keeps every block as it is (core/quant.h, core/kquant.h). With `--weight-dtype f32`
   both files widen to the same F32 weights, so `huddle run` must give the same logits bit for
   bit: any difference is a wrong value.
4. Without it, Huddle's kernels multiply the blocks by activations rounded to int8 blocks of 32;
   against the reference file the logits stay within 3 % of the largest and the first 4 greedy
   ids agree. Two processes (megatron) give the one-process answer within the same bounds.
5. With node-llama-cpp installed (scripts/node-deps), llama.cpp decodes the file too; its ids are
   printed beside Huddle's, and must agree on the first 4 tokens (llama.cpp multiplies k-quant
   blocks by 8-bit activations of 256 elements, Huddle by activations of 32, so late near-ties
   may flip).
6. A Q4_K tensor whose rows are not whole super-blocks of 256 is refused, naming the tensor.

Usage: gguf_kquant_check.py HUDDLE_BINARY FIXTURES_DIR. Exit 0 on success, 1 on a mismatch.
       gguf_kquant_check.py --rewrite F32.gguf OUT.gguf: only write OUT as the Q4_K_M copy of an
       F32 GGUF (bench/llamacpp/decode_bench.py --types q4_k_m uses it).
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_numpy_reference as ref  # noqa: E402  (its Q8_0 reference quantiser)

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "..", "..", "bench", "llamacpp")
GGML_F32, GGML_Q5_0, GGML_Q5_1, GGML_Q8_0, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K = 0, 6, 7, 8, 12, 13, 14
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 512,
    "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "bos_token_id": 509, "eos_token_id": 510, "torch_dtype": "float32",
}
# Rows of 384 (as Qwen2-0.5B's 896): not whole super-blocks, so llama.cpp's Q4_K_M writes those
# matrices as Q5_0 (for Q4_K) and Q8_0 (for Q6_K); the down projections (rows of 768) stay k-quants.
CONFIG_384 = dict(CONFIG, hidden_size=384, intermediate_size=768, num_attention_heads=6)


# --- GGUF, raw -----------------------------------------------------------------------------------

def split_gguf(data):
    """(kv section bytes, kv count, [(name, ne, type, offset)], data start, alignment)."""
    pos = 4 + 4
    n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    kv_start = pos
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_string(p):
        return p + 8 + struct.unpack_from("<Q", data, p)[0]

    def skip_value(t, p):
        if t in sizes:
            return p + sizes[t]
        if t == 8:
            return skip_string(p)
        assert t == 9, t
        et, n = struct.unpack_from("<IQ", data, p)
        p += 12
        for _ in range(n):
            p = skip_value(et, p)
        return p

    for _ in range(n_kv):
        pos = skip_string(pos)
        t = struct.unpack_from("<I", data, pos)[0]
        pos = skip_value(t, pos + 4)
    kv = data[kv_start:pos]
    infos = []
    for _ in range(n_tensors):
        n = struct.unpack_from("<Q", data, pos)[0]
        name = data[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        dims = struct.unpack_from("<I", data, pos)[0]
        ne = list(struct.unpack_from(f"<{dims}Q", data, pos + 4))
        pos += 4 + 8 * dims
        t, off = struct.unpack_from("<IQ", data, pos)
        pos += 12
        infos.append((name, ne, t, off))
    align = 32  # huddle quantize writes no general.alignment
    return kv, n_kv, infos, (pos + align - 1) // align * align, align


def write_gguf(path, kv, n_kv, tensors, align=32):
    """tensors: [(name, ne, ggml type, bytes)] in order."""
    head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), n_kv) + kv)
    offset = 0
    for name, ne, t, blob in tensors:
        raw = name.encode()
        head += struct.pack("<Q", len(raw)) + raw + struct.pack(f"<I{len(ne)}Q", len(ne), *ne)
        head += struct.pack("<IQ", t, offset)
        offset += (len(blob) + align - 1) // align * align
    head += b"\0" * (-len(head) % align)
    with open(path, "wb") as f:
        f.write(head)
        for _, _, _, blob in tensors:
            f.write(blob + b"\0" * (-len(blob) % align))


# --- k-quants (ggml-common.h layouts) -------------------------------------------------------------

def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def kquant_scales(sc, mn):
    """Q4_K's and Q5_K's 12 bytes of 6-bit scales and mins [blocks, 8] each."""
    scales = np.zeros((len(sc), 12), np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    return scales


def kquant_unscales(s):
    s = s.astype(np.int64)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc, mn


def kquant_sub_blocks(x, levels):
    """[n] f32 (n % 256 == 0) -> Q4_K's / Q5_K's d, dmin [blocks], 6-bit scales and mins
    [blocks, 8] and quants [blocks, 8, 32] in 0..levels: sub-block min/max on `levels` steps."""
    sub = x.reshape(-1, 8, 32).astype(np.float32)
    lo = np.minimum(sub.min(-1), 0)
    scale = (sub.max(-1) - lo) / levels
    offset = -lo
    d = f16(scale.max(-1) / 63).astype(np.float32)
    dmin = f16(offset.max(-1) / 63).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(scale / d[:, None]), 0).clip(0, 63).astype(np.uint8)
        mn = np.where(dmin[:, None] > 0, np.rint(offset / dmin[:, None]), 0).clip(0, 63)
        mn = mn.astype(np.uint8)
        step = d[:, None] * sc
        q = np.where(step[..., None] > 0,
                     np.rint((sub + (dmin[:, None] * mn)[..., None]) / step[..., None]), 0)
    return d, dmin, sc, mn, q.clip(0, levels).astype(np.uint8)


def kquant_values(b, q, n):
    """The [n] f32 values of Q4_K / Q5_K blocks `b` with quants q [blocks, 8, 32]: every product
    is exact in f32, so float64 then one rounding is ggml's f32 arithmetic."""
    sc, mn = kquant_unscales(b["s"])
    d = b["d"].astype(np.float64)[:, None, None]
    dmin = b["dmin"].astype(np.float64)[:, None, None]
    return (d * sc[..., None] * q - dmin * mn[..., None]).astype(np.float32).reshape(n)


def quantize_q5_k(x):
    """[n] f32 -> Q5_K bytes: as quantize_q4_k on 31 steps; the high bit of element l of
    sub-block j at bit j of qh[l]."""
    d, dmin, sc, mn, q = kquant_sub_blocks(x, 31)
    low = q & 15
    qs = (low[:, 0::2, :] | (low[:, 1::2, :] << 4)).reshape(len(q), 128)
    qh = ((q >> 4).astype(np.uint16) << np.arange(8, dtype=np.uint16)[None, :, None]).sum(1)
    out = np.zeros(len(q), dtype=[("d", "<f2"), ("dmin", "<f2"), ("s", "u1", 12),
                                  ("qh", "u1", 32), ("qs", "u1", 128)])
    out["d"], out["dmin"], out["s"] = f16(d), f16(dmin), kquant_scales(sc, mn)
    out["qh"], out["qs"] = qh.astype(np.uint8), qs
    return out.tobytes()


def dequantize_q5_k(blob, n):
    b = np.frombuffer(blob, dtype=[("d", "<f2"), ("dmin", "<f2"), ("s", "u1", 12),
                                   ("qh", "u1", 32), ("qs", "u1", 128)])
    assert len(b) * 256 == n
    qs = b["qs"].reshape(-1, 4, 32).astype(np.int64)
    low = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32)
    high = (b["qh"].astype(np.int64)[:, None, :] >> np.arange(8)[None, :, None]) & 1
    return kquant_values(b, low | (high << 4), n)


def quantize_q4_k(x):
    """[n] f32 (n % 256 == 0) -> Q4_K bytes: sub-block min/max on 15 steps, 6-bit scales."""
    d, dmin, sc, mn, q = kquant_sub_blocks(x, 15)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(len(q), 128)
    out = np.zeros(len(q), dtype=[("d", "<f2"), ("dmin", "<f2"), ("s", "u1", 12),
                                  ("qs", "u1", 128)])
    out["d"], out["dmin"], out["s"], out["qs"] = f16(d), f16(dmin), kquant_scales(sc, mn), qs
    return out.tobytes()


def dequantize_q4_k(blob, n):
    b = np.frombuffer(blob, dtype=[("d", "<f2"), ("dmin", "<f2"), ("s", "u1", 12),
                                   ("qs", "u1", 128)])
    assert len(b) * 256 == n
    qs = b["qs"].reshape(-1, 4, 32).astype(np.int64)
    q = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32)  # sub-block 2i low, 2i+1 high
    return kquant_values(b, q, n)


def quantize_q6_k(x):
    """[n] f32 -> Q6_K bytes: 16 sub-blocks of 16, signed 8-bit scales, q in -32..31."""
    sub = x.reshape(-1, 16, 16).astype(np.float32)
    scale = np.abs(sub).max(-1) / 31
    d = f16(scale.max(-1) / 127).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d[:, None] > 0, np.rint(scale / d[:, None]), 0).clip(-128, 127)
        sc = sc.astype(np.int8)
        step = d[:, None] * sc
        q = np.where(step[..., None] != 0, np.rint(sub / step[..., None]), 0)
    L = (q.clip(-32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)  # [block, half, k, l]
    ql = np.concatenate([(L[:, :, 0] & 15) | ((L[:, :, 2] & 15) << 4),
                         (L[:, :, 1] & 15) | ((L[:, :, 3] & 15) << 4)], axis=2)
    qh = (L[:, :, 0] >> 4) | ((L[:, :, 1] >> 4) << 2) | ((L[:, :, 2] >> 4) << 4) | (
        (L[:, :, 3] >> 4) << 6)
    out = np.zeros(len(sub), dtype=[("ql", "u1", 128), ("qh", "u1", 64), ("s", "i1", 16),
                                    ("d", "<f2")])
    out["ql"], out["qh"], out["s"], out["d"] = ql.reshape(-1, 128), qh.reshape(-1, 64), sc, f16(d)
    return out.tobytes()


def dequantize_q6_k(blob, n):
    b = np.frombuffer(blob, dtype=[("ql", "u1", 128), ("qh", "u1", 64), ("s", "i1", 16),
                                   ("d", "<f2")])
    assert len(b) * 256 == n
    ql = b["ql"].reshape(-1, 2, 2, 32).astype(np.int64)  # [block, half, ql[0:32] | ql[32:64], l]
    qh = b["qh"].reshape(-1, 2, 32).astype(np.int64)
    low = np.stack([ql[:, :, 0] & 15, ql[:, :, 1] & 15, ql[:, :, 0] >> 4, ql[:, :, 1] >> 4], 2)
    high = np.stack([(qh >> (2 * k)) & 3 for k in range(4)], axis=2)
    q = ((low | (high << 4)) - 32).reshape(-1, 256)
    scale = np.repeat(b["s"].astype(np.float64), 16, axis=1)
    return (b["d"].astype(np.float64)[:, None] * scale * q).astype(np.float32).reshape(n)


def quantize_q5_0(x):
    """[n] f32 -> Q5_0 bytes: ggml's reference rounding (quantize_row_q5_0_ref)."""
    blk = x.reshape(-1, 32).astype(np.float32)
    idx = np.abs(blk).argmax(-1)
    vmax = blk[np.arange(len(blk)), idx]
    d = (vmax / np.float32(-16)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.minimum(31, np.trunc(blk * inv[:, None] + np.float32(16.5))).astype(np.uint8)
    qs = (q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)
    qh = ((q >> 4).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(-1).astype("<u4")
    out = np.zeros(len(blk), dtype=[("d", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])
    out["d"], out["qh"], out["qs"] = f16(d), qh, qs
    return out.tobytes()


def dequantize_q5_0(blob, n):
    b = np.frombuffer(blob, dtype=[("d", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])
    assert len(b) * 32 == n
    qs = b["qs"].astype(np.int64)
    high = (b["qh"].astype(np.int64)[:, None] >> np.arange(32)) & 1
    q = np.concatenate([qs & 15, qs >> 4], axis=1) | (high << 4)
    return (b["d"].astype(np.float64)[:, None] * (q - 16)).astype(np.float32).reshape(n)


def quantize_q5_1(x):
    """[n] f32 -> Q5_1 bytes: ggml's reference rounding (quantize_row_q5_1_ref)."""
    blk = x.reshape(-1, 32).astype(np.float32)
    lo, hi = blk.min(-1), blk.max(-1)
    d = ((hi - lo) / np.float32(31)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.minimum(31, np.trunc((blk - lo[:, None]) * inv[:, None] + np.float32(0.5)))
    q = q.astype(np.uint8)
    qs = (q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)
    qh = ((q >> 4).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(-1).astype("<u4")
    out = np.zeros(len(blk), dtype=[("d", "<f2"), ("m", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])
    out["d"], out["m"], out["qh"], out["qs"] = f16(d), f16(lo), qh, qs
    return out.tobytes()


def dequantize_q5_1(blob, n):
    b = np.frombuffer(blob, dtype=[("d", "<f2"), ("m", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)])
    assert len(b) * 32 == n
    qs = b["qs"].astype(np.int64)
    high = (b["qh"].astype(np.int64)[:, None] >> np.arange(32)) & 1
    q = np.concatenate([qs & 15, qs >> 4], axis=1) | (high << 4)
    # d · q is exact in f32 (an f16 times 5 bits), so one rounding of the sum is ggml's.
    return (b["d"].astype(np.float64)[:, None] * q + b["m"].astype(np.float64)[:, None]).astype(
        np.float32).reshape(n)


def dequantize_q8_0(blob, n):
    b = np.frombuffer(blob, dtype=[("d", "<f2"), ("q", "i1", 32)])
    return (b["d"].astype(np.float64)[:, None] * b["q"]).astype(np.float32).reshape(n)


KQUANT = {GGML_Q4_K: (quantize_q4_k, dequantize_q4_k),
          GGML_Q5_K: (quantize_q5_k, dequantize_q5_k),
          GGML_Q6_K: (quantize_q6_k, dequantize_q6_k),
          GGML_Q5_0: (quantize_q5_0, dequantize_q5_0),
          GGML_Q5_1: (quantize_q5_1, dequantize_q5_1),
          GGML_Q8_0: (ref.q8_0_bytes, dequantize_q8_0)}
# llama.cpp's fallback for rows that are not whole super-blocks (llama-quant.cpp).
FALLBACK = {GGML_Q4_K: GGML_Q5_0, GGML_Q5_K: GGML_Q5_1, GGML_Q6_K: GGML_Q8_0}


def kquant_type(name, n_layers, base=GGML_Q4_K):
    """llama.cpp's Q4_K_M choice (llama-quant.cpp): the head Q6_K; the attention values and the
    MLP down projections Q6_K in the layers that get more bits (the first and last eighth, and
    every third between), Q4_K elsewhere; everything else Q4_K."""
    if name == "output.weight":
        return GGML_Q6_K
    if name.endswith("attn_v.weight") or name.endswith("ffn_down.weight"):
        i = int(name.split(".")[1])
        more = i < n_layers // 8 or i >= 7 * n_layers // 8 or (i - n_layers // 8) % 3 == 2
        return GGML_Q6_K if more else base
    return base


def rewrite(f32_path, kquant_path, reference_path=None, base=GGML_Q4_K):
    """Writes the F32 GGUF's matrices as llama.cpp's Q4_K_M would (kquant_type; rows that are not
    whole super-blocks as Q5_0 or Q8_0) to kquant_path,
    and, given reference_path, the same file with those matrices as F32 of numpy's decoding of
    the k-quant blocks. Returns (kv bytes, kv count, the k-quant file's tensors, counts by
    type)."""
    data = open(f32_path, "rb").read()
    kv, n_kv, infos, start, _ = split_gguf(data)
    n_layers = 1 + max(int(name.split(".")[1]) for name, _, _, _ in infos
                       if name.startswith("blk."))
    kquant, reference, counts = [], [], {}
    for name, ne, t, off in infos:
        assert t == GGML_F32, (name, t)
        n = int(np.prod(ne))
        blob = data[start + off:start + off + 4 * n]
        if len(ne) == 2 and ne[0] % 32 == 0:
            k = kquant_type(name, n_layers, base)
            if ne[0] % 256 != 0:
                k = FALLBACK[k]
            quantize, dequantize = KQUANT[k]
            kblob = quantize(np.frombuffer(blob, "<f4"))
            kquant.append((name, ne, k, kblob))
            if reference_path:
                reference.append((name, ne, GGML_F32, dequantize(kblob, n).astype("<f4").tobytes()))
            counts[k] = counts.get(k, 0) + 1
        else:
            kquant.append((name, ne, t, blob))
            reference.append((name, ne, t, blob))
    write_gguf(kquant_path, kv, n_kv, kquant)
    if reference_path:
        write_gguf(reference_path, kv, n_kv, reference)
    return kv, n_kv, kquant, counts


# --- the check ------------------------------------------------------------------------------------

def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def huddle_run(huddle, gguf, ids, out_npy, *extra):
    r = run([huddle, "run", "--model", gguf, "--ids", ids, "--n-predict", "8", "--ignore-eos",
             "--threads", "1", "--dump-logits", out_npy, "--json", *extra])
    if r.returncode != 0:
        raise SystemExit(f"huddle run {gguf} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.splitlines()[0])["generated"]


def check_model(huddle, fixtures, tmp, config, tag, base=GGML_Q4_K):
    """Steps 1-5 of the docstring on a model of `config`; returns (failures, kv, kv count, the
    k-quant file's tensors)."""
    failures = 0
    model = os.path.join(tmp, f"model-{tag}")
    os.makedirs(model)
    with open(os.path.join(tmp, f"config-{tag}.json"), "w") as f:
        json.dump(config, f)
    subprocess.run([huddle, "synth", "--arch", "llama", "--config",
                    os.path.join(tmp, f"config-{tag}.json"), "-o", model, "--seed", "7"],
                   check=True, capture_output=True)
    tiny = os.path.join(fixtures, "models", "llama-tiny")
    for name in os.listdir(tiny):
        if name.startswith("tokenizer") or name == "special_tokens_map.json":
            shutil.copy(os.path.join(tiny, name), model)
    f32 = os.path.join(tmp, f"f32-{tag}.gguf")
    subprocess.run([huddle, "quantize", "--type", "f32", model, f32], check=True,
                   capture_output=True)

    kfile = os.path.join(tmp, f"q4_k_m-{tag}.gguf")
    rfile = os.path.join(tmp, f"reference-{tag}.gguf")
    kv, n_kv, kquant, counts = rewrite(f32, kfile, rfile, base)
    names = {GGML_Q4_K: "Q4_K", GGML_Q5_K: "Q5_K", GGML_Q6_K: "Q6_K", GGML_Q5_0: "Q5_0",
             GGML_Q5_1: "Q5_1", GGML_Q8_0: "Q8_0"}
    print(f"[{tag}] file: " +
          ", ".join(f"{counts[t]} {names[t]}" for t in sorted(counts)) + " matrices; the rest F32")
    assert counts.get(base) and counts.get(GGML_Q6_K)

    prompt = json.load(open(os.path.join(fixtures, "references",
                                         "llama-tiny.generate.json")))["prompt"]
    ids = ",".join(map(str, prompt))
    out = lambda name: os.path.join(tmp, f"{name}-{tag}.npy")  # noqa: E731
    wide = ("--weight-dtype", "f32")
    huddle_run(huddle, kfile, ids, out("k32"), *wide)
    huddle_run(huddle, rfile, ids, out("r32"), *wide)
    a, b = np.load(out("k32")), np.load(out("r32"))
    same = a.shape == b.shape and np.array_equal(a, b)
    print(f"[{tag}] Huddle on the file vs on numpy's values, both widened to F32: logits "
          f"{'identical' if same else 'DIFFER'} {a.shape}")
    failures += 0 if same else 1

    ours = huddle_run(huddle, kfile, ids, out("k"))
    expected = huddle_run(huddle, rfile, ids, out("r"))
    a, b = np.load(out("k")), np.load(out("r"))
    err = float(np.abs(a - b).max() / np.abs(b).max())
    print(f"[{tag}] Huddle's kernels vs F32 of the same values: logits error {err:.2e} of the "
          f"largest, greedy ids {ours} vs {expected}")
    failures += 0 if err <= 0.03 and ours[:4] == expected[:4] else 1

    # Two processes (megatron): the blocks travel to the worker as they are, and an attention
    # output projection cut by heads inside a super-block as Q8_0.
    split = huddle_run(huddle, kfile, ids, out("m"), "--local-devices", "2", "--strategy",
                       "megatron")
    c = np.load(out("m"))
    err = float(np.abs(c - a).max() / np.abs(a).max())
    print(f"[{tag}] two processes (megatron) vs one: logits error {err:.2e} of the largest, "
          f"greedy ids {split} vs {ours}")
    failures += 0 if err <= 0.03 and split[:4] == ours[:4] else 1

    if shutil.which("node") and os.path.isdir(os.path.join(PEER, "node_modules",
                                                            "node-llama-cpp")):
        peer = run(["node", os.path.join(PEER, "greedy.mjs"), "--model", kfile, "--ids", ids,
                    "-n", "8", "--threads", "1"], cwd=PEER)
        if peer.returncode != 0:
            print(f"[{tag}] llama.cpp failed on the file:\n{peer.stderr[-3000:]}")
            failures += 1
        else:
            theirs = json.loads(peer.stdout.strip().splitlines()[-1])["generated"]
            agree = sum(x == y for x, y in zip(ours, theirs))
            print(f"[{tag}] llama.cpp on the file: {theirs} ({agree}/8 equal to Huddle's)")
            failures += 0 if ours[:4] == theirs[:4] else 1
    else:
        print("llama.cpp: node-llama-cpp not installed (scripts/node-deps); not compared")
    return failures, kv, n_kv, kquant


def main():
    if sys.argv[1] == "--rewrite":
        rewrite(sys.argv[2], sys.argv[3])
        return 0
    huddle, fixtures = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        failures, kv, n_kv, kquant = check_model(huddle, fixtures, tmp, CONFIG, "rows256")
        failures += check_model(huddle, fixtures, tmp, CONFIG_384, "rows384")[0]
        # Q5_K_M: Q5_K where Q4_K_M has Q4_K (and Q5_1 where rows are not whole super-blocks).
        failures += check_model(huddle, fixtures, tmp, CONFIG, "q5_k_m", GGML_Q5_K)[0]
        failures += check_model(huddle, fixtures, tmp, CONFIG_384, "q5_k_m-rows384", GGML_Q5_K)[0]

        # A Q4_K tensor whose rows are not whole super-blocks: refused by name.
        bad = [(n, ([128, ne[1] * 2] if n == "blk.0.attn_q.weight" else ne), t, blob)
               for n, ne, t, blob in kquant]
        bfile = os.path.join(tmp, "bad.gguf")
        write_gguf(bfile, kv, n_kv, bad)
        r = run([huddle, "run", "--model", bfile, "--ids", "1", "--n-predict", "1"])
        named = "blk.0.attn_q.weight" in r.stderr and "Q4_K with rows of 128" in r.stderr
        print(f"rows of 128 as Q4_K: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        failures += 0 if r.returncode == 1 and named else 1
    print("ok" if failures == 0 else f"{failures} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
