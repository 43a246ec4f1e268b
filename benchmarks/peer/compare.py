#!/usr/bin/env python3
"""Runs libinfer and llama.cpp side by side and prints one markdown table (compare-llama-cpp.sh
prepares the models and calls this; see there for the options).

  one sequence   infer-bench --json and llama-bench -o json on the same file with the same -p, -n,
                 -r and -t, alternately (ours, theirs, ours, theirs, ... --rounds times each per
                 model); each engine's samples_ts of all its rounds give mean ± standard deviation
  16 sequences   infer-bench-serving closed (16 clients, 16-token prompts, 128 tokens each) and
                 llama-batched-bench -npl 16 -npp 16 -ntg 128, alternately as well: the aggregate
                 generation rate while decoding (llama.cpp's S_TG; ours 16 x 1000 / mean TPOT, as
                 every step decodes all 16) and the generated tokens over the whole run

  roofline       with -n, the read bandwidth of T threads (infer-bench-micro's BM_ReadBandwidth:
                 huge pages, the widest loads, prefetching) measured once per round per model between the runs; the
                 most it reached over bytes of weights a token reads (infer-inspect: every tensor
                 but the token embeddings, of which a step reads one row, unless the output layer
                 is tied to them) is the roofline each tg rate is set against; beside it, the
                 most the model's own rounds reached (measured just before them), which a shared
                 machine's slow spells bias less

usage: compare.py --build DIR --llama-bin DIR --threads T -p N -n N -r N --rounds K
                  [--batched MODEL_FILE] [--batched-seqs 16] LABEL=FILE...
"""
import argparse
import json
import math
import os
import subprocess
import sys


def fail(msg):
    print(f"compare.py: {msg}", file=sys.stderr)
    sys.exit(1)


def run(cmd, with_stderr=False):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-400:]}")
    return p.stdout + p.stderr if with_stderr else p.stdout


def mean_std(xs):
    m = sum(xs) / len(xs)
    s = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, s


def bench_json(stdout, what):
    """The rows of a llama-bench-style JSON array."""
    start = stdout.find("[")
    if start < 0:
        fail(f"{what}: no JSON array in its output: {stdout[-300:]!r}")
    return json.loads(stdout[start:])


def bench_rows(rows):
    """{(n_prompt, n_gen): samples_ts} of bench_json's rows."""
    return {(r["n_prompt"], r["n_gen"]): r["samples_ts"] for r in rows}


def read_bandwidth(build, threads):
    """Bytes per second BM_ReadBandwidth/threads measured, or None without the benchmark."""
    micro = os.path.join(build, "benchmarks", "infer-bench-micro")
    if not os.access(micro, os.X_OK):
        return None
    d = json.loads(run([micro, f"--benchmark_filter=^BM_ReadBandwidth/{threads}/", "--benchmark_format=json"]))
    rows = [b["bytes_per_second"] for b in d.get("benchmarks", []) if "bytes_per_second" in b]
    return max(rows) if rows else None


