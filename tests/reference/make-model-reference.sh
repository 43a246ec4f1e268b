#!/usr/bin/env bash
# Regenerates tests/data/models/: a Llama-shaped test model with random weights and a real
# SentencePiece vocabulary, in every weight type, with llama.cpp's perplexity of each on a shipped
# text and its teacher-forced distributions (llama-perplexity --kl-divergence-base), which
# tests/integration/llama_reference.py compares against infer-perplexity.
#
#   tests/reference/make-model-reference.sh [BUILD_DIR]     (default BUILD_DIR: build)
#
# The F32/F16/BF16 files are written by our infer-make-model and are not committed: CI rebuilds
# them and checks their SHA-256 against the ones llama.cpp was run on. The quantized files are
# written by llama.cpp's llama-quantize and are committed.
set -euo pipefail
build=${1:-build}
# AVX2 without AVX-512: the kernels libinfer reproduces bit for bit (a native build on an AVX-512
# machine takes other summation orders). LLAMA_CPP_BIN overrides.
bin=${LLAMA_CPP_BIN:-$(LLAMA_CPP_ISA=avx2 scripts/build-llama-cpp | tail -n 1)}
out=tests/data/models
text=tests/data/text/corpus.txt
vocab=tests/data/tokenizer/spm-bpe.model
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Model shape: realistic proportions at a small size (head size 64, grouped-query attention,
# rows a multiple of 256 so every K-quant applies).
# The arguments are kept in a file so that the test rebuilds exactly the same models.

ctx=128
ppl_chunks=4
table=$out/reference.tsv
printf 'file\tkind\tsha256\tllama_ppl\tllama_ppl_err\n' > "$table"

reference() {  # model file, kind (ours|llama)
  local model=$1 kind=$2 name
  name=$(basename "$model" .gguf)
  local log="$work/$name.ppl.log"
  local ppl= err= try
  # llama.cpp logs from a background thread and now and then exits before the last line is
  # written: run again until the final estimate is there.
  for try in 1 2 3 4 5; do
    "$bin/llama-perplexity" -m "$model" -f "$text" -c $ctx -b $ctx --chunks $ppl_chunks -t 2 >"$log" 2>&1 ||
      { cat "$log" >&2; exit 1; }
    read -r ppl err < <(sed -nE 's/.*Final estimate: PPL = ([0-9.]+) \+\/- ([0-9.]+).*/\1 \2/p' "$log") || true
    [[ -n $ppl ]] && break
  done
  [[ -n $ppl ]] || { cat "$log" >&2; echo "no PPL for $model" >&2; exit 1; }
  "$bin/llama-perplexity" -m "$model" -f "$text" -c $ctx -b $ctx --chunks 1 -t 2 \
    --kl-divergence-base "$out/$name.kld" >"$work/$name.kld.log" 2>&1 || { cat "$work/$name.kld.log" >&2; exit 1; }
  printf '%s\t%s\t%s\t%s\t%s\n' "$(basename "$model")" "$kind" "$(sha256sum "$model" | cut -d' ' -f1)" "$ppl" "$err" >> "$table"
  echo "$(basename "$model"): llama.cpp PPL $ppl +/- $err" >&2
}

# One set of reference models: the infer-make-model arguments (kept in <prefix>-make-model.args,
# make-model.args for ref), the types infer-make-model writes (rebuilt by the test) and the
# llama-quantize presets made from the F32 file (committed).
model_set() {  # prefix, arguments, our types, presets
  local prefix=$1 args=$2 ours=$3 presets=$4 t preset lower file
  file=$out/$prefix-make-model.args
  [[ $prefix == ref ]] && file=$out/make-model.args
  echo "$args" > "$file"
  for t in f32 $ours; do
    # shellcheck disable=SC2046
    "$build/bin/infer-make-model" -o "$work/$prefix-$t.gguf" --type "$t" $(cat "$file") 2>/dev/null
  done
  for t in $ours; do reference "$work/$prefix-$t.gguf" ours; done
  for preset in $presets; do
    lower=$(echo "$preset" | tr 'A-Z' 'a-z')
    "$bin/llama-quantize" "$work/$prefix-f32.gguf" "$out/$prefix-$lower.gguf" "$preset" >"$work/q.log" 2>&1 ||
      { cat "$work/q.log" >&2; exit 1; }
    reference "$out/$prefix-$lower.gguf" llama
  done
}

model_set ref "--vocab $vocab --n-embd 256 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 512 --ctx 512 --seed 11" \
  "f32 f16 bf16" "Q8_0 Q6_K Q5_K_M Q5_1 Q5_0 Q4_K_M Q4_1 Q4_0 Q3_K_M Q2_K"
# Gemma 3 shape: head size 128 with 4 query heads over one KV head (attention width 512, twice
# n_embd), six layers of which five see a sliding window of 32 positions, so that the context of
# 128 exercises the window; RoPE base 1e6 on the global layer, 10000 on the local ones.
model_set gemma3 "--arch gemma3 --vocab $vocab --n-embd 256 --n-layer 6 --n-head 4 --n-head-kv 1 --head-dim 128 --n-ff 512 --ctx 512 --rope-base 1000000 --sliding-window 32 --seed 13" \
  "f32" "Q8_0 Q4_0 Q4_K_M"
# Peaked distributions (infer-make-model --init scaled: activations at unit size, so attention and
# logits are peaked as in trained models), where small arithmetic differences do show: a Llama
# shape with 4 layers of 512, untied and tied. llama_reference.py holds these to exact agreement.
peaked="--vocab $vocab --n-embd 512 --n-layer 4 --n-head 8 --n-head-kv 2 --n-ff 1408 --ctx 512 --seed 29 --init scaled"
model_set peaked "$peaked" "f16 q8_0 q4_0" "Q4_K_M"
model_set peakedtied "$peaked --tied" "f16 q8_0 q4_0" ""
# The other families, each in F32 and F16 (ours) and Q8_0, Q4_0 and Q4_K_M (llama-quantize):
#   qwen2: Q/K/V biases, NeoX RoPE base 1e6, output tied to the embeddings (as Qwen2.5-0.5B);
#   qwen3: per-head Q/K norms, head size 128 over n_embd 256 (attention wider than the model, as
#          Qwen3-0.6B), untied output;
#   phi3:  fused attn_qkv and gate-up projections, grouped-query attention (as Phi-4-mini).
small="--vocab $vocab --n-embd 256 --n-layer 2 --n-ff 512 --ctx 512"
model_set qwen2 "--arch qwen2 --n-head 4 --n-head-kv 2 --rope-base 1000000 --tied --seed 17 $small" "f32 f16" "Q8_0 Q4_0 Q4_K_M"
model_set qwen3 "--arch qwen3 --n-head 4 --n-head-kv 2 --head-dim 128 --rope-base 1000000 --seed 19 $small" "f32 f16" "Q8_0 Q4_0 Q4_K_M"
model_set phi3 "--arch phi3 --n-head 4 --n-head-kv 2 --seed 23 $small" "f32 f16" "Q8_0 Q4_0 Q4_K_M"

cat > "$out/README.md" <<EOT
Reference models and llama.cpp's results on them, made by \`tests/reference/make-model-reference.sh\`
with llama.cpp from the llama-cpp-python sdist (scripts/build-llama-cpp). reference.tsv lists each
file (ref-*: Llama shape, arguments in make-model.args; gemma3-*: Gemma 3 shape with a sliding
window, gemma3-make-model.args; peaked-*, peakedtied-*: peaked distributions (--init scaled), untied and
tied; qwen2-*, qwen3-*, phi3-*: those families, <family>-make-model.args), who wrote it (ours: infer-make-model, rebuilt by the test; llama: llama-quantize, committed),
its SHA-256, and llama.cpp's perplexity (\`llama-perplexity -c $ctx -b $ctx --chunks $ppl_chunks\`
on $text). Each .kld is \`llama-perplexity -c $ctx --chunks 1 --kl-divergence-base\` output.
EOT
echo "regenerated $out"
