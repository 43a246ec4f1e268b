#!/usr/bin/env python3
"""Writes the GGUF fuzzer's seed corpus (tests/fuzz/corpus/), byte by byte, independently of our
writer: small valid files that reach every branch of the reader. Run from the repository root:
    python3 tests/fuzz/make_corpus.py
(tests/data/gguf/llama-written.gguf, written by llama.cpp, is copied in as another seed.)"""
import os
import shutil
import struct

out = "tests/fuzz/corpus"
os.makedirs(out, exist_ok=True)


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def kv(key, type_id, payload):
    return s(key) + struct.pack("<I", type_id) + payload


def arr(elem, items_payload, count):
    return struct.pack("<IQ", elem, count) + items_payload


def tensor(name, dims, type_id, offset):
    return s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", type_id, offset)


def gguf(kvs, tensors, data, version=3, alignment=32):
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(tensors)
    head += b"\0" * ((-len(head)) % alignment)
    return head + data


every_type = [
    kv("general.architecture", 8, s("llama")),
    kv("t.u8", 0, struct.pack("<B", 200)), kv("t.i8", 1, struct.pack("<b", -5)),
    kv("t.u16", 2, struct.pack("<H", 60000)), kv("t.i16", 3, struct.pack("<h", -3000)),
    kv("t.u32", 4, struct.pack("<I", 4000000000)), kv("t.i32", 5, struct.pack("<i", -7)),
    kv("t.f32", 6, struct.pack("<f", 1.5)), kv("t.bool", 7, b"\x01"),
    kv("t.u64", 10, struct.pack("<Q", 2**63 + 5)), kv("t.i64", 11, struct.pack("<q", -2**40)),
    kv("t.f64", 12, struct.pack("<d", 0.1)),
    kv("t.arr_f32", 9, arr(6, struct.pack("<3f", 1, 2, 3), 3)),
    kv("t.arr_str", 9, arr(8, s("<unk>") + s("\xe2\x96\x81a") + s(""), 3)),
    kv("t.nested", 9, arr(9, arr(2, struct.pack("<2H", 1, 2), 2) + arr(8, s("x"), 1), 2)),
]
f32 = struct.pack("<8f", *range(8))
q8 = struct.pack("<e", 0.5) + bytes(range(32))
seeds = {
    "every_type.gguf": gguf(every_type, [tensor("w", [4, 2], 0, 0), tensor("q", [32], 8, 32)], f32 + b"\0" * 0 + q8),
    "version2.gguf": gguf([kv("general.name", 8, s("v2"))], [tensor("w", [8], 0, 0)], f32, version=2),
    "aligned64.gguf": gguf([kv("general.alignment", 4, struct.pack("<I", 64))],
                           [tensor("a", [8], 0, 0), tensor("b", [2, 2, 2], 0, 64)], f32 + b"\0" * 32 + f32, alignment=64),
    "empty.gguf": gguf([], [], b""),
    "kquant.gguf": gguf([kv("general.architecture", 8, s("llama"))], [tensor("k", [256], 12, 0)], bytes(144)),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
shutil.copy("tests/data/gguf/llama-written.gguf", os.path.join(out, "llama-written.gguf"))
# A byte-level BPE vocabulary (merges, pre-tokenizer, special tokens) for the tokenizer loader.
shutil.copy("tests/data/tokenizer/bpe-llama-bpe.gguf", os.path.join(out, "bpe-vocab.gguf"))
print(f"wrote {len(seeds) + 2} seeds to {out}")
