#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The HTTP gateway example (examples/gateway) as a fleet:
#
#   bash scripts/gateway-demo.sh                 12 s of load
#   bash scripts/gateway-demo.sh --seconds 30
#
# Starts a private redis-server on a free loopback port and three
# rl_gateway processes sharing it (one global limit, 1000/s burst 100 for
# the API key "demo"), drives them with wrk (uneven: 2, 4 and 8
# connections), and prints once a second what each node admitted and the
# fleet's total against the limit and its tolerance band (README
# "Tolerance band"). Halfway it rewrites the limits file to 500/s and sends
# SIGHUP to every node: the fleet follows without a restart. Then it shows a
# 429 and its headers with curl, and a summary; exits 1 if any second past
# the first (the pre-sync start) and the reload's was above the band.
#
# Installs what it needs first (scripts/deps.sh; wrk through apt-get when
# root). Builds rl_gateway in build/ (RL_BUILD_DIR=DIR to change it). Stops
# everything it started on exit, Ctrl-C included.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build_dir=${RL_BUILD_DIR:-$root/build}
seconds=12
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; shift ;;
    -h | --help) sed -n '3,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gateway-demo.sh: unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done
[[ $seconds =~ ^[0-9]+$ && $seconds -ge 4 ]] || { echo "gateway-demo.sh: --seconds must be 4 or more" >&2; exit 2; }

log() { echo "==> gateway-demo.sh: $*" >&2; }

bash "$here/deps.sh"
if ! command -v wrk >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing wrk"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update >/dev/null && apt-get install -y --no-install-recommends wrk >/dev/null; }; then
      echo "gateway-demo.sh: apt-get install wrk failed" >&2
      exit 1
    fi
  else
    echo "gateway-demo.sh: wrk not found (apt-get install wrk, as root)" >&2
    exit 1
  fi
fi
for tool in curl redis-server redis-cli; do
  command -v "$tool" >/dev/null 2>&1 || { echo "gateway-demo.sh: $tool not found (scripts/deps.sh)" >&2; exit 1; }
done

log "configure and build rl_gateway in $build_dir"
buildlog=$(mktemp)
if ! { cmake -S "$root" -B "$build_dir" -DRL_BUILD_EXAMPLES=ON -DRL_ASAN=OFF -DRL_TSAN=OFF &&
       cmake --build "$build_dir" --target rl_gateway -j "$(nproc 2>/dev/null || echo 2)"; } >"$buildlog" 2>&1; then
  cat "$buildlog" >&2
  rm -f "$buildlog"
  echo "gateway-demo.sh: configure or build failed (output above)" >&2
  exit 1
fi
rm -f "$buildlog"
gw=$build_dir/examples/gateway/rl_gateway

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-gateway-demo.XXXXXX")
pids=()
cleanup() {
  local p
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --------------------------------------------------------------- redis
# shellcheck source=redis-server.sh
source "$here/redis-server.sh"
rl_redis_start "$tmp/redis.log" || { echo "gateway-demo.sh: could not start redis-server" >&2; exit 1; }
redis_port=$RL_REDIS_PORT
pids+=("$RL_REDIS_PID") # stopped by cleanup, by PID
log "redis-server on 127.0.0.1:$redis_port (pid $RL_REDIS_PID)"

# ------------------------------------------------------------- gateways
rate=1000
burst=100
write_limits() {
  cat >"$tmp/limits.conf" <<EOF
# the API key "demo", on whichever node it lands: one fleet-wide limit
*       client  name=per_key rate=$1/s burst=$burst
# logins: 3 a minute per client IP on each node (mode=local: counted
# exactly here, never shared), to show a 429 with curl
/login  ip      name=login rate=3/m burst=3 mode=local
EOF
}
write_limits "$rate"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
ports=()
gw_pids=()
for n in 1 2 3; do
  "$gw" --listen 127.0.0.1:0 --limits "$tmp/limits.conf" --redis "redis://127.0.0.1:$redis_port" \
    --key-secret-file "$tmp/secret" --node-id "node$n" --expected-nodes 3 >"$tmp/node$n.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  gw_pids+=("$pid")
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/node$n.log")
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $port ]] || { cat "$tmp/node$n.log" >&2; echo "gateway-demo.sh: node$n did not start" >&2; exit 1; }
  ports+=("$port")
  log "node$n: rl_gateway on 127.0.0.1:$port (pid $pid)"
done

# What the limiter admitted on a node so far (its own counter, so the
# scrapes themselves are not counted).
admitted() {
  curl -s "http://127.0.0.1:$1/metrics" |
    sed -n 's/^ratelimit_limit_admitted_total{limit="per_key"} \([0-9]*\)$/\1/p'
}
now_ns() { date +%s%N; }

# ------------------------------------------------------------------ load
# wrk runs until the sampling below is done and stops it (SIGINT: it then
# prints its summary): each sample scrapes /metrics while wrk saturates the
# nodes, so the loop takes longer than its nominal seconds, and load that
# ended early would read as a limiter admitting nothing.
conns=(2 4 8)
wrk_pids=()
for i in 0 1 2; do
  wrk -t1 -c"${conns[$i]}" -d"$((seconds * 10 + 60))s" -H 'X-API-Key: demo' \
    "http://127.0.0.1:${ports[$i]}/api/items" >"$tmp/wrk$i.log" 2>&1 &
  pids+=("$!")
  wrk_pids+=("$!")
