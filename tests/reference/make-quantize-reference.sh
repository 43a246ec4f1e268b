#!/usr/bin/env bash
# Regenerates what tests/integration/quantize_cli.py and imatrix_cli.py compare against, so that
# the tests need no llama.cpp build:
#   tests/data/quantize/llama-quantize.tsv  size and SHA-256 of every llama-quantize output the
#                                           quantize test compares with, and of the models it read;
#   tests/data/imatrix/                     llama-imatrix's files on the reference models, and the
#                                           SHA-256 of llama-quantize's outputs with them.
# Each test runs with --record: it runs llama.cpp's tool beside ours, compares live (a failure names
# the first byte or matrix that differs) and writes the reference.
#
#   tests/reference/make-quantize-reference.sh [BUILD_DIR]     (default BUILD_DIR: build)
#
# llama.cpp is the AVX2 build of scripts/build-llama-cpp (set LLAMA_CPP_BIN to use another): the
# kernels libinfer reproduces bit for bit, so infer-imatrix's files equal llama-imatrix's. Rerun
# after a change to infer-make-model, to the reference models or to the llama.cpp version.
set -euo pipefail
build=${1:-build}
bin=${LLAMA_CPP_BIN:-$(LLAMA_CPP_ISA=avx2 LLAMA_CPP_TARGETS="llama-quantize llama-imatrix" scripts/build-llama-cpp | tail -n 1)}
mkdir -p tests/data/quantize tests/data/imatrix
status=0
python3 tests/integration/quantize_cli.py "$build/bin" . --record "$bin" || status=1
python3 tests/integration/imatrix_cli.py "$build/bin" . --record "$bin" || status=1
exit $status
