#!/usr/bin/env bash
# Runs llama.cpp's tokenizer suite (infer-llama-vocab-suite) on the llama.cpp source, fetched into
# the cache by scripts/fetch-llama-cpp-source when it is not there yet. A source that cannot be
# fetched is a failure, not a skip.
#
#   tests/integration/llama_vocab_suite.sh REPO_ROOT SUITE_BINARY
set -euo pipefail
src=$("$1/scripts/fetch-llama-cpp-source")
exec "$2" "$src/models"
