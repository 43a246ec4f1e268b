#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs programs that consume it the
# three documented ways: find_package(infer) (shared and static) and pkg-config. Also checks that
# the shared library exports only the public API and carries a versioned SONAME.
#
#   tests/integration/install.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
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
echo "install: SONAME $soname, $(echo "$exported" | wc -l) exported symbols, find_package and pkg-config consumers run"
