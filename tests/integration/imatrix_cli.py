#!/usr/bin/env python3
"""infer-imatrix against llama.cpp's llama-imatrix (its AVX2 build), on the reference models of
tests/data/models (F32, F16 and BF16 made by infer-make-model from make-model.args; the quantized
files and the other families as shipped), over the same text with the same chunking.
llama-imatrix's files are kept in tests/data/imatrix/, with the SHA-256 of llama-quantize's outputs
that read them, by tests/reference/make-quantize-reference.sh: it runs this script with --record,
which runs llama.cpp's tools live beside ours and writes them. Without --record no llama.cpp is
needed. Checked:
  - every weight matrix llama-imatrix records is recorded, with equal counts and chunk metadata;
  - the sums of squared activations (in_sum2) are equal bit for bit where our kernels compute what
    the AVX2 build computes (every model but gemma3 on a CPU with AVX2: then both files, GGUF and
    legacy .dat, are byte-identical); gemma3's GELU and the scalar kernels (INFER_CPU_ISA=scalar)
    differ from ggml in the last bits of some activations, so there the sums agree within a
    relative 1e-4 (measured: 2.2e-7 and 5.2e-5; F32 sums of 64 to 512 squares that each differ by
    a few ulps stay far below it, while a wrong row, column or count moves them by >1e-2);
  - each side reads the other's files: infer-quantize --imatrix THEIRS writes llama-quantize
    --imatrix THEIRS's model, in both formats, and so does infer-quantize --imatrix OURS, whose file
    is byte-identical to theirs (with --record llama-quantize --imatrix OURS runs too); that model
    differs from the one quantized without the matrix;
  - infer-quantize --calib TEXT quantizes exactly as --imatrix with infer-imatrix's file of TEXT;
  - --help shows the usage README.md shows;
  - bad input: too short a text, a truncated or foreign imatrix file, another model's matrix (with
    --record: which llama-quantize refuses too), bad flags (exit 1 or 2 with one line on stderr);
    progress lines on stderr.

usage: imatrix_cli.py BIN_DIR REPO_ROOT [--record LLAMA_CPP_BIN_DIR]
"""
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_recorded import command_line, read_table, write_table  # noqa: E402
from llama_recorded import digest as digest_bytes  # noqa: E402

bin_dir, root, llama_bin = command_line("imatrix_cli.py")
sys.path.insert(0, os.path.join(root, "scripts"))
import gguf_kv  # noqa: E402  (the GGUF reader of scripts/)
tool = lambda name: os.path.join(bin_dir, name)
models_dir = os.path.join(root, "tests/data/models")
reference_dir = os.path.join(root, "tests/data/imatrix")
quantize_reference = os.path.join(reference_dir, "llama-quantize.tsv")
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def run(args, expect_rc=0, env=None, cwd=None):
    p = subprocess.run(args, capture_output=True, timeout=600, env=env, cwd=cwd)
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == expect_rc, f"{' '.join(args)}: exit {p.returncode}, expected {expect_rc}: {err[-400:]}")
    return err


def read_imatrix(path):
    """{weight: (sums, counts)} and the metadata of a GGUF imatrix file."""
    kv = {key: value for key, _, value in gguf_kv.read(path)[0]}
    tensors = gguf_kv.read_f32_tensors(path)
    out = {}
    for name in tensors:
        if name.endswith(".in_sum2"):
            w = name[: -len(".in_sum2")]
            out[w] = (tensors[name], tensors.get(w + ".counts"))
    return out, kv


def digest(path):
    return digest_bytes(open(path, "rb").read())


def cpu_has_avx2():
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return False
    return all(f in flags for f in ("avx2", "fma", "f16c"))


exact_possible = cpu_has_avx2()
# name -> (bytes, sha256) of llama-quantize's outputs with llama-imatrix's files.
quantized = read_table(quantize_reference) if llama_bin is None else {}
# The F32/F16/BF16 models infer-make-model rebuilds: llama.cpp's files were made from these.
made = {}
for line in open(os.path.join(models_dir, "reference.tsv")):
    fields = line.split("\t")
    if fields[1] == "ours":
        made[fields[0]] = fields[2]


def llama(name, args):
    """A llama.cpp tool of the --record run, in tmp; true when it exits 0."""
    p = subprocess.run([os.path.join(llama_bin, name)] + args, capture_output=True, timeout=600, cwd=tmp)
    check(p.returncode == 0, f"{name} {' '.join(args)}: exit {p.returncode}: {p.stderr.decode()[-400:]}")
    return p.returncode == 0


