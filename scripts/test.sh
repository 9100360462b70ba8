#!/usr/bin/env bash
# Build libratelimit with -Werror and run every test suite.
#
#   bash scripts/test.sh               build/       ctest (all Check suites,
#                                                   examples, consumer test)
#   bash scripts/test.sh --asan        build-asan/  same, ASan + UBSan
#   bash scripts/test.sh --tsan        build-tsan/  same, ThreadSanitizer
#   bash scripts/test.sh --valgrind    build/       each tests/test_* suite
#                                                   under valgrind memcheck
# Options:
#   --build-dir DIR   build directory (also: RL_BUILD_DIR=DIR)
#   -- ARGS...        passed on to ctest (e.g. -- -R spec); not with --valgrind
#
# Installs missing Debian packages first (scripts/deps.sh; needs root only
# when something is missing). Exits non-zero if configuring, building or any
# test fails. ctest honours CTEST_PARALLEL_LEVEL; the default is one test at a
# time, because the concurrency suites measure rates on 2 cores.
#
# --valgrind runs each Check suite binary with CK_FORK=no (so memcheck sees
# the test bodies, not just the runner) under
#   valgrind --error-exitcode=1 --leak-check=full
# and skips suites whose name contains "concurrency" or "stress": they run
# many threads for a fixed wall-clock time or a fixed number of operations,
# which under valgrind's serialised threads takes 20-50x longer and tests
# little that ASan and TSan do not already cover. RL_VALGRIND_ALL=1 runs them
# too. Under --valgrind, tests see RL_VALGRIND=1, and Check test cases tagged
# "novalgrind" (tcase_set_tags) are excluded (CK_EXCLUDE_TAGS): for a test
# that is meaningless there, e.g. one whose fork()ed child exits holding an
# inherited instance by design (valgrind reports that as a leak and turns the
# child's exit status into 1). tests/valgrind.supp, if present, is used as a
# suppression file; each entry carries a comment giving its reason.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

mode=plain
build_dir=${RL_BUILD_DIR:-}
ctest_args=()

usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --asan) mode=asan ;;
    --tsan) mode=tsan ;;
    --valgrind) mode=valgrind ;;
    --build-dir)
      [[ $# -ge 2 ]] || { echo "test.sh: --build-dir needs a directory" >&2; exit 2; }
      build_dir=$2
      shift
      ;;
    --build-dir=*) build_dir=${1#--build-dir=} ;;
    -h | --help) usage; exit 0 ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "test.sh: unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [[ -z "$build_dir" ]]; then
  case "$mode" in
    asan) build_dir=$root/build-asan ;;
    tsan) build_dir=$root/build-tsan ;;
    *) build_dir=$root/build ;;
  esac
