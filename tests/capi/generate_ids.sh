#!/usr/bin/env bash
# Greedy ids through the C API equal those of infer-generate (the C++ API), for a few prompts.
#
#   generate_ids.sh INFER_CAPI_TESTS INFER_GENERATE MODEL
set -euo pipefail
capi=$1
generate=$2
model=$3
for prompt in "Once upon a time" "Hello world" "The quick brown fox jumps over the lazy dog" "a"; do
  via_c=$("$capi" "$model" ids "$prompt")
  via_cli=$("$generate" -m "$model" -p "$prompt" --temp 0 -n 16 --ids -t 2 2>/dev/null)
  if [[ -z $via_c || $via_c != "$via_cli" ]]; then
    printf 'prompt "%s":\n  C API:          %s\n  infer-generate: %s\n' "$prompt" "$via_c" "$via_cli" >&2
    exit 1
  fi
  printf 'prompt "%s": %s\n' "$prompt" "$via_c"
done
