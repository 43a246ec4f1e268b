#!/usr/bin/env bash
# Regenerates tests/data/tokenizer/: a SentencePiece BPE vocabulary trained with spm_train, a GGUF
# file carrying it (written by infer-make-model --vocab), and llama.cpp's token ids for every case
# in cases.txt (llama-tokenize), against which tests/unit/test_tokenizer.cpp and
# tests/integration/tokenize_cli.py compare.
#
#   tests/reference/make-tokenizer-reference.sh [BUILD_DIR]     (default BUILD_DIR: build)
#
# Training text: tests/data/text/corpus.txt plus the cases, except those named bytes-*, which must
# stay outside the vocabulary so that they exercise byte fallback. llama.cpp comes from
# scripts/build-llama-cpp. Run from the repository root; spm_train is Debian's `sentencepiece`.
set -euo pipefail
build=${1:-build}
bin=$(scripts/build-llama-cpp | tail -n 1)
out=tests/data/tokenizer
cases=$out/cases.txt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The cases as bytes: TEXT's escapes (\n \t \r \\ \xHH) are a subset of printf's %b.
case_text() { printf '%b' "$1"; }
cases_in_order() { grep -v '^#' "$cases"; }

# 1. Vocabulary. Single-threaded training is deterministic.
{
  cat tests/data/text/corpus.txt
  while IFS=$'\t' read -r name text; do
    [[ $name == bytes-* ]] || { case_text "$text"; echo; }
  done < <(cases_in_order)
} > "$work/train.txt"
# Relative paths: the model records its training arguments.
(cd "$work" && spm_train --input=train.txt --model_prefix=spm-bpe --model_type=bpe --vocab_size=4000 \
  --character_coverage=1.0 --byte_fallback=true --normalization_rule_name=identity \
  --remove_extra_whitespaces=false --allow_whitespace_only_pieces=true --split_digits=true \
  --user_defined_symbols='<|im_start|>,<|im_end|>,<sep>' --num_threads=1 --minloglevel=1)
cp "$work/spm-bpe.model" "$out/spm-bpe.model"

# 2. A GGUF with that vocabulary, as small as a loadable Llama model gets (llama-tokenize reads
#    the vocabulary only).
"$build/bin/infer-make-model" -o "$out/spm-bpe.gguf" --vocab "$out/spm-bpe.model" --n-embd 8 --n-layer 1 \
  --n-head 2 --n-head-kv 1 --n-ff 8 --ctx 64 --type f16 --tied --seed 11 --name "libinfer tokenizer reference" \
  2>/dev/null

# 3. llama.cpp's ids for each case, with and without BOS, with and without special-token parsing.
#    The text goes through a file, byte for byte (--no-escape); stdin stays away from
#    llama-tokenize, which would read the case list from it.
{
  echo "# llama.cpp's llama-tokenize on $out/spm-bpe.gguf: NAME<TAB>BOS<TAB>PARSE_SPECIAL<TAB>IDS"
  echo "# Regenerate with tests/reference/make-tokenizer-reference.sh; the cases are in cases.txt."
  while IFS=$'\t' read -r name text; do
    case_text "$text" > "$work/case.txt"
    for bos in 1 0; do
      for special in 0 1; do
        flags=(--ids --no-escape --log-disable)
        [[ $bos == 1 ]] || flags+=(--no-bos)
        [[ $special == 1 ]] || flags+=(--no-parse-special)  # this llama-tokenize parses by default
        ids=$("$bin/llama-tokenize" -m "$out/spm-bpe.gguf" -f "$work/case.txt" "${flags[@]}" 2>/dev/null </dev/null)
        [[ $ids == \[*\] ]] || { echo "llama-tokenize failed on case $name: $ids" >&2; exit 1; }
        ids=${ids#[}
        ids=${ids%]}
        printf '%s\t%s\t%s\t%s\n' "$name" "$bos" "$special" "${ids//, / }"
      done
    done
  done < <(cases_in_order)
} > "$out/expected.txt"
echo "regenerated $out ($(cases_in_order | wc -l) cases) with llama.cpp from $bin"
