#!/usr/bin/env python3
"""Reference distributions of Hugging Face transformers for the random-weight checkpoints of
tests/reference/hf_checkpoints.py, one file per family and dtype in tests/data/hf_reference/, in
llama.cpp's KL-divergence base format (what `llama-perplexity --kl-divergence-base` writes and
`infer-perplexity --kl-divergence-base` reads):

  "_logits_" i32:n_ctx i32:n_vocab i32:n_chunk i32:tokens[n_chunk*n_ctx]
  per chunk, per scored position (the last n_ctx/2 - 1 ... as llama-perplexity scores them):
  f32:scale f32:min_log_prob u16:q[n_vocab rounded up to even]

The tokens are the corpus (tests/data/text/corpus.txt) tokenized by the checkpoint's
tokenizer.json with the `tokenizers` library, in chunks of N_CTX, the first of each chunk replaced
by BOS in the file itself (llama-perplexity replaces it when it runs; stored so, the input is the
same whether the reader adds BOS or not). transformers runs each chunk in
float32 with eager attention; a BF16 checkpoint is upcast exactly (its weights are the F32 ones
rounded to BF16), so every reference is a float32 computation. For BF16 checkpoints there are two:
FAMILY-bf16.kld rounds the input of every Linear layer to BF16 first (what llama.cpp's BF16 matmul
and libinfer's do: the arithmetic libinfer claims), FAMILY-bf16-f32act.kld does not (exact float32
activations: how far that rounding moves the distributions).

Run once when the checkpoints change (needs torch, transformers, tokenizers, numpy from PyPI):

  python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers numpy
  /tmp/hf/bin/python tests/reference/make-hf-reference.py

Writes tests/data/hf_reference/{FAMILY}-{f32,bf16,bf16-f32act}.kld, checkpoints.sha256 (the SHA-256 of each
checkpoint's model.safetensors, which the test checks first: the reference holds only for those
weights) and versions.txt.
"""
import hashlib
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_checkpoints  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CORPUS = os.path.join(ROOT, "tests/data/text/corpus.txt")
OUT = os.path.join(ROOT, "tests/data/hf_reference")
N_CTX, N_CHUNK = 128, 4


def kld_rows(logits):
    """llama-perplexity's log_softmax rows (float64 sums as it does, the rest in float32)."""
    rows = []
    for row in logits.astype(np.float32):
        mx, mn = np.float32(row.max()), np.float32(row.min())
        mn = max(mn, np.float32(mx - np.float32(16)))
        sum_exp = float(np.sum(np.exp((row - mx).astype(np.float32)).astype(np.float64)))
        log_sum_exp = np.float32(math.log(sum_exp))
        min_log_prob = np.float32(mn - mx - log_sum_exp)
        scale = np.float32((mx - mn) / np.float32(65535))
        q = np.zeros(2 * ((len(row) + 1) // 2), dtype=np.uint16)
        if scale != 0:
            inv = np.float32(1) / scale
            v = inv * (row - mn).astype(np.float32)
            q[: len(row)] = np.where(row > mn, np.rint(v), 0).astype(np.uint16)  # nearest_int: ties to even
        rows.append(struct.pack("<ff", scale, min_log_prob) + q.tobytes())
    return b"".join(rows)


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    digests = []
    for family in hf_checkpoints.FAMILIES:
        for dtype, act, suffix in (("F32", "f32", "f32"), ("BF16", "bf16", "bf16"), ("BF16", "f32", "bf16-f32act")):
            with tempfile.TemporaryDirectory() as d:
                cfg = hf_checkpoints.make(family, d, CORPUS, dtype)
                tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
                ids = tok.encode(open(CORPUS, encoding="utf-8").read(), add_special_tokens=False).ids
                assert len(ids) >= N_CTX * N_CHUNK, "corpus too short"
                tokens = np.array(ids[: N_CTX * N_CHUNK], dtype=np.int32)
                tokens[::N_CTX] = cfg["bos_token_id"]  # stored with BOS: either side may add it or not
                model = transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32,
                                                                          attn_implementation="eager")
                model.eval()
                hooks = []
                if act == "bf16":
                    # llama.cpp's BF16 matmul (and libinfer's, bit for bit) rounds each activation
                    # row to BF16 before the products: the same rounding on every Linear's input.
                    for mod in model.modules():
                        if isinstance(mod, torch.nn.Linear):
                            hooks.append(mod.register_forward_pre_hook(
                                lambda _m, args: (args[0].to(torch.bfloat16).to(torch.float32),)))
                n_vocab = cfg["vocab_size"]
                first = N_CTX // 2
                blob = b""
                for c in range(N_CHUNK):
                    chunk = tokens[c * N_CTX:(c + 1) * N_CTX]
                    with torch.no_grad():
                        logits = model(torch.tensor(chunk[None, :], dtype=torch.long)).logits[0].float().numpy()
                    blob += kld_rows(logits[first:N_CTX - 1])
                with open(os.path.join(d, "model.safetensors"), "rb") as f:
                    digests.append(f"{hashlib.sha256(f.read()).hexdigest()}  {family}-{suffix}\n")
                path = os.path.join(OUT, f"{family}-{suffix}.kld")
                with open(path, "wb") as out:
                    out.write(b"_logits_" + struct.pack("<iii", N_CTX, n_vocab, N_CHUNK) + tokens.tobytes() + blob)
                print(f"{path}: {N_CHUNK} chunks of {N_CTX}, vocab {n_vocab}", file=sys.stderr)
    with open(os.path.join(OUT, "checkpoints.sha256"), "w") as out:
        out.writelines(digests)
    with open(os.path.join(OUT, "versions.txt"), "w") as out:
        out.write(f"torch {torch.__version__}\ntransformers {transformers.__version__}\nnumpy {np.__version__}\n"
                  f"command: python3 tests/reference/make-hf-reference.py\n")


if __name__ == "__main__":
    main()
