# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# The one redis-server launcher of the shell scripts (the C suites and
# benches have tests/redis_harness.c): a private server on a free loopback
# port, without persistence, stopped by its PID. Source this file, then
#
#   rl_redis_start LOG [redis-server options...]
#       Start one; its output goes to LOG, its files (if any) beside LOG,
#       so LOG belongs in a temporary directory. Sets RL_REDIS_PORT and
#       RL_REDIS_PID. Status 1, with LOG shown on stderr, when five tries
#       failed (a port taken between the pick and the bind is retried).
#   rl_redis_stop
#       Stop it: TERM by PID, then wait for it. Safe to repeat, and to call
#       from an EXIT trap.
#
# Needs redis-server and redis-cli on PATH (the caller checks: what a
# missing tool means, a skip or a failure, is the caller's); python3 picks
# the port when present.

RL_REDIS_PORT=
RL_REDIS_PID=

# A loopback port nothing listens on now: the kernel's pick for port 0, or
# a random one that refuses a connection.
rl_redis_free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    return
  fi
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

rl_redis_start() {
  local log=$1 try deadline port pid
  shift
  for try in 1 2 3 4 5; do
    port=$(rl_redis_free_port)
    # --dir: the log's directory (a temporary one), never the caller's
    # working directory, which may be the source tree.
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$(dirname "$log")" --daemonize no "$@" >"$log" 2>&1 &
    pid=$!
    # Up, or gone (the port was taken): at most 30 s, the last look after
    # the deadline.
    deadline=$((SECONDS + 30))
    while :; do
      if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
        RL_REDIS_PORT=$port
        RL_REDIS_PID=$pid
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      ((SECONDS > deadline)) && break
      sleep 0.05
    done
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  echo "redis-server.sh: cannot start redis-server (tried $try ports):" >&2
  cat "$log" >&2
  return 1
}

rl_redis_stop() {
  [[ -n $RL_REDIS_PID ]] || return 0
  kill -TERM "$RL_REDIS_PID" 2>/dev/null
  wait "$RL_REDIS_PID" 2>/dev/null
  RL_REDIS_PID=
  RL_REDIS_PORT=
  return 0
}
