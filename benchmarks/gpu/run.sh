#!/usr/bin/env bash
# The GPU run, in one call of under 8 minutes on an H200: configure and build with INFER_CUDA=ON,
# run the CUDA tests, then time
#   - the HBM copy bandwidth and the matmuls of a 1B-shaped model per weight type and batch,
#     beside cuBLASLt alone (infer-bench-gpu);
#   - prefill (pp512) and decode (tg128) at batch 1 on a random-weight model of that shape
#     (infer-bench --device cuda), BF16 and Q4_0;
#   - decode at batch 16 and 64 (infer-generate --prompts, the engine's TPOT and tokens/s).
# Results as JSON (and every log) in one folder: $OUT when set, else benchmarks/gpu/out. Nothing
# here installs packages: what the build needs beyond nvcc, CMake and ninja travels in
# $INFER_GPU_DEPS (benchmarks/gpu/bundle-deps.sh; docs/cuda.md).
#
#   benchmarks/gpu/run.sh            # everything
#   GPU_RUN_QUICK=1 benchmarks/gpu/run.sh   # build + tests + kernel timings only
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/benchmarks/gpu/out}
deps=${INFER_GPU_DEPS:-$root/.gpu-deps}
build=${GPU_BUILD_DIR:-$root/build-gpu}
jobs=$(nproc)
mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
start=$(date +%s)
log() { echo "[$(( $(date +%s) - start ))s] $*" | tee -a "$out/run.log"; }
status=0

log "machine: $(nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | head -1)"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
cmake_args=(-DCMAKE_BUILD_TYPE=Release -DINFER_CUDA=ON -DINFER_BUILD_TESTS=ON -DINFER_BUILD_EXAMPLES=ON
            -DINFER_BUILD_BENCHMARKS=OFF -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH:-90})
if [[ -d $deps ]]; then
  cmake_args+=(-DCMAKE_PREFIX_PATH="$deps")
  export LD_LIBRARY_PATH=$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
log "configure + build ($jobs jobs)"
if ! cmake -S "$root" -B "$build" -G Ninja "${cmake_args[@]}" > "$out/configure.log" 2>&1 ||
   ! ninja -C "$build" -j "$jobs" infer-cuda-tests infer-bench-gpu infer-make-model infer-bench infer-generate > "$out/build.log" 2>&1; then
  log "build failed: see configure.log / build.log"; tail -30 "$out/configure.log" "$out/build.log"; exit 1
fi
log "CUDA tests"
(cd "$build" && ctest -L cuda --output-on-failure --output-junit "$out/ctest-cuda.xml") > "$out/tests.log" 2>&1 || status=1
grep -E "tests passed|Skipped|Failed|\*\*\*" "$out/tests.log" | tee -a "$out/run.log"
# On the GPU machine a skipped CUDA test means the GPU was not seen: a failure of the run.
grep -q "Skipped" "$out/tests.log" && { status=1; log "CUDA tests were skipped: no GPU visible"; }

log "kernels: HBM bandwidth and matmuls"
timeout 240 "$build/bin/infer-bench-gpu" --json "$out/kernels.json" > "$out/kernels.txt" 2>&1 || { status=1; log "infer-bench-gpu failed"; }
tail -5 "$out/kernels.txt" | tee -a "$out/run.log"
[[ ${GPU_RUN_QUICK:-0} == 1 ]] && { log "done (quick), status $status"; exit $status; }

# A Llama-3.2-1B-shaped model with random weights (no model file travels: 2.5 GB in BF16).
models=$(mktemp -d)
shape=(--n-embd 2048 --n-layer 16 --n-head 32 --n-head-kv 8 --n-ff 8192 --ctx 4096 --init scaled)
for t in bf16 q4_0; do
  # Stay inside the 8 minutes: the second model only while the first left time.
  if (( $(date +%s) - start > ${GPU_RUN_BUDGET_S:-330} )); then log "skipping $t: past the time budget"; continue; fi
  log "model $t"
  "$build/bin/infer-make-model" -o "$models/m-$t.gguf" --type $t "${shape[@]}" >> "$out/models.log" 2>&1 || { status=1; continue; }
  log "infer-bench $t: pp512, tg128 at batch 1"
  timeout 150 "$build/bin/infer-bench" -m "$models/m-$t.gguf" --device cuda -p 512 -n 128 -r 3 --json > "$out/bench-$t.json" 2> "$out/bench-$t.err" ||
    { status=1; log "infer-bench $t failed: $(tail -1 "$out/bench-$t.err")"; }
  for b in 16 64; do
    prompts="$models/prompts-$b.txt"
    for i in $(seq 1 $b); do echo "Prompt number $i of the batch: once upon a time"; done > "$prompts"
    log "decode $t at batch $b"
    timeout 120 "$build/bin/infer-generate" -m "$models/m-$t.gguf" --device cuda --prompts "$prompts" -n 128 --ignore-eos \
      --temp 0 --max-sequences $b --max-batch-tokens 2048 --kv-cache-mb 4096 --stats > "$out/decode-$t-b$b.jsonl" 2> "$out/decode-$t-b$b.err" ||
      { status=1; log "decode $t batch $b failed: $(tail -1 "$out/decode-$t-b$b.err")"; }
    head -1 "$out/decode-$t-b$b.err" | tee -a "$out/run.log"
  done
done
rm -rf "$models"
python3 - "$out" <<'PY' || status=1
import glob, json, os, re, sys
out = sys.argv[1]
summary = {}
k = os.path.join(out, "kernels.json")
if os.path.exists(k):
    summary["kernels"] = json.load(open(k))
for f in sorted(glob.glob(os.path.join(out, "bench-*.json"))):
    try:
        summary[os.path.basename(f)[:-5]] = [{x: t[x] for x in ("n_prompt", "n_gen", "avg_ts", "stddev_ts")} for t in json.load(open(f))]
    except Exception as e:
        summary[os.path.basename(f)[:-5]] = f"unreadable: {e}"
for f in sorted(glob.glob(os.path.join(out, "decode-*.err"))):
    text = open(f).read()
    m = re.search(r"generated (\d+) tokens in ([0-9.]+) s: ([0-9.]+) tokens/s .*TPOT p50 ([0-9.]+) ms", text)
    name = os.path.basename(f)[:-4]
    summary[name] = {"generated": int(m.group(1)), "seconds": float(m.group(2)), "tokens_per_s": float(m.group(3)),
                     "tpot_p50_ms": float(m.group(4))} if m else f"no summary line: {text[-200:]}"
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps({k: v for k, v in summary.items() if k != "kernels"}, indent=1))
PY
log "done, status $status (results in $out)"
exit $status
