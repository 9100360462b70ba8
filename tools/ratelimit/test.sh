#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The ratelimit tool end to end (ctest runs it as "cli"):
#
#   bash tools/ratelimit/test.sh RATELIMIT_BINARY RL_CLI_FLEET_BINARY [RL_GATEWAY_BINARY]
#
# Starts a private redis-server on a free loopback port (stopped by PID on
# exit, whatever happens), runs a two-node fleet (rl_cli_fleet) that syncs one
# key, and checks `inspect` and `nodes` against it, table and --json (every
# JSON document is parsed with python3), before and after the fleet closes,
# and with a node of another secret beside it (a split fleet);
# `check` on good and bad files (exact lines and codes); `bench --seconds 1`
# (sane numbers, never timing); errors: unreachable Redis, a password Redis
# asks for, a wrong one, a missing key, usage mistakes. With the gateway
# example's binary (and curl): `inspect --api-key` / `--ip` find the keys a
# gateway wrote.
# Exit 0 all passed, 1 a check failed, 77 skipped (redis-server missing and
# RL_SKIP_REDIS=1, the Redis suites' convention).
set -uo pipefail

cli=${1:?usage: test.sh RATELIMIT_BINARY RL_CLI_FLEET_BINARY}
fleet=${2:?usage: test.sh RATELIMIT_BINARY RL_CLI_FLEET_BINARY}
gateway=${3:-}

if ! command -v redis-server >/dev/null 2>&1; then
  if [[ ${RL_SKIP_REDIS:-0} == 1 ]]; then
    echo "test.sh: redis-server not installed: skipped"
    exit 77
  fi
  echo "test.sh: redis-server not installed (scripts/deps.sh installs it)" >&2
  exit 1
fi
command -v python3 >/dev/null 2>&1 || { echo "test.sh: python3 is needed to parse JSON" >&2; exit 1; }
command -v redis-cli >/dev/null 2>&1 || { echo "test.sh: redis-cli is needed (redis-tools)" >&2; exit 1; }

