#!/usr/bin/env python3
"""Hugging Face checkpoints against transformers: for each family (llama, gemma3, qwen2, qwen3,
phi3) and dtype (F32, BF16), the random-weight checkpoint of tests/reference/hf_checkpoints.py is
written (numpy only: the same bytes on every machine), opened by libinfer as a model directory,
and run over the token chunks of the committed reference (tests/data/hf_reference/*.kld: the
distributions transformers computed in float32, see tests/reference/make-hf-reference.py):

    infer-perplexity -m DIR --kl-divergence-base FAMILY-DTYPE.kld

libinfer runs with an F32 KV cache (--kv-type f32), as transformers keeps K and V; the default F16
cache's figures are printed beside (it rounds K and V to F16, which these peaked models magnify:
mean KLD up to 3e-5 on F32 weights). A BF16 checkpoint is compared with the reference that rounds
each Linear layer's input to BF16, as llama.cpp's BF16 matmul does and libinfer's reproduces bit
for bit (FAMILY-bf16.kld); its distance from exact float32 activations (FAMILY-bf16-f32act.kld) is
printed too: the cost of that rounding.

Passes when every F32 checkpoint has a mean KL divergence below 1e-4 and the same top token at 99%
of the positions or more, and every BF16 one a mean KL divergence below 1e-3 (issue 14's bound).
Top-1 agreement of BF16 weights is printed, not bounded: over these 252 positions one flip is
0.4%, and BF16 rounding flips near-ties of the peaked models (98.4-100% measured).

usage: hf_transformers.py PERPLEXITY REPO_ROOT
"""
import hashlib
import os
import re
import subprocess
import sys
import tempfile

perplexity, root = sys.argv[1:3]
# numpy where the interpreter lacks it (scripts/hf-python-deps installs it from PyPI into the cache).
deps = subprocess.run([os.path.join(root, "scripts/hf-python-deps")], capture_output=True, text=True, check=True)
sys.path.insert(0, deps.stdout.strip().splitlines()[-1])
sys.path.insert(0, os.path.join(root, "tests/reference"))
import hf_checkpoints  # noqa: E402
import numpy as np  # noqa: E402

corpus = os.path.join(root, "tests/data/text/corpus.txt")
refs = os.path.join(root, "tests/data/hf_reference")
failures, rows = [], []
with open(os.path.join(refs, "checkpoints.sha256")) as f:
    digests = {name: digest for digest, name in (line.split() for line in f if line.strip())}
with tempfile.TemporaryDirectory() as tmp:
    for family in hf_checkpoints.FAMILIES:
        for dtype in ("F32", "BF16"):
            d = os.path.join(tmp, f"{family}-{dtype}")
            hf_checkpoints.make(family, d, corpus, dtype)
            with open(os.path.join(d, "model.safetensors"), "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            if digest != digests[f"{family}-{dtype.lower()}"]:
                failures.append(f"{family} {dtype}: the checkpoint's weights differ from the ones the reference was "
                                f"computed on (numpy {np.__version__}); regenerate with tests/reference/make-hf-reference.py")
                continue
            figures = {}
            for ref_name in ([f"{family}-f32"] if dtype == "F32" else [f"{family}-bf16", f"{family}-bf16-f32act"]):
                for kv in ("f32", "f16"):
                    p = subprocess.run([perplexity, "-m", d, "--kl-divergence-base", os.path.join(refs, ref_name + ".kld"),
                                        "-t", "2", "--kv-type", kv], capture_output=True, text=True, timeout=600)
                    if p.returncode != 0:
                        failures.append(f"{ref_name} (KV {kv}): infer-perplexity exited {p.returncode}: {p.stderr.strip()[-400:]}")
                        break
                    kld = re.search(r"mean KLD = ([\d.e+-]+)", p.stdout)
                    top = re.search(r"same top = ([\d.]+)%", p.stdout)
                    if not kld or not top:
                        failures.append(f"{ref_name}: no KLD / same-top line in:\n{p.stdout[-600:]}")
                        break
                    figures[ref_name, kv] = (float(kld.group(1)), float(top.group(1)))
            if len(figures) != (2 if dtype == "F32" else 4):
                continue
            ref = f"{family}-{dtype.lower()}"
            kld, top = figures[ref, "f32"]
            row = f"| {family} | {dtype} | {kld:.2g} | {top:.2f}% | {figures[ref, 'f16'][0]:.2g} | {figures[ref, 'f16'][1]:.2f}% |"
            if dtype == "BF16":
                k2, t2 = figures[f"{family}-bf16-f32act", "f32"]
                row += f" {k2:.2g} | {t2:.2f}% |"
            else:
                row += " | |"
            rows.append(row)
            bound = 1e-4 if dtype == "F32" else 1e-3
            if not kld < bound:
                failures.append(f"{family} {dtype}: mean KLD {kld} is not below {bound:g}")
            if dtype == "F32" and not top >= 99.0:
                failures.append(f"{family} {dtype}: same top {top}% is below 99%")
print("| family | weights | mean KLD | same top | KV f16: mean KLD | same top | BF16 vs float32 activations: mean KLD | same top |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
print("\n".join(rows))
if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
