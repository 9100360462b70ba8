#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build libratelimit and run a demo:
#
#   bash scripts/demo.sh                     the global tier: nodes sharing one
#                                            limit through Redis, 12 s, 4 nodes
#   bash scripts/demo.sh --seconds 30 --nodes 6
#   bash scripts/demo.sh --local             the local tier alone (rl_demo),
#                                            5 s, 4 threads
#   bash scripts/demo.sh --local --seconds 30 --threads 8
#
# Every other argument goes to the demo (--help lists them). The global demo
# (examples/demo_global.c) starts its own redis-server on a free loopback
# port and stops it at the end (REDIS_URL=redis://... uses that server
# instead); it ends by itself, or on Ctrl-C, stopping everything it started.
# Installs missing Debian packages first (scripts/deps.sh, redis-server
# included; root only when something is missing). Builds in build/
# (RL_BUILD_DIR=DIR to change it), only what the demo needs.
# Exits with the demo's status: non-zero if the fleet (global) or a key
# (local) was admitted beyond the bound the demo states at its end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build_dir=${RL_BUILD_DIR:-$root/build}

target=rl_demo_global
args=()
for arg in "$@"; do
  if [[ "$arg" == --local ]]; then
    target=rl_demo
  else
    args+=("$arg")
  fi
done

bash "$here/deps.sh"
echo "==> demo.sh: configure and build $target in $build_dir" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { cmake -S "$root" -B "$build_dir" -DRL_BUILD_EXAMPLES=ON -DRL_ASAN=OFF -DRL_TSAN=OFF &&
       cmake --build "$build_dir" --target "$target" -j "$(nproc 2>/dev/null || echo 2)"; } \
     >"$log" 2>&1; then
  cat "$log" >&2
  echo "demo.sh: configure or build failed (output above)" >&2
  exit 1
fi
rm -f "$log"
trap - EXIT
# exec: the demo gets Ctrl-C and SIGTERM directly and cleans up itself.
exec "$build_dir/examples/$target" ${args[@]+"${args[@]}"}
