#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The gateway as clients see it: curl for well-formed HTTP, raw bytes over
# bash's /dev/tcp for what curl will not send.
#
#   bash examples/gateway/test.sh PATH/TO/rl_gateway
#
# 1. One local-only gateway: 200 then 429 with the RateLimit headers,
#    X-API-Key vs client-IP keys, ip and shared (endpoint) scopes,
#    /metrics, malformed requests (400 and close), oversized ones
#    (431/414/413), keep-alive and HTTP/1.0 close, pipelining in order,
#    SIGHUP reloads (state kept, new rate applied, a bad file keeps the old
#    limits), idle and request timeouts, max connections, clean SIGTERM.
# 2. A gateway in front of a test upstream (python3): a tokens-per-minute
#    route (reserve on X-Max-Tokens, settle at X-Usage-Tokens: debt, refill,
#    release on failure, the overshoot bound) and in-flight limits (per
#    key, and the upstream's adaptive one: 503 + Retry-After when full).
# 3. Three gateways sharing a private redis-server (skipped when
#    redis-server is not installed and RL_SKIP_REDIS=1): the fleet's total
#    stays within the README's tolerance band.
# Every check is on responses, counts and bounds; no check depends on how
# fast the machine is (rate limits are per hour where counts must be exact;
# the fleet bound only grows with the measured time). Limits use
# rate=N/h so no token comes back during the test.
# Ctest runs this as gateway_http (exit 77: skipped).
set -uo pipefail

gw=${1:?usage: test.sh PATH/TO/rl_gateway}
if ! command -v curl >/dev/null 2>&1; then
  echo "gateway test: curl not installed (scripts/deps.sh installs it)" >&2
  [[ ${RL_SKIP_CURL:-0} == 1 ]] && exit 77
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-gateway-test.XXXXXX")
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok    $*"; }
bad() { failed=$((failed + 1)); echo "FAIL  $*"; }
check() { # check DESCRIPTION COMMAND...: pass when the command succeeds
  local what=$1
  shift
  if "$@"; then ok "$what"; else bad "$what"; fi
}
eq() { [[ "$1" == "$2" ]] || { echo "      got [$1], want [$2]"; return 1; }; }
has() { grep -qiF -- "$2" <<<"$1" || { echo "      no [$2] in:"; sed 's/^/      | /' <<<"$1" | head -20; return 1; }; }
hasre() { grep -qE -- "$2" <<<"$1" || { echo "      no /$2/"; return 1; }; }

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

# start_gateway NAME ARGS...: started in the background on a free port;
# sets $port. Waits (at most wait_s) for its "listening on" line.
port=
declare -A gw_pid
listening() { # listening NAME PID: sets $port once NAME's log says where
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$1.log")
  [[ -n $port ]] || ! kill -0 "$2" 2>/dev/null
}
start_gateway() {
  local name=$1
  shift
  "$gw" --listen 127.0.0.1:0 "$@" >"$tmp/$name.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  gw_pid[$name]=$pid
  wait_for listening "$name" "$pid"
  [[ -n $port ]] && return 0
  echo "gateway test: $name did not start:" >&2
  cat "$tmp/$name.log" >&2
  exit 1
}

# wait_log NAME TEXT [COUNT]: until NAME's log has TEXT COUNT times.
log_has() { (( $(grep -cF -- "$2" "$tmp/$1.log") >= $3 )); }
wait_log() {
  wait_for log_has "$1" "$2" "${3:-1}" && return 0
  echo "      no \"$2\" (x${3:-1}) in $1's log:"; sed 's/^/      | /' "$tmp/$1.log" | tail -20
  return 1
}

# raw PORT BYTES: send BYTES (printf %b escapes), print everything the
# server sends until it closes; rc 124 if it has not closed within wait_s.
raw() {
  local fd rc=0
  exec {fd}<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf '%b' "$2" >&"$fd"
  timeout "$wait_s" cat <&"$fd" || rc=$?
  exec {fd}>&-
  return $rc
}
status_of() { head -n 1 <<<"$1" | tr -d '\r' | cut -d' ' -f2; }

# raw_expect DESCRIPTION STATUS BYTES: the status, then the server closes.
raw_expect() {
  local out rc=0
  out=$(raw "$port" "$3") || rc=$?
  if [[ $rc -ne 0 ]]; then
    bad "$1: connection not closed by the server (rc $rc)"
  elif [[ $(status_of "$out") != "$2" ]]; then
    bad "$1: status $(status_of "$out"), want $2"
  else
    ok "$1: $2 and closed"
  fi
}

url() { echo "http://127.0.0.1:$port$1"; }
# /metrics once the server has seen every earlier client close (it does in
# its own time; until then a scrape may even be refused): at most wait_s
metrics=
scrape_settled() {
  metrics=$(curl -s "$(url /metrics)") && grep -q '^gateway_connections_open 1$' <<<"$metrics"
}
settled_metrics() {
  wait_for scrape_settled
  printf '%s\n' "$metrics"
}
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
# the value of header NAME in a `curl -si` output
header() { grep -i "^$2:" <<<"$1" | head -n 1 | cut -d' ' -f2- | tr -d '\r'; }

# ================================================================ local
cat >"$tmp/limits.conf" <<'EOF'
# the test's limits: per hour, so nothing refills during the test
*        client name=per_client rate=5/h burst=5
/ipl     ip     name=per_ip rate=2/h burst=2
/search  shared name=search_total rate=3/h burst=3
/metrics shared name=scrapes rate=1000/s burst=1000
EOF
start_gateway local --limits "$tmp/limits.conf" --idle-timeout-ms 1500 \
  --request-timeout-ms 1500 --max-connections 8

