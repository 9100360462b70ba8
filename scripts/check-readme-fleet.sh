#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run README.md's fleet quickstart as written: the first ```sh block under
# "## Fleet quickstart" (three gateways against a private redis-server),
# then check what it printed and that all three nodes registered, then the
# next ```sh block (stop). ctest runs it as readme_fleet.
#
#   bash scripts/check-readme-fleet.sh BUILD_DIR
#
# The blocks run in a temporary directory where build/ is BUILD_DIR and
# examples/ the source tree's, on free ports (REDIS_PORT, GW_PORT). Exit 77
# (skipped) when redis-server, redis-cli or curl is missing and
# RL_SKIP_REDIS=1, as the other Redis suites.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:?usage: check-readme-fleet.sh BUILD_DIR}" && pwd)
for tool in redis-server redis-cli curl python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    [[ ${RL_SKIP_REDIS:-0} == 1 ]] && { echo "readme_fleet: no $tool: skipped"; exit 77; }
    echo "readme_fleet: $tool is needed (scripts/deps.sh installs it)" >&2
    exit 1
  fi
done

blocks=$(mktemp -d)
python3 - "$root/README.md" "$blocks" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
sec = text.split("\n## Fleet quickstart\n", 1)[1].split("\n## ", 1)[0]
found = re.findall(r"^```sh\n(.*?)^```$", sec, re.S | re.M)
if len(found) < 2:
    sys.exit("readme_fleet: README.md's Fleet quickstart needs two ```sh blocks (run, stop)")
open(sys.argv[2] + "/start.sh", "w").write(found[0])
open(sys.argv[2] + "/stop.sh", "w").write(found[1])
PY

# Three consecutive free loopback ports for the gateways, one for Redis.
read -r REDIS_PORT GW_PORT < <(python3 - <<'PY'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
while True:
    r, g = random.randrange(20000, 60000), random.randrange(20000, 60000)
    if abs(r - g) > 3 and all(free(p) for p in (r, g, g + 1, g + 2)):
        print(r, g); break
PY
)
export REDIS_PORT GW_PORT

work=$(mktemp -d)
ln -s "$build" "$work/build"
ln -s "$root/examples" "$work/examples"
cleanup() {
  # Whatever the blocks left behind, by PID and by port (never by name).
  for pid in $(jobs -p); do kill "$pid" 2>/dev/null || true; done
  redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work" "$blocks"
}
trap cleanup EXIT

cd "$work"
echo "readme_fleet: README block 1 (Redis on $REDIS_PORT, gateways on $GW_PORT..$((GW_PORT + 2)))"
# Sourced (not piped: the gateways must stay this shell's jobs for the stop
# block's `jobs -p`), as a reader's shell would run it: without -e/-u.
set +eu
# shellcheck disable=SC1091
source "$blocks/start.sh" >"$work/out.txt"
set -eu
cat "$work/out.txt"

fail() { echo "readme_fleet: FAIL: $*" >&2; cat gw*.log >&2 || true; exit 1; }
ok=$(awk '$2 == 200 { print $1 }' out.txt)
denied=$(awk '$2 == 429 { print $1 }' out.txt)
[[ -n $ok && $ok -ge 1 ]] || fail "no request of alice's was admitted"
[[ -n $denied && $denied -ge 1 ]] || fail "none of alice's 30 requests was refused: the fleet did not limit"
echo "readme_fleet: alice: $ok admitted, $denied refused"

# Every node registers within a few sync rounds: wait for all three.
deadline=$((SECONDS + 30))
until build/tools/ratelimit/ratelimit --json nodes --redis "redis://127.0.0.1:$REDIS_PORT" \
        --prefix myapp | python3 -c '
import json, sys
d = json.load(sys.stdin)
ids = sorted(n.get("node_id") or n.get("node") or "" for n in d.get("nodes", []))
sys.exit(0 if ids == ["gw1", "gw2", "gw3"] else 1)'; do
  (( SECONDS < deadline )) || fail "the three nodes did not all register in 30 s"
  sleep 0.2
done
echo "readme_fleet: nodes gw1, gw2, gw3 registered"

echo "readme_fleet: README block 2 (stop)"
gw_pids=$(jobs -p)
set +eu
# shellcheck disable=SC1091
source "$blocks/stop.sh"
set -eu
if redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then fail "Redis still answers after the stop block"; fi
for pid in $gw_pids; do
  if kill -0 "$pid" 2>/dev/null; then fail "gateway $pid still running after the stop block"; fi
done
echo "readme_fleet: OK"
