#!/usr/bin/env bash
# Side by side with llama.cpp on the same model files and thread count: prompt processing (ppP)
# and generation from an empty context (tgN) with infer-bench --json against llama-bench -o json,
# the two run alternately (ours, theirs, ours, theirs: --rounds times each per model, -r timed runs
# each time); then 16 concurrent sequences, infer-bench-serving closed against llama-batched-bench
# -npl 16 -npp 16 -ntg 128 (skipped when the llama.cpp build has no llama-batched-bench). Prints one
# markdown table (tokens/s as mean ± standard deviation over all runs, and our rate over theirs),
# the CPU kernel level libinfer ran (infer-bench's cpu_isa), and a line with the command, the CPU
# (name, family and model, vector extensions) and the date, for docs/benchmarks.md.
#
#   benchmarks/peer/compare-llama-cpp.sh [-b BUILD_DIR] [-t THREADS] [-p 512] [-n 128] [-r 5]
#                                        [--rounds 2] [--models LIST] [--batched-model NAME|none]
#                                        [--batched-gen 128]
#
# LIST: comma-separated names or .gguf files (default f16,q8_0,q4_0,q4_k_m). The names are the
# TinyLlama-1.1B-shaped models (22 layers, n_embd 2048, 32 heads / 4 KV heads, n_ff 5632, random
# weights) with TinyLlama's 32000-token vocabulary, made when missing: F16 by infer-make-model (the
# vocabulary from llama.cpp's models/ggml-vocab-llama-spm.gguf), Q8_0, Q4_0 and Q4_K_M from it by
# llama-quantize; and smollm2, gemma3: the real models of scripts/fetch-model. The 16-sequence
# comparison runs on --batched-model (default q4_0; none: skip), each sequence generating
# --batched-gen tokens.
#
# With -n, a third table sets each tg rate against the roofline: the read bandwidth of the same
# thread count (infer-bench-micro's BM_ReadBandwidth, run between the others; the most it reached)
# over the bytes of weights one token reads, and beside it the most of the model's own rounds.
#
# llama.cpp: $LLAMA_CPP_BIN, else the bin directory scripts/build-llama-cpp prints (building it when
# missing). Models are cached in ${XDG_CACHE_HOME:-~/.cache}/libinfer/bench (about 5 GB).
set -euo pipefail
usage() { sed -n '10,12p' "$0" | sed 's/^# *//' >&2; exit 2; }
build=build threads=2 n_prompt=512 n_gen=128 reps=5 rounds=2 models=f16,q8_0,q4_0,q4_k_m batched_model=q4_0 batched_gen=128
args=("$@")
while [[ $# -gt 0 ]]; do
  case $1 in
    -b|-t|-p|-n|-r|--rounds|--models|--batched-model|--batched-gen)
      [[ $# -ge 2 ]] || { echo "compare-llama-cpp.sh: $1 needs a value" >&2; usage; } ;;
    *) echo "compare-llama-cpp.sh: unknown argument $1" >&2; usage ;;
  esac
  case $1 in
    -b) build=$2 ;; -t) threads=$2 ;; -p) n_prompt=$2 ;; -n) n_gen=$2 ;; -r) reps=$2 ;;
    --rounds) rounds=$2 ;; --models) models=$2 ;; --batched-model) batched_model=$2 ;; --batched-gen) batched_gen=$2 ;;
  esac
  shift 2
done
for v in "$threads" "$n_prompt" "$n_gen" "$reps" "$rounds" "$batched_gen"; do
  [[ $v =~ ^[0-9]+$ ]] || { echo "compare-llama-cpp.sh: '$v' is not a number" >&2; usage; }
done
(( reps >= 1 && rounds >= 1 && threads >= 1 && batched_gen >= 1 && n_prompt + n_gen >= 1 )) ||
  { echo "compare-llama-cpp.sh: -r, --rounds, -t and --batched-gen must be at least 1, and -p or -n" >&2; usage; }
for tool in bin/infer-bench bin/infer-inspect bin/infer-make-model benchmarks/infer-bench-serving benchmarks/infer-bench-micro; do
  [[ -x $build/$tool ]] || { echo "compare-llama-cpp.sh: $build/$tool is missing (build it first)" >&2; exit 1; }
