#!/usr/bin/env python3
"""--device in every tool that runs a model (infer-generate, -chat, -perplexity, -bench,
-bench-serving), from the outside, on the F32 reference model:
  - a malformed device name is a usage error (exit 2) naming --device;
  - a CUDA device the build or the machine lacks (past the last GPU: every ordinal where there is
    none) is a one-line error (exit 1) naming the device, never a crash;
  - --device cpu computes what the default does (the same greedy ids).
The number of GPUs comes from libinfer itself (infer_cuda_device_count), so the test holds in a
CPU-only build, in a CUDA build on a machine without a GPU, and on one with GPUs. A build without
the CUDA backend passes "cpu-only" instead of the library (its count is 0 by construction; a
sanitizer build's library cannot be loaded into an uninstrumented Python).

usage: device_cli.py BIN_DIR SERVING_BENCH|none LIBINFER_SO|cpu-only REPO_ROOT
"""
import ctypes
import os
import shlex
import subprocess
import sys
import tempfile

bin_dir, serving, libinfer, root = sys.argv[1:5]
tool = lambda name: os.path.join(bin_dir, name)
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def run(args, expect_rc):
    p = subprocess.run(args, capture_output=True, timeout=600, cwd=root)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == expect_rc, f"{' '.join(args[:1] + args[-2:])}: exit {p.returncode}, expected {expect_rc}: {err[-300:]}")
    return out, err


n_gpus = 0 if libinfer == "cpu-only" else ctypes.CDLL(libinfer).infer_cuda_device_count()
check(n_gpus >= 0, f"infer_cuda_device_count() = {n_gpus}")
missing = [f"cuda:{n_gpus}"] + (["cuda"] if n_gpus == 0 else [])

with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "ref-f32.gguf")
    args = shlex.split(open(os.path.join(root, "tests/data/models/make-model.args")).read())
    run([tool("infer-make-model"), "-o", model, "--type", "f32"] + args, 0)
    text = os.path.join(root, "tests/data/text/corpus.txt")
    prompts = os.path.join(tmp, "prompts.txt")
    with open(prompts, "w") as f:
        f.write("The licence\nOnce upon a time\n")
    commands = {
        "infer-generate": [tool("infer-generate"), "-m", model, "-p", "The licence", "-n", "4", "-t", "2"],
        "infer-generate --prompts": [tool("infer-generate"), "-m", model, "--prompts", prompts, "-n", "2", "-t", "2"],
        "infer-chat": [tool("infer-chat"), "-m", model, "-p", "hi", "-n", "4", "-t", "2"],
        "infer-perplexity": [tool("infer-perplexity"), "-m", model, "-f", text, "-c", "64", "--chunks", "1", "-t", "2"],
        "infer-bench": [tool("infer-bench"), "-m", model, "-p", "8", "-n", "4", "-r", "1", "-t", "2"],
    }
    if serving != "none":
        commands["infer-bench-serving"] = [serving, "-m", model, "closed", "--requests", "2", "--concurrency", "1",
                                           "--prompt-len", "8:8", "--output-len", "4:4", "-t", "2"]
    for name, cmd in commands.items():
        for bad in ("gpu", "cuda:", "cuda:x", "CUDA"):
            _, err = run(cmd + ["--device", bad], 2)
            check("--device" in err.splitlines()[0] if err else False, f"{name} --device {bad}: {err[:200]!r}")
        for device in missing:
            _, err = run(cmd + ["--device", device], 1)
            lines = err.strip().splitlines()
            check(len(lines) == 1 and device in lines[0] and "CUDA" in lines[0],
                  f"{name} --device {device}: not one line naming the device and CUDA: {err[-300:]!r}")

    gen = commands["infer-generate"][:-4] + ["-n", "12", "--temp", "0", "--ids", "-t", "2"]
    default, _ = run(gen, 0)
    on_cpu, _ = run(gen + ["--device", "cpu"], 0)
    check(default.strip() and default == on_cpu, f"--device cpu: {on_cpu!r}, the default {default!r}")

if failures:
    print(f"{len(failures)} of {checks} checks failed:")
    for f in failures:
        print("  " + f)
    sys.exit(1)
print(f"all {checks} checks passed ({n_gpus} CUDA devices)")
