#!/usr/bin/env python3
"""infer-perplexity against llama.cpp on the reference models of tests/data/models (made by
tests/reference/make-model-reference.sh):
  - perplexity on the shipped text within 0.2% of llama.cpp's for F32/F16/BF16/Q8_0 and within 1%
    for the 2- to 6-bit types;
  - teacher-forced distributions: top-1 token identical on >= 99% of positions for every type,
    mean KL divergence < 1e-3 for 8-bit and wider types;
  - on the models with peaked distributions (peaked-*, peakedtied-*: infer-make-model --init
    scaled), where small arithmetic differences show, exact agreement: the same top token at every
    position and a mean KL divergence that rounds to 0 (< 1e-6).
Prints the measured figures as a table.

Every build runs every model, the sanitizer builds included: they compute the same bits. (They
once differed; the likely cause, not bisected, was RoPE's products, which GCC fused at one
optimization level and not the other until the kernel wrote the fusion out explicitly.) In a
sanitizer build (INFER_TEST_SANITIZED=1, set by CMake) only the second run of each model goes:
the perplexity compared is then the one over the tokens of the KL-divergence file, against the
perplexity llama.cpp's logits there give (the same tolerances). Its one 128-token chunk runs the
same code as the four of the first run, which took 80% of the test's time under ASan+UBSan.

usage: llama_reference.py PERPLEXITY MAKE_MODEL REPO_ROOT
"""
import hashlib
import os
import re
import shlex
import subprocess
import sys
import tempfile

perplexity, make_model, root = sys.argv[1:4]
sanitized = os.environ.get("INFER_TEST_SANITIZED") == "1"
models = os.path.join(root, "tests/data/models")
text = os.path.join(root, "tests/data/text/corpus.txt")
failures = []
rows = []


def run(args, cwd=None):
    p = subprocess.run(args, capture_output=True, text=True, timeout=900, cwd=cwd)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return p.stdout


with open(os.path.join(models, "reference.tsv")) as f:
    header = f.readline().rstrip("\n").split("\t")
    entries = [dict(zip(header, line.rstrip("\n").split("\t"))) for line in f if line.strip()]


def make_args(prefix):
    """The infer-make-model arguments of a family of files (ref-*, gemma3-*)."""
    name = "make-model.args" if prefix == "ref" else f"{prefix}-make-model.args"
    with open(os.path.join(models, name)) as f:
        return shlex.split(f.read())


with tempfile.TemporaryDirectory() as tmp:
    for e in entries:
        name = e["file"]
        prefix, qtype = name[:-len(".gguf")].rsplit("-", 1)
        if e["kind"] == "ours":
            path = os.path.join(tmp, name)
            run([make_model, "-o", path, "--type", qtype] + make_args(prefix), cwd=root)
            digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
            if digest != e["sha256"]:
                failures.append(f"{name}: infer-make-model no longer writes the file llama.cpp was run on")
                continue
        else:
            path = os.path.join(models, name)
        wide = qtype in ("f32", "f16", "bf16", "q8_0")
        if not sanitized:
            out = run([perplexity, "-m", path, "-f", text, "-c", "128", "-b", "128", "--chunks", "4", "-t", "2"])
            ppl = float(re.search(r"^PPL = ([0-9.]+) \+/- ([0-9.]+)", out, re.M).group(1))
            ref = float(e["llama_ppl"])
        out = run([perplexity, "-m", path, "--kl-divergence-base", os.path.join(models, name[:-5] + ".kld"), "-t", "2"])
        if sanitized:  # our perplexity and llama.cpp's (its logits in the file) over the same tokens
            ppl = float(re.search(r"^PPL = ([0-9.]+) \+/- ([0-9.]+)", out, re.M).group(1))
            ref = float(re.search(r"^base PPL = ([0-9.]+)", out, re.M).group(1))
        rel = abs(ppl - ref) / ref
        tol = 0.002 if wide else 0.01
        if rel > tol:
            failures.append(f"{name}: PPL {ppl} vs llama.cpp {ref} differs by {100 * rel:.3f}% (limit {100 * tol}%)")
        kld = float(re.search(r"^mean KLD = ([0-9.e+-]+)", out, re.M).group(1))
        top = float(re.search(r"^same top = ([0-9.]+)%", out, re.M).group(1))
        if top < 99.0:
            failures.append(f"{name}: top-1 agreement {top}% < 99%")
        if wide and kld >= 1e-3:
            failures.append(f"{name}: mean KL divergence {kld} >= 1e-3")
        if prefix.startswith("peaked") and (top < 100.0 or abs(kld) >= 1e-6):
            failures.append(f"{name}: peaked model: top-1 agreement {top}% and mean KLD {kld} (exact agreement required)")
        rows.append((("" if prefix == "ref" else prefix + " ") + qtype.upper(), ppl, ref, 100 * rel, kld, top))

print(f"{'type':14} {'PPL ours':>12} {'PPL llama.cpp':>14} {'diff %':>8} {'mean KLD':>10} {'same top %':>10}")
for r in rows:
    print(f"{r[0]:14} {r[1]:12.4f} {r[2]:14.4f} {r[3]:8.4f} {r[4]:10.2e} {r[5]:10.2f}")
for f in failures:
    print("FAIL:", f)
if sanitized:
    print("sanitizer build: perplexity over the KL-divergence file's 63 tokens, against llama.cpp's logits there")
print(f"{len(rows) - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