echo "== 200, then 429 with its headers"
codes=""
for _ in 1 2 3 4 5; do codes+="$(code -H 'X-API-Key: alice' "$(url /a)") "; done
check "five requests within the burst of 5" eq "$codes" "200 200 200 200 200 "
r=$(curl -si -H 'X-API-Key: alice' "$(url /a)")
check "the sixth is 429" eq "$(status_of "$r")" 429
check "429: RateLimit-Policy" eq "$(header "$r" RateLimit-Policy)" '"per_client";q=5;w=3600'
check "429: RateLimit with r=0" has "$(header "$r" RateLimit)" '"per_client";r=0;t='
check "429: X-RateLimit-Remaining 0" eq "$(header "$r" X-RateLimit-Remaining)" 0
check "429: Retry-After in whole seconds (720 s for 5/h)" eq "$(header "$r" Retry-After)" 720
check "429: JSON body names the limit" has "$r" '"limit":"per_client"'
r=$(curl -si -H 'X-API-Key: bob' "$(url /a)")
check "200 carries RateLimit headers too" eq "$(header "$r" RateLimit)" '"per_client";r=4;t=720'
check "200 body" has "$r" '{"status":"ok","path":"/a","client":"key","limits":1}'

echo "== X-API-Key vs client IP"
codes=""
for _ in 1 2 3 4 5 6; do codes+="$(code "$(url /a)") "; done
check "no key: the IP's bucket, 5 then 429" eq "$codes" "200 200 200 200 200 429 "
check "the IP's bucket is not alice's" eq "$(code -H 'X-API-Key: carol' "$(url /a)")" 200
check "an API key spelled like the IP has its own bucket" \
  eq "$(code -H 'X-API-Key: ip:127.0.0.1' "$(url /a)")" 200
r=$(curl -s -H 'X-API-Key: dave' "$(url /a)")
check "body says which identity was used" has "$r" '"client":"key"'

echo "== ip scope and endpoint (shared) limits"
codes=""
for k in k1 k2 k3; do codes+="$(code -H "X-API-Key: $k" "$(url /ipl)") "; done
check "ip scope ignores the key: 2 then 429" eq "$codes" "200 200 429 "
codes=""
for k in s1 s2 s3 s4; do codes+="$(code -H "X-API-Key: $k" "$(url /search?q=$k)") "; done
check "/search shared by every client: 3 then 429" eq "$codes" "200 200 200 429 "
r=$(curl -si -H 'X-API-Key: s5' "$(url /search)")
check "the endpoint's 429 names its limit" eq "$(header "$r" RateLimit-Policy)" '"search_total";q=3;w=3600'
check "query string not part of the path" eq "$(code -H 'X-API-Key: s6' "$(url /searchx)")" 200
check "a denied batch charges nothing: s5 has 4 of 5 left after its next request" \
  eq "$(header "$(curl -si -H 'X-API-Key: s5' "$(url /other)")" X-RateLimit-Remaining)" 4

echo "== malformed requests: 400 (or the status the RFC asks for) and close"
raw_expect "bare LF" 400 'GET / HTTP/1.1\nHost: a\n\n'
raw_expect "obs-fold" 400 'GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n'
raw_expect "space before colon" 400 'GET / HTTP/1.1\r\nHost : a\r\n\r\n'
raw_expect "CR inside a value" 400 'GET / HTTP/1.1\r\nHost: a\r\nX-API-Key: a\rb\r\n\r\n'
raw_expect "missing Host" 400 'GET / HTTP/1.1\r\n\r\n'
raw_expect "Content-Length twice" 400 'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx'
raw_expect "Content-Length with Transfer-Encoding" 400 \
  'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'
raw_expect "chunked body" 411 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'
raw_expect "unknown transfer coding" 501 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n'
raw_expect "HTTP/2.0" 505 'GET / HTTP/2.0\r\nHost: a\r\n\r\n'
raw_expect "absolute-form target" 400 'GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n'
raw_expect "NUL in a value" 400 'GET / HTTP/1.1\r\nHost: a\r\nX: \x00\r\n\r\n'
rc=0
out=$(raw "$port" 'GET /first HTTP/1.1\r\nHost: a\r\nX-API-Key: pipe0\r\n\r\nGET / HTTP/1.1\nHost: a\n\n') || rc=$?
check "a good request then a bad one: 200, 400, closed" \
  eq "$(grep -o '^HTTP/1.1 [0-9]*' <<<"$out" | tr '\n' ' ')$rc" "HTTP/1.1 200 HTTP/1.1 400 0"

echo "== oversized: 431, 414, 413, 501"
big=$(head -c 9000 /dev/zero | tr '\0' v)
check "8193+ byte header value: 431" eq "$(code -H "X-Big: $big" "$(url /a)")" 431
check "5000-byte target: 414" eq "$(code "$(url "/$(head -c 5000 /dev/zero | tr '\0' a)")")" 414
hdrs=()
for i in $(seq 101); do hdrs+=(-H "X-H$i: 1"); done
check "101 header fields: 431" eq "$(code "${hdrs[@]}" "$(url /a)")" 431
check "300-byte X-API-Key: 431" eq "$(code -H "X-API-Key: $(head -c 300 /dev/zero | tr '\0' k)" "$(url /a)")" 431
raw_expect "Content-Length above --max-body: 413" 413 \
  'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n'
