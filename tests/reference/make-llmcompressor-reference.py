#!/usr/bin/env python3
"""compressed-tensors checkpoints made by others, and libinfer's read by others: the reference data of
tests/integration/hf_llmcompressor.py, in tests/data/llmcompressor/.

1. llm-compressor (the quantizer whose checkpoints vLLM serves) quantizes the random-weight llama
   and qwen3 checkpoints of tests/reference/hf_checkpoints.py with its own recipes, calibrated on
   the corpus (the chunks after the scored ones):
     w8a8        SmoothQuantModifier(0.8) + GPTQModifier, scheme W8A8 (INT8 per channel, dynamic
                 per-token activations)
     w8a16-g32   GPTQModifier, 8-bit symmetric groups of 32 (the W8A16 preset's fields, pack-quantized;
                 these layers are 64 and 160 wide, so the preset's 128-wide groups do not fit)
     w8a16-channel  GPTQModifier, 8-bit symmetric, a scale per output channel (W8A16 before the
                 presets moved to groups; what infer-quantize w8a16 writes)
     w4a16-g32   GPTQModifier, 4-bit symmetric groups of 32 (the W4A16 preset's fields)
     w4a16-asym  AWQModifier, 4-bit asymmetric groups of 32 (W4A16_ASYM's fields)
     fp8-dynamic QuantizationModifier, scheme FP8_DYNAMIC
     quip-w4a16  QuIPModifier (deterministic Hadamard input rotations, "v", in blocks of 32) + GPTQ
                 4-bit groups of 32
   each saved compressed (save_compressed=True) as `{family}-{recipe}/`, the tokenizer files beside.
2. libinfer writes checkpoints of the same sources with infer-quantize (`ours-{family}-{scheme}/`):
   int8 (rotated, the default), int8 --no-rotate, w8a16 (per channel and --group 32), fp8,
   fp8-tensor, fp8-dynamic, int4 --group 32 and int4 --group 32 --asym.
3. transformers (with the compressed-tensors package, as vLLM parses the same config) loads every
   directory, decompressing it, and computes the distributions over the corpus's first chunks in
   float32 with eager attention: `{dir}.kld` in llama.cpp's KL-divergence base format, as
   make-hf-reference.py writes it. Quantized activations are quantized in each layer's forward;
   FP8 as compressed-tensors does it, INT8 per token as vLLM does it (max|x| / 127, what libinfer
   computes: compressed-tensors' own fake quantization takes max|x| / 127.5). transformers attaches
   no online transform of a transform_config (it loads the weights with theirs folded in), so the
   script attaches the `input` ones with compressed-tensors' apply_transform_config, as vLLM runs
   them. The F32 sources' own references are tests/data/hf_reference/{family}-f32.kld.

The test then runs `infer-perplexity -m DIR --kl-divergence-base DIR.kld` on every directory: the
checkpoints load here and compute what transformers computes on them; ours-* load in transformers.

Run once when the checkpoints or the libinfer writer change (needs llmcompressor, which brings
torch, transformers, compressed-tensors and datasets, from PyPI; and a build of libinfer):

  python3 -m venv /tmp/lc && /tmp/lc/bin/pip install llmcompressor
  /tmp/lc/bin/python tests/reference/make-llmcompressor-reference.py build/bin

Writes tests/data/llmcompressor/{dirs}, {dirs}.kld, versions.txt.
"""
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_checkpoints  # noqa: E402

spec = importlib.util.spec_from_file_location("make_hf_reference", os.path.join(HERE, "make-hf-reference.py"))
make_hf_reference = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_hf_reference)

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CORPUS = os.path.join(ROOT, "tests/data/text/corpus.txt")
OUT = os.path.join(ROOT, "tests/data/llmcompressor")
N_CTX, N_CHUNK = make_hf_reference.N_CTX, make_hf_reference.N_CHUNK
FAMILIES = ("llama", "qwen3")
CALIB_SAMPLES, CALIB_LEN = 32, 128
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")


