#!/usr/bin/env bash
# Regenerates tests/data/real-models/: llama.cpp's results on the real models that
# scripts/fetch-model installs (SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M), which
# tests/integration/real_models.py compares libinfer against:
#
#   reference.tsv   perplexity on tests/data/text/corpus.txt (llama-perplexity -c 512 -b 512
#                   --chunks 4)
#   answers.tsv     for each prompt of prompts.txt: the token ids of the chat prompt llama.cpp
#                   renders (its Jinja engine on the file's template for SmolLM2; its built-in
#                   "gemma" template for Gemma, whose file carries none), and its greedy answer
#                   (llama-completion -cnv -st --temp 0 -n 48), and whether it ended at an
#                   end-of-generation token ("eog") or at the length limit, with flash attention
#                   on (-fa on) and off (-fa off): llama.cpp's two attention paths round
#                   differently, and where the model's top two tokens are nearly tied its own
#                   answers differ between them
#
#   tests/reference/make-real-model-reference.sh
#
# llama.cpp is built for AVX2 without AVX-512 (LLAMA_CPP_ISA=avx2 scripts/build-llama-cpp; set
# LLAMA_CPP_BIN to use another build): the kernels libinfer reproduces exactly.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${LLAMA_CPP_BIN:-$(LLAMA_CPP_ISA=avx2 scripts/build-llama-cpp | tail -n 1)}
out=tests/data/real-models
text=tests/data/text/corpus.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf 'model\tllama_ppl\tllama_ppl_err\n' > "$out/reference.tsv"
printf 'model\tprompt\tprompt_ids\tfinish\tanswer\tfinish_fa_off\tanswer_fa_off\n' > "$out/answers.tsv"
for name in smollm2 gemma3; do
  model=$(scripts/fetch-model "$name" | tail -n 1)
  template=(--jinja)
  [[ $name == gemma3 ]] && template=(--chat-template gemma)
  ppl=
  for try in 1 2 3 4 5; do  # llama.cpp now and then exits before its last log line is written
    "$bin/llama-perplexity" -m "$model" -f "$text" -c 512 -b 512 --chunks 4 -t 2 >"$work/ppl.log" 2>&1
    read -r ppl err < <(sed -nE 's/.*Final estimate: PPL = ([0-9.]+) \+\/- ([0-9.]+).*/\1 \2/p' "$work/ppl.log") || true
    [[ -n $ppl ]] && break
  done
  [[ -n $ppl ]] || { cat "$work/ppl.log" >&2; exit 1; }
  printf '%s\t%s\t%s\n' "$name" "$ppl" "$err" >> "$out/reference.tsv"
  echo "$name: llama.cpp PPL $ppl +/- $err" >&2
  while IFS= read -r prompt; do
    [[ -z $prompt ]] && continue
    for fa in on off; do
      "$bin/llama-completion" -m "$model" -cnv -st "${template[@]}" -p "$prompt" --temp 0 -n 48 -t 2 -fa $fa \
        --no-warmup --no-display-prompt --verbose-prompt </dev/null >"$work/answer-$fa.out" 2>"$work/answer-$fa.err" ||
        { cat "$work/answer-$fa.err" >&2; exit 1; }
    done
    python3 - "$name" "$prompt" "$work" >> "$out/answers.tsv" <<'PY'
import re, sys
name, prompt, work = sys.argv[1:4]
err = open(f"{work}/answer-on.err", encoding="utf-8", errors="replace").read()
# --verbose-prompt lists the prompt's tokens as "<id> -> '<piece>'" after "number of tokens in prompt".
section = err.split("number of tokens in prompt", 1)[1]
ids = [m.group(1) for m in re.finditer(r"^\S+ I +(\d+) -> '", section, re.M)]
fields = [name, prompt, " ".join(ids)]
for fa in ("on", "off"):
    answer = open(f"{work}/answer-{fa}.out", encoding="utf-8", errors="surrogateescape").read()
    finish = "length"
    marker = " [end of text]"
    if marker in answer:
        answer, finish = answer[: answer.index(marker)], "eog"
    answer = answer.rstrip("\n")
    fields += [finish, answer.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")]
print("\t".join(fields))
PY
  done < "$out/prompts.txt"
done
echo "regenerated $out" >&2
