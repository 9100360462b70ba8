# SPDX-License-Identifier: MIT
"""nginx serving a static file: no limiter, nginx's limit_req, this module
(local-only and global), in one run, rounds interleaved; wrk's requests/s
and p99, the median of the rounds; then what the global rounds made the
redis-server do (its CPU time and report script calls, per second).

    RL_NGINX_MODULE=/path/ngx_http_ratelimit_module.so \
        python3 bench_nginx.py [--seconds 5] [--rounds 3] [--conns 32] [--keys 1000] \
        [--controls] [--boost]

redis-server runs in a session of its own (see main). Every server
listens with reuseport: without it the kernel hands wrk's
connections to whichever worker waits first, and the split between the two
workers changed from run to run (32/0, 31/1, 25/7, 16/16 measured with ss),
which moved p99 more than the limiter did.

--controls adds two rows that tell the box from the module when Redis
shares the workers' cores: local-only beside a process that takes about
what the global rounds make redis-server take (a 2-ms spin every 31 ms or
so: 34 wake-ups/s, 6-7% of a core), and global with redis-server at
SCHED_IDLE, so that it never preempts a worker or wrk (it runs when a core
has nothing else to do). If the second row's p99 falls to local-only's,
the global row's extra p99 is the co-located Redis, not the workers; the
first row says whether any process taking that much CPU would do it.

--boost (root) sets the scheduler autogroup of the bench, its nginx servers
and redis-server to nice -20, so that other sessions' jobs on a shared box
(each session is an autogroup, weighted alike whatever its tasks' nice)
take little CPU from the rounds. It changes nothing between the rows.

Every limit is set far above the offered rate so that every request is
admitted: the figure is what the check costs, not what denials save. The
key is the X-Key header, drawn by wrk from --keys distinct values (limit_req
gets a zone sized for them). Numbers, not gates: timing never decides a test.
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_nginx import Nginx, Redis  # noqa: E402

WRK_KEYS = r"""
local n = %d
local i = 0
request = function()
  i = (i + 7919) %% n
  return wrk.format("GET", "/", { ["X-Key"] = "key-" .. i })
end
"""


def wrk(port, seconds, conns, script):
    out = subprocess.run(["wrk", "-t2", f"-c{conns}", f"-d{seconds}s", "--latency", "-s",
                          script, f"http://127.0.0.1:{port}/"],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    p99_ms = float(m[1]) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m[2]]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, p99_ms, int(non2xx[1]) if non2xx else 0


BURNER = r"""
import time
while True:
    time.sleep(0.029)
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
"""


def set_idle(pids, idle):
    """SCHED_IDLE (or back to SCHED_OTHER) for these processes; the ones gone are skipped."""
    policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
    for p in pids:
        try:
            os.sched_setscheduler(p, policy, os.sched_param(0))
        except ProcessLookupError:
            pass


def boost(pids):
    """Nice -20 for the autogroups (sessions) of these processes."""
    for p in pids:
        with open(f"/proc/{p}/autogroup", "w") as f:
            f.write("-20")


def redis_work(redis):
    """The redis-server's CPU seconds so far and its script calls (EVALSHA)."""
    with open(f"/proc/{redis.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with socket.create_connection(("127.0.0.1", redis.port), timeout=5) as c:
        c.sendall(b"INFO commandstats\r\n")
        data = b""
        while b"\r\n" not in data:  # the bulk reply's $<length> line
            data += c.recv(65536)
        head, _, data = data.partition(b"\r\n")
        while len(data) < int(head[1:]) + 2:
            data += c.recv(65536)
    m = re.search(rb"cmdstat_evalsha:calls=(\d+)", data)
    return cpu, int(m[1]) if m else 0


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--controls", action="store_true",
                    help="add the two control rows (see the module's doc)")
    ap.add_argument("--boost", action="store_true",
                    help="autogroup nice -20 for the bench (root; see the module's doc)")
    return ap.parse_args()


