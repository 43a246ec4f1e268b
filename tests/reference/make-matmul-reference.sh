#!/usr/bin/env bash
# Regenerates tests/data/matmul/: llama.cpp's CPU mul_mat of every computable weight type and its
# activation quantizers, for tests/unit/test_qmatmul.cpp (file list in ggml_matmul_reference.cpp).
#
#   tests/reference/make-matmul-reference.sh
#
# Compiles tests/reference/ggml_matmul_reference.cpp against the static ggml libraries that
# scripts/build-llama-cpp builds (GGML_NATIVE, so the kernels are those of this CPU) and runs it.
# The data describes llama.cpp on an x86 CPU with AVX2, FMA and F16C and without AVX-512 (the
# machine the reference models were made on); regenerate on such a machine. Run from the
# repository root.
set -euo pipefail
bin=$(scripts/build-llama-cpp | tail -n 1)
build_dir=$(dirname "$bin")                       # .../build-<version>
version=${build_dir##*/build-}
src="$(dirname "$build_dir")/llama_cpp_python-$version/vendor/llama.cpp"
if grep -q avx512f /proc/cpuinfo || ! grep -q avx2 /proc/cpuinfo; then
  echo "this data describes an AVX2 CPU without AVX-512; this machine differs" >&2
  exit 1
fi
out=tests/data/matmul
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

lib="$build_dir/ggml/src"
c++ -O2 -std=c++17 -I"$src/ggml/include" tests/reference/ggml_matmul_reference.cpp \
  "$lib/libggml.a" "$lib/libggml-cpu.a" "$lib/libggml-base.a" -fopenmp -lpthread -ldl -lm -o "$work/ggml-matmul-reference"

rm -rf "$out"
mkdir -p "$out"
"$work/ggml-matmul-reference" "$out"
cat > "$out/README.md" <<EOT
llama.cpp's CPU results for \`tests/unit/test_qmatmul.cpp\`: ggml's mul_mat of every computable weight
type at a batch of 16 rows and ggml's activation quantizers, on an x86 CPU with AVX2 (file list in
\`tests/reference/ggml_matmul_reference.cpp\`). Regenerate from the repository root with:

    tests/reference/make-matmul-reference.sh
EOT
echo "regenerated $out with ggml from $src"