work=$(mktemp -d)
redis_pid=
fleet_pid=
rogue_pid=
gateway_pid=
cleanup() {
  [[ -n $gateway_pid ]] && kill "$gateway_pid" 2>/dev/null && wait "$gateway_pid" 2>/dev/null
  [[ -n $fleet_pid ]] && kill "$fleet_pid" 2>/dev/null && wait "$fleet_pid" 2>/dev/null
  [[ -n $rogue_pid ]] && kill "$rogue_pid" 2>/dev/null && wait "$rogue_pid" 2>/dev/null
  if [[ -n $redis_pid ]]; then
    kill "$redis_pid" 2>/dev/null
    wait "$redis_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# wait_for COMMAND...: until the command succeeds, polling, for at most
# wait_s seconds of wall time (generous: a loaded machine under ctest -j2 is
# slow, and a check waits for the event it checks, never a fixed time). The
# last try comes after the deadline. Status 1 if it never succeeded.
wait_s=30
wait_for() {
  local end=$((SECONDS + wait_s)) late
  while :; do
    late=$((SECONDS >= end))
    "$@" && return 0
    ((late)) && return 1
    sleep 0.05
  done
}

# The shared launcher: a private server on a free loopback port, by PID.
# shellcheck source=../../scripts/redis-server.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/redis-server.sh"
free_port() { rl_redis_free_port; }

start_redis() {
  rl_redis_start "$work/redis.log" || exit 1
  port=$RL_REDIS_PORT
  redis_pid=$RL_REDIS_PID
}

# run NAME EXPECTED_STATUS -- ARGS...: run the tool, keep stdout and stderr.
run() {
  local name=$1 want=$2
  shift 3
  "$cli" "$@" >"$work/$name.out" 2>"$work/$name.err"
  local got=$?
  if [[ $got -eq $want ]]; then
    pass "$name: exit $got"
  else
    fail "$name: exit $got, want $want"
    sed 's/^/    | /' "$work/$name.out" "$work/$name.err"
  fi
}

# has NAME STREAM TEXT: the output contains TEXT (fixed string).
has() {
  if grep -qF -- "$3" "$work/$1.$2"; then
    pass "$1: $2 has '$3'"
  else
    fail "$1: $2 lacks '$3'"
    sed 's/^/    | /' "$work/$1.$2"
  fi
}

# py NAME DESCRIPTION EXPR: EXPR holds for d = json.load(NAME.out) (which
# must parse: a document that is not valid JSON fails here).
py() {
  local name=$1 what=$2 expr=$3
  if python3 - "$work/$name.out" "$expr" <<'EOF'; then
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
ok = eval("(" + sys.argv[2] + "\n)", {"d": d, "json": json})
sys.exit(0 if ok else 1)
EOF
    pass "$name: $what"
  else
    fail "$name: $what"
    sed 's/^/    | /' "$work/$name.out"
  fi
}

start_redis
url=redis://127.0.0.1:$port
lib_version=$("$cli" --json --version | python3 -c 'import json, sys; print(json.load(sys.stdin)["library_version"])')
printf 'cli-test-fleet-secret-0123' >"$work/secret"
secret_hex=$(od -An -tx1 "$work/secret" | tr -d ' \n')
spec="name=api rate=200/s burst=20"
printf '# the test limits\n\n%s\nname=other rate=5/m\n' "$spec" >"$work/limits.conf"

# ------------------------------------------------------------------ check
printf '%s\n' \
  '# a comment line' \
  'name=api rate=100/s burst=200   # trailing comment' \
  '' \
  '   name=per_min rate=600/m mode=local on_failure=open' \
  'name=shadowed rate=5/10s shadow=1 degraded_rate=1/s max_keys=1000' >"$work/good.conf"
run check_good 0 -- check "$work/good.conf"
has check_good out "OK, 3 limits"
run check_good_json 0 -- --json check "$work/good.conf"
py check_good_json "valid, 3 limits, exact fields" \
  'd["ok"] and d["valid"] and d["limit_count"] == 3 and d["errors"] == [] and
   [l["name"] for l in d["limits"]] == ["api", "per_min", "shadowed"] and
   [l["line"] for l in d["limits"]] == [2, 4, 5] and
   d["limits"][1]["rate"] == {"count": 600, "period_ms": 60000, "text": "600/m"} and
   d["limits"][0]["burst"] == 200 and d["limits"][1]["burst"] == 600 and
   d["limits"][1]["mode"] == "local" and d["limits"][1]["on_failure"] == "open" and
   d["limits"][2]["shadow"] is True and d["limits"][2]["max_keys"] == 1000 and
   d["limits"][2]["rate"]["text"] == "5/10s" and
   d["limits"][2]["degraded_rate"]["text"] == "1/s" and d["limits"][0]["degraded_rate"] is None'

printf '%s\n' \
  'name=api rate=100/s' \
  'name=api rate=5/s' \
  '# fine' \
  'name=b rate=10/x' \
  'name=c rate=0/s' \
  'name=d rate=1/s mode=fast' \
  'name=bad!name rate=1/s' \
  'rate=1/s' \
  'name=e rate=1/s burst' \
  'name=f rate=1/s' >"$work/bad.conf"
run check_bad 1 -- check --quiet "$work/bad.conf"
# Line numbers and codes exactly; the messages are rl_limit_parse's own.
codes=$(sed -E 's/^[^:]*:([0-9]+): error: .*\((RL_[A-Z]+)\)$/\1 \2/' "$work/check_bad.out" | tr '\n' ' ')
want_codes="2 RL_EEXIST 4 RL_ESPEC 5 RL_ERANGE 6 RL_EMODE 7 RL_ENAME 8 RL_ESPEC 9 RL_ESPEC "
if [[ $codes == "$want_codes" ]]; then
  pass "check_bad: lines and codes"
else
  fail "check_bad: lines and codes '$codes', want '$want_codes'"
fi
has check_bad out "$work/bad.conf:2: error: duplicate limit name \"api\" (first defined on line 1) (RL_EEXIST)"
if [[ $(wc -l <"$work/check_bad.out") -eq 7 ]]; then pass "check_bad: 7 lines, no summary (--quiet)"; else fail "check_bad: line count"; fi
run check_bad_json 1 -- check "$work/bad.conf" --json
py check_bad_json "invalid, 7 errors, 2 good limits" \
  'd["ok"] and not d["valid"] and d["error_count"] == 7 and d["limit_count"] == 2 and
   [(e["line"], e["code"]) for e in d["errors"]] == [(2, "RL_EEXIST"), (4, "RL_ESPEC"),
     (5, "RL_ERANGE"), (6, "RL_EMODE"), (7, "RL_ENAME"), (8, "RL_ESPEC"), (9, "RL_ESPEC")] and
   [l["name"] for l in d["limits"]] == ["api", "f"]'
# Bytes a JSON string must escape, in an error message.
printf 'name=q rate=1/s mode="\x01\\\t"\n' >"$work/escape.conf"
run check_escape 1 -- --json check "$work/escape.conf"
py check_escape "control bytes escaped, still valid JSON" 'd["errors"][0]["code"] == "RL_EMODE"'
for i in $(seq 1 4100); do printf 'name=l%d rate=1/s\n' "$i"; done >"$work/toomany.conf"
run check_too_many 1 -- check --quiet "$work/toomany.conf"
has check_too_many out "toomany.conf:4097: error: more than 4096 limits"
run check_missing_file 2 -- check "$work/nope.conf"
# Exact and tiered limits: closed unless the spec says otherwise; open is
# warned about; --local (an instance without a redis_url) refuses them.
printf '%s\n' \
  'name=login rate=5/m burst=5 mode=exact' \
  'name=pay rate=5/m mode=exact on_failure=open' \
  'name=t rate=1/s mode=tiered near=0.5' >"$work/exact.conf"
run check_exact 0 -- check "$work/exact.conf"
has check_exact out "OK, 3 limits"
has check_exact out "exact.conf:2: warning: limit \"pay\": mode=exact with on_failure=open"
run check_exact_json 0 -- --json check "$work/exact.conf"
py check_exact_json "exact closed by default, one warning" \
  'd["valid"] and [l["on_failure"] for l in d["limits"]] == ["closed", "open", "closed"] and
   [w["line"] for w in d["warnings"]] == [2] and "on_failure=open" in d["warnings"][0]["message"]'
run check_exact_local 1 -- check --local "$work/exact.conf"
has check_exact_local out "exact.conf:1: error: limit \"login\": mode=exact needs Redis; an instance without a redis_url refuses it (RL_ENOTSUP)"
has check_exact_local out "exact.conf:3: error: limit \"t\": mode=tiered needs Redis"
has check_missing_file err "cannot read"
run check_no_file 2 -- check
run check_two_files 2 -- check a b
printf '' >"$work/empty.conf"
run check_empty 0 -- check "$work/empty.conf"
# One format: the gateway's own file (PATTERN SCOPE SPEC) is valid here,
# with each rule's route in the JSON; bad routes get their lines and codes.
gateway_conf=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples/gateway" && pwd)/limits.conf
run check_gateway_file 0 -- check "$gateway_conf"
has check_gateway_file out "OK, 9 limits"
run check_gateway_json 0 -- --json check "$gateway_conf"
py check_gateway_json "the gateway's limits.conf, with routes" \
  'd["valid"] and d["limit_count"] == 9 and
   d["limits"][0]["route"] == {"pattern": "*", "scope": "client"} and
   d["limits"][2]["route"] == {"pattern": "/search", "scope": "shared"} and
   d["limits"][2]["name"] == "search_total" and
   d["limits"][6]["route"] == {"pattern": "/v1/chat", "scope": "client", "tokens": True} and
   d["limits"][6]["name"] == "llm_tpm"'
printf '%s\n' \
  'name=plain rate=1/s' \
  '/api/* client name=api rate=10/s' \
  '/x nobody name=x rate=1/s' \
  'search client name=y rate=1/s' \
  '/z client' >"$work/routes.conf"
run check_routes 1 -- --json check "$work/routes.conf"
py check_routes "both forms in one file; route errors by line" \
  'd["limit_count"] == 2 and d["limits"][0]["route"] is None and
   d["limits"][1]["route"] == {"pattern": "/api/*", "scope": "client"} and
   [(e["line"], e["code"]) for e in d["errors"]] == [(3, "RL_ESPEC"), (4, "RL_ESPEC"), (5, "RL_ESPEC")]'

# ------------------------------------------------------- fleet: inspect, nodes
# A second key with bytes JSON must escape or cannot hold as they are: a
# control byte, a quote, a backslash, a byte that is not UTF-8, and UTF-8.
key2_hex=6b01225cff2dc3a9
mkfifo "$work/fleet.in"
"$fleet" --redis "$url" --prefix cli --secret-file "$work/secret" --spec "$spec" \
  --key customer-42 --key2-hex "$key2_hex" --nodes 2 --warm-ms 1500 <"$work/fleet.in" >"$work/fleet.out" 2>&1 &
fleet_pid=$!
exec 3>"$work/fleet.in" # held open: the fleet runs until "stop" or EOF
fleet_ready_or_gone() { grep -q ready "$work/fleet.out" || ! kill -0 "$fleet_pid" 2>/dev/null; }
wait_for fleet_ready_or_gone
if ! grep -q ready "$work/fleet.out"; then
  fail "fleet did not start"
  cat "$work/fleet.out"
  exit 1
fi
# "ready" says only that the load has run --warm-ms. What the checks below
# read from Redis lands a sync round or more later: wait until both nodes
# have reported both keys, and written a heartbeat that counts them.
fleet_synced() {
  "$cli" --json inspect --redis "$url" --prefix cli --secret-file "$work/secret" "$spec" \
    customer-42 >"$work/synced_key.json" 2>/dev/null &&
    "$cli" --json inspect --redis "$url" --prefix cli --secret-file "$work/secret" \
      --key-hex "$spec" "$key2_hex" >"$work/synced_key2.json" 2>/dev/null &&
    "$cli" --json nodes --redis "$url" --prefix cli >"$work/synced_nodes.json" 2>/dev/null &&
    python3 - "$work" <<'EOF'
import json, os, sys
def load(name):
    with open(os.path.join(sys.argv[1], name)) as f:
        return json.load(f)
both = ["cli-node-0", "cli-node-1"]
key, key2, nodes = load("synced_key.json"), load("synced_key2.json"), load("synced_nodes.json")
ok = ([n["node_id"] for n in key["nodes"]] == both and all(n["admitted"] > 0 for n in key["nodes"])
      and [n["node_id"] for n in key2["nodes"]] == both
      and [n["node_id"] for n in nodes["nodes"]] == both
      and all(n["keys"] == 2 and n["rounds"] > 0 for n in nodes["nodes"]))
sys.exit(0 if ok else 1)
EOF
}
if wait_for fleet_synced; then
  pass "fleet synced: both nodes reported both keys"
else
  fail "fleet not synced within $wait_s s"
  sed 's/^/    | /' "$work"/synced_*.json
fi

run inspect_live 0 -- inspect --redis "$url" --prefix cli --secret-file "$work/secret" "$spec" customer-42
has inspect_live out "customer-42 in limit api (prefix cli)"
has inspect_live out "cli-node-0"
has inspect_live out "cli-node-1"
has inspect_live out "limit      200/s, burst 20"
run inspect_live_json 0 -- inspect --json --redis "$url" --prefix cli --secret "$secret_hex" \
  --limits "$work/limits.conf" api customer-42
# Invariants of the data, not timing: one epoch per node, so the key's total
# is the sum of the nodes' counters; the share rule hands out at most the
# whole rate and exactly the burst.
# (Whether a node is live depends on its last report's age; the tool must
# only say so consistently: live exactly when its entry has not expired.)
py inspect_live_json "both nodes, totals add up, shares within the limit" \
  'd["ok"] and d["prefix"] == "cli" and d["limit"] == "api" and d["key"] == "customer-42" and
   d["key_hex"] == "customer-42".encode().hex() and d["redis_key"].startswith("{cli:v1:api:") and
   d["limit_spec"]["count"] == 200 and d["limit_spec"]["burst"] == 20 and
   [n["node_id"] for n in d["nodes"]] == ["cli-node-0", "cli-node-1"] and
   all(len(n["instance"]) == 16 and n["state"] in ("live", "stale") and
       (n["state"] == "live") == (n["expires_in_ms"] >= 0) and n["last_report_age_ms"] >= 0
       for n in d["nodes"]) and
   d["usage"]["live_nodes"] == sum(n["state"] == "live" for n in d["nodes"]) and
   d["admitted_total"] == sum(n["admitted"] for n in d["nodes"]) and
   all(0 < n["admitted"] <= n["offered"] for n in d["nodes"]) and
   sum(n["share_q24"] or 0 for n in d["nodes"]) <= 2**24 and
   sum(n["burst_tokens"] or 0 for n in d["nodes"]) == (20 if d["usage"]["live_nodes"] else 0) and
   all((n["share_q24"] is None) == (n["state"] != "live") for n in d["nodes"]) and
   d["usage"]["admitted_q24"] == sum(n["admitted_rate_q24"] for n in d["nodes"]
                                     if n["state"] == "live") and
   d["usage"]["limit_per_s"] == 200 and d["ttl_ms"] > 0'
# One rule for a secret file, every component's (docs/fleet.md, "The
# secret file"): one final "\n" or "\r\n" is not part of the secret. A file
# written with echo names the keys the nodes wrote (their secret has none);
# a second newline is the secret's.
printf 'cli-test-fleet-secret-0123\n' >"$work/secret-nl"
printf 'cli-test-fleet-secret-0123\r\n' >"$work/secret-crlf"
printf 'cli-test-fleet-secret-0123\n\n' >"$work/secret-nlnl"
for f in secret-nl secret-crlf; do
  run "inspect_$f" 0 -- --json inspect --redis "$url" --prefix cli --secret-file "$work/$f" api customer-42
  py "inspect_$f" "one final line ending is not the secret's" \
    'd["redis_key"] == json.load(open("'"$work"'/synced_key.json"))["redis_key"]'
done
run inspect_secret-nlnl 1 -- inspect --redis "$url" --prefix cli --secret-file "$work/secret-nlnl" api customer-42
has inspect_secret-nlnl err "no such key in Redis"
printf '%s\n' '/v1/* shared name=up kind=inflight limit=adaptive min=2 max=4' >"$work/inflight.conf"
run inspect_inflight 1 -- inspect --redis "$url" --prefix cli --secret-file "$work/secret" \
  --limits "$work/inflight.conf" up shared
has inspect_inflight err "is an in-flight limit (kind=inflight, mode=local)"
has inspect_inflight err 'ratelimit_limit_inflight{limit="up"}'
run inspect_inflight_spec 1 -- --json inspect --redis "$url" --prefix cli --secret-file "$work/secret" \
  'name=db kind=inflight max=4' k
py inspect_inflight_spec "an in-flight spec: the error says where its state is" \
  'd["ok"] is False and d["error"]["kind"] == "local_state"'
run inspect_name_only 0 -- inspect --redis "$url" --prefix cli --secret-file "$work/secret" api customer-42
has inspect_name_only out "rate unknown"
run inspect_name_only_json 0 -- --json inspect --redis "$url" --prefix cli --secret-file "$work/secret" api customer-42
py inspect_name_only_json "no rate: per-second figures and shares are null" \
  'd["limit_spec"] is None and d["usage"]["limit_per_s"] is None and
   all(n["share_q24"] is None and n["demand_per_s"] is None and n["demand_fraction"] is not None
       for n in d["nodes"])'

run inspect_binary_json 0 -- --json inspect --redis "$url" --prefix cli --secret-file "$work/secret" \
  --key-hex "$spec" "$key2_hex"
py inspect_binary_json "a binary key: escaped, valid JSON, exact in key_hex" \
  'd["key_hex"] == "'"$key2_hex"'" and d["key"] == "k\x01\"\\\u00ff-\u00e9" and len(d["nodes"]) == 2'
run inspect_binary 0 -- inspect --redis "$url" --prefix cli --secret-file "$work/secret" --key-hex "$spec" "$key2_hex"
has inspect_binary out 'k\x01"\\\xff-\xc3\xa9 in limit api'
run nodes_live 0 -- nodes --redis "$url" --prefix cli
has nodes_live out 'fleet "cli" at 127.0.0.1:'
has nodes_live out "cli-node-0"
has nodes_live out "cli-node-1"
run nodes_live_json 0 -- nodes --redis "$url" --prefix cli --json
py nodes_live_json "both nodes: this fleet's pid, interval, limits, keys; liveness consistent" \
  'd["ok"] and d["live_count"] + d["stale_count"] == 2 and
   d["live_count"] == sum(n["live"] for n in d["nodes"]) and
   [n["node_id"] for n in d["nodes"]] == ["cli-node-0", "cli-node-1"] and
   all(n["pid"] == '"$fleet_pid"' and n["sync_interval_ms"] == 200 and
       n["limits"] == 1 and n["keys"] == 2 and
       n["health"] in ("healthy", "degraded", "recovering") and
       n["library_version"] == "'"$lib_version"'" and n["record_version"] == 1 and n["rounds"] > 0 and
       n["live"] == (n["deadline_ms"] >= d["now_ms"]) and
       n["deadline_ms"] == n["last_seen_ms"] + 10 * 200 and
       n["last_seen_age_ms"] >= 0 and len(n["instance"]) == 16 for n in d["nodes"])'
py nodes_live_json "one fleet, one fingerprint: no split" \
  'd["split"] is False and len(d["fingerprints"]) == 1 and d["fingerprints"][0]["live_nodes"] == 2 and
   all(n["fingerprint"] == d["fingerprints"][0]["fingerprint"] for n in d["nodes"])'

# hot: each column is what its heading says. Two live records written as a
# node writes them (the hot word: limit/keyhex/len/demand_mps/rate_mps/hot):
# node a offers 463.9/s of a 100/s limit's key, more than the fleet admits,
# so its hot mark's rate is its own demand; node b offers 50/s and saw the
# fleet admit 100/s. DEMAND/S sums the nodes' demands, HOT RATE/S is the
# highest mark rate, and no column calls a node's demand the fleet's.
hot_rec='seen=1000 v=1 lib=0.2.0 host=h pid=9 start=900 int=100 health=healthy limits=1 keys=1 rkeys=0 rlimits=0 rounds=3 failed=0'
redis-cli -p "$port" hset '{hotcols:v1}:nodes' 'a:00000000000000aa' \
  "$hot_rec hot=api/$(printf 'k-1' | od -An -tx1 | tr -d ' \n')/3/463900/463900/1" >/dev/null
redis-cli -p "$port" hset '{hotcols:v1}:nodes' 'b:00000000000000bb' \
  "$hot_rec hot=api/$(printf 'k-1' | od -An -tx1 | tr -d ' \n')/3/50000/100000/0" >/dev/null
redis-cli -p "$port" zadd '{hotcols:v1}:nodes:live' 99999999999999 'a:00000000000000aa' \
  99999999999999 'b:00000000000000bb' >/dev/null
run hot_text 0 -- hot --redis "$url" --prefix hotcols
has hot_text out "DEMAND/S  HOT RATE/S"
if grep -q "FLEET" "$work/hot_text.out"; then fail "hot_text: a FLEET heading"; else pass "hot_text: no FLEET heading"; fi
row=$(grep -E '^api +k-1 ' "$work/hot_text.out" | tr -s ' ')
if [[ $row == "api k-1 hot 1/2 513.9 463.9" ]]; then
  pass "hot_text: the row: demand summed 513.9, hot rate 463.9"
else
  fail "hot_text: row '$row'"
  sed 's/^/    | /' "$work/hot_text.out"
fi
has hot_text out "DEMAND/S: the publishing nodes' own demand"
has hot_text out "HOT RATE/S: what the hot mark compares with hot="
run hot_json 0 -- --json hot --redis "$url" --prefix hotcols
py hot_json "demand summed, the highest hot rate, no fleet_per_s" \
  '[(k["demand_per_s"], k["hot_rate_per_s"], "fleet_per_s" in k) for k in d["keys"]] ==
   [(513.9, 463.9, False)]'

# A node of the same prefix with another secret: a split fleet. The nodes
# show it (and log it, on their stderr); so does `nodes`.
printf 'a-rogue-secret-0123456789' >"$work/rogue-secret"
mkfifo "$work/rogue.in"
"$fleet" --redis "$url" --prefix cli --secret-file "$work/rogue-secret" --spec "$spec" \
  --key customer-42 --nodes 1 --name rogue --warm-ms 1500 <"$work/rogue.in" >"$work/rogue.out" 2>&1 &
rogue_pid=$!
exec 4>"$work/rogue.in"
for _ in $(seq 1 200); do
  grep -q ready "$work/rogue.out" && break
  kill -0 "$rogue_pid" 2>/dev/null || break
  sleep 0.05
done
grep -q ready "$work/rogue.out" && pass "rogue node started" || fail "rogue node did not start"
run nodes_split 0 -- nodes --redis "$url" --prefix cli
has nodes_split out "SPLIT: the live nodes hold 2 different key_secret fingerprints"
has nodes_split out "rogue-0"
run nodes_split_json 0 -- nodes --redis "$url" --prefix cli --json
py nodes_split_json "two fingerprints: 2 nodes and 1" \
  'd["split"] is True and sorted(g["live_nodes"] for g in d["fingerprints"]) == [1, 2] and
   len({n["fingerprint"] for n in d["nodes"]}) == 2 and
   [n for n in d["nodes"] if n["node_id"] == "rogue-0"][0]["fingerprint"] not in
   {n["fingerprint"] for n in d["nodes"] if n["node_id"].startswith("cli-node-")}'
# The rogue's own log (stderr, no hook set) says so; poll, it logs once the
# registry answered its heartbeat.
for _ in $(seq 1 200); do
  grep -q "libratelimit: ERROR \[rogue-0\] fleet split" "$work/rogue.out" && break
  sleep 0.05
done
grep -q "libratelimit: ERROR \[rogue-0\] fleet split: 1 other key_secret fingerprint" "$work/rogue.out" \
  && pass "the rogue logs the split on stderr" || fail "no split line on the rogue's stderr"
echo stop >&4
exec 4>&-
wait "$rogue_pid" && pass "rogue closed" || fail "rogue exit $?"
rogue_pid=

run nodes_other_prefix 0 -- nodes --redis "$url" --prefix nobody
has nodes_other_prefix out "0 live nodes"

# The fleet closes: each node reports its last usage, hands its share back
# and leaves the registry.
echo stop >&3
exec 3>&-
wait "$fleet_pid"
fleet_status=$?
fleet_pid=
[[ $fleet_status -eq 0 ]] && pass "fleet closed" || fail "fleet exit $fleet_status"
run inspect_closed_json 0 -- --json inspect --redis "$url" --prefix cli --secret-file "$work/secret" "$spec" customer-42
# What each node admitted, as rl_check answered it, is what Redis holds.
for node in cli-node-0 cli-node-1; do
  n=$(awk -v n="$node" '$1 == "admitted" && $2 == n { print $3 }' "$work/fleet.out")
  py inspect_closed_json "$node left, Redis holds its $n admitted" \
    '[x for x in d["nodes"] if x["node_id"] == "'"$node"'" and x["state"] == "left" and
      x["admitted"] == '"${n:--1}"' and x["share_q24"] is None and x["demand_q24"] is None] != []'
