#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Print the path of a clang that can build and link a program with the
# sanitizer flags given, installing Debian 12's clang 14 when none can.
#
#   cc=$(bash scripts/clang.sh -fsanitize=undefined,integer)
#   cc=$(bash scripts/clang.sh -fsanitize=fuzzer,address,undefined)
#
# RL_CLANG=PATH tries that compiler only. When no clang passes the probe,
# installs clang-14, libclang-rt-14-dev (Debian ships the sanitizer and
# libFuzzer runtimes apart from the compiler) and llvm-14 (llvm-symbolizer:
# without it sanitizer reports carry no function names, and UBSan's
# function-level suppressions cannot match). Installing needs root, like
# scripts/deps.sh. Messages go to stderr; stdout is only the compiler path.
# Exits 1 when no usable clang can be had.
set -euo pipefail

flags=("$@")

say() { echo "clang.sh: $*" >&2; }

# Does the flag list link libFuzzer (which brings its own main)?
links_fuzzer() {
  local f s
  for f in "${flags[@]}"; do
    [[ $f == -fsanitize=* ]] || continue
    IFS=, read -r -a s <<<"${f#-fsanitize=}"
    [[ " ${s[*]} " == *" fuzzer "* ]] && return 0
  done
  return 1
}

# Can $1 build a program with the flags, and (without libFuzzer) run it?
usable() {
  local cc=$1 d rc=0
  command -v "$cc" >/dev/null 2>&1 || return 1
  d=$(mktemp -d)
  printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' >"$d/p.c"
  if links_fuzzer; then
    "$cc" "${flags[@]}" "$d/p.c" -o "$d/p" >/dev/null 2>&1 || rc=1
  else
    echo 'int main(void) { return LLVMFuzzerTestOneInput(NULL, 0); }' >>"$d/p.c"
    { "$cc" "${flags[@]}" "$d/p.c" -o "$d/p" && "$d/p"; } >/dev/null 2>&1 || rc=1
  fi
  rm -rf "$d"
  return $rc
}

find_usable() {
  local c
  if [[ -n ${RL_CLANG:-} ]]; then
    usable "$RL_CLANG" && { echo "$RL_CLANG"; return 0; }
    return 1
  fi
  for c in clang clang-14; do
    usable "$c" && { echo "$c"; return 0; }
  done
  return 1
}

symbolizer_ok() {
  command -v llvm-symbolizer >/dev/null 2>&1 || [[ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]]
}

if cc=$(find_usable) && symbolizer_ok; then
  echo "$cc"
  exit 0
fi

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  say "installing clang-14, libclang-rt-14-dev and llvm-14"
  export DEBIAN_FRONTEND=noninteractive
  log=$(mktemp)
  { apt-get update && apt-get install -y --no-install-recommends clang-14 libclang-rt-14-dev llvm-14; } >"$log" 2>&1 \
    || { tail -20 "$log" >&2; rm -f "$log"; say "apt-get install clang-14 libclang-rt-14-dev llvm-14 failed"; exit 1; }
  rm -f "$log"
fi
cc=$(find_usable) || {
  say "no clang builds with ${flags[*]} (apt-get install clang-14 libclang-rt-14-dev llvm-14)"
  exit 1
}
symbolizer_ok || say "warning: no llvm-symbolizer: reports will lack function names"
echo "$cc"