done
log "wrk: ${conns[*]} connections on node1..3, $seconds s, all as API key \"demo\""

# The band for a window of w seconds (README "Tolerance band"): with
# N = X = 3 nodes and I = 0.1 s, E_pre = max(0, 3 ceil(burst/3) - burst),
# E = E_pre + rate I + burst, and at most rate w + burst + E.
bound() {
  awk -v r="$1" -v b="$burst" -v w="$2" 'BEGIN {
    c = int((b + 2) / 3); pre = 3 * c - b; if (pre < 0) pre = 0
    printf "%d", r * w + b + pre + r * 0.1 + b }'
}

printf '\n%4s %9s %9s %9s %10s %8s %9s  %s\n' sec node1/s node2/s node3/s fleet/s limit "% limit" "band (max/s)"
# The three nodes' counters, scraped at once (in parallel), so a sample's
# window is about the same on every node.
scrape_all() {
  local i
  scrapes=()
  for i in 0 1 2; do
    admitted "${ports[$i]}" >"$tmp/sample$i" &
    scrapes+=("$!")
  done
  wait "${scrapes[@]}"
  sampled=()
  for i in 0 1 2; do sampled+=("$(cat "$tmp/sample$i")"); done
}
scrape_all
prev=("${sampled[@]}")
t_prev=$(now_ns)
over=0
settled=0
sum_pct=0
min_pct=
max_pct=0
reload_at=$((seconds / 2))
for ((s = 1; s <= seconds; s++)); do
  sleep 1
  if [[ $s -eq $((reload_at + 1)) ]]; then
    rate=500
    write_limits "$rate"
    for p in "${gw_pids[@]}"; do kill -HUP "$p"; done
    echo "     --- limits file rewritten: per_key 1000/s -> 500/s, SIGHUP to node1..3 ---"
  fi
  scrape_all
  cur=("${sampled[@]}")
  t_now=$(now_ns)
  w=$(awk -v a="$t_prev" -v b="$t_now" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  d=()
  total=0
  for i in 0 1 2; do
    d+=($((cur[i] - prev[i])))
    total=$((total + d[i]))
  done
  per_s=$(awk -v t="$total" -v w="$w" 'BEGIN { printf "%d", t / w }')
  pct=$(awk -v t="$total" -v w="$w" -v r="$rate" 'BEGIN { printf "%.0f", 100 * t / (w * r) }')
  b=$(bound "$rate" "$w")
  note=""
  if [[ $s -eq 1 ]]; then
    note="(start: before the first sync)"
  elif [[ $s -eq $((reload_at + 1)) ]]; then
    note="(reload)"
  elif ((total > b)); then
    note="ABOVE THE BAND"
    over=$((over + 1))
  else
    settled=$((settled + 1))
    sum_pct=$((sum_pct + pct))
    [[ -z $min_pct || $pct -lt $min_pct ]] && min_pct=$pct
    ((pct > max_pct)) && max_pct=$pct
  fi
  printf '%4d %9d %9d %9d %10d %8d %8s%%  %-6s %s\n' "$s" \
    "$(awk -v x="${d[0]}" -v w="$w" 'BEGIN { printf "%d", x / w }')" \
    "$(awk -v x="${d[1]}" -v w="$w" 'BEGIN { printf "%d", x / w }')" \
    "$(awk -v x="${d[2]}" -v w="$w" 'BEGIN { printf "%d", x / w }')" \
    "$per_s" "$rate" "$pct" "$(awk -v x="$b" -v w="$w" 'BEGIN { printf "%d", x / w }')" "$note"
  prev=("${cur[@]}")
  t_prev=$t_now
done

kill -INT "${wrk_pids[@]}" 2>/dev/null || true
wait "${wrk_pids[@]}" 2>/dev/null || true

echo
echo "== wrk (each node: all requests, 200 and 429)"
for i in 0 1 2; do
  printf 'node%d: %s\n' "$((i + 1))" "$(grep -E 'Requests/sec' "$tmp/wrk$i.log" | tr -s ' ')"
done

echo
echo "== a 429 and its headers (curl -i: logins from one IP past 3 a minute)"
for _ in 1 2 3 4 5 6; do
  r=$(curl -si "http://127.0.0.1:${ports[0]}/login" | tr -d '\r')
  [[ $r == "HTTP/1.1 429"* ]] && break
done
sed 's/^/    /' <<<"$r"

echo "== the reload, as node1 logged it"
grep -h 'reloaded' "$tmp/node1.log" | sed 's/^/    /'

echo
avg=$((settled > 0 ? sum_pct / settled : 0))
echo "== summary: $settled settled seconds averaged $avg% of the limit (lowest ${min_pct:-0}%," \
     "highest $max_pct%); $over above the band"
echo "   (band per second: rate + burst + E, E = E_pre + rate x 0.1 s + burst, with 3 nodes"
echo "    and --expected-nodes 3; see README \"Tolerance band\")"
[[ $over -eq 0 ]]