done
py inspect_closed_json "no live node, the total is the sum" \
  'd["usage"]["live_nodes"] == 0 and d["admitted_total"] == sum(n["admitted"] for n in d["nodes"])'
run inspect_closed 0 -- inspect --redis "$url" --prefix cli --secret-file "$work/secret" api customer-42
has inspect_closed out "left"
run nodes_closed_json 0 -- nodes --json --redis "$url" --prefix cli
py nodes_closed_json "no node after a clean close" 'd["live_count"] == 0 and d["nodes"] == []'

# A node that died without closing: its entry is past its deadline, and with
# no live node to prune it, it shows as stale. (The registry keys expire 2 x
# the stale time after the last heartbeat: start them afresh, without a TTL.)
redis-cli -p "$port" del '{cli:v1}:nodes' '{cli:v1}:nodes:live' >/dev/null
redis-cli -p "$port" hset '{cli:v1}:nodes' 'ghost:00000000000000aa' \
  'seen=1000 v=1 lib=0.1.0 host=h pid=9 start=900 int=100 health=degraded limits=1 keys=2 rkeys=0 rlimits=0 rounds=3 failed=1' >/dev/null
redis-cli -p "$port" zadd '{cli:v1}:nodes:live' 2000 'ghost:00000000000000aa' >/dev/null
redis-cli -p "$port" hset '{cli:v1}:nodes' 'future:00000000000000bb' 'seen=1000 v=7 shiny=1' >/dev/null
run nodes_stale 0 -- nodes --redis "$url" --prefix cli
has nodes_stale out "0 live nodes, 2 stale"
has nodes_stale out "ghost"
has nodes_stale out "unknown to this tool"
run nodes_stale_json 0 -- --json nodes --redis "$url" --prefix cli
py nodes_stale_json "stale entries: fields as written, unknown version flagged" \
  'd["stale_count"] == 2 and d["nodes"][1]["node_id"] == "ghost" and not d["nodes"][1]["live"] and
   d["nodes"][1]["health"] == "degraded" and d["nodes"][1]["deadline_ms"] == 2000 and
   d["nodes"][1]["rounds_failed"] == 1 and d["nodes"][0]["record_version"] == 7 and
   "health" not in d["nodes"][0]'

