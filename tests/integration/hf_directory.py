#!/usr/bin/env python3
"""A Hugging Face directory written from a GGUF model (scripts/gguf-to-hf: numpy + the safetensors
package, Llama's Q/K rows un-permuted, Gemma's norms less 1, the vocabulary as tokenizer.model or
tokenizer.json) gives exactly the GGUF's results, the GGUF path being the one checked against
llama.cpp (llama_reference.py):
  - infer-perplexity prints the same per-chunk and final perplexity on the directory as on the
    GGUF, and `--kl-divergence-base` (llama.cpp's logits of the GGUF) reports the same figures;
  - through the Python binding, the same prompt tokens and bit-identical raw logits at every
    position;
  - for the families infer-make-model writes (llama, gemma3, qwen2, qwen3, phi3), each in F32, F16
    and BF16, a sharded directory, a peaked model (--init scaled, where small differences show),
    SentencePiece vocabularies written as tokenizer.json instead of tokenizer.model (the whole
    corpus must tokenize the same), and byte-level BPE vocabularies written as tokenizer.json
    (SmolLM2's: its corpus ids must also equal llama.cpp's,
    tests/data/tokenizer/smollm2-corpus-ids.txt);
  - generation_config.json's sampling is reported as the model's default sampling.
infer-inspect reads each directory too.

usage: hf_directory.py BIN_DIR LIBINFER_SO REPO_ROOT
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import (checked, failures, finish, gguf_and_directory, libinfer, make_args, models, root, run,  # noqa: E402
                       text_path, tool)


def perplexity_lines(model, args):
    out = run([tool("infer-perplexity"), "-m", model, "-t", "2"] + args).stdout
    # Everything but the timing.
    return [re.sub(r"scored in [0-9.]+ s", "", line) for line in out.splitlines()]


with open(text_path) as f:
    prompt = f.read()[:600]


def logits_of(model):
    with libinfer.Engine(model, threads=2) as engine:
        ids = engine.tokenize(prompt)
        c = engine.generate(prompt, max_tokens=1, temperature=0, prompt_logprobs_from=1, prompt_logits=True)
        return ids, c.prompt_logits


def check(label, gguf, directory, kld=None):
    try:
        inspect = run([tool("infer-inspect"), directory]).stdout
        if "safetensors" not in inspect:
            failures.append(f"{label}: infer-inspect does not name the safetensors format")
        ppl_args = ["-f", text_path, "-c", "128", "-b", "128", "--chunks", "4"]
        a, b = perplexity_lines(gguf, ppl_args), perplexity_lines(directory, ppl_args)
        if a != b:
            failures.append(f"{label}: infer-perplexity differs:\n  gguf: {a}\n  dir:  {b}")
        if kld:
            a = perplexity_lines(gguf, ["--kl-divergence-base", kld])
            b = perplexity_lines(directory, ["--kl-divergence-base", kld])
            if a != b:
                failures.append(f"{label}: --kl-divergence-base differs:\n  gguf: {a}\n  dir:  {b}")
        ids_a, logits_a = logits_of(gguf)
        ids_b, logits_b = logits_of(directory)
        if ids_a != ids_b:
            failures.append(f"{label}: prompt tokens differ")
        elif len(logits_a) != len(logits_b) or any(x != y for x, y in zip(logits_a, logits_b)):
            rows = sum(1 for x, y in zip(logits_a, logits_b) if x != y)
            failures.append(f"{label}: logits differ in {rows} of {len(logits_a)} rows")
        checked.append(f"{label}: {len(logits_a)} rows x {len(logits_a[0]) if logits_a else 0} logits identical")
    except Exception as e:  # one failing model must not hide the others
        failures.append(f"{label}: {e}")


with tempfile.TemporaryDirectory() as tmp:
    def build(label, make, shards=1, extra=()):
        return gguf_and_directory(tmp, label, make, ["--shards", str(shards)] + list(extra))

    for prefix in ("ref", "gemma3", "qwen2", "qwen3", "phi3"):
        for qtype in ("f32", "f16", "bf16"):
            label = f"{prefix}-{qtype}"
            gguf, directory = build(label, ["--type", qtype] + make_args(prefix))
            kld = os.path.join(models, f"{label}.kld")
            check(label, gguf, directory, kld if os.path.exists(kld) else None)

    gguf, directory = build("ref-f16-sharded", ["--type", "f16"] + make_args("ref"), shards=3)
    if not os.path.exists(os.path.join(directory, "model.safetensors.index.json")):
        failures.append("ref-f16-sharded: gguf-to-hf wrote no index")
    check("ref-f16-sharded (3 shards)", gguf, directory, os.path.join(models, "ref-f16.kld"))

    # generation_config.json's sampling becomes the model's default sampling (model_info).
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        f.write('{"temperature": 0.6, "top_p": 0.9, "top_k": 20, "eos_token_id": [2, 3]}')
    with libinfer.Engine(directory, threads=1) as engine:
        info = engine.model_info()
    with libinfer.Engine(gguf, threads=1) as engine:
        plain = engine.model_info()
    got = (round(info.default_temperature, 6), info.default_top_k, round(info.default_top_p, 6), info.eos)
    if got != (0.6, 20, 0.9, 2) or (plain.default_temperature, plain.default_top_k, plain.default_top_p) != (-1, -1, -1):
        failures.append(f"generation_config.json: model_info defaults {got}, GGUF's "
                        f"{(plain.default_temperature, plain.default_top_k, plain.default_top_p)}")
    else:
        checked.append("generation_config.json: temperature, top_k, top_p as the model's default sampling")

    gguf, directory = build("peaked-bf16", ["--type", "bf16"] + make_args("peaked"))
    check("peaked-bf16", gguf, directory)

    # SentencePiece vocabularies as a SentencePiece-style tokenizer.json (no tokenizer.model): the
    # whole corpus must tokenize as the GGUF tokenizes it.
    for prefix in ("ref", "gemma3"):
        label = f"{prefix}-f16-tokenizer-json"
        gguf, directory = build(label, ["--type", "f16"] + make_args(prefix), extra=["--tokenizer-json"])
        if os.path.exists(os.path.join(directory, "tokenizer.model")):
            failures.append(f"{label}: gguf-to-hf wrote a tokenizer.model")
        check(label, gguf, directory)
        a = run([tool("infer-tokenize"), "-m", gguf, "-f", text_path]).stdout
        b = run([tool("infer-tokenize"), "-m", directory, "-f", text_path]).stdout
        if a != b:
            failures.append(f"{label}: the corpus tokenizes differently from tokenizer.json")
        else:
            checked.append(f"{label}: {len(a.split())} corpus ids identical through tokenizer.json")

    # Byte-level BPE vocabularies through tokenizer.json.
    small = ["--n-embd", "64", "--n-layer", "2", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128", "--ctx", "1024"]
    for vocab in ("bpe-llama-bpe", "bpe-qwen2", "bpe-gpt-2"):
        gguf, directory = build(vocab, small + ["--vocab", f"tests/data/tokenizer/{vocab}.gguf", "--seed", "5"])
        check(f"{vocab} (tokenizer.json)", gguf, directory)
    arch_small = small + ["--arch", "qwen2", "--tied", "--seed", "7"]
    gguf, directory = build("smollm2", arch_small + ["--vocab", "tests/data/tokenizer/smollm2-vocab.gguf"])
    check("smollm2 vocabulary (tokenizer.json)", gguf, directory)
    with open(os.path.join(root, "tests/data/tokenizer/smollm2-corpus-ids.txt")) as f:
        expected = [int(line) for line in f if line.strip() and not line.startswith("#")]
    with open(text_path) as f:
        corpus = f.read()
    with libinfer.Engine(directory, threads=2) as engine:
        got = engine.tokenize(corpus, add_special=False, parse_special=False)
    if got != expected:
        first = next((i for i, (x, y) in enumerate(zip(got, expected)) if x != y), min(len(got), len(expected)))
        failures.append(f"smollm2 tokenizer.json: corpus ids differ from llama.cpp's at {first} "
                        f"({len(got)} vs {len(expected)} ids)")
    else:
        checked.append(f"smollm2 tokenizer.json: {len(got)} corpus ids equal llama.cpp's")

finish()
