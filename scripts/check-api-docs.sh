#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fail unless docs/api.md and docs/man/ratelimit.3 are what
# scripts/gen-api-docs.py makes of include/ratelimit.h today: the committed
# API reference must never lag the header it documents. Regenerates into a
# temporary directory and diffs. Run by ctest as docs_api_current. The
# generator also keeps the header organised: it fails (and so does this
# check) when a section is missing, out of order (SECTIONS in
# gen-api-docs.py) or without its intro, or has a constant or type after its
# functions.
#
#   bash scripts/check-api-docs.sh     exit 0: current; 1: stale (the diff
#                                      and the command that fixes it are
#                                      printed); 77: no python3 (ctest: skip)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
  echo "check-api-docs: $python not found: cannot regenerate docs/api.md (skipped)" >&2
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$python" "$root/scripts/gen-api-docs.py" --out-dir "$tmp" \
  || { echo "check-api-docs: scripts/gen-api-docs.py failed on include/ratelimit.h" >&2; exit 1; }

stale=0
for f in api.md man/ratelimit.3; do
  if [[ ! -f $root/docs/$f ]]; then
    echo "check-api-docs: docs/$f is missing" >&2
    stale=1
  elif ! diff -u "$root/docs/$f" "$tmp/$f" >"$tmp/diff" 2>&1; then
    echo "check-api-docs: docs/$f is stale; what the header says now (+) against the committed file (-):" >&2
    head -60 "$tmp/diff" >&2
    lines=$(wc -l <"$tmp/diff")
    [[ $lines -le 60 ]] || echo "... ($lines diff lines in all)" >&2
    stale=1
  fi
done
if [[ $stale -ne 0 ]]; then
  echo "check-api-docs: regenerate with: python3 scripts/gen-api-docs.py   (then commit docs/api.md and docs/man/ratelimit.3)" >&2
  exit 1
fi
echo "docs/api.md and docs/man/ratelimit.3 match include/ratelimit.h"
