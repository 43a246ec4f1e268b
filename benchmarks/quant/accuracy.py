#!/usr/bin/env python3
"""The accuracy table of docs/quantization.md: each weight format and KV-cache type on a real model,
against the model's F16 base, with libinfer's figures beside llama.cpp's on the same files.

For each real model of scripts/fetch-model (SmolLM2-135M Q4_1, Gemma 3 270M Q4_K_M) it
  1. makes an F16 base by dequantizing the packaged file (`llama-quantize --allow-requantize SRC BASE
     F16`: the packages ship only 4-bit files, so every base lies on the grid it came from — the
     table marks the types that re-quantize into that grid);
  2. quantizes the base to each GGUF type with infer-quantize (byte-identical to llama-quantize);
  3. scores each variant against the base on the same chunks of tests/data/text/corpus.txt:
     `infer-perplexity -m VARIANT --kl-base BASE` (ΔPPL, mean / p99 KLD, same top-1), and, for the
     GGUF files, llama.cpp's own `llama-perplexity --kl-divergence` against the base's logits
     (`--kl-divergence-base`) as the independent figure;
  4. libinfer's load-time formats (`--weight-type`) and KV-cache types (`--kv-type`) against the
     same base the same way (llama.cpp has no counterpart for the first; for the second it runs
     with `-ctk T -ctv T -fa on`);
  5. with --speed, pp512 / tg128 of each variant with infer-bench (-r 2, the machine's threads).
Prints one markdown table per model, and the command line, CPU and date.

usage: benchmarks/quant/accuracy.py [-b BUILD_DIR] [--chunks N] [-t THREADS] [--speed]
                                     [--models smollm2,gemma3] [--types LIST] [--weight-types LIST]
                                     [--kv-types LIST] [--work DIR]
"""
import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("-b", "--build", default=os.path.join(ROOT, "build"))
ap.add_argument("--chunks", type=int, default=20)
ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 2)
ap.add_argument("--speed", action="store_true")
ap.add_argument("--models", default="smollm2,gemma3")
ap.add_argument("--types", default="Q8_0,Q6_K,Q5_K_M,Q4_K_M,Q4_0,Q3_K_M,Q2_K")
ap.add_argument("--weight-types", default="", help="libinfer load-time formats (--weight-type values)")
ap.add_argument("--kv-types", default="bf16,q8_0")
ap.add_argument("--imatrix", action="store_true",
                help="also quantize each type with an importance matrix of the corpus (infer-imatrix)")
ap.add_argument("--work", default=os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                               "libinfer", "quant-accuracy"))
args = ap.parse_args()

corpus = os.path.join(ROOT, "tests/data/text/corpus.txt")
bin_dir = os.path.join(args.build, "bin")
os.makedirs(args.work, exist_ok=True)


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"accuracy.py: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    return p


llama_bin = os.environ.get("LLAMA_CPP_BIN") or run([os.path.join(ROOT, "scripts/build-llama-cpp")]).stdout.strip().splitlines()[-1]
ctx = ["-c", "512", "--chunks", str(args.chunks), "-t", str(args.threads)]


def ours(model, base, extra=()):
    """infer-perplexity --kl-base: {ppl, dppl, kld, p99, top1}."""
    out = run([os.path.join(bin_dir, "infer-perplexity"), "-m", model, "--kl-base", base, "-f", corpus, *ctx,
               *extra]).stdout
    r = {}
    r["dppl"] = float(re.search(r"PPL - base PPL = \S+ \(([+-][\d.]+)%\)", out).group(1))
    r["kld"] = float(re.search(r"mean KLD = ([\d.e+-]+)", out).group(1))
    r["p99"] = float(re.search(r"p99 KLD = ([\d.e+-]+)", out).group(1))
    r["top1"] = float(re.search(r"same top = ([\d.]+)%", out).group(1))
    return r


def theirs(model, base_logits, extra=()):
    """llama-perplexity --kl-divergence against the base's logits file: {kld, top1, dppl}."""
    p = run([os.path.join(llama_bin, "llama-perplexity"), "-m", model, "--kl-divergence-base", base_logits,
             "--kl-divergence", "-t", str(args.threads), *extra])
    text = p.stdout + p.stderr
    r = {}
    r["kld"] = float(re.search(r"Mean\s+KLD:\s+([\d.e+-]+)", text).group(1))
    r["top1"] = float(re.search(r"Same top p:\s+([\d.]+)", text).group(1))
    m = re.search(r"Mean\s+ln\(PPL\(Q\)/PPL\(base\)\)\s*:\s+([-\d.e+]+)", text)
    r["dppl"] = (2.718281828459045 ** float(m.group(1)) - 1) * 100 if m else float("nan")
    return r


def bench(model, extra=()):
    out = run([os.path.join(bin_dir, "infer-bench"), "-m", model, "-p", "512", "-n", "128", "-r", "2", "-t",
               str(args.threads), "--json", *extra]).stdout
    rows = json.loads(out)
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] > 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] > 0)
    return pp, tg


