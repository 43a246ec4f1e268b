#!/usr/bin/env python3
"""Hugging Face checkpoints against transformers: for each family (llama, gemma3, qwen2, qwen3,
phi3) and dtype (F32, BF16), the random-weight checkpoint of tests/reference/hf_checkpoints.py is
written (numpy only: the same bytes on every machine), opened by libinfer as a model directory,
and run over the token chunks of the committed reference (tests/data/hf_reference/*.kld: the
distributions transformers computed in float32, see tests/reference/make-hf-reference.py):

    infer-perplexity -m DIR --kl-divergence-base FAMILY-DTYPE.kld

A BF16 checkpoint is held to the reference that rounds each Linear layer's input to BF16, as
llama.cpp's BF16 matmul does and libinfer's reproduces bit for bit (FAMILY-bf16.kld); its distance
from exact float32 activations (FAMILY-bf16-f32act.kld) is printed beside it, not bounded: it is
the cost of that rounding, which the peaked test models magnify.

Passes when, for every checkpoint, the mean KL divergence is below 1e-3 and the same token is on
top at 99% of the positions or more (issue 14's bound). Prints the figures as a table.

usage: hf_transformers.py PERPLEXITY REPO_ROOT
"""
import hashlib
import os
import re
import subprocess
import sys
import tempfile

perplexity, root = sys.argv[1:3]
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
                p = subprocess.run([perplexity, "-m", d, "--kl-divergence-base", os.path.join(refs, ref_name + ".kld"),
                                    "-t", "2"], capture_output=True, text=True, timeout=600)
                if p.returncode != 0:
                    failures.append(f"{ref_name}: infer-perplexity exited {p.returncode}: {p.stderr.strip()[-400:]}")
                    continue
                kld = re.search(r"mean KLD = ([\d.e+-]+)", p.stdout)
                top = re.search(r"same top = ([\d.]+)%", p.stdout)
                if not kld or not top:
                    failures.append(f"{ref_name}: no KLD / same-top line in:\n{p.stdout[-600:]}")
                    continue
                figures[ref_name] = (float(kld.group(1)), float(top.group(1)))
            if len(figures) != (1 if dtype == "F32" else 2):
                continue
            kld, top = figures[f"{family}-{dtype.lower()}"]
            row = f"{family:8} {dtype:5} mean KLD {kld:.3g}  same top {top:.2f}%"
            if dtype == "BF16":
                k2, t2 = figures[f"{family}-bf16-f32act"]
                row += f"   (against float32 activations: mean KLD {k2:.3g}, same top {t2:.2f}%)"
            rows.append(row)
            if not kld < 1e-3:
                failures.append(f"{family} {dtype}: mean KLD {kld} is not below 1e-3")
            if not top >= 99.0:
                failures.append(f"{family} {dtype}: same top {top}% is below 99%")
print("\n".join(rows))
if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
