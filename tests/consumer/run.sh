#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Out-of-tree consumer test: install a libratelimit build into a temporary
# prefix, then build tests/consumer/consumer.c against that install four ways,
#   1. with pkg-config:  cc consumer.c $(pkg-config --cflags --libs ratelimit),
#                        and again statically with pkg-config --static
#   2. with CMake:       find_package(ratelimit) + ratelimit::ratelimit,
#                        and again with ratelimit::ratelimit_static
# and run each. Cleans up after itself.
#
#   bash tests/consumer/run.sh BUILD_DIR ["EXTRA C FLAGS"]
#
# BUILD_DIR must be built already. EXTRA C FLAGS are used to compile and link
# the consumer (ctest passes the sanitizer flags of a sanitizer build, whose
# library needs its runtime in the program). ctest runs this as the test
# "consumer" (label "consumer").
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 BUILD_DIR [\"EXTRA C FLAGS\"]" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "$1" && pwd)
read -r -a extra <<<"${2:-}"

fail() {
  echo "consumer: FAIL: $*" >&2
  exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$(realpath -m "$tmp/prefix")

echo "consumer: installing $build into $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log" >&2; fail "cmake --install"; }

# --------------------------------------------------------------- pkg-config
pc=$(find "$prefix" -name ratelimit.pc -path '*/pkgconfig/*' | head -n 1)
[[ -n "$pc" ]] || fail "no ratelimit.pc installed under $prefix"
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
export PKG_CONFIG_PATH=$pcdir

# The .pc must describe where it was installed: a user who runs
# `cmake --install build --prefix DIR` gets a usable pkg-config file. (A .pc
# pointing at the configure-time prefix would compile against whatever
# happens to be installed there, or fail.)
for var in includedir libdir; do
  val=$(pkg-config --variable="$var" ratelimit)
  val_real=$(realpath -m "$val")
  case "$val_real" in
    "$prefix"/*) ;;
    *) fail "ratelimit.pc's $var is $val, not under the install prefix $prefix:" \
            "the .pc is not relocatable (derive prefix from \${pcfiledir})" ;;
  esac
done
mapfile -t pcflags < <(pkg-config --cflags --libs ratelimit | tr ' ' '\n' | sed '/^$/d')
echo "consumer: pkg-config --cflags --libs ratelimit: ${pcflags[*]}"
cc -std=c11 -Wall -Wextra -Werror "${extra[@]}" "$here/consumer.c" -o "$tmp/consumer_pc" \
  "${pcflags[@]}" || fail "build with pkg-config"
LD_LIBRARY_PATH=$libdir "$tmp/consumer_pc" || fail "consumer built with pkg-config"
[[ $(pkg-config --variable=license ratelimit) == MIT ]] || fail "ratelimit.pc does not say license=MIT"
# Run time (README "Install notes"): outside the loader's directories the
# program starts only if it knows where the library is. Without help it
# fails as users saw ("libratelimit.so.0: cannot open shared object file"),
# unless a libratelimit is installed system-wide; with the rpath the README
# gives, it starts with no LD_LIBRARY_PATH.
if ! ldconfig -p 2>/dev/null | grep -q 'libratelimit\.so\.0 '; then
  if env -u LD_LIBRARY_PATH "$tmp/consumer_pc" >"$tmp/norpath.log" 2>&1; then
    fail "a consumer without rpath started: the install notes' premise is wrong"
  fi
  grep -q 'libratelimit.so.0' "$tmp/norpath.log" \
    || { cat "$tmp/norpath.log" >&2; fail "no 'libratelimit.so.0' in the loader's error"; }
fi
cc -std=c11 -Wall -Wextra -Werror "${extra[@]}" "$here/consumer.c" -o "$tmp/consumer_rpath" \
  "${pcflags[@]}" "-Wl,-rpath,$(pkg-config --variable=libdir ratelimit)" \
  || fail "build with pkg-config and an rpath"
env -u LD_LIBRARY_PATH "$tmp/consumer_rpath" || fail "consumer built with the install notes' rpath"

# Static: `pkg-config --static` must list everything libratelimit.a needs
# (Libs.private, Requires.private). -l:libratelimit.a makes ld take the
# archive even though the shared library sits beside it.
mapfile -t pcstatic < <(pkg-config --static --cflags --libs ratelimit | tr ' ' '\n' |
  sed -e '/^$/d' -e 's/^-lratelimit$/-l:libratelimit.a/')
echo "consumer: pkg-config --static (libratelimit.a): ${pcstatic[*]}"
cc -std=c11 -Wall -Wextra -Werror "${extra[@]}" "$here/consumer.c" -o "$tmp/consumer_pc_static" \
  "${pcstatic[@]}" || fail "static build with pkg-config --static"
"$tmp/consumer_pc_static" || fail "consumer built with pkg-config --static"

# ------------------------------------------------------------ find_package
flags="${extra[*]}"
cmake -S "$here" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="-Wall -Wextra -Werror $flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$tmp/configure.log" 2>&1 \
  || { cat "$tmp/configure.log" >&2; fail "cmake find_package(ratelimit)"; }
found=$(sed -n 's/^ratelimit_DIR:PATH=//p' "$tmp/build/CMakeCache.txt")
echo "consumer: find_package(ratelimit) found $found"
case "$(realpath -m "$found")" in
  "$prefix"/*) ;;
  *) fail "find_package(ratelimit) found $found, not the install under $prefix" ;;
esac
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 \
  || { cat "$tmp/build.log" >&2; fail "build with find_package"; }
# CMake puts the imported library's directory in the build tree's RPATH.
env -u LD_LIBRARY_PATH "$tmp/build/consumer" || fail "consumer built with find_package"
"$tmp/build/consumer_static" || fail "consumer_static built with find_package"

# The docs the CLI's help points to, and the man page.
docs=(share/doc/ratelimit/cli.md share/doc/ratelimit/limits-file.md share/doc/ratelimit/LICENSE
      share/man/man3/ratelimit.3)
# ratelimit(1) comes with the tool (not generated in TSan builds).
if [[ -x $prefix/bin/ratelimit ]] && ! grep -q '^RL_TSAN:BOOL=ON' "$build/CMakeCache.txt"; then
  docs+=(share/man/man1/ratelimit.1)
fi
for f in "${docs[@]}"; do
  [[ -f $prefix/$f ]] || fail "$f is not installed"
done
echo "consumer: OK (pkg-config shared, rpath and static; find_package shared and static; docs)"
