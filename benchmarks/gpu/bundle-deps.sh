#!/usr/bin/env bash
# Copies what the build needs and a GPU machine lacks (it has nvcc, CMake, ninja and PyTorch, no
# package registry) into one prefix that travels with the tree: sentencepiece's header and library
# and Catch2 (header and CMake package), from this machine's Debian packages (libsentencepiece-dev,
# catch2). run.sh finds the prefix at $INFER_GPU_DEPS (default: .gpu-deps, ignored by git).
#
#   benchmarks/gpu/bundle-deps.sh [PREFIX]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
prefix=${1:-$root/.gpu-deps}
lib=/usr/lib/x86_64-linux-gnu
rm -rf "$prefix"
mkdir -p "$prefix/include" "$prefix/lib/cmake"
cp /usr/include/sentencepiece_processor.h "$prefix/include/"
cp -P "$lib"/libsentencepiece.so "$lib"/libsentencepiece.so.0* "$prefix/lib/"
cp -r /usr/include/catch2 "$prefix/include/"
cp -r /usr/lib/cmake/Catch2 "$prefix/lib/cmake/"
echo "bundled into $prefix ($(du -sh "$prefix" | cut -f1))"
