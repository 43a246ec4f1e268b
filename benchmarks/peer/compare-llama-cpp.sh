#!/usr/bin/env bash
# Side by side with llama.cpp on the same model files and thread count, in one run: prompt
# processing and generation throughput of a TinyLlama-1.1B-shaped model (random weights; the
# 4000-token test vocabulary instead of 32000) in F16, Q8_0 and Q4_0. Prints a markdown table for
# docs/benchmarks.md.
#
#   benchmarks/peer/compare-llama-cpp.sh [BUILD_DIR] [THREADS] [PROMPT_TOKENS] [GEN_TOKENS]
#
# Models are cached in ${XDG_CACHE_HOME:-~/.cache}/libinfer/bench (about 3.5 GB).
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
  "$build/examples/infer-make-model" -o "$f16" --type f16 --vocab tests/data/tokenizer/spm-bpe.model \
    --n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 --n-ff 5632 --ctx 2048 --seed 5 \
    --name "TinyLlama-1.1B shape (random weights)" 2>/dev/null
fi
for q in Q8_0 Q4_0; do
  out=$cache/tinyllama-shape-$(echo $q | tr 'A-Z' 'a-z').gguf
  [[ -f $out ]] || "$bin/llama-quantize" "$f16" "$out" $q >/dev/null 2>&1
done

# A prompt of exactly n_prompt tokens for our tool: the corpus cut by infer-tokenize.
prompt_file=$(mktemp)
trap 'rm -f "$prompt_file"' EXIT
python3 - "$prompt_file" "$f16" "$build" "$n_prompt" <<'PY'
import subprocess, sys
path, model, build, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# The shortest prefix of the corpus that tokenizes to n tokens (BOS is added on top).
text = open("tests/data/text/corpus.txt", encoding="utf-8").read()[:20 * n]
lo, hi = 0, len(text)
count = lambda t: len(subprocess.run([f"{build}/examples/infer-tokenize", "-m", model, "-p", t, "--no-bos"],
                                     capture_output=True, text=True).stdout.split())
while lo < hi:
    mid = (lo + hi) // 2
    if count(text[:mid]) < n: lo = mid + 1
    else: hi = mid
open(path, "w", encoding="utf-8").write(text[:lo])
PY

printf '| model | engine | prompt tokens/s (pp%d) | generation tokens/s (tg%d) |\n| --- | --- | ---: | ---: |\n' "$n_prompt" "$n_gen"
for m in f16 q8_0 q4_0; do
  file=$cache/tinyllama-shape-$m.gguf
  ours=$("$build/examples/infer-generate" -m "$file" -f "$prompt_file" -n "$n_gen" --temp 0 --ignore-eos -t "$threads" \
    -b "$n_prompt" 2>&1 >/dev/null | tail -n 1)
  pp=$(echo "$ours" | sed -nE 's/.*prompt [0-9]+ tokens, [0-9.]+ ms, ([0-9.]+) tokens\/s.*/\1/p')
  tg=$(echo "$ours" | sed -nE 's/.*generated [0-9]+ tokens, [0-9.]+ ms, ([0-9.]+) tokens\/s.*/\1/p')
  printf '| %s | libinfer | %s | %s |\n' "$m" "$pp" "$tg"
  theirs=$("$bin/llama-bench" -m "$file" -p "$n_prompt" -n "$n_gen" -t "$threads" -r 1 -o csv 2>/dev/null)
  llama_pp=$(echo "$theirs" | python3 -c "
import csv,sys
rows=list(csv.DictReader(sys.stdin))
pp=[r for r in rows if r['n_prompt']=='$n_prompt' and r['n_gen']=='0']
tg=[r for r in rows if r['n_gen']=='$n_gen' and r['n_prompt']=='0']
print(f\"{float(pp[0]['avg_ts']):.2f} {float(tg[0]['avg_ts']):.2f}\")")
  printf '| %s | llama.cpp | %s | %s |\n' "$m" ${llama_pp% *} ${llama_pp#* }
done
echo
echo "command: benchmarks/peer/compare-llama-cpp.sh $build $threads $n_prompt $n_gen ($(nproc) cores, $(date -u +%F))"
