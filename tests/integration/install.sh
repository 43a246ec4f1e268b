#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs programs that consume it the
# three documented ways: find_package(infer) (shared and static) and pkg-config. Also checks that
# the shared library exports only the public API and carries a versioned SONAME, and that
# examples/simple-c builds against the installed package both ways and generates text with a tiny
# model that INFER_MAKE_MODEL writes.
#
#   tests/integration/install.sh BUILD_DIR INFER_MAKE_MODEL
set -euo pipefail
build=$(cd "$1" && pwd)
make_model=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
# Missing tool: a failure, not a skip (the simple-c check would silently not run).
[[ -n $make_model && -x $make_model ]] || { echo "infer-make-model not found at '$make_model' (build it)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
lib=$(find "$prefix" -name 'libinfer.so.*.*' | head -n 1)
test -n "$lib" || { echo "no versioned libinfer.so installed" >&2; exit 1; }
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
[[ $soname =~ ^libinfer\.so\.[0-9]+$ ]] || { echo "unexpected SONAME '$soname'" >&2; exit 1; }

# Only the C API (infer_*) and the public C++ namespace may be exported.
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | c++filt)
internal=$(echo "$exported" | grep -vE "^(infer_|infer::)" || true)
[[ -z $internal ]] || { echo "internal symbols exported:" >&2; echo "$internal" | head >&2; exit 1; }
echo "$exported" | grep -qx 'infer_version' || { echo "infer_version not exported" >&2; exit 1; }

cmake -S "$here/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/consumer/consumer_c"
"$tmp/consumer/consumer_cxx"

pc_dir=$(dirname "$(find "$prefix" -name infer.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs infer)
cc "$here/consumer/main.c" $flags -o "$tmp/pc_consumer"
LD_LIBRARY_PATH=$(dirname "$lib") "$tmp/pc_consumer" >/dev/null

# examples/simple-c, the C API's sample, built the two ways against the installed package: it must
# stream some text, then its "[finish reason] ..." line, and exit 0.
"$make_model" -o "$tmp/tiny.gguf" --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --ctx 256 --seed 1 >/dev/null
check_simple_c() {  # program
  local out text
  out=$(LD_LIBRARY_PATH=$(dirname "$lib") "$1" "$tmp/tiny.gguf" "Once upon a time") || { echo "$1 failed" >&2; exit 1; }
  text=$(echo "$out" | sed '$d')
  [[ $(echo "$out" | tail -n 1) =~ ^\[(stop|length)\]\ [0-9]+\ tokens ]] || { echo "$1: no finish line in: $out" >&2; exit 1; }
  [[ -n $text ]] || { echo "$1 printed no text" >&2; exit 1; }
}
simple_c=$here/../../examples/simple-c
cmake -S "$simple_c" -B "$tmp/simple-c" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/simple-c" >/dev/null
check_simple_c "$tmp/simple-c/simple-c"
cc -std=c99 -Wall -Wextra -Werror "$simple_c/main.c" $flags -o "$tmp/simple-c-pc"
check_simple_c "$tmp/simple-c-pc"
echo "install: SONAME $soname, $(echo "$exported" | wc -l) exported symbols, find_package and pkg-config consumers and simple-c run"