def weight_scheme(bits, symmetric=True, strategy="group"):
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    group = {"group_size": 32} if strategy == "group" else {}
    return {"group_0": QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(
        num_bits=bits, type="int", symmetric=symmetric, strategy=strategy, **group))}


def recipes():
    from llmcompressor.modifiers.awq import AWQModifier
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier
    from llmcompressor.modifiers.smoothquant import SmoothQuantModifier
    from llmcompressor.modifiers.transform import QuIPModifier
    return {
        "w8a8": [SmoothQuantModifier(smoothing_strength=0.8), GPTQModifier(targets="Linear", scheme="W8A8", ignore=["lm_head"])],
        "w8a16-g32": [GPTQModifier(config_groups=weight_scheme(8), ignore=["lm_head"])],
        "w8a16-channel": [GPTQModifier(config_groups=weight_scheme(8, strategy="channel"), ignore=["lm_head"])],
        "w4a16-g32": [GPTQModifier(config_groups=weight_scheme(4), ignore=["lm_head"])],
        "w4a16-asym": [AWQModifier(config_groups=weight_scheme(4, symmetric=False), ignore=["lm_head"])],
        "fp8-dynamic": [QuantizationModifier(targets="Linear", scheme="FP8_DYNAMIC", ignore=["lm_head"])],
        "quip-w4a16": [QuIPModifier(rotations=["v"], transform_type="hadamard", transform_block_size=32, ignore=["lm_head"]),
                       GPTQModifier(config_groups=weight_scheme(4), ignore=["lm_head"])],
    }


OURS = {
    "int8": ["int8"],
    "int8-unrotated": ["int8", "--no-rotate"],
    "w8a16": ["w8a16"],
    "w8a16-g32": ["w8a16", "--group", "32"],
    "fp8": ["fp8"],
    "fp8-tensor": ["fp8-tensor"],
    "fp8-dynamic": ["fp8-dynamic"],
    "int4-g32": ["int4", "--group", "32"],
    "int4-g32-asym": ["int4", "--group", "32", "--asym"],
}


def corpus_tokens(d):
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    ids = tok.encode(open(CORPUS, encoding="utf-8").read(), add_special_tokens=False).ids
    assert len(ids) >= N_CTX * N_CHUNK + CALIB_SAMPLES * CALIB_LEN, "corpus too short"
    return ids


def calibration_set(ids, bos):
    from datasets import Dataset
    start = N_CTX * N_CHUNK  # after the scored chunks
    rows = []
    for s in range(CALIB_SAMPLES):
        chunk = [bos] + ids[start + s * CALIB_LEN: start + (s + 1) * CALIB_LEN - 1]
        rows.append(chunk)
    return Dataset.from_dict({"input_ids": rows, "attention_mask": [[1] * len(r) for r in rows]})


def int8_per_token(x):
    """vLLM's dynamic per-token INT8 quantization (dynamic_scaled_int8_quant), quantized and back:
    s = max|x| / 127, q = round-half-even(x * (127 / max|x|)) in [-127, 127], x ~ s q."""
    amax = x.abs().amax(dim=-1, keepdim=True)
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    q = torch.round(x * (torch.tensor(127.0) / safe)).clamp(-127, 127)
    return torch.where(amax > 0, q * (safe / torch.tensor(127.0)), torch.zeros_like(x))


def serving_arithmetic(model, model_dir):
    """What vLLM runs of a compressed checkpoint that transformers' loader leaves out or computes
    otherwise: the online input transforms of transform_config (transformers loads their weights
    with the transforms folded in, but attaches no online ones), and INT8 activations quantized per
    token as vLLM does (compressed-tensors' own fake quantization takes max|x| / 127.5 and allows
    -128)."""
    from compressed_tensors.transform import TransformConfig, apply_transform_config
    with open(os.path.join(model_dir, "config.json")) as f:
        qc = json.load(f).get("quantization_config") or {}
    # (The modules of a config group share one scheme object: find them all before changing it.)
    int8_inputs = [mod for mod in model.modules() if getattr(mod, "quantization_scheme", None) is not None
                   and mod.quantization_scheme.input_activations is not None
                   and mod.quantization_scheme.input_activations.type == "int"]
    for mod in int8_inputs:
        mod.quantization_scheme.input_activations = None  # compressed-tensors' own, replaced:
        mod.register_forward_pre_hook(lambda _m, args: (int8_per_token(args[0]),) + tuple(args[1:]))
    tc = qc.get("transform_config")
    if tc:
        for scheme in tc["config_groups"].values():
            scheme["apply"] = [a for a in scheme["apply"] if a["location"] == "input"]
        apply_transform_config(model, TransformConfig.model_validate(tc))  # prepended: before the quantization