# ------------------------------------------------------------------ errors
run inspect_missing 1 -- inspect --redis "$url" --prefix cli --secret-file "$work/secret" api nobody
has inspect_missing err "no such key in Redis: {cli:v1:api:"
has inspect_missing err "(has it been synced? is the secret/prefix right?)"
run inspect_missing_json 1 -- --json inspect --redis "$url" --prefix cli --secret-file "$work/secret" api nobody
py inspect_missing_json "error document" \
  'd["ok"] is False and d["error"]["kind"] == "no_such_key" and d["error"]["exit_status"] == 1'
# Another secret names another key.
printf 'another-secret-0123456789' >"$work/secret2"
run inspect_wrong_secret 1 -- inspect --redis "$url" --prefix cli --secret-file "$work/secret2" api customer-42
run inspect_short_secret 2 -- inspect --redis "$url" --secret 00ff api k
has inspect_short_secret err "at least 16"
run inspect_two_secrets 2 -- inspect --redis "$url" --secret 00ff --secret-file "$work/secret" api k
run inspect_bad_hex 2 -- inspect --redis "$url" --secret zz api k
run inspect_no_redis 2 -- inspect --secret-file "$work/secret" api k
run inspect_bad_url 2 -- inspect --redis http://x --secret-file "$work/secret" api k
has inspect_bad_url err "must start with redis://"
run inspect_bad_limit 2 -- inspect --redis "$url" --secret-file "$work/secret" 'bad name' k
run inspect_limit_not_in_file 2 -- inspect --redis "$url" --secret-file "$work/secret" --limits "$work/limits.conf" nope k
run inspect_unknown_opt 2 -- inspect --redis "$url" --frobnicate api k
has inspect_unknown_opt err "unknown option '--frobnicate'"
dead_port=$(free_port)
run inspect_unreachable 3 -- inspect --redis "redis://127.0.0.1:$dead_port" --secret-file "$work/secret" api k
has inspect_unreachable err "cannot reach Redis at 127.0.0.1:$dead_port"
run nodes_unreachable_json 3 -- --json nodes --redis "redis://127.0.0.1:$dead_port"
py nodes_unreachable_json "error document" 'd["ok"] is False and d["error"]["kind"] == "redis_unreachable"'
redis-cli -p "$port" config set requirepass cli-test-pass >/dev/null
run nodes_noauth 3 -- nodes --redis "$url" --prefix cli
has nodes_noauth err "requires a password"
run nodes_wrongpass 3 -- nodes --redis "redis://:wrong@127.0.0.1:$port" --prefix cli
has nodes_wrongpass err "refused the credentials"
run nodes_auth_ok 0 -- nodes --redis "redis://:cli-test-pass@127.0.0.1:$port" --prefix cli
redis-cli -p "$port" -a cli-test-pass --no-auth-warning config set requirepass '' >/dev/null

