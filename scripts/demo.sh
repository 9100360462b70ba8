#!/usr/bin/env bash
# Build libratelimit and run the local-tier demo (examples/demo_local.c):
#
#   bash scripts/demo.sh                 5 seconds, 4 threads
#   bash scripts/demo.sh --seconds 30 --threads 8
#
# Every argument goes to rl_demo (--help lists them). Installs missing Debian
# packages first (scripts/deps.sh; root only when something is missing).
# Builds in build/ (RL_BUILD_DIR=DIR to change it), only what the demo needs.
# Exits with the demo's status: non-zero if a key was admitted beyond
# burst + rate x (elapsed + one coarse clock tick).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build_dir=${RL_BUILD_DIR:-$root/build}

bash "$here/deps.sh"
echo "==> demo.sh: configure and build rl_demo in $build_dir" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { cmake -S "$root" -B "$build_dir" -DRL_BUILD_EXAMPLES=ON -DRL_ASAN=OFF -DRL_TSAN=OFF &&
       cmake --build "$build_dir" --target rl_demo -j "$(nproc 2>/dev/null || echo 2)"; } \
     >"$log" 2>&1; then
  cat "$log" >&2
  echo "demo.sh: configure or build failed (output above)" >&2
  exit 1
fi
rm -f "$log"
trap - EXIT
exec "$build_dir/examples/rl_demo" "$@"
