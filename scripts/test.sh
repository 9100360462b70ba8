#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build libratelimit with -Werror and run every test suite.
#
#   bash scripts/test.sh               build/       ctest (all Check suites,
#                                                   examples, consumer test)
#   bash scripts/test.sh --asan        build-asan/  same, ASan + UBSan
#   bash scripts/test.sh --tsan        build-tsan/  same, ThreadSanitizer
#   bash scripts/test.sh --valgrind    build/       each tests/test_* suite and
#                                                   the gateway's, under
#                                                   valgrind memcheck
#   bash scripts/test.sh --integer     build-int/   the Check suites (not the
#                                                   Redis fault suite), clang
#                                                   -fsanitize=undefined,integer
#   bash scripts/test.sh --helgrind    build/       the threaded Check test
#   bash scripts/test.sh --drd         build/       cases under helgrind, drd,
#   bash scripts/test.sh --threadcheck build/       or both
# Options:
#   --nginx           also build and test the nginx module (-DRL_BUILD_NGINX=ON;
#                     installs nginx, nginx-dev, wrk); e.g. --nginx -- -L nginx
#   --build-dir DIR   build directory (also: RL_BUILD_DIR=DIR)
#   -- ARGS...        passed on to ctest (e.g. -- -R spec); not with --valgrind
#                     or the thread checkers
#
# Installs missing Debian packages first (scripts/deps.sh; needs root only
# when something is missing). Exits non-zero if configuring, building or any
# test fails. ctest honours CTEST_PARALLEL_LEVEL; the default is one test at a
# time, because the concurrency suites measure rates on 2 cores.
#
# --valgrind runs each Check suite binary with CK_FORK=no (so memcheck sees
# the test bodies, not just the runner) under
#   valgrind --error-exitcode=1 --leak-check=full --fair-sched=yes
# (valgrind runs one thread at a time; without fair scheduling a thread that
# spins on an atomic can keep the lock and starve the thread it waits for,
# and a suite of racing checkers hangs) and skips suites whose name contains "concurrency" or "stress": they run
# many threads for a fixed wall-clock time or a fixed number of operations,
# which under valgrind's serialised threads takes 20-50x longer and tests
# little that ASan and TSan do not already cover. RL_VALGRIND_ALL=1 runs them
# too. Under --valgrind, tests see RL_VALGRIND=1, and Check test cases tagged
# "novalgrind" (tcase_set_tags) are excluded (CK_EXCLUDE_TAGS): for a test
# that is meaningless there, e.g. one whose fork()ed child exits holding an
# inherited instance by design (valgrind reports that as a leak and turns the
# child's exit status into 1). tests/valgrind.supp, if present, is used as a
# suppression file; each entry carries a comment giving its reason.
# Suites run RL_VALGRIND_JOBS at a time (default: the CPU count, at most 4),
# each one's output printed whole when it ends.
#
# --integer builds with clang (scripts/clang.sh finds one, or installs
# clang-14 with its sanitizer runtimes and llvm-symbolizer) and
# -fsanitize=undefined,integer, and runs the Check suites but test_policy_faults
# (the Redis fault suite: fault injection with wall-clock deadlines, which
# the instrumented build is too slow for) through ctest. -fsanitize=integer
# adds checks for behaviour that is defined but usually a bug: unsigned
# wrap-around, bits shifted out of an unsigned value, implicit conversions
# that change a value. Hashes and PRNGs wrap on purpose:
# tests/ubsan-integer.supp lists those functions, one entry each with its
# reason; any other report stops the test (halt_on_error=1). -Werror is off
# there (clang warns where gcc does not; the gcc -Werror build is the gate
# for warnings). Big test loops run at 1/4 size (RL_TEST_SCALE=4).
#
# --helgrind and --drd run the Check test cases that start threads
# (threaded_cases below), each in one process (CK_FORK=no, one CK_RUN_CASE),
# under valgrind's thread checkers with tests/threadcheck.supp, which
# suppresses race reports only in audited lock-free functions (C11 atomics,
# which the tools do not model). Any other race, lock-order or pthreads
# error fails the run. Before the suites, a deliberately racy program must
# fail under the same tool and suppressions, so the gate is shown to bite.
# --threadcheck runs both tools.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

