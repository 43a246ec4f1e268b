#!/usr/bin/env bash
# Regenerates tests/data/gguf/: GGUF files written by llama.cpp's own tools and by our writer,
# each with llama.cpp's reading of it (`llama-gguf FILE r n`), for the reference tests in
# tests/unit/test_gguf_reference.cpp and tests/integration/inspect_cli.py.
#
#   tests/reference/make-gguf-reference.sh [BUILD_DIR]     (default BUILD_DIR: build)
#
# llama.cpp comes from scripts/build-llama-cpp (the llama-cpp-python sdist, cached outside the
# repository). Run from the repository root.
set -euo pipefail
build=${1:-build}
bin=$(scripts/build-llama-cpp | tail -n 1)
out=tests/data/gguf
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

dump() {  # llama.cpp's reading of a file, without the pointer values that change per run
  (cd "$work" && "$bin/llama-gguf" "$1" r n) | sed -E 's/, data = 0x[0-9a-f]+//' > "$2"
}

# 1. Written by llama.cpp's gguf example: every scalar type, arrays, 10 F32 tensors filled with
#    100 + i (see examples/gguf/gguf.cpp in llama.cpp).
(cd "$work" && "$bin/llama-gguf" llama-written.gguf w >/dev/null)
cp "$work/llama-written.gguf" "$out/llama-written.gguf"
dump "$PWD/$out/llama-written.gguf" "$out/llama-written.dump.txt"

# 2. Written by our writer (infer-make-model), read by llama.cpp.
"$build/bin/infer-make-model" -o "$out/libinfer-tiny-f32.gguf" --n-embd 32 --n-layer 1 --n-head 4 \
  --n-head-kv 2 --n-ff 64 --ctx 128 --seed 7 2>/dev/null
dump "$PWD/$out/libinfer-tiny-f32.gguf" "$out/libinfer-tiny-f32.dump.txt"

# 3. llama-quantize output (written by llama.cpp) from our files: Q8_0, and Q4_K_M on a model whose
#    rows are multiples of 256 so that K-quants apply.
"$bin/llama-quantize" "$out/libinfer-tiny-f32.gguf" "$out/llama-quantized-q8_0.gguf" Q8_0 >/dev/null 2>&1
dump "$PWD/$out/llama-quantized-q8_0.gguf" "$out/llama-quantized-q8_0.dump.txt"
"$build/bin/infer-make-model" -o "$work/k.gguf" --n-embd 256 --n-layer 1 --n-head 4 --n-head-kv 2 \
  --n-ff 256 --ctx 128 --seed 8 2>/dev/null
"$bin/llama-quantize" "$work/k.gguf" "$out/llama-quantized-q4_k_m.gguf" Q4_K_M >/dev/null 2>&1
dump "$PWD/$out/llama-quantized-q4_k_m.gguf" "$out/llama-quantized-q4_k_m.dump.txt"

# The dumps name files by absolute path; keep only the base name.
sed -i -E "s#$PWD/$out/##g" "$out"/*.dump.txt
echo "regenerated $out with llama.cpp from $bin"
