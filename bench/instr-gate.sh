#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Instruction counts of one check (and of one in-flight acquire+release
# pair), gated: callgrind counts the same binary
# to the instruction on any machine, whatever its load, so unlike a timing
# a count can decide a test. For each mode of rl_bench_instr, the
# difference of N2 and N1 checks over N2 - N1 (one check plus the driver
# loop's few instructions) must be at most its limit below: the figures
# bench/README.md records (RelWithDebInfo, gcc) plus a small margin, so a
# change that adds work to the hot path fails here and is measured again.
# Usage: instr-gate.sh RL_BENCH_INSTR. Exit 77 (a ctest skip) without
# valgrind.
set -euo pipefail
bin=$1
command -v valgrind > /dev/null || { echo "no valgrind: skipped"; exit 77; }
n1=20000
n2=40000
# mode limit (instructions per check; ifl_*: per in-flight acquire+release
# pair, rl_bench_instr's in-flight modes)
limits="allow 232
deny 240
decision 294
hot 262
batch32 310
precise1s 240
ifl_first 412
ifl_held 428"
refs() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
    awk '/refs:/ { gsub(",", "", $4); print $4 }'
}
fail=0
while read -r mode limit; do
  a=$(refs "$mode" "$n1")
  b=$(refs "$mode" "$n2")
  per=$(( (b - a) / (n2 - n1) ))
  if [ "$per" -le "$limit" ]; then
    echo "instr-gate: $mode $per instructions per check (limit $limit)"
  else
    echo "instr-gate: $mode $per instructions per check: over its limit $limit"
    fail=1
  fi
done <<< "$limits"
exit "$fail"