done

bin=${LLAMA_CPP_BIN:-$(scripts/build-llama-cpp | tail -n 1)}
[[ -x $bin/llama-bench ]] || { echo "compare-llama-cpp.sh: no llama-bench in $bin" >&2; exit 1; }
llama_src=${LLAMA_CPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/libinfer/llama.cpp}/llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION:-0.3.36}/vendor/llama.cpp
vocab=${LLAMA_CPP_VOCAB:-$llama_src/models/ggml-vocab-llama-spm.gguf}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/libinfer/bench
mkdir -p "$cache"

# The file of a model name (made when missing), or the name itself when it is a file.
model_file() {
  local name=$1 f16=$cache/tinyllama-1.1b-shape-v32000-f16.gguf
  case $name in
    smollm2|gemma3) scripts/fetch-model "$name" | tail -n 1; return ;;
    f16|q8_0|q4_0|q4_k_m) ;;
    *) [[ -f $name ]] || { echo "compare-llama-cpp.sh: no model '$name'" >&2; exit 1; }; echo "$name"; return ;;
  esac
  if [[ ! -f $f16 ]]; then
    [[ -f $vocab ]] || { echo "compare-llama-cpp.sh: no 32000-token vocabulary at $vocab (set LLAMA_CPP_VOCAB)" >&2; exit 1; }
    # (written atomically: a file that exists is whole)
    "$build/bin/infer-make-model" -o "$f16" --type f16 --vocab "$vocab" --n-embd 2048 --n-layer 22 --n-head 32 \
      --n-head-kv 4 --n-ff 5632 --ctx 2048 --seed 5 --name "TinyLlama-1.1B shape (random weights)" >&2
  fi
  local out=$cache/tinyllama-1.1b-shape-v32000-$name.gguf
  if [[ ! -f $out ]]; then
    "$bin/llama-quantize" "$f16" "$out.tmp" "$(echo "$name" | tr a-z A-Z)" >/dev/null 2>&1 ||
      { echo "compare-llama-cpp.sh: llama-quantize $name failed" >&2; exit 1; }
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}
label() {
  case $1 in
    smollm2) echo "SmolLM2-135M Q4_1" ;; gemma3) echo "Gemma 3 270M Q4_K_M" ;;
    f16|q8_0|q4_0|q4_k_m) echo "TinyLlama-1.1B shape $(echo "$1" | tr a-z A-Z)" ;;
    *) basename "$1" .gguf ;;
  esac
}

entries=()
IFS=, read -ra names <<<"$models"
for m in "${names[@]}"; do entries+=("$(label "$m")=$(model_file "$m")"); done
batched=()
if [[ $batched_model != none ]]; then
  if [[ -x $bin/llama-batched-bench ]]; then
    batched=(--batched "$(label "$batched_model")=$(model_file "$batched_model")" --batched-gen "$batched_gen")
  else
    echo "compare-llama-cpp.sh: no llama-batched-bench in $bin: the 16-sequence comparison is skipped" >&2
  fi
fi

python3 benchmarks/peer/compare.py --build "$build" --llama-bin "$bin" --threads "$threads" -p "$n_prompt" -n "$n_gen" \
  -r "$reps" --rounds "$rounds" "${batched[@]}" "${entries[@]}"
echo
# The CPU: its name, family and model (a VM's name is often only the vendor's), and which of the
# vector extensions the kernels choose between it has.
cpu_field() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2 | xargs; }
cpu_flags=$(cpu_field flags)
cpu_isa=()
for f in avx2 fma f16c avx_vnni avx512f avx512_vnni avx512_bf16 amx_tile; do
  [[ " $cpu_flags " == *" $f "* ]] && cpu_isa+=("$f")
done
cpu="$(cpu_field 'model name'), family $(cpu_field 'cpu family') model $(cpu_field model); ${cpu_isa[*]:-no AVX2}"
echo "command: benchmarks/peer/compare-llama-cpp.sh ${args[*]} (llama.cpp: $bin; $(nproc) cores, $cpu, $(date -u +%F))"
