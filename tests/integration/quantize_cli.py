#!/usr/bin/env python3
"""infer-quantize against llama-quantize, on small random models from infer-make-model and
importance matrices this script writes from a seeded generator. llama-quantize's outputs are
recorded in tests/data/quantize/llama-quantize.tsv (size and SHA-256 of each, and of each input
model) by tests/reference/make-quantize-reference.sh, which runs this script with --record: that
compares with llama-quantize live, byte for byte, and writes the table. Without --record no
llama.cpp is needed. Checked:
  - every preset (Q4_0 ... Q6_K, the K-quant mixtures, F16, BF16, F32) and, with --pure, every
    type writes the same file byte for byte: metadata, tensor infos and data;
  - on models whose rows are multiples of 256 (K-quants apply), whose rows are not (96, 144:
    llama.cpp's fallbacks, down to F16 where 32 does not divide either), F16 and BF16 inputs, tied
    embeddings, a fused-QKV architecture (phi3), grouped-query attention with 4 heads per KV head
    and gemma3; 80 layers with GQA, llama.cpp's 70B case, for the presets whose rules it changes;
  - with an importance matrix (of every weight, in llama-imatrix's GGUF format), every
    preset that reads one equals llama-quantize --imatrix on every model above (the 8 layers of k256
    also cover Q4_0 / Q5_0's ffn_down rule), every such type with --pure on k256 and odd, and so do
    --include-weights and --exclude-weights;
  - --keep output.weight equals llama-quantize --leave-output-tensor, and --keep GLOB on a layer
    equals llama-quantize --tensor-type REGEX=f32 (F32 input: the tensor stays as it is);
  - the summary line on stderr; progress lines when stderr is not a terminal; bad arguments exit 2,
    unreadable input exits 1, both with one line on stderr.

In a sanitizer build (INFER_TEST_SANITIZED=1, set by CMake) the comparisons that only choose other
types for the same quantizers are left to the Release build: every model still runs every type
with --pure (each quantizer on each model's rows and input types) and k256 / odd every weighted
quantizer, but the presets' rules run on k256 alone and the 70B case not at all (a third of the
comparisons; the summary line says how many ran).

usage: quantize_cli.py BIN_DIR REPO_ROOT [--record LLAMA_CPP_BIN_DIR]
"""
import math
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_recorded import command_line, digest, read_table, write_table  # noqa: E402

bin_dir, root, llama_bin = command_line("quantize_cli.py")
sys.path.insert(0, os.path.join(root, "scripts"))
import gguf_kv  # noqa: E402  (the GGUF reader and writer of scripts/)
tool = lambda name: os.path.join(bin_dir, name)
reference_path = os.path.join(root, "tests/data/quantize/llama-quantize.tsv")
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def run(args, expect_rc=0, cwd=None):
    p = subprocess.run(args, capture_output=True, timeout=600, cwd=cwd)
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == expect_rc, f"{' '.join(args)}: exit {p.returncode}, expected {expect_rc}: {err[-400:]}")
    return err


# name -> (bytes, sha256) of llama-quantize's output ("input:MODEL": of the model it read).
reference = read_table(reference_path) if llama_bin is None else {}


def write_imatrix(model, path):
    """An importance matrix of every weight of `model`, as llama-imatrix writes one (GGUF: Σx² per
    column and the rows seen), with values spread over four decades from a generator seeded by the
    file name: the same bytes on every machine, whatever our kernels compute (exact operations
    only: ldexp and one rounded product, no libm function whose last bit may vary)."""
    rng = random.Random(os.path.basename(path))
    _, tensors, _ = gguf_kv.read(model)
    count = 128.0
    entries = []
    for name, dims, _, _ in tensors:
        if len(dims) == 2:
            entries.append((f"{name}.in_sum2", [dims[0], 1],
                            [count * math.ldexp(1.0 + rng.random(), rng.randint(-7, 6)) for _ in range(dims[0])]))
            entries.append((f"{name}.counts", [1, 1], [count]))
    kv = [("general.type", gguf_kv.STRING, "imatrix"), ("imatrix.datasets", gguf_kv.ARRAY, (gguf_kv.STRING, ["calib.txt"])),
          ("imatrix.chunk_count", gguf_kv.U32, 4), ("imatrix.chunk_size", gguf_kv.U32, 32)]
    gguf_kv.write_kv(path, kv, entries)


presets = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
           "Q5_K_S", "Q5_K_M", "Q6_K", "Q3_K", "Q4_K", "Q5_K", "F16", "BF16", "F32"]
