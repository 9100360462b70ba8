#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Whole-process clock jumps under libfaketime: test_hardening's faketime test
# case (RL_FAKETIME=1), which re-runs the suite binary as a checker with
# libfaketime preloaded, steps CLOCK_MONOTONIC back 1 h and forward 1 h
# mid-run through a timestamp file (FAKETIME_TIMESTAMP_FILE,
# FAKETIME_NO_CACHE=1) and checks that a backward jump mints no tokens and
# does not freeze the limits, and that a forward jump gives at most one
# burst (docs/hardening.md).
#
#   bash scripts/faketime-test.sh [--build-dir DIR]
#
# Builds test_hardening in DIR (default build/, also RL_BUILD_DIR; configured
# like scripts/test.sh's plain build when DIR has no cache yet), after
# scripts/deps.sh, and installs Debian's faketime and libfaketime when the
# library is missing (needs root then). Exits non-zero if anything fails.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build_dir=${RL_BUILD_DIR:-$root/build}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir)
      [[ $# -ge 2 ]] || { echo "faketime-test.sh: --build-dir needs a directory" >&2; exit 2; }
      build_dir=$2
      shift
      ;;
    --build-dir=*) build_dir=${1#--build-dir=} ;;
    -h | --help) sed -n '3,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "faketime-test.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

log() { echo "==> faketime-test.sh: $*"; }

bash "$here/deps.sh"

# The library the test preloads (Debian: libfaketime, pulled by faketime).
have_libfaketime() {
  compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null ||
    [[ -e /usr/lib/faketime/libfaketime.so.1 ]]
}
if ! have_libfaketime; then
  command -v apt-get >/dev/null 2>&1 || { echo "faketime-test.sh: no libfaketime and no apt-get" >&2; exit 1; }
  [[ $(id -u) -eq 0 ]] || { echo "faketime-test.sh: must run as root to install faketime" >&2; exit 1; }
  log "installing faketime and libfaketime"
  export DEBIAN_FRONTEND=noninteractive
  apt_log=$(mktemp)
  if ! { apt-get update && apt-get install -y --no-install-recommends faketime libfaketime; } >"$apt_log" 2>&1; then
    tail -20 "$apt_log" >&2
    rm -f "$apt_log"
    echo "faketime-test.sh: apt-get install faketime libfaketime failed" >&2
    exit 1
  fi
  rm -f "$apt_log"
  have_libfaketime || { echo "faketime-test.sh: libfaketime.so.1 still not found" >&2; exit 1; }
fi

if [[ ! -f $build_dir/CMakeCache.txt ]]; then
  log "configure $build_dir"
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE="${RL_BUILD_TYPE:-RelWithDebInfo}" \
    -DRL_WERROR=ON -DRL_ASAN=OFF -DRL_TSAN=OFF -DRL_BUILD_TESTS=ON -DRL_BUILD_EXAMPLES=ON \
    || { echo "faketime-test.sh: configure failed (errors above)" >&2; exit 1; }
fi
log "build test_hardening in $build_dir"
cmake --build "$build_dir" --target test_hardening -j "$(nproc 2>/dev/null || echo 2)" \
  || { echo "faketime-test.sh: build failed (errors above)" >&2; exit 1; }

# Whatever faking the caller's environment carries would change what the
# checker sees; the test sets its own.
unset FAKETIME FAKETIME_TIMESTAMP_FILE DONT_FAKE_MONOTONIC FAKETIME_DONT_FAKE_MONOTONIC LD_PRELOAD

log "run test_hardening (faketime)"
out=$(mktemp)
rc=0
(cd "$build_dir/tests" && RL_FAKETIME=1 CK_RUN_CASE=faketime ./test_hardening) >"$out" 2>&1 || rc=$?
cat "$out"
# The case only exists with RL_FAKETIME=1: make sure it ran.
checks=$(sed -n 's/^[0-9]*%: Checks: \([0-9]*\).*/\1/p' "$out" | tail -1)
rm -f "$out"
if [[ $rc -ne 0 || ${checks:-0} -lt 1 ]]; then
  echo "faketime-test.sh: FAILED (exit $rc, ${checks:-0} checks run)" >&2
  exit 1
fi
log "OK"