def server_configs(a, redis, secret):
    """Each server's (http, server) configuration, by name."""
    huge = "rate=100000000/s burst=100000000"
    return {
        "none": ("", ""),
        "limit_req": ("limit_req_zone $http_x_key zone=z:%dm rate=100000000r/s;"
                      % max(1, a.keys // 4000 + 1),
                      "location / { limit_req zone=z burst=100000000 nodelay; }"),
        "ratelimit local": (f"ratelimit_limit name=b {huge} mode=local;",
                            "location / { ratelimit b $http_x_key; }"),
        "ratelimit global": (f"ratelimit_redis redis://127.0.0.1:{redis.port};\n"
                             f"ratelimit_secret_file {secret};\n"
                             "ratelimit_expected_nodes 1;\n"  # one server: one node
                             f"ratelimit_limit name=b {huge};",
                             "location / { ratelimit b $http_x_key; }"),
    }


def one_row(a, row, beside, server, redis, script, work):
    """One wrk run of a row, with what runs beside it; the global row adds
    what it made redis-server do to work ([cpu seconds, script calls])."""
    burner = None
    idle = []
    if beside == "burner":
        burner = subprocess.Popen([sys.executable, "-c", BURNER])
        time.sleep(0.1)
    elif beside == "idle":
        idle = [redis.proc.pid]
        set_idle(idle, True)
    try:
        if row == "ratelimit global":
            cpu0, calls0 = redis_work(redis)
        got = wrk(server.port, a.seconds, a.conns, script)
        if row == "ratelimit global":
            cpu1, calls1 = redis_work(redis)
            work[0] += cpu1 - cpu0
            work[1] += calls1 - calls0
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
        set_idle(idle, False)
    return got


def report(a, res, redis_cpu, redis_calls):
    base = statistics.median(x[0] for x in res["none"])
    print(f"{'config':<26} {'req/s':>10} {'vs none':>8} {'p99 ms':>8} {'non-2xx':>8}  "
          "p99 of each round")
    for row, got in res.items():
        rps = statistics.median(x[0] for x in got)
        p99 = statistics.median(x[1] for x in got)
        bad = sum(x[2] for x in got)
        each = " ".join(f"{x[1]:.1f}" for x in got)
        print(f"{row:<26} {rps:>10.0f} {100 * rps / base:>7.1f}% {p99:>8.2f} {bad:>8}  {each}")
    # The sync's cost outside nginx: what the global rounds made Redis do.
    span = a.rounds * a.seconds
    print(f"global: redis-server CPU {100 * redis_cpu / span:.1f}% of a core, "
          f"{redis_calls / span:.0f} report script calls/s, "
          f"{1000 * redis_cpu / max(redis_calls, 1):.2f} ms of CPU a call")


def main():
    a = parse_args()
    tmp = tempfile.mkdtemp(prefix="rl-bench-")
    script = os.path.join(tmp, "keys.lua")
    with open(script, "w") as f:
        f.write(WRK_KEYS % a.keys)
    secret = os.path.join(tmp, "secret")
    with open(secret, "w") as f:
        f.write("bench-secret-0123456789\n")
    # In a session (so a scheduler autogroup) of its own, as nginx is: one
    # shared with wrk made a Redis script's run and wrk take turns on a
    # core for tens of ms (global rounds' p99 57 ms against 10 apart).
    redis = Redis(own_session=True)
    configs = server_configs(a, redis, secret)
    # Each row: its server's config name, and what runs beside it.
    rows = {name: (name, None) for name in configs}
    if a.controls:
        rows["local + Redis-like CPU"] = ("ratelimit local", "burner")
        rows["global, Redis idle-class"] = ("ratelimit global", "idle")
    servers = {}
    try:
        for name, (http_conf, server_conf) in configs.items():
            servers[name] = Nginx(http_conf, server_conf=server_conf, listen_opts="reuseport")
            servers[name].start()
        if a.boost:
            boost([os.getpid(), redis.proc.pid] + [n.master_pid() for n in servers.values()])
        res = {row: [] for row in rows}
        work = [0.0, 0.0]
        for r in range(a.rounds):
            for row, (name, beside) in rows.items():
                res[row].append(one_row(a, row, beside, servers[name], redis, script, work))
                print(f"round {r + 1} {row}: {res[row][-1][0]:.0f} req/s "
                      f"p99 {res[row][-1][1]:.2f} ms", file=sys.stderr)
        report(a, res, work[0], work[1])
    finally:
        for n in servers.values():
            n.stop()
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