# --pure with the plain type names: one tensor type everywhere (Q3_K, Q4_K, Q5_K name the _M presets).
presets_70b = ["Q2_K", "Q3_K_M", "Q4_K_S", "Q4_K_M"]
# The presets and types whose quantizers read an importance matrix (Q8_0 ignores it: kept to check
# the metadata llama-quantize adds).
imatrix_presets = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
                   "Q5_K_S", "Q5_K_M", "Q6_K"]
imatrix_pure_types = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
pure_types = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
common = ["--n-head", "4", "--n-head-kv", "2", "--ctx", "128"]
models = {
    # 8 layers: the layer rules (first / last eighth, every third) pick different layers.
    "k256": ["--n-embd", "256", "--n-ff", "512", "--n-layer", "8", "--seed", "3"] + common,
    # rows of 96 and 144: K-quants fall back; 144 is not a multiple of 32 either (ffn_down: F16).
    "odd": ["--n-embd", "96", "--n-ff", "144", "--n-layer", "3", "--seed", "4"] + common,
    "f16-tied": ["--n-embd", "256", "--n-ff", "512", "--n-layer", "2", "--tied", "--type", "f16", "--seed", "5"] + common,
    "phi3-bf16": ["--arch", "phi3", "--n-embd", "256", "--n-ff", "256", "--n-layer", "2", "--type", "bf16",
                  "--seed", "6"] + common,
    # GQA 4 (attn_v rules of Q2_K), and a gemma3 (tied output, extra norms, Q/K norms).
    "gqa4": ["--n-embd", "256", "--n-ff", "256", "--n-layer", "2", "--n-head", "8", "--n-head-kv", "2",
             "--ctx", "128", "--seed", "7"],
    "gemma3": ["--arch", "gemma3", "--n-embd", "256", "--n-ff", "512", "--n-layer", "3", "--seed", "8"] + common,
}

