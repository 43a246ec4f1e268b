#!/usr/bin/env bash
# Side by side with llama.cpp on the same model files and thread count, in one run: prompt
# processing and generation throughput of the real models of scripts/fetch-model (SmolLM2-135M
# Q4_1, Gemma 3 270M Q4_K_M) and of a TinyLlama-1.1B-shaped model (random weights; the 4000-token
# test vocabulary instead of 32000) in F16, Q8_0 and Q4_0. Generation is measured after the
# prompt (llama-bench -d PROMPT_TOKENS), as infer-generate measures it. Prints a markdown table
# for docs/benchmarks.md.
#
#   benchmarks/peer/compare-llama-cpp.sh [BUILD_DIR] [THREADS] [PROMPT_TOKENS] [GEN_TOKENS]
#
# Models are cached in ${XDG_CACHE_HOME:-~/.cache}/libinfer/bench (about 3.5 GB) and by
# scripts/fetch-model.
set -euo pipefail
build=${1:-build}
threads=${2:-2}
n_prompt=${3:-128}
n_gen=${4:-32}
bin=$(scripts/build-llama-cpp | tail -n 1)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/libinfer/bench
mkdir -p "$cache"

f16=$cache/tinyllama-shape-f16.gguf
if [[ ! -f $f16 ]]; then
  "$build/bin/infer-make-model" -o "$f16" --type f16 --vocab tests/data/tokenizer/spm-bpe.model \
    --n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 --n-ff 5632 --ctx 2048 --seed 5 \
    --name "TinyLlama-1.1B shape (random weights)" 2>/dev/null
fi
for q in Q8_0 Q4_0; do
  out=$cache/tinyllama-shape-$(echo $q | tr 'A-Z' 'a-z').gguf
  [[ -f $out ]] || "$bin/llama-quantize" "$f16" "$out" $q >/dev/null 2>&1
done

# A prompt of exactly n_prompt tokens for our tool: the corpus cut by infer-tokenize.
make_prompt() {  # output model
  python3 - "$1" "$2" "$build" "$n_prompt" <<'PY'
import subprocess, sys
path, model, build, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# The shortest prefix of the corpus that tokenizes to n tokens (a BOS may be added on top).
text = open("tests/data/text/corpus.txt", encoding="utf-8").read()[:20 * n]
lo, hi = 0, len(text)
count = lambda t: len(subprocess.run([f"{build}/bin/infer-tokenize", "-m", model, "-p", t, "--no-bos"],
                                     capture_output=True, text=True).stdout.split())
while lo < hi:
    mid = (lo + hi) // 2
    if count(text[:mid]) < n: lo = mid + 1
    else: hi = mid
open(path, "w", encoding="utf-8").write(text[:lo])
PY
}
prompt_file=$(mktemp)
trap 'rm -f "$prompt_file"' EXIT

models=("SmolLM2-135M Q4_1=$(scripts/fetch-model smollm2 | tail -n 1)"
        "Gemma 3 270M Q4_K_M=$(scripts/fetch-model gemma3 | tail -n 1)")
for m in f16 q8_0 q4_0; do models+=("TinyLlama shape $(echo $m | tr a-z A-Z)=$cache/tinyllama-shape-$m.gguf"); done

printf '| model | engine | prompt tokens/s (pp%d) | generation tokens/s (tg%d after pp%d) |\n| --- | --- | ---: | ---: |\n' \
  "$n_prompt" "$n_gen" "$n_prompt"
for entry in "${models[@]}"; do
  label=${entry%%=*}
  file=${entry#*=}
  make_prompt "$prompt_file" "$file"
  ours=$("$build/bin/infer-generate" -m "$file" -f "$prompt_file" -n "$n_gen" --temp 0 --ignore-eos -t "$threads" \
    -b "$n_prompt" 2>&1 >/dev/null | tail -n 1)
  pp=$(echo "$ours" | sed -nE 's/.*prompt [0-9]+ tokens, [0-9.]+ ms, ([0-9.]+) tokens\/s.*/\1/p')
  tg=$(echo "$ours" | sed -nE 's/.*generated [0-9]+ tokens, [0-9.]+ ms, ([0-9.]+) tokens\/s.*/\1/p')
  printf '| %s | libinfer | %s | %s |\n' "$label" "$pp" "$tg"
  pp_csv=$("$bin/llama-bench" -m "$file" -p "$n_prompt" -n 0 -t "$threads" -r 2 -o csv 2>/dev/null)
  tg_csv=$("$bin/llama-bench" -m "$file" -p 0 -n "$n_gen" -d "$n_prompt" -t "$threads" -r 2 -o csv 2>/dev/null)
  llama=$(python3 -c "
import csv, io, sys
pp = list(csv.DictReader(io.StringIO(sys.argv[1])))[0]
tg = list(csv.DictReader(io.StringIO(sys.argv[2])))[0]
print(f\"{float(pp['avg_ts']):.2f} {float(tg['avg_ts']):.2f}\")" "$pp_csv" "$tg_csv")
  printf '| %s | llama.cpp | %s | %s |\n' "$label" ${llama% *} ${llama#* }
done
echo
echo "command: benchmarks/peer/compare-llama-cpp.sh $build $threads $n_prompt $n_gen ($(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F))"