fi
if [[ $mode == valgrind && ${#ctest_args[@]} -gt 0 ]]; then
  echo "test.sh: ctest arguments are not used with --valgrind" >&2
  exit 2
fi

jobs=$(nproc 2>/dev/null || echo 2)
log() { echo "==> test.sh [$mode]: $*"; }

log "dependencies"
bash "$here/deps.sh"

asan=OFF
tsan=OFF
[[ $mode == asan ]] && asan=ON
[[ $mode == tsan ]] && tsan=ON

log "configure $build_dir"
# Both sanitizer options are always given, so a reused build directory never
# keeps a stale one.
cmake -S "$root" -B "$build_dir" \
  -DCMAKE_BUILD_TYPE="${RL_BUILD_TYPE:-RelWithDebInfo}" \
  -DRL_WERROR=ON -DRL_ASAN="$asan" -DRL_TSAN="$tsan" \
  -DRL_BUILD_TESTS=ON -DRL_BUILD_EXAMPLES=ON \
  || { echo "test.sh: configure failed (errors above)" >&2; exit 1; }

log "build (-Werror, $jobs jobs)"
cmake --build "$build_dir" -j "$jobs" \
  || { echo "test.sh: build failed (errors above)" >&2; exit 1; }

# Check suites: fork mode with a per-test timeout (tests/CMakeLists.txt sets
# CK_DEFAULT_TIMEOUT); keep a caller's sanitizer options, else fail fast.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [[ -z ${TSAN_OPTIONS:-} ]]; then
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
  # A suppression, if ever needed, lives in tests/tsan.supp with a comment
  # giving its reason (STYLE.md 16).
  if [[ -f $root/tests/tsan.supp ]]; then
    TSAN_OPTIONS+=":suppressions=$root/tests/tsan.supp"
  fi
fi
export TSAN_OPTIONS

# ThreadSanitizer (GCC 12's) cannot map its shadow memory when the kernel
# randomises mmap with more than 28 bits ("unexpected memory mapping"). Probe
# a tiny TSan program; when it fails, or the kernel uses more bits, run the
# tests with ASLR off for those processes (setarch -R), which is harmless.
tsan_prefix=()
tsan_setup() {
  local probe_dir rc=0 bits
  bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)
  probe_dir=$(mktemp -d)
  printf '%s\n' '#include <pthread.h>' \
    'static void *run(void *a) { return a; }' \
    'int main(void) { pthread_t t; if (pthread_create(&t, 0, run, 0)) return 1; return pthread_join(t, 0); }' \
    >"$probe_dir/probe.c"
  if ! cc -fsanitize=thread -pthread "$probe_dir/probe.c" -o "$probe_dir/probe" 2>"$probe_dir/cc.log"; then
    cat "$probe_dir/cc.log" >&2
    rm -rf "$probe_dir"
    echo "test.sh: cannot build a ThreadSanitizer program (is libtsan installed?)" >&2
    exit 1
  fi
  for _ in 1 2 3; do
    "$probe_dir/probe" >/dev/null 2>&1 || rc=1
  done
  if [[ $rc -ne 0 || $bits -gt 28 ]]; then
    local arch
    arch=$(uname -m)
    if setarch "$arch" -R "$probe_dir/probe" >/dev/null 2>&1; then
      tsan_prefix=(setarch "$arch" -R)
      log "TSan needs ASLR off here (mmap_rnd_bits=$bits): running tests under setarch $arch -R"
    else
      rm -rf "$probe_dir"
      echo "test.sh: ThreadSanitizer programs fail here, with and without setarch -R" >&2
      exit 1
    fi
  fi
  rm -rf "$probe_dir"
}

run_ctest() {
  log "ctest"
  (cd "$build_dir" && "${tsan_prefix[@]}" ctest --output-on-failure --no-tests=error "${ctest_args[@]}")
}

run_valgrind() {
  local suites=() skipped=() passed=0 failed=0 failed_names=() t name
  command -v valgrind >/dev/null 2>&1 || { echo "test.sh: valgrind not found" >&2; exit 1; }
  local vg_supp=()
  if [[ -f $root/tests/valgrind.supp ]]; then
    vg_supp=("--suppressions=$root/tests/valgrind.supp")
  fi
  for t in "$build_dir"/tests/test_*; do
    [[ -f $t && -x $t ]] || continue
    name=$(basename "$t")
    if [[ ${RL_VALGRIND_ALL:-0} != 1 && ( $name == *concurrency* || $name == *stress* ) ]]; then
      skipped+=("$name")
      continue
    fi
    suites+=("$t")
  done
  if [[ ${#suites[@]} -eq 0 ]]; then
    echo "test.sh: no Check suite binaries found in $build_dir/tests" >&2
    exit 1
  fi
  for t in "${suites[@]}"; do
    name=$(basename "$t")
    log "valgrind $name"
    # A suite runs in one process here (CK_FORK=no), so Check's per-test
    # timeout does not apply: bound the whole suite instead.
    if (cd "$build_dir/tests" &&
        CK_FORK=no RL_VALGRIND=1 CK_EXCLUDE_TAGS="${CK_EXCLUDE_TAGS:+$CK_EXCLUDE_TAGS }novalgrind" \
          timeout --signal=KILL 1200 \
          valgrind --error-exitcode=1 --leak-check=full --quiet "${vg_supp[@]}" "$t"); then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      failed_names+=("$name")
    fi
  done
  if [[ ${#skipped[@]} -gt 0 ]]; then
    log "skipped under valgrind (too slow; ASan/TSan cover them): ${skipped[*]}"
  fi
  if [[ $failed -gt 0 ]]; then
    log "failed under valgrind: ${failed_names[*]}"
  fi
  echo "valgrind: $passed passed, $failed failed, ${#skipped[@]} skipped"
  [[ $failed -eq 0 ]]
}

case "$mode" in
  valgrind) run_valgrind ;;
  tsan) tsan_setup; run_ctest ;;
  *) run_ctest ;;
esac
log "OK"
