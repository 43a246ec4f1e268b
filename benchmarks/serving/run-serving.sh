#!/usr/bin/env bash
# The serving figures of docs/benchmarks.md: infer-bench-serving on a TinyLlama-1.1B-shaped model
# (random weights, Q4_0, written by infer-make-model into the cache), as markdown tables.
#   1. closed loop at 1, 4, 16 and 32 concurrent sequences (short prompts, 128 generated tokens
#      each): aggregate generation throughput and its ratio to one sequence;
#   2. time to first token of a request behind an 800-token system prompt, cold and cached;
#   3. a trace: Poisson arrivals, mixed lengths, half the requests sharing a 256-token system
#      prompt; latency percentiles.
#
#   benchmarks/serving/run-serving.sh [BUILD_DIR] [THREADS] [extra infer-bench-serving flags...]
set -euo pipefail
build=${1:-build}
threads=${2:-2}
shift $(( $# > 2 ? 2 : $# ))
extra=("$@")
cache=${XDG_CACHE_HOME:-$HOME/.cache}/libinfer/bench
mkdir -p "$cache"
model=$cache/tinyllama-shape-q4_0-pure.gguf
if [[ ! -f $model ]]; then
  "$build/bin/infer-make-model" -o "$model" --type q4_0 --vocab tests/data/tokenizer/spm-bpe.model \
    --n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 --n-ff 5632 --ctx 2048 --seed 5 \
    --name "TinyLlama-1.1B shape (random weights)" >/dev/null 2>&1
fi
bench=("$build/benchmarks/infer-bench-serving" -m "$model" -t "$threads" "${extra[@]}")
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

echo "| concurrent sequences | requests | generated tokens/s | x one sequence | TPOT p50 ms | TTFT p50 ms | latency p50 ms |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
single=
for c in 1 4 16 32; do
  n=$(( c == 1 ? 4 : 2 * c ))
  json=$("${bench[@]}" closed --concurrency "$c" --requests "$n" --prompt-len 16 --output-len 128)
  tps=$(echo "$json" | field "round(d['generated_tokens_per_s'], 2)")
  single=${single:-$tps}
  echo "$json" | field "f\"| $c | $n | $tps | {$tps / $single:.2f} | {d['tpot_ms']['p50']:.1f} | {d['ttft_ms']['p50']:.0f} | {d['e2e_ms']['p50']:.0f} |\""
done
echo

echo "| 800-token system prompt | TTFT p50 ms | TTFT mean ms | prompt tokens from the cache |"
echo "| --- | ---: | ---: | ---: |"
json=$("${bench[@]}" prefix --system-len 800 --user-len 16 --reps 3)
echo "$json" | field "f\"| cold | {d['ttft_cold_ms']['p50']:.0f} | {d['ttft_cold_ms']['mean']:.0f} | 0 |\\n| cached | {d['ttft_cached_ms']['p50']:.0f} | {d['ttft_cached_ms']['mean']:.0f} | {d['cached_tokens_mean']:.0f} |\\n\\nspeed-up (p50): {d['speedup_p50']:.1f}x\""
echo

echo "| trace | generated tokens/s | TTFT p50 / p95 / p99 ms | TPOT p50 / p95 / p99 ms | latency p50 / p95 / p99 ms | prompt tokens from the cache |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
json=$("${bench[@]}" trace --rate 0.5 --requests 32 --prompt-len 16:256 --output-len 16:128 --shared-prefix 256 --shared-fraction 0.5)
echo "$json" | field "f\"| {d['requests']} requests, Poisson 0.5/s | {d['generated_tokens_per_s']:.2f} | {d['ttft_ms']['p50']:.0f} / {d['ttft_ms']['p95']:.0f} / {d['ttft_ms']['p99']:.0f} | {d['tpot_ms']['p50']:.0f} / {d['tpot_ms']['p95']:.0f} / {d['tpot_ms']['p99']:.0f} | {d['e2e_ms']['p50']:.0f} / {d['e2e_ms']['p95']:.0f} / {d['e2e_ms']['p99']:.0f} | {d['cached_prompt_tokens']} of {d['prompt_tokens']} |\""
echo
echo "command: benchmarks/serving/run-serving.sh $build $threads ${extra[*]} ($(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F))"