sanitized = os.environ.get("INFER_TEST_SANITIZED") == "1" and llama_bin is None
full = lambda model: not sanitized or model == "k256"  # noqa: E731: the presets' rules on this model
identical = 0
with tempfile.TemporaryDirectory() as tmp:
    # Every tool runs in tmp with names relative to it: the importance matrix's name goes into the
    # output's metadata.

    def same_file(name, src, extra_ours, extra_theirs, qtype):
        """Ours on src against llama-quantize's output, live with --record, else its recorded size
        and SHA-256; true when they match (a live failure names the first difference)."""
        global identical
        ours, theirs = f"{name}.ours.gguf", f"{name}.llama.gguf"
        run([tool("infer-quantize"), src, ours, qtype, "-t", "2"] + extra_ours, cwd=tmp)
        if not os.path.exists(os.path.join(tmp, ours)):
            return
        a = open(os.path.join(tmp, ours), "rb").read()
        os.remove(os.path.join(tmp, ours))
        if llama_bin is not None:
            p = subprocess.run([os.path.join(llama_bin, "llama-quantize")] + extra_theirs + [src, theirs, qtype, "2"],
                               capture_output=True, timeout=600, cwd=tmp)
            check(p.returncode == 0, f"llama-quantize {name}: exit {p.returncode}: {p.stderr.decode()[-400:]}")
            if p.returncode != 0:
                return
            b = open(os.path.join(tmp, theirs), "rb").read()
            os.remove(os.path.join(tmp, theirs))
            reference[name] = digest(b)
            first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            check(a == b, f"{name}: {len(a)} bytes against llama-quantize's {len(b)}, first difference at byte {first}")
            identical += a == b
            return
        want = reference.get(name)
        check(want is not None, f"{name}: not in {reference_path}")
        got = digest(a)
        same = want == got
        check(same, f"{name}: {got[0]} bytes with SHA-256 {got[1][:16]}..., llama-quantize's output "
              f"{want[0] if want else '?'} bytes with {want[1][:16] if want else '?'}...; "
              "tests/reference/make-quantize-reference.sh compares live and names the first difference")
        identical += same

    def make_model(name, args):
        """infer-make-model's file, checked against the one the reference was made from."""
        src = os.path.join(tmp, f"{name}.gguf")
        run([tool("infer-make-model"), "-o", src] + args)
        got = digest(open(src, "rb").read())
        if llama_bin is not None:
            reference[f"input:{name}"] = got
        else:
            check(reference.get(f"input:{name}") == got,
                  f"{name}.gguf is not the model the reference was made from (infer-make-model changed?): "
                  "run tests/reference/make-quantize-reference.sh")
        return src

    for model, args in models.items():
        src = make_model(model, args)
        for p in presets if full(model) else []:
            same_file(f"{model}-{p}", src, [], [], p)
        for t in pure_types:
            same_file(f"{model}-pure-{t}", src, ["--pure"], ["--pure"], t)
        imatrix = f"{model}.imatrix.gguf"
        write_imatrix(src, os.path.join(tmp, imatrix))
        im = ["--imatrix", imatrix]
        for p in imatrix_presets if full(model) else []:
            same_file(f"{model}-imatrix-{p}", src, im, im, p)
        # Every weighted quantizer on every tensor: on the K-quant rows and on the fallback rows.
        for t in imatrix_pure_types if model in ("k256", "odd") else []:
            same_file(f"{model}-imatrix-pure-{t}", src, im + ["--pure"], im + ["--pure"], t)

    # 80 layers of llama with GQA: llama.cpp's "70B" model type, whose attn_v rule differs.
    if not sanitized:
        src = make_model("l80", ["--n-embd", "256", "--n-ff", "256", "--n-layer", "80", "--seed", "9"] + common)
        for p in presets_70b:
            same_file(f"l80-{p}", src, [], [], p)
        os.remove(src)

    src = os.path.join(tmp, "k256.gguf")
    same_file("keep-output", src, ["--keep", "output.weight"], ["--leave-output-tensor"], "Q4_K_M")
    same_file("keep-layer", src, ["--keep", "blk.1.*"], ["--tensor-type", r"blk\.1\.=f32"], "Q4_K_M")
    im = ["--imatrix", "k256.imatrix.gguf"]
    same_file("imatrix-include", src, im + ["--include-weights", "ffn_"], im + ["--include-weights", "ffn_"], "Q4_K_M")
    same_file("imatrix-exclude", src, im + ["--exclude-weights", "attn_v", "--exclude-weights", "blk.3."],
              im + ["--exclude-weights", "attn_v", "--exclude-weights", "blk.3."], "Q4_K_M")

    # The summary line, progress lines (stderr is a pipe here), exit codes.
    err = run([tool("infer-quantize"), src, os.path.join(tmp, "s.gguf"), "q4_k_m"])
    check(re.search(r"infer-quantize: .* \(Q4_K_M\): \d+ tensors, \d+ converted \| [0-9.]+ MiB -> [0-9.]+ MiB, "
                    r"32\.00 -> [0-9.]+ bits per weight \| [0-9.]+ s", err) is not None, f"summary line: {err!r}")
    check("infer-quantize: 50% of the tensor data" in err, f"no progress lines: {err!r}")
    for bad in (["Q9_9"], ["IQ2_XXS"], []):
        err = run([tool("infer-quantize"), src, os.path.join(tmp, "x.gguf")] + bad, expect_rc=2)
        check(err.startswith("infer-quantize: "), f"usage error message: {err!r}")
    err = run([tool("infer-quantize"), src, os.path.join(tmp, "x.gguf"), "Q4_0", "-t", "0"], expect_rc=2)
    err = run([tool("infer-quantize"), os.path.join(tmp, "missing.gguf"), os.path.join(tmp, "x.gguf"), "Q4_0"],
              expect_rc=1)
    check(len(err.strip().splitlines()) == 1, f"one error line expected: {err!r}")
    # A quantized input is not requantized.
    q = os.path.join(tmp, "q.gguf")
    run([tool("infer-make-model"), "-o", q, "--type", "q8_0"] + models["k256"])
    err = run([tool("infer-quantize"), q, os.path.join(tmp, "x.gguf"), "Q4_0"], expect_rc=1)
    check("requantizing" in err, f"requantization not refused: {err!r}")
    check(not os.path.exists(os.path.join(tmp, "x.gguf")), "a failed run left an output file")

expected = len(models) * (len(presets) + len(pure_types) + len(imatrix_presets)) + 2 * len(imatrix_pure_types) + \
    len(presets_70b) + 4
if sanitized:
    expected = len(models) * len(pure_types) + len(presets) + len(imatrix_presets) + 2 * len(imatrix_pure_types) + 4
check(identical == expected, f"{identical} outputs byte-identical, {expected} comparisons expected")
if llama_bin is not None:
    write_table(reference_path, reference, "llama-quantize's outputs (size, SHA-256) and the models it read", llama_bin)
print(f"{identical} of {expected} outputs byte-identical to llama-quantize's"
      + (" (live)" if llama_bin else " (recorded)") + f"; {checks} checks"
      + (" (sanitizer build: the Release build runs all, with the presets on every model and the 70B case)"
         if sanitized else ""))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
