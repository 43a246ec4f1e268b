#!/usr/bin/env bash
# Regenerates tests/data/quant/: quantized weight rows written by llama.cpp's llama-quantize, each
# with the float32 values gguf-py (llama.cpp's own Python package, an implementation independent
# of ggml's C code and of ours) dequantizes them to, for tests/unit/test_dequantize.cpp.
#
#   tests/reference/make-quant-reference.sh [BUILD_DIR]     (default BUILD_DIR: build)
#
# Files written:
#   manifest.txt        one line per type: TYPE FILE_STEM N_IN N_ROWS TENSOR
#   <stem>.bin          the first N_ROWS rows of TENSOR as llama-quantize stored them
#   <stem>.f32          gguf-py's dequantization of those rows (float32, little-endian)
#   source.f32          the same rows of the F32 model that was quantized (llama-quantize's
#                       rows come from ggml's reference quantizers without an imatrix, so
#                       quantizing these floats must give every <stem>.bin byte for byte)
#   preset-types.txt    per llama-quantize preset and model shape, the tensor types it wrote
#
# llama.cpp comes from scripts/build-llama-cpp (the llama-cpp-python sdist, cached outside the
# repository); gguf-py is the copy in that source tree and needs numpy (pip install numpy).
# Run from the repository root.
set -euo pipefail
build=${1:-build}
bin=$(scripts/build-llama-cpp | tail -n 1)
build_dir=$(dirname "$bin")                       # .../build-<version>
version=${build_dir##*/build-}
gguf_py="$(dirname "$build_dir")/llama_cpp_python-$version/vendor/llama.cpp/gguf-py"
out=tests/data/quant
tensor=blk.0.ffn_down.weight  # rows of n_ff = 512 elements: two K-quant super-blocks per row
n_rows=4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Model rows are multiples of 256 so that every K-quant applies without fallback...
"$build/bin/infer-make-model" -o "$work/f32.gguf" --n-embd 256 --n-layer 1 --n-head 4 --n-head-kv 2 \
  --n-ff 512 --ctx 128 --seed 11 2>/dev/null
# ...and a second model whose rows are not (96, 160), to record llama-quantize's fallback types.
"$build/bin/infer-make-model" -o "$work/odd.gguf" --n-embd 96 --n-layer 1 --n-head 4 --n-head-kv 2 \
  --n-ff 160 --ctx 128 --seed 12 2>/dev/null

# --pure: every 2-D tensor gets the preset's base type (no K-quant mixture).
pure=(Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K_S Q4_K_S Q5_K_S Q6_K BF16 F16)
for p in "${pure[@]}"; do
  "$bin/llama-quantize" --pure "$work/f32.gguf" "$work/pure-$p.gguf" "$p" >"$work/q.log" 2>&1 ||
    { cat "$work/q.log" >&2; exit 1; }
done
presets=(Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K F16 BF16)
for p in "${presets[@]}"; do
  for m in f32 odd; do
    "$bin/llama-quantize" "$work/$m.gguf" "$work/preset-$m-$p.gguf" "$p" >"$work/q.log" 2>&1 ||
      { cat "$work/q.log" >&2; exit 1; }
  done
done

rm -rf "$out"
mkdir -p "$out"
PYTHONPATH="$gguf_py" python3 - "$work" "$out" "$tensor" "$n_rows" "${pure[*]}" "${presets[*]}" <<'EOF'
import sys
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

work, out, tensor, n_rows, pure, presets = sys.argv[1:7]
n_rows = int(n_rows)

def find(path, name):
    for t in GGUFReader(path).tensors:
        if t.name == name:
            return t
    sys.exit(f"{path}: no tensor {name}")

src = find(f"{work}/f32.gguf", tensor)
n_in = int(src.shape[0])
np.asarray(src.data[:n_rows], dtype="<f4").tofile(f"{out}/source.f32")

with open(f"{out}/manifest.txt", "w") as manifest:
    manifest.write("# TYPE FILE_STEM N_IN N_ROWS TENSOR (see tests/reference/make-quant-reference.sh)\n")
    for p in pure.split():
        t = find(f"{work}/pure-{p}.gguf", tensor)
        rows = t.data[:n_rows]
        stem = t.tensor_type.name.lower()
        rows.tofile(f"{out}/{stem}.bin")
        np.asarray(dequantize(rows, t.tensor_type), dtype="<f4").tofile(f"{out}/{stem}.f32")
        manifest.write(f"{t.tensor_type.name} {stem} {n_in} {n_rows} {tensor}\n")

with open(f"{out}/preset-types.txt", "w") as f:
    f.write("# PRESET MODEL: tensor types llama-quantize wrote (f32: rows multiples of 256; odd: rows of 96 and 160)\n")
    for p in presets.split():
        for m in ("f32", "odd"):
            types = sorted({t.tensor_type.name for t in GGUFReader(f"{work}/preset-{m}-{p}.gguf").tensors})
            f.write(f"{p} {m}: {' '.join(types)}\n")
EOF
echo "regenerated $out with llama.cpp from $bin and gguf-py from $gguf_py"