# ------------------------------------------------------------------- bench
run bench_text 0 -- bench --seconds 1 --keys 1000
has bench_text out "machine: CPU"
has bench_text out "rl_check, hot key"
run bench_json 0 -- bench --seconds 1 --keys 5000 --threads 2 --json
py bench_json "four figures, positive and finite, machine line" \
  'd["ok"] and d["threads"] == 2 and d["keys"] == 5000 and d["machine"]["cores"] >= 1 and
   d["machine"]["cpu"] != "" and
   [f["name"] for f in d["figures"]] == ["floor_hot_key", "rl_check_hot_key", "floor_keys", "rl_check_keys"] and
   all(0 < f["ns_min"] <= f["ns_median"] <= f["ns_max"] < 1e7 for f in d["figures"]) and
   d["ratios"]["hot_key_vs_floor"] > 0 and d["ratios"]["keys_vs_floor"] > 0'
run bench_bad 2 -- bench --seconds 0

# ------------------------------------------------------ quota
# The counter the library's charges move (test_quota checks the library and
# this name agree): its name from the tool itself, set here, read back.
qspec='name=plan amount=1000 period=month'
run quota_empty_json 0 -- --json quota --redis "$url" --prefix cli --secret-file "$work/secret" "$qspec" customer-42
py quota_empty_json "nothing charged: used 0, no counter, a month ahead at most" \
  'd["ok"] and d["quota"] == "plan" and d["used"] == 0 and d["remaining"] == 1000 and
   d["ttl_ms"] == -2 and d["period"] == "month" and
   d["period_start_ms"] <= d["now_ms"] < d["reset_unix_ms"] <= d["now_ms"] + 31 * 86400000 and
   d["redis_key"].startswith("{cli:q1:plan:") and
   d["redis_key"].endswith("}:p:" + str(d["period_start_ms"]))'