raw_expect "Content-Length of 2^64: 413, no wrap" 413 \
  'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n'
raw_expect "17-byte method: 501" 501 'ABCDEFGHIJKLMNOPQ / HTTP/1.1\r\nHost: a\r\n\r\n'

echo "== keep-alive, Connection: close, HTTP/1.0, pipelining, bodies"
n=$(curl -s -o /dev/null -o /dev/null -o /dev/null -w '%{num_connects}' -H 'X-API-Key: ka' "$(url /1)" "$(url /2)" "$(url /3)")
check "HTTP/1.1: three requests on one connection" eq "$n" "100"
n=$(curl -s -o /dev/null -o /dev/null -w '%{num_connects}' -H 'X-API-Key: ka2' -H 'Connection: close' "$(url /1)" "$(url /2)")
check "Connection: close honoured" eq "$n" "11"
n=$(curl -s -o /dev/null -o /dev/null --http1.0 -w '%{num_connects}' -H 'X-API-Key: ka3' "$(url /1)" "$(url /2)")
check "HTTP/1.0 closes by default" eq "$n" "11"
r=$(raw "$port" 'GET /k HTTP/1.0\r\nConnection: keep-alive\r\nX-API-Key: ka4\r\n\r\nGET /k2 HTTP/1.0\r\nX-API-Key: ka4\r\n\r\n')
check "HTTP/1.0 keep-alive kept, then closed" eq "$(grep -c '^HTTP/1.1 200' <<<"$r") $(grep -ci '^Connection: keep-alive' <<<"$r")" "2 1"
out=$(raw "$port" 'GET /p1 HTTP/1.1\r\nHost: a\r\nX-API-Key: pipe\r\n\r\nPOST /p2 HTTP/1.1\r\nHost: a\r\nX-API-Key: pipe\r\nContent-Length: 5\r\n\r\nhelloGET /p3 HTTP/1.1\r\nHost: a\r\nX-API-Key: pipe\r\nConnection: close\r\n\r\n')
check "three pipelined requests answered in order" \
  eq "$(grep -o '"path":"[^"]*"' <<<"$out" | tr '\n' ' ')" '"path":"/p1" "path":"/p2" "path":"/p3" '
r=$(curl -s -H 'X-API-Key: body' --data-binary "$(head -c 100000 /dev/zero | tr '\0' b)" "$(url /upload)")
check "a 100 kB body is read and answered" has "$r" '"path":"/upload"'
r=$(curl -s -o /dev/null -H 'X-API-Key: body2' -H 'Expect: 100-continue' --data-binary 'abc' \
  -w '%{http_code}' "$(url /upload)")
check "Expect: 100-continue (the 100 is counted in /metrics below)" eq "$r" 200
len=$(curl -s -H 'X-API-Key: head' "$(url /h)" | wc -c)
out=$(raw "$port" 'HEAD /h HTTP/1.1\r\nHost: a\r\nX-API-Key: head\r\nConnection: close\r\n\r\n')
check "HEAD: the GET's Content-Length, no body" \
  eq "$(status_of "$out") $(header "$out" Content-Length) $(tail -n 1 <<<"$out" | tr -d '\r')" "200 $len "

echo "== /metrics"
m=$(settled_metrics)
check "gateway responses by status" has "$m" 'gateway_responses_total{status="429"}'
check "library per-limit counters" has "$m" 'ratelimit_limit_denied_total{limit="search_total"} 2'
check "per-limit admitted" has "$m" 'ratelimit_limit_admitted_total{limit="search_total"} 3'
check "open connections gauge" has "$m" 'gateway_connections_open 1'
check "parse errors by reason" has "$m" 'gateway_parse_errors_total{reason="BAD_LINE_END"} 3'
check "100 Continue sent once" has "$m" 'gateway_responses_total{status="100"} 1'
check "smuggling attempts counted" has "$m" 'gateway_parse_errors_total{reason="LENGTH_AND_CHUNKED"} 1'
check "rules gauge" has "$m" 'gateway_limit_rules 4'
check "hot keys per limit (rl_metrics_text)" has "$m" 'ratelimit_hot_keys{limit="search_total"} 0'
check "busiest keys family" has "$m" '# TYPE ratelimit_hot_key_demand_per_second gauge'
check "/metrics limited by its exact rule only, not by *" \
  eq "$(header "$(curl -si "$(url /metrics)")" RateLimit-Policy)" '"scrapes";q=1000;w=1'
check "POST /metrics: 405" eq "$(code -X POST "$(url /metrics)")" 405
check "Prometheus content type" has "$(curl -sI "$(url /metrics)")" 'text/plain; version=0.0.4'

echo "== SIGHUP reload"
cat >"$tmp/limits.conf" <<'EOF'
# per_client: 5/h -> 10/h (updated in place); per_ip removed; /new added
*        client name=per_client rate=10/h burst=10
/search  shared name=search_total rate=3/h burst=3
/new     shared name=fresh rate=1/h burst=1
/metrics shared name=scrapes rate=1000/s burst=1000
EOF
kill -HUP "${gw_pid[local]}"
check "reload logged" wait_log local "1 added, 3 updated in place, 1 removed"
# A reload keeps what each key has used: alice used 5, so of the new burst
# of 10 she has 5 (4 after this request), where a new key has 10 (9).
r=$(curl -si -H 'X-API-Key: alice' "$(url /a)")
check "state kept: alice's 5 used still count" eq "$(status_of "$r") $(header "$r" X-RateLimit-Remaining)" "200 4"
check "...under the new rate" eq "$(header "$r" RateLimit-Policy)" '"per_client";q=10;w=3600'
r=$(curl -si -H 'X-API-Key: newcomer' "$(url /a)")
check "new burst for a new key" eq "$(header "$r" X-RateLimit-Remaining)" 9
check "removed limit no longer applies" eq "$(code -H 'X-API-Key: k9' "$(url /ipl)")$(code -H 'X-API-Key: k10' "$(url /ipl)")$(code -H 'X-API-Key: k11' "$(url /ipl)")" 200200200
check "added limit applies" eq "$(code -H 'X-API-Key: n1' "$(url /new)") $(code -H 'X-API-Key: n2' "$(url /new)")" "200 429"
cp "$tmp/limits.conf" "$tmp/good.conf"
cat >"$tmp/limits.conf" <<'EOF'
*        client name=per_client rate=1/h burst=1
/x       nobody name=x rate=1/s
/y       shared name=y rate=fast
EOF
kill -HUP "${gw_pid[local]}"
check "bad reload: line-numbered errors" wait_log local "limits.conf:2: unknown scope"
check "bad reload: line 3 too" wait_log local "limits.conf:3: rate: \"fast\""
check "bad reload: old limits kept" wait_log local "keeping the 4 rules in force"
r=$(curl -si -H 'X-API-Key: newcomer2' "$(url /a)")
check "old config still in force" eq "$(header "$r" RateLimit-Policy)" '"per_client";q=10;w=3600'
check "failed reload counted" has "$(curl -s "$(url /metrics)")" 'gateway_reloads_total{result="failed"} 1'

echo "== timeouts and max connections"
rc=0
out=$(raw "$port" '') || rc=$?
check "idle connection closed by the idle timeout" eq "$rc $out" "0 "
out=$(raw "$port" 'GET /slow HTTP/1.1\r\nHost: a\r\n')
check "request not finished in time: 408" eq "$(status_of "$out")" 408
out=$(raw "$port" 'POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc')
check "body not finished in time: 408" eq "$(status_of "$out")" 408
fds=()
for _ in $(seq 8); do
  exec {fd}<>"/dev/tcp/127.0.0.1/$port"
  fds+=("$fd")
done
# The 503 to a connection over the limit is best effort: the server closes
# at once, and a request already sent (unread) would turn the close into a
# reset that can discard the 503. So this client only listens.
out=$(raw "$port" '')
check "connection 9 of --max-connections 8: 503" eq "$(status_of "$out")" 503
for fd in "${fds[@]}"; do exec {fd}>&-; done
m=$(settled_metrics)
check "connections closed by the client are gone" has "$m" 'gateway_connections_open 1'
check "rejection counted" hasre "$m" '^gateway_connections_rejected_total [1-9]'
check "timeouts counted (idle, request, body)" hasre "$m" '^gateway_timeouts_total [3-9]'

echo "== SIGTERM"
kill -TERM "${gw_pid[local]}"
rc=0
wait "${gw_pid[local]}" || rc=$?
check "exits 0 after SIGTERM" eq "$rc" 0
check "logged its stop" wait_log local "stopped"

# ================================================================ upstream
# The proxy stage (proxy.c): an LLM-style route limited in tokens per
# minute (reserved on X-Max-Tokens, settled at the upstream's
# X-Usage-Tokens, released when it fails), and in-flight limits (the
# upstream's adaptive one, a fixed one per API key). The test upstream is a
# small Python server whose /v1/slow requests wait until the test opens a
# gate, so "N requests in flight at once" is a state the test holds, never
# a race with a sleep.
if ! command -v python3 >/dev/null 2>&1; then
  bad "python3 not installed: the upstream tests need it"
else
cat >"$tmp/upstream.py" <<'PY'
import http.server, sys, threading, urllib.parse
gate = threading.Event(); gate.set()
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        u = urllib.parse.urlsplit(self.path); q = urllib.parse.parse_qs(u.query)
        if u.path == "/hold": gate.clear()
        elif u.path == "/go": gate.set()
        elif u.path == "/v1/slow": gate.wait(60)
        if "fail" in q:
            self.send_response(500); self.end_headers(); return
        body = ('{"upstream":"%s","key":"%s","max_tokens":"%s"}\n' % (u.path,
                self.headers.get("X-API-Key", ""), self.headers.get("X-Max-Tokens", ""))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if "usage" in q: self.send_header("X-Usage-Tokens", q["usage"][0])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
python3 "$tmp/upstream.py" "$tmp/upstream.port" &
pids+=("$!")
up_ready() { [[ -s $tmp/upstream.port ]]; }
wait_for up_ready || { echo "gateway test: the test upstream did not start" >&2; exit 1; }
up_port=$(cat "$tmp/upstream.port")
up() { curl -s -o /dev/null "http://127.0.0.1:$up_port$1"; }

# rate=6000/m: 100 tokens a second, burst 1000. The in-flight rules as in
# the sample limits.conf: the upstream's adaptive limit (min 2, max 4: it
# starts at 4 and moves only on full windows of releases) and 2 per key.
cat >"$tmp/llm.conf" <<'CONF'
/v1/chat client tokens name=tpm rate=6000/m burst=1000
/v1/*    shared name=upstream kind=inflight limit=adaptive algo=gradient2 min=2 max=4 max_hold=60s
/v1/*    client name=per_key_inflight kind=inflight max=2 mode=local
/metrics shared name=scrapes rate=1000/s burst=1000
CONF
start_gateway llm --limits "$tmp/llm.conf" --upstream "127.0.0.1:$up_port"
chat() { # chat KEY MAX_TOKENS QUERY: curl -si through the gateway
  curl -si -H "X-API-Key: $1" -H "X-Max-Tokens: $2" "$(url "/v1/chat?$3")"
}
gauge() { # gauge FAMILY LIMIT: a per-limit metric's value
  curl -s "$(url /metrics)" | sed -n "s/^$1{limit=\"$2\"} \\([0-9]*\\).*/\\1/p"
}

echo "== tokens per minute: reserve on X-Max-Tokens, settle at X-Usage-Tokens"
check "no X-Max-Tokens on a token route: 400" eq "$(code -H 'X-API-Key: t0' "$(url /v1/chat)")" 400
check "an estimate above the burst: 400" eq "$(code -H 'X-API-Key: t0' -H 'X-Max-Tokens: 1001' "$(url /v1/chat)")" 400
check "X-Max-Tokens not a number: 400" eq "$(code -H 'X-API-Key: t0' -H 'X-Max-Tokens: ten' "$(url /v1/chat)")" 400
r=$(chat t1 100 usage=80)
check "admitted and forwarded" eq "$(status_of "$r")" 200
check "the upstream saw the estimate" has "$r" '"max_tokens":"100"'
check "the usage is passed back" eq "$(header "$r" X-Usage-Tokens)" 80
check "the 200 shows the token budget: 900 of 1000 left at the reservation" \
  eq "$(header "$r" X-RateLimit-Remaining)" 900
# An underestimate: 100 reserved, 5000 used. The key owes 5000 - 1000 + 80
# (minus what refilled meanwhile): at 100/s, 41 s before an estimate of 100
# fits again. So its next request is refused, whatever the machine's speed.
t_debt=$SECONDS
r=$(chat t1 100 usage=5000)
check "the underestimated request itself is served (settled at 5000)" eq "$(status_of "$r")" 200
r=$(chat t1 100 usage=10)
check "debt: the key's next request is refused" eq "$(status_of "$r")" 429
ra=$(header "$r" Retry-After)
lo=$((41 - (SECONDS - t_debt) - 2))
check "Retry-After is the debt's payback: (5080 - 1000 + 100) / 100 = 42 s less the time since" \
  test "${ra:-0}" -ge "$lo" -a "${ra:-99}" -le 42
check "429 names the token limit" has "$r" '"limit":"tpm"'
check "another key is not in debt" eq "$(status_of "$(chat t2 100 usage=10)")" 200
# A small debt is paid back by refill: 100 reserved, 1150 used on a full
# bucket leaves -150 (plus refill); an estimate of 50 fits after about 2 s.
r=$(chat t3 100 usage=1150)
t3_admit() { [[ $(code -H 'X-API-Key: t3' -H 'X-Max-Tokens: 50' "$(url /v1/chat?usage=50)") == 200 ]]; }
check "after the refill pays a small debt back, the key is admitted again" wait_for t3_admit
rel0=$(curl -s "$(url /metrics)" | sed -n 's/^ratelimit_reserve_released_total \([0-9]*\)/\1/p')
check "an upstream failure (its 500) is passed on ..." eq "$(status_of "$(chat t4 600 fail=1)")" 500
rel1=$(curl -s "$(url /metrics)" | sed -n 's/^ratelimit_reserve_released_total \([0-9]*\)/\1/p')
check "... and its reservation released, not settled" eq "$((rel1 - rel0))" 1
check "... so its 600 tokens are back: a full burst fits" \
  eq "$(status_of "$(chat t4 1000 usage=1)")" 200

echo "== the overshoot bound (README: reservations): 4 clients, 1 key, 15 requests each"
# Every request reserves 200 and uses 400. The bound at every admission:
# used <= burst + rate x elapsed + the in-flight excess, and a key holds at
# most 2 requests in flight (per_key_inflight), so used <= 1000 + 100 x
# elapsed + 2 x 200. Elapsed is measured around the whole run (an upper
# bound on the gateway's own). 60 requests of 400 tokens ask for 24000:
# far more than the bound gives in any run shorter than 3 minutes, so some
# are refused however slow the machine.
t0=$(date +%s%N)
bg=()
for w in 1 2 3 4; do
  ( for _ in $(seq 15); do
      code -H 'X-API-Key: ob' -H 'X-Max-Tokens: 200' "$(url /v1/chat?usage=400)"; echo
    done >"$tmp/ob.$w" ) &
  bg+=("$!")
done
wait "${bg[@]}"
t1=$(date +%s%N)
served=$(cat "$tmp"/ob.* | grep -c '^200$')
refused=$(cat "$tmp"/ob.* | grep -c '^429$')
used=$((served * 400))
elapsed_ms=$(((t1 - t0) / 1000000))
bound=$((1000 + elapsed_ms / 10 + 2 * 200))
echo "      served $served (used $used tokens), refused $refused, in ${elapsed_ms} ms: bound $bound"
check "used tokens within the stated bound" test "$used" -le "$bound"
check "the key was refused once its budget and debt ran out" test "$refused" -gt 0
check "no request failed otherwise" eq "$(cat "$tmp"/ob.* | grep -cvE '^(200|429|503)$')" 0

echo "== in-flight: 2 per API key (503 + Retry-After when full)"
up /hold
bg=()
for i in 1 2; do
  curl -s -o /dev/null -w '%{http_code}' -H 'X-API-Key: k1' "$(url /v1/slow)" >"$tmp/k.$i.code" &
  bg+=("$!")
done
two_held() { [[ $(gauge ratelimit_limit_inflight per_key_inflight) == 2 ]]; }
check "two of k1's requests are held upstream" wait_for two_held
r=$(curl -si -H 'X-API-Key: k1' "$(url /v1/slow)")
check "k1's third at once: 503" eq "$(status_of "$r")" 503
check "503: Retry-After" hasre "$(header "$r" Retry-After)" '^[0-9]+$'
check "503: names the per-key limit" has "$r" '"limit":"per_key_inflight"'
check "503: RateLimit headers from the decision" has "$(header "$r" RateLimit-Policy)" '"per_key_inflight"'
up /go
wait "${bg[@]}"
check "the two held requests were served" eq "$(cat "$tmp/k.1.code") $(cat "$tmp/k.2.code")" "200 200"
check "once they are done, k1 is admitted again" eq "$(code -H 'X-API-Key: k1' "$(url /v1/slow)")" 200

echo "== in-flight: the upstream's adaptive limit, every key together"
lim=$(gauge ratelimit_limit_inflight_limit upstream)
check "the adaptive limit is within min..max" test "${lim:-0}" -ge 2 -a "${lim:-0}" -le 4
up /hold
bg=()
for ((i = 1; i <= lim; i++)); do
  curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: u$i" "$(url /v1/slow)" >"$tmp/u.$i.code" &
  bg+=("$!")
done
all_held() { [[ $(gauge ratelimit_limit_inflight upstream) == "$lim" ]]; }
check "$lim requests of $lim keys held upstream" wait_for all_held
r=$(curl -si -H 'X-API-Key: u-extra' "$(url /v1/slow)")
check "the next, from a fresh key: 503" eq "$(status_of "$r")" 503
check "503: Retry-After" hasre "$(header "$r" Retry-After)" '^[0-9]+$'
check "503: names the upstream's limit" has "$r" '"limit":"upstream"'
up /go
wait "${bg[@]}"
codes=""
for ((i = 1; i <= lim; i++)); do codes+="$(cat "$tmp/u.$i.code") "; done
check "the held requests were served" eq "$codes" "$(printf '200 %.0s' $(seq "$lim"))"
check "a request after them is admitted" eq "$(code -H 'X-API-Key: u-extra' "$(url /v1/slow)")" 200
check "nothing left in flight" eq "$(gauge ratelimit_limit_inflight upstream)" 0
kill -TERM "${gw_pid[llm]}"
rc=0
wait "${gw_pid[llm]}" || rc=$?
check "llm gateway: clean exit after SIGTERM" eq "$rc" 0
fi

# ================================================================ fleet
echo "== three gateways sharing a redis-server"
if ! command -v redis-server >/dev/null 2>&1; then
  if [[ ${RL_SKIP_REDIS:-0} == 1 ]]; then
    echo "skip  redis-server not installed (RL_SKIP_REDIS=1)"
  else
    bad "redis-server not installed (scripts/deps.sh installs it; RL_SKIP_REDIS=1 skips)"
  fi
else
  redis_port=
  # shellcheck source=../../scripts/redis-server.sh
  source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/redis-server.sh"
  if rl_redis_start "$tmp/redis.log"; then
    redis_port=$RL_REDIS_PORT
    pids+=("$RL_REDIS_PID") # stopped by cleanup, by PID
  fi
  if [[ -z $redis_port ]]; then
    bad "could not start redis-server"
  else
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
    # rate 20/s, burst 20, 3 nodes, expected-nodes 1 (the default): without
    # the global tier each node would admit 20/s + 20 on its own
    cat >"$tmp/fleet.conf" <<'EOF'
/fleet client name=fleet rate=20/s burst=20
/pay client name=pay rate=10/h burst=12 mode=exact on_failure=closed
EOF
    fleet_ports=()
    for n in 1 2 3; do
      start_gateway "node$n" --limits "$tmp/fleet.conf" --redis "redis://127.0.0.1:$redis_port" \
        --key-secret-file "$tmp/secret" --node-id "node$n" --exact-timeout-ms 10000
      fleet_ports+=("$port")
    done
    # drive the same API key through all three at once, in keep-alive batches
    drive() {
      local p=$1 end=$2 urls=()
      for _ in $(seq 40); do urls+=("http://127.0.0.1:$p/fleet"); done
      while (($(date +%s%N) < end)); do
        curl -s -o /dev/null -w '%{http_code}\n' -H 'X-API-Key: shared-key' "${urls[@]}"
      done
    }
    start_ns=$(date +%s%N)
    end_ns=$((start_ns + 3000000000))
    drivers=()
    for n in 0 1 2; do
      drive "${fleet_ports[$n]}" "$end_ns" >"$tmp/codes$n" &
      drivers+=($!)
    done
    wait "${drivers[@]}"
    took_ns=$(($(date +%s%N) - start_ns))
    admitted=$(cat "$tmp"/codes* | grep -c '^200$')
    denied=$(cat "$tmp"/codes* | grep -c '^429$')
    per_node=$(for n in 0 1 2; do grep -c '^200$' "$tmp/codes$n"; done | tr '\n' ' ')
    # README "Tolerance band": rate x W + burst + E, E = E_pre + rate x I + burst,
    # E_pre = max(0, N ceil(burst/X) - burst) + max(0, N - X) rate I / X;
    # N 3, X 1, I 0.1 s: E_pre = 40 + 4, E = 44 + 2 + 20 = 66
    bound=$(awk -v ns="$took_ns" 'BEGIN { w = ns / 1e9; printf "%d", 20 * w + 20 + 66 }')
    alone=$(awk -v ns="$took_ns" 'BEGIN { w = ns / 1e9; printf "%d", 3 * (20 * w + 20) }')
    echo "      fleet: admitted $admitted (per node: $per_node), denied $denied in" \
         "$(awk -v ns="$took_ns" 'BEGIN { printf "%.2f", ns / 1e9 }') s;" \
         "bound $bound; three unsynced nodes could admit $alone"
    check "the fleet's total stays within the tolerance band" test "$admitted" -le "$bound"
    check "every node was driven past the limit" test "$denied" -gt 0
    # mode=exact: Redis decides every request (rl_check_async, answered
    # back on each gateway's loop): 60 requests for one API key, 20 through
    # each gateway at once, admit exactly the burst of 12 (10/h: no token
    # comes back during the test). A global limit would admit up to 12 per
    # gateway before the first sync.
    pay() {
      local p=$1 urls=()
      for _ in $(seq 20); do urls+=("http://127.0.0.1:$p/pay"); done
      curl -s -o /dev/null -w '%{http_code}\n' -H 'X-API-Key: payer' "${urls[@]}"
    }
    payers=()
    for n in 0 1 2; do
      pay "${fleet_ports[$n]}" >"$tmp/pay$n" &
      payers+=($!)
    done
    wait "${payers[@]}"
    pay_ok=$(cat "$tmp"/pay* | grep -c '^200$')
    pay_429=$(cat "$tmp"/pay* | grep -c '^429$')
    pay_per_node=$(for n in 0 1 2; do grep -c '^200$' "$tmp/pay$n"; done | tr '\n' ' ')
    echo "      exact: admitted $pay_ok (per node: $pay_per_node), denied $pay_429 of 60"
    check "mode=exact: the three gateways admit exactly the burst (12)" eq "$pay_ok" 12
    check "mode=exact: every other request is a 429" eq "$pay_429" 48
    port=${fleet_ports[0]}
    r=$(curl -s -i -H 'X-API-Key: payer' "$(url /pay)")
    check "mode=exact: a 429 carries the RateLimit headers" has "$r" 'RateLimit-Policy:'
    synced() { metrics=$(curl -s "$(url /metrics)") && grep -q '^ratelimit_sync_connected 1$' <<<"$metrics"; }
    for n in 0 1 2; do
      port=${fleet_ports[$n]}
      wait_for synced
      check "node$((n + 1)): synced through Redis" has "$metrics" 'ratelimit_sync_connected 1'
    done
    echo "== a monthly quota beside a rate limit (README: Quotas)"
    # 5 a month per client; the rate limit's burst of 6 would let a sixth
    # and a seventh through: each is turned away by the quota, and its rate
    # charge is refunded, so the seventh still meets the quota, not the rate.
    # The rate limit is local: a synced one would start at a share of the
    # fleet already running here (rate / live nodes), not its burst.
    cat >"$tmp/quota.conf" <<'EOF'
/q client name=q_rate rate=1/h burst=6 mode=local
/q client name=q_month amount=5 period=month dedup=1h on_failure=closed
/idem client name=i_month amount=3 period=month dedup=1h on_failure=closed
EOF
    start_gateway quota --limits "$tmp/quota.conf" --redis "redis://127.0.0.1:$redis_port" \
      --key-secret-file "$tmp/secret" --node-id quota1
    codes=""
    for _ in 1 2 3 4 5; do codes+="$(code -H 'X-API-Key: plan-user' "$(url /q)") "; done
    check "five requests within the month's quota" eq "$codes" "200 200 200 200 200 "
    r=$(curl -si -H 'X-API-Key: plan-user' "$(url /q)")
    check "the sixth is 429" eq "$(status_of "$r")" 429
    check "... for the quota" has "$r" '"error":"quota exhausted","quota":"q_month","used":5,"amount":5'
    check "... with Retry-After up to the month's reset" hasre "$r" $'Retry-After: [0-9]+\r'
    retry_s=$(grep -i '^Retry-After:' <<<"$r" | tr -dc '0-9')
    check "... at most 31 days" test "$retry_s" -le 2678400
    r=$(curl -si -H 'X-API-Key: plan-user' "$(url /q)")
    check "the seventh meets the quota too: the rate charges were refunded" \
      has "$r" '"error":"quota exhausted"'
    check "another client has its own quota" eq "$(code -H 'X-API-Key: other' "$(url /q)")" 200
    echo "== a client's retry with the same Idempotency-Key is charged once"
    # 3 a month; the charge goes through rl_quota_charge_async (the loop
    # never waits for Redis). The request id is the client's key, scoped to
    # the client; without one the gateway makes its own (each charged).
    idem() { curl -si -H 'X-API-Key: idem-user' "$@" "$(url /idem)"; }
    r=$(idem -H 'Idempotency-Key: "k-a"')
    check "a first Idempotency-Key is charged" eq "$(status_of "$r")" 200
    check "... 2 left" has "$r" $'X-Quota-Remaining: 2\r'
    check "... not a duplicate" test "$(grep -ci '^X-Quota-Duplicate' <<<"$r")" -eq 0
    r=$(idem -H 'Idempotency-Key: "k-a"')
    check "its retry is allowed again" eq "$(status_of "$r")" 200
    check "... flagged a duplicate (RL_FLAG_DUPLICATE)" has "$r" $'X-Quota-Duplicate: true\r'
    check "... and not charged: still 2 left" has "$r" $'X-Quota-Remaining: 2\r'
    r=$(idem)
    check "a request without a key is charged" has "$r" $'X-Quota-Remaining: 1\r'
    r=$(idem -H 'Idempotency-Key: k-b')
    check "another key is charged: 0 left" has "$r" $'X-Quota-Remaining: 0\r'
    r=$(idem -H 'Idempotency-Key: k-c')
    check "over the quota: 429" eq "$(status_of "$r")" 429
    check "... with Retry-After up to the reset" hasre "$r" $'Retry-After: [0-9]+\r'
    r=$(idem -H 'Idempotency-Key: k-c')
    check "its retry gets the same 429" eq "$(status_of "$r")" 429
    check "... flagged a duplicate" has "$r" $'X-Quota-Duplicate: true\r'
    r=$(idem -H 'Idempotency-Key: "k-a"')
    check "the first key, retried after exhaustion, gets its first answer" \
      eq "$(status_of "$r")" 200
    check "... with its first figures" has "$r" $'X-Quota-Remaining: 2\r'
    r=$(curl -si -H 'X-API-Key: other-idem' -H 'Idempotency-Key: "k-a"' "$(url /idem)")
    check "another client's equal key is its own: charged" has "$r" $'X-Quota-Remaining: 2\r'
    check "... not a duplicate" test "$(grep -ci '^X-Quota-Duplicate' <<<"$r")" -eq 0
    check "a malformed Idempotency-Key is a 400" \
      eq "$(code -H 'X-API-Key: idem-user' -H 'Idempotency-Key: a b' "$(url /idem)")" 400
    check "an over-long one too" eq "$(code -H "Idempotency-Key: $(printf 'k%.0s' {1..65})" \
      "$(url /idem)")" 400
    m=$(curl -s "$(url /metrics)")
    check "duplicates counted in the metrics" has "$m" 'ratelimit_quota_duplicates_total 3'
    kill -TERM "${gw_pid[quota]}"
    rc=0
    wait "${gw_pid[quota]}" || rc=$?
    check "quota gateway: clean exit after SIGTERM" eq "$rc" 0
    for n in 1 2 3; do
      kill -TERM "${gw_pid[node$n]}"
    done
    for n in 1 2 3; do
      rc=0
      wait "${gw_pid[node$n]}" || rc=$?
      check "node$n: clean exit after SIGTERM (shares handed back)" eq "$rc" 0
    done
    echo "== the secret file: one final line ending is not the secret's (docs/fleet.md)"
    # Each gateway publishes its secret's fingerprint in the node registry:
    # a file written with echo (or with CRLF) holds the inline secret, and a
    # second newline is part of the secret.
    s=gateway-secret-0123456789
    printf '%s\n' "$s" >"$tmp/sec-nl"
    printf '%s\r\n' "$s" >"$tmp/sec-crlf"
    printf '%s\n\n' "$s" >"$tmp/sec-nlnl"
    sec_gw() { # sec_gw NAME SECRET-OPTION VALUE
      start_gateway "$1" --limits "$tmp/fleet.conf" --redis "redis://127.0.0.1:$redis_port" \
        --key-prefix sec --node-id "$1" "$2" "$3"
    }
    sec_gw inline --key-secret "$s"
    sec_gw nl --key-secret-file "$tmp/sec-nl"
    sec_gw crlf --key-secret-file "$tmp/sec-crlf"
    sec_gw nlnl --key-secret-file "$tmp/sec-nlnl"
    sec_gw inline_nl --key-secret "$s"$'\n'
    fp_of() { redis-cli -p "$redis_port" hgetall '{sec:v1}:nodes' |
      awk -v n="$1" 'f { if (match($0, / fp=[0-9a-f]+/)) print substr($0, RSTART + 4, RLENGTH - 4); f = 0 }
                     index($0, n ":") == 1 { f = 1 }'; }
    all_published() { local n; for n in inline nl crlf nlnl inline_nl; do [[ -n $(fp_of "$n") ]] || return 1; done; }
    check "five gateways published a fingerprint" wait_for all_published
    check "a secret file with a final \\n is the inline secret" eq "$(fp_of nl)" "$(fp_of inline)"
    check "... with a final \\r\\n too" eq "$(fp_of crlf)" "$(fp_of inline)"
    check "a second newline is the secret's" eq "$(fp_of nlnl)" "$(fp_of inline_nl)"
    check "... so that secret is another one" test "$(fp_of nlnl)" != "$(fp_of inline)"
    for n in inline nl crlf nlnl inline_nl; do kill -TERM "${gw_pid[$n]}"; done
    for n in inline nl crlf nlnl inline_nl; do wait "${gw_pid[$n]}" 2>/dev/null; done
  fi
fi

echo "== sanitizer reports in the gateways' logs (ASan/UBSan/TSan builds)"
no_sanitizer_report() {
  ! grep -E 'ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|runtime error:' "$1"
}
for f in "$tmp"/local.log "$tmp"/node*.log; do
  [[ -f $f ]] || continue
  check "$(basename "$f" .log): no sanitizer report" no_sanitizer_report "$f"
done

echo "gateway: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
