#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the libFuzzer targets in tests/fuzz/ and run each for a while.
#
#   bash scripts/fuzz.sh              every target for 10 s (the CI smoke run)
#   bash scripts/fuzz.sh 60           every target for 60 s (the documented
#                                     longer run, docs/hardening.md)
#   bash scripts/fuzz.sh 30 fuzz_spec one target
#   RL_FUZZ_CFLAGS="-DRL_FUZZ_BOUNDED_CLOCK" bash scripts/fuzz.sh
#                                     replace the instance after 2^60 ns of
#                                     clock swings (explores other state)
#
# Everything goes to build-fuzz/: the library built by clang through CMake
# (so it follows the project's own source list and generated files) with
# -fsanitize=fuzzer-no-link,address,undefined, one binary per target, a
# writable corpus per target (seeded from tests/fuzz/corpus/<target>, which
# is never written), crash artifacts and logs. Prints one summary line per
# target and exits non-zero if any target crashed, leaked, hit undefined
# behaviour, timed out or failed to build. fuzz_http targets the gateway
# example's parser, which is not in the library: its one source file,
# examples/gateway/http_parser.c, is compiled into that target. Runs
# scripts/deps.sh first, and
# installs clang-14 and libclang-rt-14-dev (libFuzzer) when no clang can
# link a fuzzer (needs root then, like deps.sh). RL_FUZZ_CC picks a compiler.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${RL_FUZZ_DIR:-$root/build-fuzz}
secs=${1:-10}
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for f in "$root"/tests/fuzz/fuzz_*.c; do
    targets+=("$(basename "$f" .c)")
  done
fi
[[ $secs =~ ^[0-9]+$ && $secs -gt 0 ]] || { echo "fuzz.sh: seconds must be a positive integer: $secs" >&2; exit 2; }

log() { echo "==> fuzz.sh: $*"; }

# The library's own build dependencies (cmake, hiredis, libuv, ...).
bash "$root/scripts/deps.sh"

# A clang that links libFuzzer with ASan and UBSan (scripts/clang.sh installs
# clang-14, libclang-rt-14-dev and llvm-14 when none can).
cc=$(RL_CLANG=${RL_FUZZ_CC:-} bash "$root/scripts/clang.sh" -fsanitize=fuzzer,address,undefined) || exit 1

san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"

log "library ($cc, fuzzer-no-link + ASan + UBSan) in $out/lib"
mkdir -p "$out/lib"
# -Werror off for the library here: a clang-only warning in library code is
# the -Werror build's business (scripts/test.sh), not a reason to skip fuzzing.
cmake -S "$root" -B "$out/lib" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link $san" \
  -DRL_WERROR=OFF -DRL_ASAN=OFF -DRL_TSAN=OFF \
  -DRL_BUILD_TESTS=OFF -DRL_BUILD_BENCH=OFF -DRL_BUILD_EXAMPLES=OFF >"$out/lib/configure.log" 2>&1 \
  || { tail -30 "$out/lib/configure.log" >&2; echo "fuzz.sh: configure failed" >&2; exit 1; }
cmake --build "$out/lib" --target ratelimit_static -j "$(nproc 2>/dev/null || echo 2)" >"$out/lib/build.log" 2>&1 \
  || { tail -50 "$out/lib/build.log" >&2; echo "fuzz.sh: library build failed" >&2; exit 1; }
lib=$out/lib/libratelimit.a
# Whatever the library links against (hiredis, libuv once the global tier
# lands); absent packages simply add nothing.
extra_libs=$(pkg-config --libs hiredis libuv 2>/dev/null || true)

# The project's warning set (CMakeLists.txt RL_WARN), as errors.
warn=(-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wpointer-arith
      -Wcast-align -Wformat=2 -Wvla)
mkdir -p "$out/logs" "$out/artifacts"
for t in "${targets[@]}"; do
  src=$root/tests/fuzz/$t.c
  [[ -f $src ]] || { echo "fuzz.sh: no such target: $src" >&2; exit 2; }
  log "build $t"
  extra_src=()
  [[ $t == fuzz_http ]] && extra_src=(-I"$root/examples/gateway" "$root/examples/gateway/http_parser.c")
  # shellcheck disable=SC2086 # $san, $extra_libs, RL_FUZZ_CFLAGS are word lists
  "$cc" -std=gnu11 "${warn[@]}" ${RL_FUZZ_CFLAGS:-} -fsanitize=fuzzer $san -I"$root/include" -I"$root/src" \
    "$src" "${extra_src[@]}" "$lib" $extra_libs -lpthread -o "$out/$t"
done

# LeakSanitizer needs ptrace-like access; it is on by default with ASan.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=0
summary=()
for t in "${targets[@]}"; do
  corpus=$out/corpus/$t
  seeds=$root/tests/fuzz/corpus/$t
  mkdir -p "$corpus"
  args=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$out/artifacts/$t-")
  [[ -f $root/tests/fuzz/$t.dict ]] && args+=(-dict="$root/tests/fuzz/$t.dict")
  [[ -f $root/tests/fuzz/$t.options ]] && read -r -a more <"$root/tests/fuzz/$t.options" && args+=("${more[@]}")
  log "run $t for ${secs}s"
  rc=0
  # The first directory receives new inputs; the seed directory is read only.
  "$out/$t" "${args[@]}" "$corpus" "$seeds" >"$out/logs/$t.log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/logs/$t.log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$out/logs/$t.log" | tail -1 | awk '{print $2}')
  corp=$(find "$corpus" -type f | wc -l)
  if [[ $rc -eq 0 ]]; then
    line="fuzz: $t: ok, ${execs:-?} execs in ${secs}s, cov ${cov:-?}, corpus $corp"
  else
    failed=$((failed + 1))
    line="fuzz: $t: FAILED (exit $rc) after ${execs:-?} execs: see $out/logs/$t.log"
    grep -E 'ERROR: |SUMMARY: |runtime error|Test unit written' "$out/logs/$t.log" | head -8 >&2 || true
  fi
  summary+=("$line")
done
printf '%s\n' "${summary[@]}"
echo "fuzz: $(( ${#targets[@]} - failed )) passed, $failed failed"
[[ $failed -eq 0 ]]