qkey=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["redis_key"])' "$work/quota_empty_json.out")
redis-cli -p "$port" set "$qkey" 42 px 600000 >/dev/null
run quota_used 0 -- quota --redis "$url" --prefix cli --secret-file "$work/secret" "$qspec" customer-42
has quota_used out "used       42 of 1000"
has quota_used out "remaining  958"
has quota_used out "period     month"
run quota_used_json 0 -- quota --json --redis "$url" --prefix cli --secret "$secret_hex" "$qspec" customer-42
py quota_used_json "the counter read" 'd["used"] == 42 and d["remaining"] == 958 and 0 < d["ttl_ms"] <= 600000'
run quota_bad_spec 2 -- quota --redis "$url" --secret-file "$work/secret" 'name=plan period=month' k
has quota_bad_spec err "missing amount"
run quota_no_key 2 -- quota --redis "$url" --secret-file "$work/secret" "$qspec"

# ------------------------------------------- every key family inspect reads
# inspect reads each family the library writes: global (above), exact and
# tiered (the token bucket exact.lua keeps in the key's hash: xn xl xr xf
# xc, with a tiered key's node entries beside it), and a quota (its spec
# reads the period's counter, as quota does).
family_fleet() { # family_fleet NAME SPEC NODES: a fleet run until ready, then closed
  mkfifo "$work/$1.in"
  "$fleet" --redis "$url" --prefix fam --secret-file "$work/secret" --spec "$2" --key alice \
    --nodes "$3" --name "$1" --warm-ms 500 <"$work/$1.in" >"$work/$1.out" 2>&1 &
  fleet_pid=$!
  exec 5>"$work/$1.in"
  wait_for fleet_ready_or_gone
  echo stop >&5
  exec 5>&-
  wait "$fleet_pid" && pass "$1 fleet ran and closed" || { fail "$1 fleet"; cat "$work/$1.out"; }
  fleet_pid=
}
xspec='name=login rate=5/m burst=5 mode=exact'
family_fleet exact "$xspec" 1
x_admitted=$(awk '$1 == "admitted" { print $3 }' "$work/exact.out")
run inspect_exact 0 -- inspect --redis "$url" --prefix fam --secret-file "$work/secret" "$xspec" alice
has inspect_exact out "mode       exact: Redis decides every check from one token bucket"
has inspect_exact out "admitted   $x_admitted since created (charged to the bucket)"
if grep -q "cannot read" "$work/inspect_exact.out"; then fail "inspect_exact: unread fields"; else pass "inspect_exact: every field read"; fi
run inspect_exact_json 0 -- --json inspect --redis "$url" --prefix fam --secret-file "$work/secret" "$xspec" alice
py inspect_exact_json "exact: the bucket, its charges the node's admissions, nothing unread" \
  'd["family"] == "exact" and d["malformed_fields"] == 0 and d["nodes"] == [] and
   d["admitted_total"] == '"${x_admitted:--1}"' == d["bucket"]["charged"] and
   5 <= d["admitted_total"] <= 6 and 0 <= d["bucket"]["tokens_now"] <= 5 and
   d["bucket"]["tokens_at_last_charge"] <= d["bucket"]["tokens_now"] and
   d["bucket"]["first_check_ms"] <= d["bucket"]["last_charge_ms"] and d["ttl_ms"] > 0'