CTX, CHUNKS = "64", "8"
rows = []

with tempfile.TemporaryDirectory() as tmp:
    # The text by the same relative name on both sides: the dataset names in the files are equal.
    with open(os.path.join(root, "tests/data/text/corpus.txt"), "rb") as f:
        open(os.path.join(tmp, "calib.txt"), "wb").write(f.read(24000))
    with open(os.path.join(tmp, "short.txt"), "w") as f:
        f.write("too short for two chunks")

    make_args = shlex.split(open(os.path.join(models_dir, "make-model.args")).read())
    models = {}
    for t in ("f32", "f16", "bf16"):
        models[f"ref-{t}"] = os.path.join(tmp, f"ref-{t}.gguf")
        run([tool("infer-make-model"), "-o", models[f"ref-{t}"], "--type", t] + make_args, cwd=root)
        check(digest(models[f"ref-{t}"])[1] == made.get(f"ref-{t}.gguf"),
              f"ref-{t}.gguf is not the model of tests/data/models/reference.tsv (infer-make-model changed?)")
    for name in ("ref-q8_0", "ref-q4_0", "ref-q5_1", "ref-q2_k", "ref-q3_k_m", "ref-q4_k_m", "ref-q6_k",
                 "qwen2-q4_k_m", "qwen3-q4_0", "phi3-q8_0", "gemma3-q8_0", "peaked-q4_k_m"):
        models[name] = os.path.join(models_dir, f"{name}.gguf")

    def compare(label, ours_path, theirs_path, exact):
        ours, kv_o = read_imatrix(ours_path)
        theirs, kv_t = read_imatrix(theirs_path)
        check(sorted(ours) == sorted(theirs), f"{label}: matrices {sorted(set(ours) ^ set(theirs))} on one side only")
        for key in ("general.type", "imatrix.chunk_count", "imatrix.chunk_size", "imatrix.datasets"):
            check(kv_o.get(key) == kv_t.get(key), f"{label}: {key} {kv_o.get(key)!r} against {kv_t.get(key)!r}")
        worst = 0.0
        for w in set(ours) & set(theirs):
            (s_o, c_o), (s_t, c_t) = ours[w], theirs[w]
            check(c_o == c_t, f"{label}: {w} counts {c_o} against {c_t}")
            check(len(s_o) == len(s_t), f"{label}: {w} has {len(s_o)} sums against {len(s_t)}")
            for a, b in zip(s_o, s_t):
                if a != b:
                    worst = max(worst, abs(a - b) / max(abs(b), 1e-30))
        if exact:
            check(worst == 0.0, f"{label}: in_sum2 differs from llama-imatrix's (max relative {worst:.3g})")
        else:
            check(worst <= 1e-4, f"{label}: in_sum2 differs from llama-imatrix's by a relative {worst:.3g} > 1e-4")
        return worst

    # llama-imatrix's file of each model: run with --record (and kept), else the one kept.
    theirs_of = lambda name: os.path.join(reference_dir, f"{name}.gguf")  # noqa: E731
    if llama_bin is not None:
        os.makedirs(reference_dir, exist_ok=True)
    for name, path in models.items():
        if llama_bin is not None:
            llama("llama-imatrix", ["-m", path, "-f", "calib.txt", "-c", CTX, "--chunks", CHUNKS, "-o", theirs_of(name),
                                    "-t", "2"])
        check(os.path.exists(theirs_of(name)), f"{theirs_of(name)} is missing")
        if not os.path.exists(theirs_of(name)):
            continue
        ours = os.path.join(tmp, f"{name}.ours.gguf")
        run([tool("infer-imatrix"), "-m", path, "-f", "calib.txt", "-c", CTX, "--chunks", CHUNKS, "-o", ours, "-t", "2"],
            cwd=tmp)
        exact = exact_possible and not name.startswith("gemma3")
        worst = compare(name, ours, theirs_of(name), exact)
        same_bytes = open(ours, "rb").read() == open(theirs_of(name), "rb").read()
        if exact:
            check(same_bytes, f"{name}: the GGUF imatrix file is not byte-identical to llama-imatrix's")
        rows.append((name, "default", worst, same_bytes))

    # The scalar kernels: other summation orders, the same matrices and counts.
    env = dict(os.environ, INFER_CPU_ISA="scalar")
    for name in ("ref-f32", "ref-q4_k_m"):
        ours = os.path.join(tmp, f"{name}.scalar.gguf")
        run([tool("infer-imatrix"), "-m", models[name], "-f", "calib.txt", "-c", CTX, "--chunks", CHUNKS, "-o", ours],
            env=env, cwd=tmp)
        rows.append((name, "scalar", compare(f"{name} (scalar)", ours, theirs_of(name), False), None))

    # The legacy format, both ways.
    src = models["ref-f32"]
    ours_dat, theirs_dat = os.path.join(tmp, "ours.dat"), os.path.join(reference_dir, "ref-f32.dat")
    run([tool("infer-imatrix"), "-m", src, "-f", "calib.txt", "-c", CTX, "--chunks", CHUNKS, "-o", ours_dat,
         "--output-format", "dat"], cwd=tmp)
    if llama_bin is not None:
        llama("llama-imatrix", ["-m", src, "-f", "calib.txt", "-c", CTX, "--chunks", CHUNKS, "-o", theirs_dat,
                                "--output-format", "dat"])
    if exact_possible:
        check(open(ours_dat, "rb").read() == open(theirs_dat, "rb").read(), "the .dat file differs from llama-imatrix's")

    # Each side reads the other's files. The matrix goes in by one relative name, imatrix.FORMAT:
    # the quantized model's metadata holds it.
    def quantize_with(label, imatrix_file, fmt, qtype, tool_name):
        shutil.copyfile(imatrix_file, os.path.join(tmp, f"imatrix.{fmt}"))
        out = f"{label}.gguf"
        if tool_name == "infer-quantize":
            run([tool("infer-quantize"), src, out, qtype, "--imatrix", f"imatrix.{fmt}", "-t", "2"], cwd=tmp)
        else:
            llama("llama-quantize", ["--imatrix", f"imatrix.{fmt}", src, out, qtype, "2"])
        return os.path.join(tmp, out)

    for qtype in ("Q4_K_M", "Q4_0"):
        for fmt, ours_file, theirs_file in (("gguf", os.path.join(tmp, "ref-f32.ours.gguf"), theirs_of("ref-f32")),
                                            ("dat", ours_dat, theirs_dat)):
            key = f"ref-f32-{qtype}-{fmt}"
            a = quantize_with(f"{key}-theirs", theirs_file, fmt, qtype, "infer-quantize")
            if llama_bin is not None:
                b = quantize_with(f"{key}-llama", theirs_file, fmt, qtype, "llama-quantize")
                quantized[key] = digest(b)
                check(open(a, "rb").read() == open(b, "rb").read(),
                      f"{key}: infer-quantize with llama-imatrix's file differs from llama-quantize with it")
            check(digest(a) == quantized.get(key),
                  f"{key}: infer-quantize with llama-imatrix's file is not llama-quantize's model with it")
            a_ours = quantize_with(f"{key}-ours", ours_file, fmt, qtype, "infer-quantize")
            if exact_possible:
                check(open(a_ours, "rb").read() == open(a, "rb").read(),
                      f"{key}: infer-quantize with infer-imatrix's file differs from it with llama-imatrix's")
            if llama_bin is not None:
                b_ours = quantize_with(f"{key}-llama-ours", ours_file, fmt, qtype, "llama-quantize")
                check(open(b_ours, "rb").read() == open(b, "rb").read(),
                      f"{key}: llama-quantize with infer-imatrix's file differs from llama-quantize with llama-imatrix's")
    plain = os.path.join(tmp, "plain.gguf")
    run([tool("infer-quantize"), src, plain, "Q4_K_M"])
    weighted = os.path.join(tmp, "ref-f32-Q4_K_M-gguf-ours.gguf")
    pa, wa = open(plain, "rb").read(), open(weighted, "rb").read()
    # The tensor data (the last MiB) changes, not only the metadata.
    check(pa[-(1 << 20):] != wa[-(1 << 20):], "quantizing with the importance matrix changed no tensor data")

    # --calib: the same model as --imatrix with infer-imatrix's file of the same text.
    calib = os.path.join(tmp, "calib.gguf")
    err = run([tool("infer-quantize"), src, calib, "Q4_K_M", "--calib", "calib.txt", "--calib-ctx", CTX, "--calib-chunks",
               CHUNKS], cwd=tmp)
    check("chunks of 64 tokens" in err, f"--calib printed no calibration line: {err[-300:]!r}")
    ca = open(calib, "rb").read()
    check(ca[-(1 << 20):] == wa[-(1 << 20):], "--calib quantized differently from --imatrix with the same text")

    # --help: each usage form (a line starting with the tool's name, and the lines of "[...]" after
    # it) is one README.md shows (whitespace aside).
    readme = " ".join(open(os.path.join(root, "README.md")).read().split())
    for name in ("infer-imatrix", "infer-quantize"):
        help_text = subprocess.run([tool(name), "--help"], capture_output=True, text=True).stdout
        forms, current = [], None
        for line in help_text.splitlines():
            text = line.strip().removeprefix("usage: ")
            if text.startswith(name):
                current = [text]
                forms.append(current)
            elif text.startswith("[") and current is not None:
                current.append(text)
            else:
                current = None
        check(len(forms) >= 1, f"{name} --help shows no usage line")
        for form in forms:
            usage = " ".join(" ".join(form).split())
            check(usage in readme, f"{name} --help usage is not one README.md shows: {usage!r}")

    # Progress and errors.
    err = run([tool("infer-imatrix"), "-m", src, "-f", "calib.txt", "-c", CTX, "--chunks", "4", "-o", "p.gguf"], cwd=tmp)
    check("infer-imatrix: 50% (2 of 4 chunks)" in err, f"no progress lines: {err!r}")
    check("final estimate: PPL" in err, f"no perplexity estimate: {err!r}")
    for bad, rc in ((["-m", src, "-f", "short.txt"], 1), (["-m", src], 2), (["-m", src, "-f", "calib.txt", "-c", "8"], 2),
                    (["-m", src, "-f", "calib.txt", "--output-format", "xml"], 2), (["--bogus"], 2)):
        err = run([tool("infer-imatrix")] + bad, expect_rc=rc, cwd=tmp)
        # Exit 1: one line; exit 2 (usage): one line, then the usage.
        check(err.startswith("infer-imatrix: ") and (rc == 2 or len(err.strip().splitlines()) == 1) and
              (rc == 1 or "usage: infer-imatrix" in err), f"error message {bad}: {err!r}")
    truncated = os.path.join(tmp, "truncated.gguf")
    open(truncated, "wb").write(open(os.path.join(tmp, "ref-f32.ours.gguf"), "rb").read()[:300])
    garbage = os.path.join(tmp, "garbage.dat")
    open(garbage, "wb").write(struct.pack("<iii", 1, 1000000, 5) + b"abc")
    for f in (truncated, garbage, src, os.path.join(tmp, "missing.dat")):
        err = run([tool("infer-quantize"), src, os.path.join(tmp, "y.gguf"), "Q4_K_M", "--imatrix", f], expect_rc=1)
        check(len(err.strip().splitlines()) == 1 and err.startswith("infer-quantize: "), f"--imatrix {f}: {err!r}")
    # Another model's matrix: gemma3's attn_output has 512 columns, the Llama shape's 256 (llama-quantize
    # refuses it too).
    err = run([tool("infer-quantize"), src, os.path.join(tmp, "y.gguf"), "Q4_K_M", "--imatrix",
               os.path.join(tmp, "gemma3-q8_0.ours.gguf")], expect_rc=1)
    check("is different from tensor size" in err, f"a mismatched importance matrix: {err!r}")
    if llama_bin is not None:
        p = subprocess.run([os.path.join(llama_bin, "llama-quantize"), "--imatrix", os.path.join(tmp, "gemma3-q8_0.ours.gguf"),
                            src, os.path.join(tmp, "z.gguf"), "Q4_K_M"], capture_output=True, timeout=600)
        check(p.returncode != 0, "llama-quantize accepted a mismatched importance matrix (the test's premise)")
    run([tool("infer-quantize"), src, os.path.join(tmp, "y.gguf"), "Q4_K_M", "--imatrix", truncated, "--calib", "calib.txt"],
        expect_rc=2)
    check(not os.path.exists(os.path.join(tmp, "y.gguf")), "a failed run left an output file")

if llama_bin is not None:
    write_table(quantize_reference, quantized,
                "llama-quantize --imatrix with llama-imatrix's files of this directory (size, SHA-256)", llama_bin)
print(f"{'model':16} {'ISA':8} {'max rel. diff of in_sum2':>26}  GGUF file identical"
      + (" (llama-imatrix live)" if llama_bin else " (llama-imatrix's kept files)"))
for name, isa, worst, same in rows:
    print(f"{name:16} {isa:8} {worst:26.3g}  {'' if same is None else 'yes' if same else 'no'}")
print(f"{len(failures)} of {checks} checks failed" if failures else f"all {checks} checks passed")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
