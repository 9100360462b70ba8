#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fail if the source tree holds a Redis server's files (an RDB snapshot, an
# append-only file, a cluster node's nodes.conf), tracked or not, outside
# the build directories: every redis-server a test starts keeps its files
# in a temporary --dir (tests/redis_harness.c, scripts/redis-server.sh, the
# bindings' tests). scripts/test.sh runs it after the suites.
#
#   bash scripts/check-tree-clean.sh [ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$root"
git rev-parse --git-dir >/dev/null 2>&1 || { echo "check-tree-clean: $root is not a git tree (skipped)"; exit 0; }
found=$({
  git ls-files
  git ls-files --others --exclude-standard
  git ls-files --others --ignored --exclude-standard
} | grep -vE '^(build[^/]*|out)/' \
  | grep -E '(^|/)([^/]*\.rdb|[^/]*\.aof|appendonly[^/]*|appendonlydir/.*|nodes[^/]*\.conf)$' \
  | sort -u || true)
if [[ -n $found ]]; then
  echo "check-tree-clean: a redis-server wrote into the source tree (start it with --dir" \
    "to a temporary directory):" >&2
  printf '  %s\n' $found >&2
  exit 1
fi
echo "check-tree-clean: no Redis server files in the tree"
