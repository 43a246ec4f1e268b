#!/usr/bin/env python3
"""Writes the byte-level BPE vocabularies of tests/data/tokenizer/ (called by make-bpe-reference.sh).

    make-bpe-vocabs.py smollm2 MODEL.gguf OUT.gguf    vocabulary-only copy of a model file: every
                                                       key/value pair, no tensors
    make-bpe-vocabs.py synthetic PRE CORPUS OUT.gguf  a small vocabulary trained on CORPUS, with
                                                       tokenizer.ggml.pre = PRE (llama-bpe, qwen2,
                                                       gpt-2, default)

The synthetic vocabularies: a few special tokens, the 256 byte characters of GPT-2's
bytes_to_unicode, then 400 merges learned by plain BPE (most frequent pair first, ties by text)
on CORPUS cut into words by a simple split. They carry Llama's hyper-parameter keys (those of
SmolLM2-135M) so that llama-tokenize loads them; it reads the vocabulary only. Each one also has
entries that exercise corner cases (see VARIANTS).
"""
import collections
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import gguf_kv as g  # noqa: E402

N_MERGES = 400


def bytes_to_unicode():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cps, n = {}, 0
    for b in range(256):
        if b in keep:
            cps[b] = b
        else:
            cps[b] = 256 + n
            n += 1
    return {b: chr(c) for b, c in cps.items()}


BYTE_CHAR = bytes_to_unicode()


def spell(text):
    return "".join(BYTE_CHAR[b] for b in text.encode("utf-8"))


def learn_merges(corpus, n_merges):
    words = collections.Counter(re.findall(r" ?[^\W\d_]+| ?\d| ?[^\w\s]+|\s+", corpus))
    vocab = {tuple(spell(w)): c for w, c in words.items()}
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for symbols, count in vocab.items():
            for a, b in zip(symbols, symbols[1:]):
                pairs[(a, b)] += count
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        merged = {}
        for symbols, count in vocab.items():
            out, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == best:
                    out.append(symbols[i] + symbols[i + 1])
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + count
        vocab = merged
    return merges


# Per pre-tokenizer: special tokens (text, GGUF token type: 3 control, 4 user-defined), the
# special ids by text, and corner cases:
#   whole_words  entries no merge sequence reaches (with ignore_merges, llama-bpe takes them whole)
#   unlisted     how many of the last merges have no vocabulary entry for their result (the
#                merged symbol is then looked up byte by byte)
VARIANTS = {
    "llama-bpe": dict(
        specials=[("<|begin_of_text|>", 3), ("<|end_of_text|>", 3), ("<|eot_id|>", 3), ("<tool>", 4)],
        ids={"bos_token_id": "<|begin_of_text|>", "eos_token_id": "<|end_of_text|>"},
        whole_words=[" supercalifragilisticexpialidocious", " WARRANTY"],
        unlisted=0),
    "qwen2": dict(
        specials=[("<|endoftext|>", 3), ("<|im_start|>", 3), ("<|im_end|>", 3), ("<tool>", 4)],
        ids={"eos_token_id": "<|im_end|>", "padding_token_id": "<|endoftext|>"},
        whole_words=[],
        unlisted=3),
    "gpt-2": dict(
        specials=[("<|endoftext|>", 3), ("<tool>", 4)],
        ids={"bos_token_id": "<|endoftext|>", "eos_token_id": "<|endoftext|>"},
        whole_words=[],
        unlisted=0),
    "default": dict(
        specials=[("<|endoftext|>", 3), ("<tool>", 4)],
        ids={"bos_token_id": "<|endoftext|>", "eos_token_id": "<|endoftext|>"},
        whole_words=[],
        unlisted=0),
}

HPARAMS = [("llama.block_count", g.U32, 1), ("llama.context_length", g.U32, 2048),
           ("llama.embedding_length", g.U32, 64), ("llama.feed_forward_length", g.U32, 128),
           ("llama.attention.head_count", g.U32, 4), ("llama.attention.head_count_kv", g.U32, 4),
           ("llama.rope.dimension_count", g.U32, 16),
           ("llama.attention.layer_norm_rms_epsilon", g.F32, 1e-5)]


def synthetic(pre, corpus_path, out):
    v = VARIANTS[pre]
    corpus = open(corpus_path, encoding="utf-8").read()
    merges = learn_merges(corpus, N_MERGES)
    tokens = [t for t, _ in v["specials"]]
    types = [t for _, t in v["specials"]]
    tokens += [BYTE_CHAR[b] for b in range(256)]
    types += [1] * 256
    listed = merges[:len(merges) - v["unlisted"]] if v["unlisted"] else merges
    for a, b in listed:
        if a + b not in tokens:
            tokens.append(a + b)
            types.append(1)
    for w in v["whole_words"]:
        if spell(w) not in tokens:
            tokens.append(spell(w))
            types.append(1)
    kv = [("general.architecture", g.STRING, "llama"),
          ("general.name", g.STRING, f"libinfer synthetic {pre} vocabulary")]
    kv += HPARAMS
    kv += [("llama.vocab_size", g.U32, len(tokens)),
           ("tokenizer.ggml.model", g.STRING, "gpt2"),
           ("tokenizer.ggml.pre", g.STRING, pre),
           ("tokenizer.ggml.tokens", g.ARRAY, (g.STRING, tokens)),
           ("tokenizer.ggml.token_type", g.ARRAY, (g.I32, types)),
           ("tokenizer.ggml.merges", g.ARRAY, (g.STRING, [f"{a} {b}" for a, b in merges]))]
    for key, text in v["ids"].items():
        kv.append((f"tokenizer.ggml.{key}", g.U32, tokens.index(text)))
    g.write_kv(out, kv)


def main():
    if sys.argv[1] == "smollm2":
        g.write_kv(sys.argv[3], g.read_kv(sys.argv[2]))
    elif sys.argv[1] == "synthetic":
        synthetic(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