run inspect_exact_name 0 -- --json inspect --redis "$url" --prefix fam --secret-file "$work/secret" login alice
py inspect_exact_name "exact by name: the stored tokens, no refill without the rate" \
  'd["family"] == "exact" and d["bucket"]["tokens_now"] is None and d["malformed_fields"] == 0'
tspec='name=tier rate=5/m burst=5 mode=tiered near=0.5'
family_fleet tiered "$tspec" 2
run inspect_tiered_json 0 -- --json inspect --redis "$url" --prefix fam --secret-file "$work/secret" "$tspec" alice
py inspect_tiered_json "tiered: both nodes and the fleet bucket, nothing unread" \
  'd["family"] == "tiered" and d["malformed_fields"] == 0 and
   sorted(n["node_id"] for n in d["nodes"]) == ["tiered-0", "tiered-1"] and
   d["bucket"] is not None and 0 <= d["bucket"]["tokens_now"] <= 5 and d["admitted_total"] > 0'
run inspect_tiered 0 -- inspect --redis "$url" --prefix fam --secret-file "$work/secret" "$tspec" alice
has inspect_tiered out "mode       tiered: nodes decide locally"
has inspect_tiered out "tiered-1"
run inspect_quota 0 -- inspect --redis "$url" --prefix cli --secret-file "$work/secret" "$qspec" customer-42
has inspect_quota out "used       42 of 1000"
run inspect_quota_json 0 -- --json inspect --redis "$url" --prefix cli --secret-file "$work/secret" "$qspec" customer-42
py inspect_quota_json "a quota: the period's counter" 'd["quota"] == "plan" and d["used"] == 42'

