#!/usr/bin/env python3
"""infer-inspect from the outside: good files give exit 0 and valid JSON; hundreds of corrupted
variants give exit 1 and exactly one line on stderr; nothing ends in a signal.

Also checks that our writer still writes, byte for byte, the file llama.cpp read in
tests/data/gguf/libinfer-tiny-f32.dump.txt (so llama.cpp's acceptance of it still holds).

usage: inspect_cli.py INSPECT MAKE_MODEL DATA_DIR
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

inspect, make_model, data_dir = sys.argv[1:4]
gguf_dir = os.path.join(data_dir, "gguf")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(args):
    p = subprocess.run(args, capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def expect_rejected(path, what):
    rc, out, err = run([inspect, path])
    lines = err.splitlines()
    check(rc == 1, f"{what}: exit status {rc}, expected 1 (stderr: {err[:200]!r})")
    check(len(lines) == 1 and lines[0].startswith("infer-inspect: "), f"{what}: stderr is not one message line: {err[:300]!r}")
    return rc == 1


def data_end(path):
    rc, out, _ = run([inspect, "--json", path])
    info = json.loads(out)
    return info["data_offset"] + max((t["offset"] + t["bytes"] for t in info["tensors"]), default=0)


# 1. Good files: text and JSON.
good = sorted(f for f in os.listdir(gguf_dir) if f.endswith(".gguf"))
check(len(good) >= 4, "reference files missing")
for f in good:
    path = os.path.join(gguf_dir, f)
    rc, out, err = run([inspect, path])
    check(rc == 0 and "tensors (" in out and "totals:" in out, f"{f}: text mode failed: {rc} {err}")
    rc, out, err = run([inspect, "--json", path])
    check(rc == 0, f"{f}: --json exit {rc}: {err}")
    info = json.loads(out)
    check(info["format"] == "gguf" and info["version"] == 3, f"{f}: format/version")
    check(info["totals"]["tensors"] == len(info["tensors"]), f"{f}: totals disagree with the table")
    check(info["totals"]["bytes"] == sum(t["bytes"] for t in info["tensors"]), f"{f}: byte total")
    if f.startswith("libinfer") or f.startswith("llama-quantized"):
        check(info["architecture"] == "llama", f"{f}: architecture")
        check(info["tokenizer"]["vocab_size"] == 259, f"{f}: vocab size")
        check(info["hyperparameters"]["block_count"] in (1, 2), f"{f}: block_count")

# 2. The writer still produces the file llama.cpp accepted.
with tempfile.TemporaryDirectory() as tmp:
    regenerated = os.path.join(tmp, "tiny.gguf")
    rc, _, err = run([make_model, "-o", regenerated, "--n-embd", "32", "--n-layer", "1", "--n-head", "4",
                      "--n-head-kv", "2", "--n-ff", "64", "--ctx", "128", "--seed", "7"])
    check(rc == 0, f"infer-make-model failed: {err}")
    with open(regenerated, "rb") as a, open(os.path.join(gguf_dir, "libinfer-tiny-f32.gguf"), "rb") as b:
        check(a.read() == b.read(), "our writer no longer writes the file llama.cpp accepted (regenerate tests/data/gguf)")

# 3. Usage errors and missing files.
rc, _, _ = run([inspect])
check(rc == 2, f"no arguments: exit {rc}, expected 2")
rc, _, _ = run([inspect, "--bogus", "x"])
check(rc == 2, f"unknown option: exit {rc}, expected 2")
with tempfile.TemporaryDirectory() as tmp:
    expect_rejected(os.path.join(tmp, "missing.gguf"), "missing file")
    expect_rejected(tmp, "a directory")

# 4. Corrupted variants.
rng = random.Random(20261202)
rejected = 0
variants = 0
with tempfile.TemporaryDirectory() as tmp:
    bad = os.path.join(tmp, "bad.gguf")
    for base_name in ("libinfer-tiny-f32.gguf", "llama-quantized-q8_0.gguf", "llama-written.gguf"):
        base = open(os.path.join(gguf_dir, base_name), "rb").read()
        end = data_end(os.path.join(gguf_dir, base_name))
        # Truncations anywhere before the end of the tensor data: always malformed.
        for cut in sorted(set(rng.randrange(0, end) for _ in range(120))):
            open(bad, "wb").write(base[:cut])
            variants += 1
            rejected += expect_rejected(bad, f"{base_name} truncated to {cut} bytes")
        # Header fields set to impossible values: always malformed or unsupported.
        for off, val, fmt in ((0, 0x4C4D4747, "<I"), (4, 1, "<I"), (4, 99, "<I"), (8, 2**63, "<Q"),
                              (16, 2**64 - 1, "<Q"), (8, 10**9, "<Q"), (16, 10**9, "<Q")):
            b = bytearray(base)
            struct.pack_into(fmt, b, off, val)
            open(bad, "wb").write(b)
            variants += 1
            rejected += expect_rejected(bad, f"{base_name} with header field at {off} = {val}")
        # Random damage in the header, metadata and tensor infos: either still readable (exit 0)
        # or rejected with one line (exit 1); never anything else.
        info_end = json.loads(run([inspect, "--json", os.path.join(gguf_dir, base_name)])[1])["data_offset"]
        for _ in range(100):
            b = bytearray(base)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(0, info_end)
                kind = rng.randrange(3)
                if kind == 0:
                    b[at] ^= 1 << rng.randrange(8)
                elif kind == 1:
                    b[at] = rng.randrange(256)
                else:
                    v = rng.choice([2**64 - 1, 2**63, 2**32, rng.randrange(2**64)])
                    for k in range(8):
                        if at + k < len(b):
                            b[at + k] = (v >> (8 * k)) & 0xFF
            open(bad, "wb").write(b)
            variants += 1
            rc, out, err = run([inspect, bad])
            check(rc in (0, 1), f"{base_name} random damage: exit status {rc} (a signal?) stderr {err[:200]!r}")
            if rc == 1:
                rejected += 1
                check(len(err.splitlines()) == 1, f"random damage: stderr not one line: {err[:300]!r}")

print(f"{variants} corrupted variants, {rejected} rejected with exit status 1 and one message line")
for f in failures[:50]:
    print("FAIL:", f)
print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)