def write_reference(model_dir, ids, bos, n_vocab, path):
    """transformers' distributions on model_dir, as make-hf-reference.py writes them."""
    tokens = np.array(ids[: N_CTX * N_CHUNK], dtype=np.int32)
    tokens[::N_CTX] = bos
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    serving_arithmetic(model, model_dir)
    first, blob = N_CTX // 2, b""
    for c in range(N_CHUNK):
        chunk = tokens[c * N_CTX:(c + 1) * N_CTX]
        with torch.no_grad():
            logits = model(torch.tensor(chunk[None, :], dtype=torch.long)).logits[0].float().numpy()
        blob += make_hf_reference.kld_rows(logits[first:N_CTX - 1])
    with open(path, "wb") as out:
        out.write(b"_logits_" + struct.pack("<iii", N_CTX, n_vocab, N_CHUNK) + tokens.tobytes() + blob)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make-llmcompressor-reference.py BIN_DIR (infer-quantize's directory)")
    quantize = os.path.join(sys.argv[1], "infer-quantize")
    from llmcompressor import oneshot
    if not torch.cuda.is_available():
        # llm-compressor 0.14's AWQ pins its cached intermediates for transfers to a GPU, which needs
        # a driver; on a CPU-only machine there is nothing to transfer.
        torch.Tensor.pin_memory = lambda self, *args, **kwargs: self
    torch.manual_seed(0)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    made = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in FAMILIES:
            src = os.path.join(tmp, family)
            cfg = hf_checkpoints.make(family, src, CORPUS, "F32")
            ids, bos, n_vocab = corpus_tokens(src), cfg["bos_token_id"], cfg["vocab_size"]
            for name, recipe in recipes().items():
                d = os.path.join(OUT, f"{family}-{name}")
                model = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
                oneshot(model=model, dataset=calibration_set(ids, bos), recipe=recipe, num_calibration_samples=CALIB_SAMPLES,
                        max_seq_length=CALIB_LEN, shuffle_calibration_samples=False)
                model.save_pretrained(d, save_compressed=True)
                for f in TOKENIZER_FILES:
                    shutil.copy(os.path.join(src, f), d)
                made.append((d, ids, bos, n_vocab))
            for name, args in OURS.items():
                d = os.path.join(OUT, f"ours-{family}-{name}")
                subprocess.run([quantize, src, d] + args, check=True, capture_output=True)
                made.append((d, ids, bos, n_vocab))
        for d, ids, bos, n_vocab in made:
            write_reference(d, ids, bos, n_vocab, d + ".kld")
            print(f"{d}.kld", file=sys.stderr)
    import compressed_tensors
    import llmcompressor
    with open(os.path.join(OUT, "versions.txt"), "w") as out:
        out.write(f"llmcompressor {llmcompressor.__version__}\ncompressed-tensors {compressed_tensors.__version__}\n"
                  f"torch {torch.__version__}\ntransformers {transformers.__version__}\nnumpy {np.__version__}\n"
                  f"command: python3 tests/reference/make-llmcompressor-reference.py build/bin\n")
        for d, *_ in made:
            with open(os.path.join(d, "config.json")) as f:
                q = json.load(f).get("quantization_config", {})
            out.write(f"{os.path.basename(d)}: format {q.get('format')}\n")


if __name__ == "__main__":
    main()
