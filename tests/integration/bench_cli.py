#!/usr/bin/env python3
"""infer-bench from the outside, on a tiny random-weight model made with infer-make-model (no
timing is asserted, only the shape of what it reports):
  - --json prints a JSON array with llama-bench's fields, one object per test, n_prompt / n_gen
    as asked, -r samples each; -p 0 / -n 0 skip a test;
  - the markdown table has llama-bench's columns and a row per test;
  - INFER_PROFILE=1 adds the per-op table on stderr (a matmul row for the model's weight type),
    and nothing is printed there without it;
  - bad arguments exit 2 and an unreadable model exits 1, each with a first stderr line naming
    the problem; --help is the text README.md shows;
  - cpu_isa names the CPU kernels' level: INFER_CPU_ISA=scalar gives "scalar", a name that is no
    level warns on stderr and keeps the default;
  - it is a host like the others: it loads libinfer.so.

usage: bench_cli.py BIN_DIR REPO_ROOT
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

bin_dir, root = sys.argv[1:3]
bench = os.path.join(bin_dir, "infer-bench")
failures = []
checks = 0

FIELDS = ["cpu_info", "backends", "model_filename", "model_type", "model_size", "model_n_params", "n_batch", "n_ubatch",
          "n_threads", "type_k", "type_v", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts",
          "stddev_ts", "samples_ns", "samples_ts"]


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def run(args, expect_rc=0, env=None):
    e = dict(os.environ)
    e.pop("INFER_PROFILE", None)
    e.update(env or {})
    p = subprocess.run(args, capture_output=True, timeout=600, cwd=root, env=e)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == expect_rc, f"{shlex.join(args[1:])}: exit {p.returncode}, expected {expect_rc}: {err[-300:]}")
    return out, err


def check_rows(rows, model, tests, reps, what):
    check(isinstance(rows, list) and len(rows) == len(tests), f"{what}: {len(rows)} objects, expected {len(tests)}")
    for row, (n_prompt, n_gen) in zip(rows, tests):
        missing = [f for f in FIELDS if f not in row]
        check(not missing, f"{what}: fields missing: {missing}")
        if missing:
            continue
        check(row["n_prompt"] == n_prompt and row["n_gen"] == n_gen,
              f"{what}: n_prompt {row['n_prompt']}, n_gen {row['n_gen']}; expected {n_prompt}, {n_gen}")
        check(row["model_filename"] == model, f"{what}: model_filename {row['model_filename']!r}")
        check(row["n_depth"] == 0 and 1 <= row["n_threads"] <= 2, f"{what}: n_depth {row['n_depth']}, n_threads {row['n_threads']}")
        check(row["model_size"] > 0 and row["model_n_params"] > 0 and row["model_type"].startswith("llama "),
              f"{what}: model {row['model_type']!r}, {row['model_size']} bytes, {row['model_n_params']} parameters")
        check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["test_time"]) is not None, f"{what}: test_time {row['test_time']!r}")
        ns, ts = row["samples_ns"], row["samples_ts"]
        check(len(ns) == reps and len(ts) == reps and all(isinstance(x, int) and x > 0 for x in ns),
              f"{what}: {len(ns)} samples_ns and {len(ts)} samples_ts for -r {reps}: {ns}")
        # The rates are the tokens over each sample's time, and the averages are of the samples.
        tokens = n_prompt + n_gen
        check(all(abs(t - tokens * 1e9 / n) <= 1e-3 * t for n, t in zip(ns, ts)), f"{what}: samples_ts {ts} != tokens / samples_ns {ns}")
        check(abs(row["avg_ts"] - sum(ts) / len(ts)) <= 1e-3 * row["avg_ts"] and abs(row["avg_ns"] - sum(ns) / len(ns)) <= 1,
              f"{what}: avg_ts {row['avg_ts']} / avg_ns {row['avg_ns']} are not the samples' means")
        check(row["stddev_ts"] >= 0 and row["stddev_ns"] >= 0 and (reps > 1 or row["stddev_ts"] == 0),
              f"{what}: stddev_ts {row['stddev_ts']}")


with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "tiny.gguf")
    subprocess.run([os.path.join(bin_dir, "infer-make-model"), "-o", model, "--n-embd", "64", "--n-layer", "2", "--n-head", "4",
                    "--n-head-kv", "2", "--n-ff", "128", "--ctx", "256", "--seed", "1"], check=True, capture_output=True)
    base = [bench, "-m", model, "-t", "2"]

    out, err = run(base + ["-p", "8", "-n", "4", "-r", "1", "--json"])
    try:
        rows = json.loads(out)
    except json.JSONDecodeError as e:
        rows = []
        check(False, f"--json: not JSON ({e}): {out[:200]!r}")
    check_rows(rows, model, [(8, 0), (0, 4)], 1, "-p 8 -n 4 -r 1 --json")
    check("INFER_PROFILE" not in err, f"without INFER_PROFILE, stderr has a profile: {err[:200]!r}")

    # The CPU kernels' level: the default, forced to the scalar reference, and a name that is none.
    default_isa = rows[0].get("cpu_isa") if rows else None
    check(default_isa in ("scalar", "avx2", "avxvnni", "avx512"), f"cpu_isa {default_isa!r}")
    out, err = run(base + ["-p", "8", "-n", "0", "-r", "1", "--json"], env={"INFER_CPU_ISA": "scalar"})
    forced = json.loads(out or "[]")
    check(forced and forced[0].get("cpu_isa") == "scalar" and "INFER_CPU_ISA" not in err,
          f"INFER_CPU_ISA=scalar: cpu_isa {forced[0].get('cpu_isa') if forced else None!r}, stderr {err[:200]!r}")
    out, err = run(base + ["-p", "8", "-n", "0", "-r", "1", "--json"], env={"INFER_CPU_ISA": "avx-512"})
    bogus = json.loads(out or "[]")
    check(bogus and bogus[0].get("cpu_isa") == default_isa and "INFER_CPU_ISA=avx-512 is not scalar, avx2, avxvnni or avx512" in err,
          f"INFER_CPU_ISA=avx-512: cpu_isa {bogus[0].get('cpu_isa') if bogus else None!r}, stderr {err[:200]!r}")

    out, _ = run(base + ["-p", "16", "-n", "0", "-r", "3", "--json"])
    check_rows(json.loads(out or "[]"), model, [(16, 0)], 3, "-p 16 -n 0 -r 3 --json")
    out, _ = run(base + ["-p", "0", "-n", "5", "-r", "2", "--json"])
    check_rows(json.loads(out or "[]"), model, [(0, 5)], 2, "-p 0 -n 5 -r 2 --json")

    # The markdown table: llama-bench's columns, one row per test.
    out, err = run(base + ["-p", "8", "-n", "4", "-r", "2"], env={"INFER_PROFILE": "1"})
    lines = out.splitlines()
    check(len(lines) >= 4 and re.fullmatch(r"\| model +\| +size \| +params \| threads \| +test \| +t/s \|", lines[0]) is not None,
          f"table header: {lines[:1]}")
    rows = [l for l in lines[2:] if l.startswith("|")]
    check(len(rows) == 2 and re.search(r"\| +pp8 \| +[0-9.]+ ± [0-9.]+ \|$", rows[0]) and re.search(r"\| +tg4 \| +[0-9.]+ ± [0-9.]+ \|$", rows[1]),
          f"table rows: {rows}")
    # INFER_PROFILE=1: the ops' table on stderr, matmuls by weight type (this model is F32).
    check("INFER_PROFILE: wall time per op" in err and re.search(r"^\| matmul F32 \| \d+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$", err, re.M)
          and re.search(r"^\| attention \| \d+ \|", err, re.M), f"INFER_PROFILE=1: stderr {err[:400]!r}")

    for bad in (["-p", "-1"], ["-r", "0"], ["-p", "0", "-n", "0"], ["--bogus"], ["-n"], ["-t", "x"]):
        _, err = run(base + bad, expect_rc=2)
        check(err.startswith("infer-bench: ") and len(err.splitlines()[0]) > len("infer-bench: "), f"{bad}: stderr {err[:200]!r}")
    _, err = run([bench, "-m", os.path.join(tmp, "missing.gguf"), "-p", "4", "-n", "4"], expect_rc=1)
    check(len(err.strip().splitlines()) == 1 and "missing.gguf" in err, f"missing model: stderr {err!r}")

help_text, _ = run([bench, "--help"])
readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
check(help_text.startswith("usage: infer-bench") and help_text in readme, "infer-bench --help is not the text README.md shows")

if shutil.which("readelf"):
    dyn = subprocess.run(["readelf", "-d", bench], capture_output=True, text=True).stdout
    check(re.search(r"NEEDED.*\[libinfer\.so\.\d+\]", dyn) is not None, "infer-bench does not load libinfer.so")

for f in failures:
    print("FAIL:", f)
print(f"{checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
