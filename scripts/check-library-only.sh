#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The library-only build (README "Build options"): configure with the
# tests, benchmarks and examples off, and with pkg-config unable to see
# Check or xxHash, then build the shared and static library. It fails if
# the top-level CMakeLists.txt looks either up for the library itself.
# ctest runs it as build_library_only.
#
#   bash scripts/check-library-only.sh [CMAKE_EXTRA_ARG...]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A pkg-config search path holding every .pc file of the system's but
# check.pc and libxxhash.pc: as on a machine without those packages.
mkdir "$tmp/pc"
search=$(pkg-config --variable pc_path pkg-config)
IFS=: read -ra dirs <<<"$search"
for d in "${dirs[@]}"; do
  [[ -d $d ]] || continue
  for pc in "$d"/*.pc; do
    [[ -e $pc ]] || continue
    case $(basename "$pc") in
      check.pc | libxxhash.pc) ;;
      *) [[ -e $tmp/pc/$(basename "$pc") ]] || ln -s "$pc" "$tmp/pc/" ;;
    esac
  done
done
export PKG_CONFIG_LIBDIR=$tmp/pc
unset PKG_CONFIG_PATH
if pkg-config --exists check || pkg-config --exists libxxhash; then
  echo "build_library_only: could not hide check/libxxhash from pkg-config" >&2
  exit 1
fi

echo "build_library_only: configure without Check and xxHash"
cmake -S "$root" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release \
  -DRL_BUILD_TESTS=OFF -DRL_BUILD_BENCH=OFF -DRL_BUILD_EXAMPLES=OFF "$@" \
  >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log" >&2; exit 1; }
echo "build_library_only: build the shared and static library"
cmake --build "$tmp/build" -j2 --target ratelimit ratelimit_static >"$tmp/build.log" 2>&1 \
  || { tail -40 "$tmp/build.log" >&2; exit 1; }
ls "$tmp/build"/libratelimit.so.* "$tmp/build/libratelimit.a" >/dev/null
echo "build_library_only: OK"
