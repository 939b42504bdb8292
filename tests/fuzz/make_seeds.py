#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

Seeds are small valid (and a few nearly valid) inputs, so that the fuzzer starts from the
formats' structure instead of discovering it. Plan seeds are plans `huddle plan` wrote for the
gpt2-tiny fixture (see README.md); the others are made here. Re-running rewrites these files;
inputs that once crashed a target are added by hand as crash-<what> and never rewritten.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(header, data=b""):
    text = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    write("safetensors", "empty", safetensors({}))
    write("safetensors", "one_f32", safetensors(
        {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}, bytes(24)))
    write("safetensors", "metadata_and_two", safetensors(
        {"__metadata__": {"format": "pt"},
         "a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]},
         "b": {"dtype": "BF16", "shape": [1, 2], "data_offsets": [8, 12]}}, bytes(12)))
    write("safetensors", "unsupported_i64", safetensors(
        {"position_ids": {"dtype": "I64", "shape": [1, 2], "data_offsets": [0, 16]}}, bytes(16)))
    write("safetensors", "overlap", safetensors(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)))
    write("safetensors", "nested", safetensors({"a": {"dtype": [[["F32"]]]}}))


def cluster_seeds():
    minimal = {
        "devices": [{"name": "L", "gflops": 40.0, "memory_bytes": 2000000000},
                    {"name": "M", "gflops": 20.0, "memory_bytes": 1000000000}],
        "links": [{"from": "L", "to": "M", "bandwidth_bps": 1e8, "latency_s": 0.002}],
        "default_link": {"bandwidth_bps": 1e9, "latency_s": 0.0005}}
    write("cluster", "minimal.json", json.dumps(minimal, indent=1))
    rich = json.loads(json.dumps(minimal))
    rich["devices"][1]["gflops_by_block"] = {"attention": 15.0, "mlp": 25.0}
    rich["links"].append({"from": "M", "to": "L", "bandwidth_bps": 5e7, "latency_s": 0.001})
    write("cluster", "rich.json", json.dumps(rich, indent=1))
    write("cluster", "one_device.json",
          json.dumps({"devices": [{"name": "only", "gflops": 1, "memory_bytes": 1}]}))


MAGIC = 0x4C445548
VERSION = 3
TAG_OPEN = 0xFFFF0001
TAG_JOIN = 0xFFFF0003


def hello(role=1, version=VERSION, flags=0):
    return struct.pack("<IHBB", MAGIC, version, role, flags) + bytes(range(64))


def frame_header(length, kind=1, flags=0, tag=TAG_OPEN):
    return struct.pack("<IHHI", length, kind, flags, tag)


def open_payload(kind=1, rank=0, world=0, reserved=0, session=42):
    return struct.pack("<IIIIQ", kind, rank, world, reserved, session)


def message(tag, payload):
    return struct.pack("<IH", tag, len(payload)) + payload


def wire_seeds():
    # Mode 0: raw bytes from the start.
    write("wire", "m0_hello", b"\x00" + hello())
    write("wire", "m0_hello_auth", b"\x00" + hello() + struct.pack("<IBBBB", MAGIC, 1, 0, 0, 0)
          + bytes(32))
    write("wire", "m0_future_version", b"\x00" + hello(version=7))
    write("wire", "m0_http", b"\x00GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    # Mode 1: after a genuine handshake, raw frames (they fail authentication unless refused
    # earlier by their header).
    write("wire", "m1_open_frame", b"\x01" + frame_header(24) + open_payload() + bytes(16))
    write("wire", "m1_oversized", b"\x01" + frame_header(0xFFFFFFFF))
    write("wire", "m1_close", b"\x01" + frame_header(5, kind=2, tag=0) + b"bye!!" + bytes(16))
    write("wire", "m1_more_empty", b"\x01" + frame_header(0, flags=1))
    # Mode 2: sealed messages.
    write("wire", "m2_session", b"\x02" + message(TAG_OPEN, open_payload())
          + message(7, b"hello"))
    write("wire", "m2_link", b"\x02" + message(TAG_OPEN, open_payload(kind=2, rank=1, world=3)))
    write("wire", "m2_bad_reserved", b"\x02" + message(TAG_OPEN, open_payload(reserved=1)))
    write("wire", "m2_short_open", b"\x02" + message(TAG_OPEN, open_payload()[:10]))
    write("wire", "m2_rank_past_world",
          b"\x02" + message(TAG_OPEN, open_payload(kind=2, rank=5, world=3)))
    # Mode 3: sealed messages to a primary's admission port (OPEN of kind 3, then JOIN).
    join_open = message(TAG_OPEN, open_payload(kind=3, session=0))
    write("wire", "m3_join", b"\x03" + join_open + message(TAG_JOIN, struct.pack("<HHI", 7001, 0, 0)))
    write("wire", "m3_join_host", b"\x03" + join_open
          + message(TAG_JOIN, struct.pack("<HHI", 7001, 8, 0) + b"10.0.0.5"))
    write("wire", "m3_host_too_long", b"\x03" + join_open
          + message(TAG_JOIN, struct.pack("<HHI", 7001, 300, 0) + b"h" * 300))
    write("wire", "m3_session_open", b"\x03" + message(TAG_OPEN, open_payload()))


def palette(channels, values):
    """A palette piece (core/palette.h) of `values` (floats, channels interleaved), as the first
    byte (the channels, as fuzz_palette reads it) and the encoding."""
    tables = [[] for _ in range(channels)]
    indices = bytearray()
    for i, v in enumerate(values):
        t = tables[i % channels]
        bits = struct.pack("<f", v)
        if bits not in t:
            t.append(bits)
        indices.append(t.index(bits))
    body = struct.pack("<IQ", channels, len(values)) + bytes(indices)
    for t in tables:
        body += struct.pack("<H", len(t)) + b"".join(t)
    return bytes([channels - 1]) + body


def palette_seeds():
    pixels = [((i * 37) % 256 / 255.0 - 0.45) / 0.22 for i in range(3 * 64)]
    write("palette", "image_3ch", palette(3, pixels))
    write("palette", "one_channel", palette(1, [0.0, -0.0, 1.0, 0.0, 2.5, 1.0]))
    write("palette", "empty", palette(2, []))
    bad = bytearray(palette(1, [1.0, 2.0]))
    bad[1 + 12] = 9  # the first index, beyond its table of two
    write("palette", "bad_index", bytes(bad))


if __name__ == "__main__":
    safetensors_seeds()
    cluster_seeds()
    wire_seeds()
    palette_seeds()
