#!/usr/bin/env python3
"""infer-generate, infer-tokenize and infer-perplexity from the outside, on the F32 reference
model (rebuilt with infer-make-model from tests/data/models/make-model.args):
  - greedy generation is deterministic and a fixed seed reproduces a sampled run;
  - --ids prints ids that infer-tokenize's vocabulary knows, and -n bounds their number;
  - a stop string cuts the output right before its first occurrence, and is not printed;
  - --top-probs prints one "top:" line per generated token, led by the greedy choice; the timing
    line on stderr keeps the fields scripts parse;
  - bad arguments exit 2, unreadable models exit 1, both with one line on stderr;
  - infer-make-model --vocab FILE.gguf takes that file's vocabulary (the same token ids);
  - the user-facing tools are hosts like any other: examples/ and the serving benchmark include
    public headers only, and infer-generate, infer-chat and infer-perplexity load libinfer.so.

usage: tools_cli.py BIN_DIR REPO_ROOT
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

bin_dir, root = sys.argv[1:3]
tool = lambda name: os.path.join(bin_dir, name)
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def run(args, expect_rc=0):
    p = subprocess.run(args, capture_output=True, timeout=600, cwd=root)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == expect_rc, f"{' '.join(args[:4])}...: exit {p.returncode}, expected {expect_rc}: {err[-300:]}")
    return out, err


with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "ref-f32.gguf")
    args = shlex.split(open(os.path.join(root, "tests/data/models/make-model.args")).read())
    run([tool("infer-make-model"), "-o", model, "--type", "f32"] + args)
    gen = [tool("infer-generate"), "-m", model, "-p", "The licence of the program", "-t", "2"]

    a, _ = run(gen + ["--temp", "0", "-n", "24"])
    b, _ = run(gen + ["--temp", "0", "-n", "24"])
    check(a == b and len(a) > 0, "greedy generation is not deterministic or empty")
    s1, _ = run(gen + ["--temp", "0.9", "--seed", "7", "-n", "24"])
    s2, _ = run(gen + ["--temp", "0.9", "--seed", "7", "-n", "24"])
    check(s1 == s2, "the same seed gave different samples")

    ids_out, _ = run(gen + ["--temp", "0", "-n", "24", "--ids"])
    ids = [int(t) for t in ids_out.split()]
    check(0 < len(ids) <= 24, f"--ids printed {len(ids)} ids for -n 24")
    tok_out, _ = run([tool("infer-tokenize"), "-m", model, "-p", "The licence of the program"])
    check(all(t.isdigit() for t in tok_out.split()), "infer-tokenize printed something other than ids")

    top_ids, top_err = run(gen + ["--temp", "0", "-n", "24", "--ids", "--top-probs", "3"])
    tops = [[(int(a), float(b)) for a, b in (kv.split(":") for kv in line.split()[1:])]
            for line in top_err.splitlines() if line.startswith("top:")]
    check(top_ids == ids_out and len(tops) == len(ids) and all(len(t) == 3 for t in tops),
          f"--top-probs 3: {len(tops)} lines for {len(ids)} ids")
    check(all(t[0][0] == i and t[0][1] >= t[1][1] >= t[2][1] and t[0][1] <= 0 for t, i in zip(tops, ids)),
          f"--top-probs: the greedy id does not lead its line: {tops[:3]} for {ids[:3]}")
    timing = re.search(r"infer-generate: load [0-9.]+ ms \| prompt (\d+) tokens, [0-9.]+ ms, [0-9.]+ tokens/s \| "
                       r"generated (\d+) tokens, [0-9.]+ ms, [0-9.]+ tokens/s, [0-9.]+ ms per token \| finish: (\w+)", top_err)
    check(timing is not None and int(timing.group(2)) == len(ids), f"timing line: {top_err.splitlines()[-1:]}")

    # Stop at a piece of the greedy output: the output becomes the text before it.
    text = a
    if len(text) >= 8:
        stop = text[len(text) // 2: len(text) // 2 + 3]
        c, _ = run(gen + ["--temp", "0", "-n", "24", "--stop", stop])
        check(c == text[: text.find(stop)], f"--stop {stop!r}: got {c!r}, expected {text[: text.find(stop)]!r}")

    # --prompts: every line a request, all in one engine; each answer must be the one the prompt
    # gets alone (same greedy ids), in input order, whatever the batching knobs.
    import json
    prompts = ["The licence of the program", "Free software", "\"A JSON line\\nwith a newline\"",
               "Copyright", "The GNU General Public License is a free, copyleft license for software"]
    texts = ["The licence of the program", "Free software", "A JSON line\nwith a newline", "Copyright",
             "The GNU General Public License is a free, copyleft license for software"]
    pfile = os.path.join(tmp, "prompts.txt")
    with open(pfile, "w") as f:
        f.write("\n".join(prompts) + "\n")
    alone = [[int(t) for t in run(gen[:3] + ["-p", t, "-t", "2", "--temp", "0", "-n", "16", "--ids"])[0].split()]
             for t in texts]
    for knobs in ([], ["--max-batch-tokens", "3", "--max-sequences", "2", "--no-prefix-cache"],
                  ["--max-sequences", "2", "--priority-preemption"]):
        out, _ = run(gen[:3] + ["--prompts", pfile, "-t", "2", "--temp", "0", "-n", "16"] + knobs)
        lines = [json.loads(l) for l in out.splitlines()]
        check([l["index"] for l in lines] == list(range(len(texts))), f"--prompts {knobs}: indexes {[l.get('index') for l in lines]}")
        for l, t, ids in zip(lines, texts, alone):
            check(l["ids"] == ids, f"--prompts {knobs}: {t!r}: {l['ids']} != alone {ids}")
            ntok = len(run([tool("infer-tokenize"), "-m", model, "-p", t])[0].split())
            check(l["prompt_tokens"] == ntok, f"--prompts: prompt_tokens {l['prompt_tokens']} != {ntok}")
            check(l["finish_reason"] in ("stop", "length") and l["ttft_ms"] > 0 and "cached_tokens" in l and "tpot_ms" in l,
                  f"--prompts: fields of {l}")
    with open(pfile, "a") as f:
        f.write("\"unterminated\n")
    _, err = run(gen[:3] + ["--prompts", pfile], expect_rc=1)
    check("line 6" in err, f"--prompts with a bad JSON line: {err!r}")

    # --type q8_0 / q4_0: every matrix quantized (norms stay F32); the file loads and its
    # perplexity stays near the F32 model's (weights are N(0, sigma) noise: Q8_0 barely moves it).
    ppl = lambda m: float(run([tool("infer-perplexity"), "-m", m, "-f", os.path.join(root, "tests/data/text/corpus.txt"),
                                "-c", "128", "--chunks", "2", "-t", "2"])[0].split("PPL = ")[-1].split()[0])
    base = ppl(model)
    for qt in ("q8_0", "q4_0"):
        qm = os.path.join(tmp, f"ref-{qt}.gguf")
        run([tool("infer-make-model"), "-o", qm, "--type", qt] + args)
        info = json.loads(run([tool("infer-inspect"), qm, "--json"])[0])
        types = {t["name"]: t["type"] for t in info["tensors"]}
        check(types.get("blk.0.ffn_down.weight", "").lower() == qt and types.get("blk.0.attn_norm.weight", "").lower() == "f32",
              f"--type {qt}: tensor types {list(types.items())[:4]}")
        # Every matrix llama-quantize also wrote in this type (all but output.weight, which it
        # keeps in Q6_K for Q4_0) is byte-identical to llama-quantize's file made from the F32 model.
        ref_path = os.path.join(root, f"tests/data/models/ref-{qt}.gguf")
        ref = json.loads(run([tool("infer-inspect"), ref_path, "--json"])[0])

        def tensor_bytes(path, meta, name):
            t = next(t for t in meta["tensors"] if t["name"] == name)
            with open(path, "rb") as f:
                f.seek(meta["data_offset"] + t["offset"])
                return t["type"], f.read(t["bytes"])

        same = [t["name"] for t in ref["tensors"] if t["type"].lower() == qt and
                tensor_bytes(qm, info, t["name"]) == tensor_bytes(ref_path, ref, t["name"])]
        wanted = [t["name"] for t in ref["tensors"] if t["type"].lower() == qt]
        check(len(wanted) >= 15 and same == wanted, f"--type {qt}: {len(same)} of {len(wanted)} tensors as llama-quantize's")
        q = ppl(qm)
        check(abs(q - base) / base < (0.01 if qt == "q8_0" else 0.10), f"--type {qt}: perplexity {q} against F32 {base}")
        # Quantized at load (--weight-type) the F32 file computes exactly what the quantized file does.
        ppl_args = ["-f", os.path.join(root, "tests/data/text/corpus.txt"), "-c", "128", "--chunks", "2", "-t", "2"]
        at_load, _ = run([tool("infer-perplexity"), "-m", model, "--weight-type", qt] + ppl_args)
        from_file, _ = run([tool("infer-perplexity"), "-m", qm] + ppl_args)
        check(at_load == from_file and "PPL = " in at_load, f"--weight-type {qt}: {at_load!r} != {from_file!r}")
        g1, _ = run(gen + ["--temp", "0", "-n", "16", "--ids", "--weight-type", qt])
        g2, _ = run([tool("infer-generate"), "-m", qm, "-p", "The licence of the program", "-t", "2", "--temp", "0", "-n", "16", "--ids"])
        check(g1 == g2 and g1.strip(), f"--weight-type {qt}: generated {g1!r}, the quantized file {g2!r}")
    # --kl-base: the model against itself is all zeros; llama.cpp's Q8_0 file against the F32
    # model gives, on the base file's chunk, what --kl-divergence-base computes from llama.cpp's
    # own stored F32 distributions (tests/data/models/ref-f32.kld: 16-bit log-probabilities).
    corpus = os.path.join(root, "tests/data/text/corpus.txt")
    out, _ = run([tool("infer-perplexity"), "-m", model, "--kl-base", model, "-f", corpus, "-c", "128", "--chunks", "2", "-t", "2"])
    check("mean KLD = 0.000000 +/- 0.000000" in out and "same top = 100.00% (126 of 126)" in out and "+0.0000 (+0.000%)" in out,
          f"--kl-base with the model itself: {out!r}")
    q8 = os.path.join(root, "tests/data/models/ref-q8_0.gguf")
    out, _ = run([tool("infer-perplexity"), "-m", q8, "--kl-base", model, "-f", corpus, "-c", "128", "--chunks", "1", "-t", "2"])
    ref_out, _ = run([tool("infer-perplexity"), "-m", q8, "--kl-divergence-base", os.path.join(root, "tests/data/models/ref-f32.kld"), "-t", "2"])
    kld = lambda text: float(re.search(r"mean KLD = ([0-9.]+)", text).group(1))
    top = lambda text: re.search(r"same top = ([0-9.]+)%", text).group(1)
    check(kld(out) > 0 and abs(kld(out) - kld(ref_out)) <= 0.02 * kld(ref_out) and top(out) == top(ref_out),
          f"--kl-base {kld(out)} / {top(out)}% against the llama.cpp base file's {kld(ref_out)} / {top(ref_out)}%")
    check(re.search(r"p99 KLD = [0-9.]+, max KLD = [0-9.]+", out) and re.search(r"^1 +[0-9.]+ +[0-9.]+ ", out, re.M),
          f"--kl-base: no percentiles or per-chunk line: {out!r}")
    _, err = run([tool("infer-perplexity"), "-m", q8, "--kl-base", model, "--kl-divergence-base", "x.kld"], expect_rc=2)
    check("--kl-base" in err, f"--kl-base with --kl-divergence-base: {err!r}")

    _, err = run([tool("infer-make-model"), "-o", os.path.join(tmp, "x.gguf"), "--type", "q4_0", "--n-embd", "48",
                  "--n-head", "4", "--n-head-kv", "2", "--n-ff", "64"], expect_rc=2)
    check("multiples of 32" in err, f"--type q4_0 with n_embd 48: {err!r}")
    # --vocab FILE.gguf copies that file's tokenizer.* keys: the new model tokenizes as it does.
    vm = os.path.join(tmp, "vocab-from-gguf.gguf")
    run([tool("infer-make-model"), "-o", vm, "--vocab", model, "--n-embd", "64", "--n-layer", "1", "--n-head", "4",
         "--n-head-kv", "2", "--n-ff", "64"])
    text = "The GNU General Public License is a free, copyleft license"
    ids_a, _ = run([tool("infer-tokenize"), "-m", model, "-p", text])
    ids_b, _ = run([tool("infer-tokenize"), "-m", vm, "-p", text])
    check(ids_a == ids_b and len(ids_a.split()) > 3, f"--vocab {model}: tokenized {ids_b!r}, the vocabulary's file {ids_a!r}")

    _, err = run(gen + ["--weight-type", "q5_0"], expect_rc=2)
    check("--weight-type" in err, f"--weight-type q5_0: {err!r}")

    _, err = run(gen + ["--temp", "-1"], expect_rc=2)
    check(len(err.strip().splitlines()) >= 1, "usage error without a message")
    _, err = run([tool("infer-generate"), "-m", os.path.join(tmp, "missing.gguf"), "-p", "x"], expect_rc=1)
    check(len(err.strip().splitlines()) == 1, f"missing model: stderr not one line: {err!r}")
    _, err = run([tool("infer-perplexity"), "-m", model, "-f", os.path.join(root, "tests/data/text/corpus.txt"),
                  "-c", "1000000"], expect_rc=1)
    check("needs at least" in err, f"too large a context: {err!r}")

# Public API only: every include of examples/ and of the serving benchmark is a system header, a
# public one (infer/..., infer.h) or the tools' own cli_common.hpp; the tools link the shared library.
sources = [os.path.join(root, "examples", f) for f in sorted(os.listdir(os.path.join(root, "examples")))
           if f.endswith((".cpp", ".hpp", ".h", ".c"))] + [os.path.join(root, "benchmarks/serving/serving.cpp")]
for path in sources:
    for inc in re.findall(r'^\s*#\s*include\s*"([^"]+)"', open(path, encoding="utf-8").read(), re.M):
        check(inc.startswith("infer/") or inc in ("infer.h", "cli_common.hpp"),
              f"{os.path.relpath(path, root)} includes the internal header {inc!r}")
if shutil.which("readelf"):
    for name in ("infer-generate", "infer-chat", "infer-perplexity"):
        dyn = subprocess.run(["readelf", "-d", tool(name)], capture_output=True, text=True).stdout
        check(re.search(r"NEEDED.*\[libinfer\.so\.\d+\]", dyn) is not None, f"{name} does not load libinfer.so")

for f in failures:
    print("FAIL:", f)
print(f"{checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
