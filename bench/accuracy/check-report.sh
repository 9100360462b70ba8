#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Is bench/accuracy/REPORT.md current? The full matrix takes many minutes,
# so this regenerates only its quick section (the CI subset: every family
# at 10 and 100 nodes, 100 ms, and uniform and skewed with 1000 keys at 10
# nodes; a minute or two) and compares it with the committed one. Virtual runs are deterministic for a seed, so any
# difference is a change in the code's figures: regenerate the report
#   build/bench/accuracy/rl_accuracy --report bench/accuracy/REPORT.md
# Usage: check-report.sh RL_ACCURACY REPORT.md. Exit 77 (a ctest skip)
# without redis-server.
set -euo pipefail
bin=$1
report=$2
command -v redis-server > /dev/null || { echo "no redis-server: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
nice -n 10 "$bin" --quick --no-csv --report "$tmp/quick.md" > "$tmp/log" 2>&1 || rc=$?
# 1: a gated claim missed; the report is written all the same, and whether
# it is current is this check's only question (the CI stage gates claims).
if [ "$rc" -gt 1 ] || [ ! -s "$tmp/quick.md" ]; then
  cat "$tmp/log"
  echo "check-report: rl_accuracy failed (exit $rc)"
  exit 1
fi
quick_section() { sed -n '/^## Quick matrix/,$p' "$1"; }
if ! diff -u <(quick_section "$report") <(quick_section "$tmp/quick.md"); then
  echo "check-report: $report is stale (its quick section differs from a fresh run):"
  echo "  regenerate it with: build/bench/accuracy/rl_accuracy --report bench/accuracy/REPORT.md"
  exit 1
fi
echo "check-report: $report's quick section is current"
