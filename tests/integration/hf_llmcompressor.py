#!/usr/bin/env python3
"""compressed-tensors checkpoints made by llm-compressor load here, and libinfer's load in
transformers: every directory of tests/data/llmcompressor/ (made once by
tests/reference/make-llmcompressor-reference.py: llm-compressor's W8A8, W8A16 per channel and in
groups, W4A16 with GPTQ and AWQ, FP8_DYNAMIC and QuIP-rotated W4A16 recipes on the random-weight
llama and qwen3 checkpoints, and infer-quantize's own int8 / w8a16 / fp8 / int4 outputs of the same
sources) is run over the token chunks of its reference, the distributions transformers computed on
that very checkpoint (with the compressed-tensors package, vLLM's arithmetic where transformers'
differs: see the script):

    infer-perplexity -m DIR --kl-divergence-base DIR.kld --kv-type f32

and against its F32 source's reference (tests/data/hf_reference/FAMILY-f32.kld), which measures how
far the quantization itself moved the model.

Passes when every weight-only checkpoint agrees with its reference to a mean KL divergence below
1e-4 with the same top token at 99% of the positions or more (the same weights, float arithmetic
in another order), and every checkpoint that quantizes activations (INT8 W8A8, FP8_DYNAMIC) to a
mean KL divergence below a tenth of its distance from the F32 source. (Quantized activations turn
the last-bit differences of two float orders into rounding flips of the next layer's inputs, which
these peaked models magnify: a relative noise of 1e-6 on the reference's own activations moves its
W8A8 distributions by a mean KLD of 2e-3.)

usage: hf_llmcompressor.py PERPLEXITY REPO_ROOT
"""
import json
import os
import re
import subprocess
import sys

perplexity, root = sys.argv[1:3]
data = os.path.join(root, "tests/data/llmcompressor")
refs = os.path.join(root, "tests/data/hf_reference")
failures, rows = [], []


def score(model, reference):
    p = subprocess.run([perplexity, "-m", model, "--kl-divergence-base", reference, "-t", "2", "--kv-type", "f32"],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"infer-perplexity exited {p.returncode}: {p.stderr.strip()[-400:]}")
    kld = re.search(r"mean KLD = ([\d.e+-]+)", p.stdout)
    top = re.search(r"same top = ([\d.]+)%", p.stdout)
    if not kld or not top:
        raise RuntimeError(f"no KLD / same-top line in:\n{p.stdout[-600:]}")
    return float(kld.group(1)), float(top.group(1))


# The directories the reference script wrote (versions.txt lists each with its format).
with open(os.path.join(data, "versions.txt")) as f:
    dirs = [m.group(1) for m in (re.match(r"(\S+): format ", line) for line in f) if m]
if len(dirs) < 30:
    failures.append(f"versions.txt lists {len(dirs)} checkpoints: regenerate with tests/reference/make-llmcompressor-reference.py")
for name in dirs:
    d = os.path.join(data, name)
    family = name.removeprefix("ours-").split("-")[0]
    try:
        with open(os.path.join(d, "config.json")) as f:
            groups = json.load(f)["quantization_config"]["config_groups"]
        activations = any(isinstance(g, dict) and g.get("input_activations") for g in groups.values())
        kld, top = score(d, d + ".kld")
        moved, _ = score(d, os.path.join(refs, f"{family}-f32.kld"))
    except Exception as e:
        failures.append(f"{name}: {e}")
        continue
    maker = "libinfer" if name.startswith("ours-") else "llm-compressor"
    rows.append(f"| {name} | {maker} | {'quantized' if activations else 'float'} | {kld:.2g} | {top:.2f}% | {moved:.3g} |")
    if activations:
        if not kld < 0.1 * moved:
            failures.append(f"{name}: mean KLD {kld:.3g} against transformers is not below a tenth of the quantization's own {moved:.3g}")
    elif not (kld < 1e-4 and top >= 99.0):
        failures.append(f"{name}: mean KLD {kld:.3g}, same top {top}% against transformers (want < 1e-4 and >= 99%)")
print("| checkpoint | written by | activations | mean KLD vs transformers | same top | mean KLD vs the F32 source |")
print("| --- | --- | --- | ---: | ---: | ---: |")
print("\n".join(rows))
if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