# ------------------------------------------------- the gateway's key names
# The gateway example names a client's keys key:<X-API-Key> and ip:<address>
# (examples/gateway/README.md, "Keys in Redis"); --api-key and --ip take
# those forms. Its secret file is written with echo (one rule for every
# component: docs/fleet.md, "The secret file").
if [[ -n $gateway ]] && command -v curl >/dev/null 2>&1; then
  printf '%s\n' '* client name=per_client rate=100/s burst=50' '* ip name=per_ip rate=100/s burst=50' \
    >"$work/gateway.conf"
  "$gateway" --listen 127.0.0.1:0 --limits "$work/gateway.conf" --redis "$url" --key-prefix gw \
    --key-secret-file "$work/secret-nl" --node-id gw1 >"$work/gateway.log" 2>&1 &
  gateway_pid=$!
  gw_port() { sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/gateway.log"; }
  gw_up() { [[ -n $(gw_port) ]] || ! kill -0 "$gateway_pid" 2>/dev/null; }
  wait_for gw_up
  gport=$(gw_port)
  if [[ -z $gport ]]; then
    fail "the gateway did not start"
    sed 's/^/    | /' "$work/gateway.log"
  else
    for _ in 1 2 3 4 5; do
      curl -s -o /dev/null -H 'X-API-Key: alice' "http://127.0.0.1:$gport/search"
    done
    # Until the gateway has reported all five (a sync round or two).
    gw_synced() {
      "$cli" --json inspect --redis "$url" --prefix gw --secret-file "$work/secret" --api-key \
        per_client alice 2>/dev/null |
        python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["admitted_total"] != 5)' &&
        "$cli" inspect --redis "$url" --prefix gw --secret-file "$work/secret" --ip \
          per_ip 127.0.0.1 >/dev/null 2>&1
    }
    wait_for gw_synced
    run inspect_api_key 0 -- --json inspect --redis "$url" --prefix gw --secret-file "$work/secret" \
      --api-key per_client alice
    py inspect_api_key "--api-key alice is the gateway's key:alice, its 5 requests" \
      'd["key"] == "key:alice" and d["admitted_total"] == 5 and
       [n["node_id"] for n in d["nodes"]] == ["gw1"]'
    run inspect_ip 0 -- inspect --redis "$url" --prefix gw --secret-file "$work/secret" --ip \
      per_ip 127.0.0.1
    has inspect_ip out "ip:127.0.0.1 in limit per_ip"
    run inspect_gateway_literal 0 -- inspect --redis "$url" --prefix gw --secret-file "$work/secret" \
      per_client key:alice
    run inspect_gateway_bare 1 -- inspect --redis "$url" --prefix gw --secret-file "$work/secret" \
      per_client alice
    has inspect_gateway_bare err "the gateway example names a client's keys key:<API key> and ip:<address>: --api-key KEY or --ip ADDRESS"
    run inspect_ip_bad 2 -- inspect --redis "$url" --prefix gw --secret-file "$work/secret" --ip \
      per_ip alice
    has inspect_ip_bad err "not an IPv4 or IPv6 address"
    run inspect_ip_and_key 2 -- inspect --redis "$url" --prefix gw --secret-file "$work/secret" \
      --ip --api-key per_ip 127.0.0.1
  fi
  kill "$gateway_pid" 2>/dev/null
  wait "$gateway_pid" 2>/dev/null
  gateway_pid=
fi

# ------------------------------------------------------ help and version
# The tool's version is the project's it was built with, the library's is
# rl_version (the same here: the tool links it statically).
project_version=${RL_PROJECT_VERSION:-$lib_version}
run version 0 -- --version
has version out "ratelimit $project_version (libratelimit $lib_version)"
run version_json 0 -- --version --json
py version_json "versions" \
  'd["ok"] and d["library_version"] == "'"$lib_version"'" and d["tool_version"] == "'"$project_version"'"'
run help 0 -- --help
has help out "EXIT STATUS"
# The docs the help names are found from the tool's own directory, wherever
# it is installed (RL_CLI_DOCDIR_REL from it, as cmake --install lays out).
docs_rel=${RL_CLI_DOCDIR_REL:-../share/doc/ratelimit}
mkdir -p "$work/inst/bin" "$work/inst/bin/$docs_rel" "$work/bare/bin"
cp "$cli" "$work/inst/bin/ratelimit"
cp "$cli" "$work/bare/bin/ratelimit"
touch "$work/inst/bin/$docs_rel/cli.md" "$work/inst/bin/$docs_rel/limits-file.md"
docs_abs=$(cd "$work/inst/bin/$docs_rel" && pwd -P)
"$work/inst/bin/ratelimit" --help >"$work/help_installed.out" 2>&1
has help_installed out "Full reference: $docs_abs/cli.md"
has help_installed out "$docs_abs/limits-file.md"
"$work/bare/bin/ratelimit" --help >"$work/help_bare.out" 2>&1
has help_bare out "cli.md, which \`cmake --install\` puts in"
has help_bare out "$docs_rel/ from the directory this program is"
for sub in check inspect nodes bench quota; do
  run "help_$sub" 0 -- "$sub" --help
  has "help_$sub" out "SYNOPSIS"
  run "help_cmd_$sub" 0 -- help "$sub"
done
run no_args 2 --
run unknown_cmd 2 -- frob
has unknown_cmd err "no such command: frob"

if [[ $failures -gt 0 ]]; then
  echo "test.sh: $failures check(s) failed"
  exit 1
fi
echo "test.sh: all passed"