def inspect(path):
    """(parameters, tensor MiB, bits per weight, {tensor: (type, elements)}) as infer-inspect lists them."""
    out = run([os.path.join(bin_dir, "infer-inspect"), path]).stdout
    m = re.search(r"totals:\s+\d+ tensors, (\d+) parameters, \d+ bytes \(([\d.]+) MiB\), ([\d.]+) bits per weight", out)
    tensors = {name: (t, math.prod(int(x) for x in shape.split(",")))
               for name, t, shape in re.findall(r"^  (\S+\.weight)\s+(\w+)\s+\[([\d, ]+)\]", out, re.M)}
    return int(m.group(1)), float(m.group(2)), float(m.group(3)), tensors


def fmt(r, key, spec):
    """r[key] formatted, or a dash where there is no figure."""
    return format(r[key], spec) if r and key in r else "—"


cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown CPU")
print(f"<!-- {' '.join(sys.argv)} | {cpu}, {args.threads} threads | {datetime.date.today()} -->")
for name in args.models.split(","):
    src = run([os.path.join(ROOT, "scripts/fetch-model"), name]).stdout.strip().splitlines()[-1]
    base = os.path.join(args.work, f"{name}-f16.gguf")
    if not os.path.exists(base):
        run([os.path.join(llama_bin, "llama-quantize"), "--allow-requantize", src, base, "F16", "2"])
    src_tensors = inspect(src)[3]
    base_logits = os.path.join(args.work, f"{name}-f16-c512x{args.chunks}.kld")
    if not os.path.exists(base_logits):
        run([os.path.join(llama_bin, "llama-perplexity"), "-m", base, "-f", corpus, "--kl-divergence-base",
             base_logits, *ctx])
    n_params = inspect(base)[0]
    rows = []  # (label, (MiB, bits/weight) or None, ours, theirs, speed, note)

    def speed(model, extra=()):
        return bench(model, extra) if args.speed else None

    rows.append(("F16 (base)", inspect(base)[1:3], None, None, speed(base), ""))
    imatrix = None
    if args.imatrix:
        imatrix = os.path.join(args.work, f"{name}-f16.imatrix.gguf")
        if not os.path.exists(imatrix):
            run([os.path.join(bin_dir, "infer-imatrix"), "-m", base, "-f", corpus, "-o", imatrix, "-t",
                 str(args.threads)])
    for t in [t for t in args.types.split(",") if t]:
        for with_imatrix in ([False, True] if imatrix else [False]):
            suffix = "-imatrix" if with_imatrix else ""
            q = os.path.join(args.work, f"{name}-{t.lower()}{suffix}.gguf")
            cmd = [os.path.join(bin_dir, "infer-quantize"), base, q, t, "-t", str(args.threads)]
            if with_imatrix:
                cmd += ["--imatrix", imatrix]
            run(cmd)
            _, mib, bits, tensors = inspect(q)
            # Weights that land back in the type they had in the packaged file lose nothing.
            back = sum(n for k, (ty, n) in tensors.items() if ty.startswith("Q") and src_tensors.get(k, ("",))[0] == ty)
            note = f"{100 * back / n_params:.0f}% of the weights back in their source type" if back else ""
            rows.append((t + (" + imatrix" if with_imatrix else ""), (mib, bits), ours(q, base),
                         theirs(q, base_logits), speed(q), note))
    for w in [w for w in args.weight_types.split(",") if w]:
        rows.append((f"--weight-type {w}", None, ours(base, base, ["--weight-type", w]), None,
                     speed(base, ["--weight-type", w]) if args.speed else None, "libinfer format"))
    for kv in [k for k in args.kv_types.split(",") if k]:
        rows.append((f"F16, KV {kv}", None, ours(base, base, ["--kv-type", kv]),
                     theirs(base, base_logits, ["-ctk", kv, "-ctv", kv, "-fa", "on"]),
                     speed(base, ["--kv-type", kv]) if args.speed else None, "KV-cache type"))

    print(f"\n### {name}: F16 base dequantized from {os.path.basename(src)} ({n_params:,} parameters)\n")
    head = "| format | bits/weight | size MiB | ΔPPL | mean KLD | p99 KLD | same top | llama.cpp ΔPPL | llama.cpp KLD | llama.cpp same top |"
    sep = "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    if args.speed:
        head += " pp512 t/s | tg128 t/s |"
        sep += " ---: | ---: |"
    print(head + " note |")
    print(sep + " --- |")
    for label, size, o, th, sp, note in rows:
        cells = [label, f"{size[1]:.2f}" if size else "—", f"{size[0]:.1f}" if size else "—",
                 f"{o['dppl']:+.2f}%" if o else "—", fmt(o, "kld", ".5f"), fmt(o, "p99", ".4f"),
                 f"{o['top1']:.2f}%" if o else "—",
                 f"{th['dppl']:+.2f}%" if th else "—", fmt(th, "kld", ".5f"), f"{th['top1']:.2f}%" if th else "—"]
        if args.speed:
            cells += [f"{sp[0]:.1f}" if sp else "—", f"{sp[1]:.1f}" if sp else "—"]
        print("| " + " | ".join(cells) + f" | {note} |")
    sys.stdout.flush()