mode=plain
nginx=OFF
build_dir=${RL_BUILD_DIR:-}
ctest_args=()

usage() {
  sed -n '3,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --asan) mode=asan ;;
    --tsan) mode=tsan ;;
    --valgrind) mode=valgrind ;;
    --integer) mode=integer ;;
    --helgrind) mode=helgrind ;;
    --drd) mode=drd ;;
    --threadcheck) mode=threadcheck ;;
    --nginx) nginx=ON ;;
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
    integer) build_dir=$root/build-int ;;
    *) build_dir=$root/build ;;
  esac
fi
case "$mode" in
  valgrind | helgrind | drd | threadcheck)
    if [[ ${#ctest_args[@]} -gt 0 ]]; then
      echo "test.sh: ctest arguments are not used with --$mode" >&2
      exit 2
    fi
    ;;
esac

jobs=$(nproc 2>/dev/null || echo 2)
log() { echo "==> test.sh [$mode]: $*"; }

log "dependencies"
RL_WITH_NGINX=$([[ $nginx == ON ]] && echo 1 || echo 0) bash "$here/deps.sh"

asan=OFF
tsan=OFF
[[ $mode == asan ]] && asan=ON
[[ $mode == tsan ]] && tsan=ON

# Flavour-specific configure arguments (--integer has its own build
# directory, so its compiler and flags never reach another flavour's).
flavour=(-DRL_WERROR=ON -DRL_BUILD_EXAMPLES=ON -DRL_BUILD_NGINX=$nginx)
werror="-Werror"
# Recoverable checks (clang's default for these): UBSan suppressions apply
# only to those; halt_on_error=1 below stops at the first unsuppressed one.
int_flags="-fsanitize=undefined,integer -fno-omit-frame-pointer"
if [[ $mode == integer ]]; then
  log "clang for -fsanitize=undefined,integer"
  cc=$(bash "$here/clang.sh" -fsanitize=undefined,integer) || exit 1
  flavour=(-DCMAKE_C_COMPILER="$cc" -DRL_WERROR=OFF -DRL_BUILD_EXAMPLES=OFF -DRL_BUILD_BENCH=OFF
           "-DCMAKE_C_FLAGS=$int_flags")
  werror="$cc, no -Werror"
fi

log "configure $build_dir"
# Both sanitizer options are always given, so a reused build directory never
# keeps a stale one.
cmake -S "$root" -B "$build_dir" \
  -DCMAKE_BUILD_TYPE="${RL_BUILD_TYPE:-RelWithDebInfo}" \
  -DRL_ASAN="$asan" -DRL_TSAN="$tsan" -DRL_BUILD_TESTS=ON "${flavour[@]}" \
  || { echo "test.sh: configure failed (errors above)" >&2; exit 1; }

log "build ($werror, $jobs jobs)"
cmake --build "$build_dir" -j "$jobs" \
  || { echo "test.sh: build failed (errors above)" >&2; exit 1; }

# Check suites: fork mode with a per-test timeout (tests/CMakeLists.txt sets
# CK_DEFAULT_TIMEOUT); keep a caller's sanitizer options, else fail fast.
ORIG_UBSAN_OPTIONS=${UBSAN_OPTIONS:-}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [[ $mode == integer ]]; then
  # The suppressions name functions, so reports must be symbolized; a
  # caller's options come last and win.
  int_opts="suppressions=$root/tests/ubsan-integer.supp:halt_on_error=1:print_stacktrace=1:report_error_type=1"
  for sym in "$(command -v llvm-symbolizer 2>/dev/null)" /usr/lib/llvm-14/bin/llvm-symbolizer; do
    if [[ -n $sym && -x $sym ]]; then
      int_opts+=":external_symbolizer_path=$sym"
      break
    fi
  done
  export UBSAN_OPTIONS="$int_opts${ORIG_UBSAN_OPTIONS:+:$ORIG_UBSAN_OPTIONS}"
  export RL_TEST_SCALE=${RL_TEST_SCALE:-4}
  # Check cases tagged "nointeger" fork several children that check at once;
  # here those children hang inside the UBSan runtime (its suppression
  # lookup for the hashes' intended wraps, blocked reading the symbolizer's
  # pipe, which fork() shares). They run in every other flavour.
  export CK_EXCLUDE_TAGS="${CK_EXCLUDE_TAGS:+$CK_EXCLUDE_TAGS }nointeger"
  [[ ${#ctest_args[@]} -gt 0 ]] || ctest_args=(-R '^test_' -E '^test_policy_faults$')
fi
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
  # The library's suites, the gateway example's (its parser and limits
  # file) and the shared limits-file parser's: pure code, where memcheck
  # earns its keep.
  for t in "$build_dir"/tests/test_* "$build_dir"/examples/gateway/test_gateway_* \
           "$build_dir"/tools/limitsfile/test_*; do
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
  # Suites run RL_VALGRIND_JOBS at a time (default: the CPU count, at most
  # 4): memcheck runs a process's threads one at a time, so one suite keeps
  # one core busy, and a serial run leaves the others idle. Each suite's
  # output is kept in its own log and printed whole when it ends.
  local jobs=${RL_VALGRIND_JOBS:-$(nproc 2>/dev/null || echo 1)} logs names=() i
  [[ $jobs -ge 1 ]] || jobs=1
  [[ $jobs -le 4 ]] || jobs=4
  logs=$(mktemp -d)
  for t in "${suites[@]}"; do
    name=$(basename "$t")
    while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do
      wait -n || true
    done
    log "valgrind $name"
    # A suite runs in one process here (CK_FORK=no), so Check's per-test
    # timeout does not apply: bound the whole suite instead.
    (rc=0
      cd "$build_dir/tests" &&
        CK_FORK=no RL_VALGRIND=1 CK_EXCLUDE_TAGS="${CK_EXCLUDE_TAGS:+$CK_EXCLUDE_TAGS }novalgrind" \
          timeout --signal=KILL 1200 \
          valgrind --error-exitcode=1 --leak-check=full --fair-sched=yes --quiet "${vg_supp[@]}" \
          "$t" >"$logs/$name.log" 2>&1 || rc=$?
      echo "$rc" >"$logs/$name.rc") &
    names+=("$name")
  done
  wait || true
  for i in "${!names[@]}"; do
    name=${names[$i]}
    cat "$logs/$name.log"
    if [[ $(cat "$logs/$name.rc" 2>/dev/null) == 0 ]]; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1))
      failed_names+=("$name")
    fi
  done
  rm -rf "$logs"
  if [[ ${#skipped[@]} -gt 0 ]]; then
    log "skipped under valgrind (too slow; ASan/TSan cover them): ${skipped[*]}"
  fi
  if [[ $failed -gt 0 ]]; then
    log "failed under valgrind: ${failed_names[*]}"
  fi
  echo "valgrind: $passed passed, $failed failed, ${#skipped[@]} skipped"
  [[ $failed -eq 0 ]]
}

# The Check test cases that start threads (grep pthread_create tests/), as
# "suite case [tool]": a case runs under both tools unless a tool is named.
# Cases tagged novalgrind (fork tests: a child exits with the errors it
# inherited) are excluded. test_sync (the sync thread against a real Redis)
# runs only with RL_THREADCHECK_ALL=1, under helgrind: it asserts admitted
# rates over wall-clock seconds, which valgrind's serialised threads miss
# now and then (1 run in 3 here), and its round deadlines are overrun under
# drd. The gating cases still start and stop the sync thread (test_api's
# config_ranges opens instances with a Redis URL).
threaded_cases=(
  "test_table concurrency"
  "test_api contract"
  "test_hardening numeric"
  "test_hardening regressions"
  "test_metrics concurrency"
  # drd serialises its racing checkers and updater far more than helgrind:
  # 13 min for the case even at 1/16 size (RL_VALGRIND shrinks its loops)
  "test_exactness core helgrind"
  "test_batch core"
  "test_hot threads"
  "test_lease core"
)
if [[ ${RL_THREADCHECK_ALL:-0} == 1 ]]; then
  threaded_cases+=("test_sync redis helgrind")
fi

# A deliberately racy program (two threads, one plain counter) must fail
# under the tool with the same options and suppressions: proof that the
# suppressions did not switch the check off.
threadcheck_selftest() {
  local tool=$1 d rc=0
  d=$(mktemp -d)
  printf '%s
' '#include <pthread.h>' 'static long racy_counter;' \
    'static void *racy_bump(void *a) { for (int i = 0; i < 1000; i++) racy_counter++; return a; }' \
    'int main(void) { pthread_t t[2]; for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, racy_bump, 0);' \
    '  for (int i = 0; i < 2; i++) pthread_join(t[i], 0); return racy_counter == 0; }' >"$d/racy.c"
  cc -g -O1 -pthread "$d/racy.c" -o "$d/racy" || { rm -rf "$d"; echo "test.sh: cannot build the race self-test" >&2; return 1; }
  "${vg[@]}" --tool="$tool" "$d/racy" >"$d/log" 2>&1 || rc=$?
  if [[ $rc -eq 1 ]] && grep -q racy_bump "$d/log"; then
    log "$tool self-test: the racy program fails as it must"
    rm -rf "$d"
    return 0
  fi
  cat "$d/log" >&2
  rm -rf "$d"
  echo "test.sh: $tool self-test: a racy program passed (exit $rc): the check cannot fail" >&2
  return 1
}

run_threadcheck() {
  local tools=("$@") tool entry suite tcase only out rc checks passed=0 failed=0 failed_names=()
  command -v valgrind >/dev/null 2>&1 || { echo "test.sh: valgrind not found" >&2; exit 1; }
  vg=(valgrind --error-exitcode=1 --fair-sched=yes --read-inline-info=yes --num-callers=20
      "--suppressions=$root/tests/threadcheck.supp")
  out=$(mktemp)
  for tool in "${tools[@]}"; do
    threadcheck_selftest "$tool" || { failed=$((failed + 1)); failed_names+=("$tool:self-test"); continue; }
    for entry in "${threaded_cases[@]}"; do
      read -r suite tcase only <<<"$entry"
      [[ -z $only || $only == "$tool" ]] || continue
      log "$tool $suite ($tcase)"
      rc=0
      # One process (CK_FORK=no), so Check's per-test timeout does not
      # apply: bound the run instead.
      (cd "$build_dir/tests" &&
        CK_FORK=no CK_RUN_CASE="$tcase" RL_VALGRIND=1 \
          CK_EXCLUDE_TAGS="${CK_EXCLUDE_TAGS:+$CK_EXCLUDE_TAGS }novalgrind" \
          timeout --signal=KILL 900 "${vg[@]}" --tool="$tool" "./$suite") >"$out" 2>&1 || rc=$?
      # A renamed test case would otherwise run nothing and pass.
      checks=$(sed -n 's/^[0-9]*%: Checks: \([0-9]*\).*/\1/p' "$out" | tail -1)
      if [[ $rc -eq 0 && ${checks:-0} -gt 0 ]]; then
        passed=$((passed + 1))
        grep -E '^[0-9]+%: Checks' "$out" || true
      else
        cat "$out"
        [[ $rc -ne 0 ]] || echo "test.sh: $suite: no test ran in case '$tcase' (renamed?)" >&2
        failed=$((failed + 1))
        failed_names+=("$tool:$suite/$tcase")
      fi
    done
  done
  rm -f "$out"
  if [[ $failed -gt 0 ]]; then
    log "failed: ${failed_names[*]}"
  fi
  echo "threadcheck (${tools[*]}): $passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}

case "$mode" in
  valgrind) run_valgrind ;;
  helgrind) run_threadcheck helgrind ;;
  drd) run_threadcheck drd ;;
  threadcheck) run_threadcheck helgrind drd ;;
  tsan) tsan_setup; run_ctest ;;
  *) run_ctest ;;
esac
# After the suites: no redis-server wrote into the source tree.
bash "$here/check-tree-clean.sh" "$root"
log "OK"
