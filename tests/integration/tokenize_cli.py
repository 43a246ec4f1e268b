#!/usr/bin/env python3
"""infer-tokenize from the outside: for every case in tests/data/tokenizer/cases.txt, with and
without BOS and special-token parsing, it prints llama.cpp's ids (expected.txt), from the GGUF file
and from the tokenizer.model it was made from; the same for the byte-level BPE vocabulary of SmolLM2
(smollm2-vocab.gguf, bpe-expected.txt, cases of cases.txt and bpe-cases.txt); --pieces prints
id:entry pairs; errors exit 1 with one stderr line, usage errors exit 2.

In a sanitizer build (INFER_TEST_SANITIZED=1, set by CMake) every eighth case runs through the
tool, with all four flag combinations and every model, and every other check runs: the unit tests
compare every case's ids in-process there (tests/unit/test_tokenizer.cpp, test_bpe_tokenizer.cpp),
and each case here is a process start, which dominates under the sanitizers (800 of them took
135 s). The summary line says how many ran.

usage: tokenize_cli.py INFER_TOKENIZE DATA_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

tokenize, data_dir = sys.argv[1:3]
sanitized = os.environ.get("INFER_TEST_SANITIZED") == "1"
ran = 0
tok_dir = os.path.join(data_dir, "tokenizer")
gguf = os.path.join(tok_dir, "spm-bpe.gguf")
spm = os.path.join(tok_dir, "spm-bpe.model")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def unescape(text):
    """The escapes of cases.txt: \\n \\t \\r \\\\ \\xHH; anything else is an error."""
    out = bytearray()
    i = 0
    raw = text.encode("utf-8")
    while i < len(raw):
        c = raw[i]
        if c != ord("\\"):
            out.append(c)
            i += 1
            continue
        e = chr(raw[i + 1])
        if e in "ntr\\":
            out += {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\"}[e]
            i += 2
        elif e == "x" and re.fullmatch(rb"[0-9A-Fa-f]{2}", raw[i + 2:i + 4]):
            out.append(int(raw[i + 2:i + 4], 16))
            i += 4
        else:
            raise ValueError(f"unknown escape in {text!r}")
    return bytes(out)


def lines(name):
    with open(os.path.join(tok_dir, name), encoding="utf-8") as f:
        return [l.rstrip("\n") for l in f if not l.startswith("#")]


def run(args):
    p = subprocess.run([tokenize] + args, capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


cases = {}
for line in lines("cases.txt"):
    name, _, text = line.partition("\t")
    cases[name] = unescape(text)
# The cases run through the tool: all, or every eighth in a sanitizer build.
chosen = set(list(cases)[:: 8 if sanitized else 1])

with tempfile.TemporaryDirectory() as tmp:
    # 1. Every reference case, from the GGUF file and from the tokenizer.model.
    files = {}
    for name, text in cases.items():
        files[name] = os.path.join(tmp, name + ".txt")
        with open(files[name], "wb") as f:
            f.write(text)
    expected = [l.split("\t") for l in lines("expected.txt")]
    check(len(expected) == 4 * len(cases), f"expected.txt has {len(expected)} rows for {len(cases)} cases")
    for name, bos, special, ids in expected:
        if name not in chosen:
            continue
        flags = ([] if bos == "1" else ["--no-bos"]) + (["--parse-special"] if special == "1" else [])
        for model in (gguf, spm):
            ran += 1
            rc, out, err = run(["-m", model, "-f", files[name]] + flags)
            check(rc == 0 and out == ids + "\n",
                  f"{name} {' '.join(flags)} ({os.path.basename(model)}): got {out.strip()!r} (exit {rc}, {err.strip()!r}), "
                  f"llama.cpp gives {ids!r}")

    # 1b. The same for SmolLM2's byte-level BPE vocabulary.
    bpe_cases = {}
    for line in lines("bpe-cases.txt"):
        name, _, text = line.partition("\t")
        bpe_cases[name] = unescape(text)
        if len(bpe_cases) % 8 == 1 or not sanitized:
            chosen.add(name)
        files[name] = os.path.join(tmp, name + ".txt")
        with open(files[name], "wb") as f:
            f.write(bpe_cases[name])
    smollm2 = os.path.join(tok_dir, "smollm2-vocab.gguf")
    rows = [l.split("\t") for l in lines("bpe-expected.txt") if l.startswith("smollm2-vocab.gguf\t")]
    check(len(rows) == 4 * (len(cases) + len(bpe_cases)), f"bpe-expected.txt has {len(rows)} SmolLM2 rows")
    for _, name, bos, special, ids in rows:
        if name not in chosen:
            continue
        flags = ([] if bos == "1" else ["--no-bos"]) + (["--parse-special"] if special == "1" else [])
        ran += 1
        rc, out, err = run(["-m", smollm2, "-f", files[name]] + flags)
        check(rc == 0 and out == ids + "\n",
              f"{name} {' '.join(flags)} (smollm2-vocab.gguf): got {out.strip()!r} (exit {rc}, {err.strip()!r}), "
              f"llama.cpp gives {ids!r}")

    # 2. -p and --pieces: id:entry pairs whose ids are those of the plain output.
    rc, out, _ = run(["-m", gguf, "-p", "Hello world", "--pieces"])
    pairs = out.split()
    check(rc == 0 and len(pairs) >= 2 and pairs[0] == "1:<s>", f"--pieces output: {out!r}")
    rc, plain, _ = run(["-m", gguf, "-p", "Hello world"])
    check(plain.split() == [p.split(":", 1)[0] for p in pairs], f"--pieces ids {out!r} differ from {plain!r}")
    check(all(":" in p for p in pairs), f"--pieces pairs: {out!r}")

    # 3. Errors: exit 1 with one line; usage: exit 2.
    bad = os.path.join(tmp, "bad.gguf")
    with open(gguf, "rb") as f:
        data = f.read()
    with open(bad, "wb") as f:
        f.write(data[: len(data) // 3])
    not_a_model = os.path.join(tmp, "text.model")
    with open(not_a_model, "wb") as f:
        f.write(b"\xff\xff\xff\xff not a sentencepiece model")
    for args, what in [
        (["-m", os.path.join(tmp, "missing.gguf"), "-p", "x"], "missing model"),
        (["-m", bad, "-p", "x"], "truncated GGUF"),
        (["-m", not_a_model, "-p", "x"], "malformed tokenizer.model"),
        (["-m", os.path.join(data_dir, "gguf", "llama-written.gguf"), "-p", "x"], "GGUF without a tokenizer"),
        (["-m", gguf, "-f", os.path.join(tmp, "missing.txt")], "missing text file"),
    ]:
        rc, out, err = run(args)
        check(rc == 1 and out == "" and len(err.splitlines()) == 1 and err.startswith("infer-tokenize: "),
              f"{what}: exit {rc}, stdout {out!r}, stderr {err!r}")
    for args, what in [([], "no arguments"), (["-m", gguf], "no text"), (["-m", gguf, "-p", "x", "-f", "y"], "-p and -f"),
                       (["-m", gguf, "-p"], "-p without a value"), (["-m", gguf, "-p", "x", "--bogus"], "unknown flag")]:
        rc, out, err = run(args)
        check(rc == 2 and out == "" and err.startswith("infer-tokenize: "), f"{what}: exit {rc}, stderr {err!r}")

for f in failures:
    print("FAIL:", f)
print(f"{len(cases)} cases (SentencePiece), {len(rows)} SmolLM2 BPE rows: {ran} runs of the tool"
      + (" (sanitizer build: every eighth case; the unit tests check every one in-process)" if sanitized else "")
      + f", {len(failures)} failures")
sys.exit(1 if failures else 0)
