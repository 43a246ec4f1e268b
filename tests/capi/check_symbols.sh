#!/usr/bin/env bash
# Fails when capi/infer.symbols and the infer_* symbols libinfer.so exports differ: a listed symbol
# that disappeared breaks every program linked against it; an exported one that is not listed
# means the list (and docs/c-api.md) fell behind.
#
#   check_symbols.sh LIBINFER_SO INFER_SYMBOLS
set -euo pipefail
lib=$1
list=$2
exported=$(nm -D --defined-only "$lib" | awk '$3 ~ /^infer_/ {print $3}' | LC_ALL=C sort -u)
listed=$(grep -v '^$' "$list")
if [[ $listed != "$(echo "$listed" | LC_ALL=C sort -u)" ]]; then
  echo "$list is not sorted (LC_ALL=C sort -u) or has duplicates" >&2
  exit 1
fi
missing=$(LC_ALL=C comm -23 <(echo "$listed") <(echo "$exported"))
added=$(LC_ALL=C comm -13 <(echo "$listed") <(echo "$exported"))
status=0
if [[ -n $missing ]]; then
  echo "listed in $list but no longer exported by $lib (an ABI break):" >&2
  echo "$missing" | sed 's/^/  /' >&2
  status=1
fi
if [[ -n $added ]]; then
  echo "exported by $lib but not listed in $list (add them, in order):" >&2
  echo "$added" | sed 's/^/  /' >&2
  status=1
fi
[[ $status -eq 0 ]] && echo "$(echo "$listed" | wc -l) infer_* symbols, as listed"
exit $status