def weight_bytes_per_token(build, path):
    """Bytes of the weights one decode step reads (infer-inspect's tensor table)."""
    d = json.loads(run([os.path.join(build, "bin", "infer-inspect"), path, "--json"]))
    sizes = {t["name"]: t["bytes"] for t in d["tensors"]}
    total = sum(sizes.values())
    if "output.weight" in sizes:
        total -= sizes.get("token_embd.weight", 0)
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("-p", type=int, required=True)
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("-r", type=int, required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--batched", default="")
    ap.add_argument("--batched-seqs", type=int, default=16)
    ap.add_argument("--batched-prompt", type=int, default=16)
    ap.add_argument("--batched-gen", type=int, default=128)
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()

    ours_bin = os.path.join(a.build, "bin", "infer-bench")
    theirs_bin = os.path.join(a.llama_bin, "llama-bench")
    tests = [t for t in ((a.p, 0), (0, a.n)) if t[0] + t[1] > 0]
    name = lambda t: f"pp{t[0]}" if t[0] else f"tg{t[1]}"

    print("| model | test | libinfer t/s | llama.cpp t/s | libinfer / llama.cpp |")
    print("| --- | --- | ---: | ---: | ---: |")
    bandwidth = []  # bytes/s, one sample per round per model
    kernels = set()  # the CPU kernel levels infer-bench reported (cpu_isa)
    roofline = []   # (label, bytes per token, our tg mean, their tg mean, the model's own bandwidth samples)
    for entry in a.models:
        label, path = entry.split("=", 1)
        ours = {t: [] for t in tests}
        theirs = {t: [] for t in tests}
        own = []
        for _ in range(a.rounds):
            if a.n > 0:
                bw = read_bandwidth(a.build, a.threads)
                if bw:
                    bandwidth.append(bw)
                    own.append(bw)
            out = run([ours_bin, "-m", path, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r), "-t", str(a.threads), "--json"])
            rows = bench_json(out, "infer-bench")
            kernels.update(r["cpu_isa"] for r in rows if "cpu_isa" in r)
            for t, ts in bench_rows(rows).items():
                ours[t] += ts
            out = run([theirs_bin, "-m", path, "-p", str(a.p), "-n", str(a.n), "-r", str(a.r), "-t", str(a.threads), "-o", "json"])
            for t, ts in bench_rows(bench_json(out, "llama-bench")).items():
                theirs[t] += ts
        for t in tests:
            if not ours[t] or not theirs[t]:
                fail(f"{label}: {name(t)} missing from {'infer-bench' if not ours[t] else 'llama-bench'}'s output")
            (om, os_), (tm, ts_) = mean_std(ours[t]), mean_std(theirs[t])
            print(f"| {label} | {name(t)} | {om:.2f} ± {os_:.2f} | {tm:.2f} ± {ts_:.2f} | {om / tm:.2f} |")
            if t == (0, a.n):
                roofline.append((label, weight_bytes_per_token(a.build, path), om, tm, own))
        sys.stdout.flush()
    if kernels:
        print()
        print(f"libinfer's CPU kernels: {', '.join(sorted(kernels))} (infer-bench's cpu_isa).")

    if bandwidth and roofline:
        bw = max(bandwidth)
        lo = min(bandwidth)
        print()
        print(f"Generation against the roofline: read bandwidth {bw / 1e9:.1f} GB/s with {a.threads} threads (the most of "
              f"{len(bandwidth)} BM_ReadBandwidth runs between the others; the least {lo / 1e9:.1f}) over the bytes of "
              "weights a token reads.")
        print()
        print("| model | bytes / token | roofline t/s | libinfer tg | % of roofline | llama.cpp tg | % of roofline "
              "| its own rounds' bandwidth | libinfer % of its roofline | llama.cpp % of its roofline |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, nbytes, om, tm, own in roofline:
            top = bw / nbytes
            row = f"| {label} | {nbytes / 1e6:.0f} MB | {top:.1f} | {om:.2f} | {100 * om / top:.0f}% | {tm:.2f} | {100 * tm / top:.0f}% |"
            if own:
                mine = max(own) / nbytes
                row += f" {max(own) / 1e9:.1f} GB/s | {100 * om / mine:.0f}% | {100 * tm / mine:.0f}% |"
            else:
                row += " - | - | - |"
            print(row)
        sys.stdout.flush()

    if not a.batched:
        return
    label, path = a.batched.split("=", 1)
    seqs, npp, ntg = a.batched_seqs, a.batched_prompt, a.batched_gen
    serving = os.path.join(a.build, "benchmarks", "infer-bench-serving")
    batched = os.path.join(a.llama_bin, "llama-batched-bench")
    decode, whole = {"ours": [], "theirs": []}, {"ours": [], "theirs": []}
    for _ in range(a.rounds):
        d = json.loads(run([serving, "-m", path, "-t", str(a.threads), "--max-sequences", str(seqs), "closed",
                            "--concurrency", str(seqs), "--requests", str(seqs), "--prompt-len", str(npp),
                            "--output-len", str(ntg)]))
        if d["failed"] or d["generated_tokens"] != seqs * ntg:
            fail(f"infer-bench-serving: {d['failed']} failed requests, {d['generated_tokens']} tokens generated")
        decode["ours"].append(seqs * 1000.0 / d["tpot_ms"]["mean"])
        whole["ours"].append(d["generated_tokens_per_s"])
        out = run([batched, "-m", path, "-t", str(a.threads), "-c", str(seqs * (npp + ntg)), "-npl", str(seqs),
                   "-npp", str(npp), "-ntg", str(ntg), "--output-format", "jsonl"], with_stderr=True)
        lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        if not lines:
            fail(f"llama-batched-bench printed no result: {out[-300:]!r}")
        r = lines[-1]
        decode["theirs"].append(r["speed_tg"])
        whole["theirs"].append(seqs * ntg / r["t"])
    print()
    print(f"| {label}, {seqs} sequences, {npp}-token prompts, {ntg} generated each | libinfer t/s | llama.cpp t/s | "
          "libinfer / llama.cpp |")
    print("| --- | ---: | ---: | ---: |")
    for what, v in (("generation while decoding (llama.cpp: S_TG; libinfer: "
                     f"{seqs} x 1000 / mean TPOT)", decode),
                    ("generated tokens / whole run, prompts included (llama.cpp: "
                     f"{seqs} x {ntg} / T)", whole)):
        (om, os_), (tm, ts_) = mean_std(v["ours"]), mean_std(v["theirs"])
        print(f"| {what} | {om:.2f} ± {os_:.2f} | {tm:.2f} ± {ts_:.2f} | {om / tm:.2f} |")


if __name__ == "__main__":
    main()
