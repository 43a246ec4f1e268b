#!/usr/bin/env python3
"""Writes the GGUF fuzzer's seed corpus (tests/fuzz/corpus/), byte by byte, independently of our
writer: small valid files that reach every branch of the reader, and tiny vocabularies for every
tokenizer kind and every pre-tokenizer row that is more than an alias. Run from the repository root:
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


def strings(items):
    return arr(8, b"".join(s(t) for t in items), len(items))


def i32s(items):
    return arr(5, b"".join(struct.pack("<i", v) for v in items), len(items))


def vocab(model, tokens, types, merges=None, pre=None, extra=()):
    kvs = [kv("general.architecture", 8, s("llama")), kv("tokenizer.ggml.model", 8, s(model)),
           kv("tokenizer.ggml.tokens", 9, strings(tokens)), kv("tokenizer.ggml.token_type", 9, i32s(types))]
    if merges is not None:
        kvs.append(kv("tokenizer.ggml.merges", 9, strings(merges)))
    if pre is not None:
        kvs.append(kv("tokenizer.ggml.pre", 8, s(pre)))
    return gguf(kvs + list(extra), [], b"")


def byte_chars():
    """GPT-2's bytes_to_unicode, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]


# Byte-level BPE: the 256 byte characters, a few merges, a control token; one seed per regex family.
bl = byte_chars()
bpe_tokens = bl + ["\u0120t", "he", "\u0120the", "12", "<|im_start|>"]
bpe_types = [1] * (len(bpe_tokens) - 1) + [3]
bpe_merges = ["\u0120 t", "h e", "\u0120t he", "1 2"]
for pre in ["deepseek-coder", "deepseek-llm", "falcon", "qwen35", "gpt-2", "default"]:
    seeds[f"bpe-{pre}.gguf"] = vocab("gpt2", bpe_tokens, bpe_types, bpe_merges, pre)
# Gemma 4: UTF-8 pieces with U+2581 for spaces, <0xAB> byte tokens, newline runs.
gemma_tokens = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)] + [
    "\u2581", "\u2581w", "or", "ld", "\u2581world", "\n", "\n\n", "<|turn>"]
gemma_types = [3, 3, 3, 2] + [6] * 256 + [1] * 7 + [3]
seeds["gemma4-vocab.gguf"] = vocab("gemma4", gemma_tokens, gemma_types, ["\u2581 w", "o r", "l d", "\u2581w or", "\u2581wor ld"],
                                   extra=[kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 2))])
# WordPiece: whole words with U+2581, continuation pieces without.
bert_tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "\u2581hello", "\u2581wor", "ld", "\u2581123", "\u2581!", "\u2581\u4e2d"]
seeds["bert-vocab.gguf"] = vocab("bert", bert_tokens, [3, 2, 3, 3] + [1] * 6,
                                 extra=[kv("tokenizer.ggml.unknown_token_id", 4, struct.pack("<I", 1)),
                                        kv("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 2)),
                                        kv("tokenizer.ggml.seperator_token_id", 4, struct.pack("<I", 3))])

for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
shutil.copy("tests/data/gguf/llama-written.gguf", os.path.join(out, "llama-written.gguf"))
# A byte-level BPE vocabulary (merges, pre-tokenizer, special tokens) for the tokenizer loader.
shutil.copy("tests/data/tokenizer/bpe-llama-bpe.gguf", os.path.join(out, "bpe-vocab.gguf"))
print(f"wrote {len(seeds) + 2} seeds to {out}")
