# SPDX-License-Identifier: MIT
"""ngx_http_ratelimit_module against a real nginx and real clients.

    RL_NGINX_MODULE=/path/ngx_http_ratelimit_module.so python3 -m unittest -v test_nginx.py

Each test starts its own nginx (private prefix, free loopback port) and,
for the fleet tests, its own redis-server; wrk drives the load tests. Every
wait polls for the event with a 30 s deadline; nothing sleeps a fixed time
and then asserts.
"""
import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

MODULE = os.environ.get("RL_NGINX_MODULE", "")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
WAIT_S = 30.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, what, deadline=WAIT_S):
    end = time.monotonic() + deadline
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def get(port, path, headers=None):
    """One request on its own connection: (status, headers dict, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


class Nginx:
    """An nginx with the module under a private prefix."""

    def __init__(self, http_conf, workers=2, server_conf="", extra_main="", listen_opts=""):
        self.prefix = tempfile.mkdtemp(prefix="rl-nginx-")
        os.chmod(self.prefix, 0o755)  # workers may run as another user
        os.makedirs(os.path.join(self.prefix, "html"))
        with open(os.path.join(self.prefix, "html", "index.html"), "w") as f:
            f.write("ok\n")
        self.port = free_port()
        self.conf = os.path.join(self.prefix, "nginx.conf")
        self.workers = workers
        self.listen_opts = listen_opts  # e.g. "reuseport" (bench_nginx.py)
        self.write(http_conf, server_conf, extra_main)
        self.running = False

    def write(self, http_conf, server_conf="", extra_main=""):
        p = self.prefix
        with open(self.conf, "w") as f:
            f.write(f"""
load_module {MODULE};
worker_processes {self.workers};
pid {p}/nginx.pid;
error_log {p}/error.log info;
{extra_main}
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {p}/body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    {http_conf}
    server {{
        listen 127.0.0.1:{self.port} {self.listen_opts};
        root {p}/html;
        location = /metrics {{ ratelimit_metrics; }}
        {server_conf}
    }}
}}
""")

    def cmd(self, *args):
        return subprocess.run([NGINX, "-p", self.prefix, "-c", self.conf, "-e",
                               os.path.join(self.prefix, "error.log"), *args],
                              capture_output=True, text=True, timeout=60)

    def test_config(self):
        r = self.cmd("-t")
        return r.returncode, r.stdout + r.stderr

    def start(self):
        r = self.cmd()
        if r.returncode != 0:
            raise AssertionError("nginx failed to start: " + r.stderr + self.error_log())
        self.running = True
        wait_until(lambda: self._answers(), "nginx to answer")
        wait_until(lambda: len(self.worker_pids()) == self.workers, "the workers")

    def _answers(self):
        try:
            get(self.port, "/metrics")
            return True
        except OSError:
            return False

    def master_pid(self):
        with open(os.path.join(self.prefix, "nginx.pid")) as f:
            return int(f.read())

    def worker_pids(self):
        r = subprocess.run(["pgrep", "-P", str(self.master_pid())], capture_output=True,
                           text=True)
        return [int(x) for x in r.stdout.split()]

    def error_log(self):
        try:
            with open(os.path.join(self.prefix, "error.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if self.running:
            try:
                pid = self.master_pid()
                os.kill(pid, signal.SIGQUIT)
                wait_until(lambda: not _alive(pid), "nginx to exit")
            except (OSError, ValueError):
                pass
            self.running = False
        shutil.rmtree(self.prefix, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie of ours counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


class Redis:
    def __init__(self, own_session=False):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rl-redis-")
        # own_session: a scheduler autogroup of its own, apart from the
        # caller's (bench_nginx.py: not sharing one with wrk).
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=own_session)
        wait_until(self._up, "redis-server")

    def _up(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)

    def command(self, *args):
        """One command's reply: bytes, an int, None or a list of them."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            req = b"*%d\r\n" % len(args)
            for a in args:
                a = a.encode() if isinstance(a, str) else a
                req += b"$%d\r\n%s\r\n" % (len(a), a)
            s.sendall(req)
            return _resp(s.makefile("rb"))


def _resp(f):
    line = f.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest
    if kind == b"-":
        raise AssertionError("redis: " + rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        return None if int(rest) < 0 else f.read(int(rest) + 2)[:-2]
    return None if int(rest) < 0 else [_resp(f) for _ in range(int(rest))]


def registry_fingerprints(redis, prefix="rl"):
    """node id -> the key_secret fingerprint its registry record publishes."""
    flat = redis.command("HGETALL", "{%s:v1}:nodes" % prefix)
    out = {}
    for field, value in zip(flat[0::2], flat[1::2]):
        m = re.search(rb"(?:^| )fp=([0-9a-f]+)", value)
        if m:
            out[field.rsplit(b":", 1)[0].decode()] = m.group(1).decode()
    return out


def metric_sum(text, name, label_filter=""):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and label_filter in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def metric_value(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def exact_pending(n):
    """The answering worker's requests waiting for Redis now."""
    return metric_value(get(n.port, "/metrics")[2].decode(), "ratelimit_nginx_exact_pending")


def _status_or_none(port, path):
    try:
        return get(port, path)[0]
    except OSError:
        return None


def write_secret(test, text):
    """A secret file holding text, in a directory the test removes."""
    d = tempfile.mkdtemp(prefix="rl-secret-")
    test.addCleanup(shutil.rmtree, d, True)
    path = os.path.join(d, "secret")
    with open(path, "w") as f:
        f.write(text)
    return path


def nginx_t(http_conf, server_conf=""):
    """nginx -t of a configuration: (exit status, output)."""
    n = Nginx(http_conf, server_conf=server_conf)
    try:
        return n.test_config()
    finally:
        n.stop()


def wait_new_workers(n, old):
    """After a reload: none of the old workers is left, and both new ones run."""
    try:
        wait_until(lambda: set(n.worker_pids()).isdisjoint(old) and
                   len(n.worker_pids()) == 2, "the new workers")
    except AssertionError:
        print(n.error_log(), old, n.worker_pids(), file=sys.stderr)
        raise


def check_batches_until_both_workers(test, n, end):
    """Concurrent clients until a batch was served by both workers: each
    batch's key (X-Api-Key, burst 5) admits exactly its burst."""
    both = False
    batch = 0
    while not both:
        test.assertLess(time.monotonic(), end, "no batch reached both workers")
        key = f"batch-{batch}"
        batch += 1
        with ThreadPoolExecutor(max_workers=16) as ex:
            res = list(ex.map(lambda _: get(n.port, "/", {"X-Api-Key": key}), range(32)))
        test.assertEqual(sum(1 for st, _, _ in res if st == 200), 5, key)
        test.assertEqual(sum(1 for st, _, _ in res if st == 429), 27, key)
        both = len({h["x-worker"] for _, h, _ in res}) == 2


@unittest.skipUnless(MODULE and os.path.exists(MODULE), "RL_NGINX_MODULE not set")
class TestModule(unittest.TestCase):
    def nginx(self, *a, **kw):
        n = Nginx(*a, **kw)
        self.addCleanup(n.stop)
        return n

    def test_200s_then_429_with_headers(self):
        n = self.nginx("ratelimit_limit name=api rate=5/m burst=5 mode=local;",
                       server_conf="location / { ratelimit api $http_x_api_key; }")
        n.start()
        statuses = []
        for _ in range(12):
            st, h, _ = get(n.port, "/", {"X-Api-Key": "k1"})
            statuses.append(st)
            if st == 200:
                self.assertEqual(h.get("x-ratelimit-limit"), "5")
                self.assertIn("ratelimit-policy", h)
                self.assertIn("ratelimit", h)
                self.assertNotIn("retry-after", h)
            else:
                self.assertEqual(st, 429)
                self.assertGreaterEqual(int(h["retry-after"]), 1)
                self.assertEqual(h.get("x-ratelimit-remaining"), "0")
                self.assertIn('"api"', h["ratelimit-policy"])
        # The workers share one instance (rl_open_shared): the host holds
        # the limit, whichever worker each connection reaches.
        self.assertEqual(statuses, [200] * 5 + [429] * 7)
        # Another key has its own bucket; an empty key is not limited.
        self.assertEqual(get(n.port, "/", {"X-Api-Key": "k2"})[0], 200)
        for _ in range(20):
            self.assertEqual(get(n.port, "/")[0], 200)

    def test_return_bypasses_ratelimit_and_the_documented_fix_enforces(self):
        # README, "return bypasses every rule": `return` answers in the
        # rewrite phase, before the access phase where the module charges,
        # so a location that returns is never limited. The fixes the README
        # gives enforce: a content handler (here the static file), or the
        # rule in a location that proxies to the handler that returns.
        backend = free_port()
        n = self.nginx(
            "ratelimit_limit name=r rate=1/h burst=3 mode=local;\n"
            f"server {{ listen 127.0.0.1:{backend}; return 200 \"backend\\n\"; }}",
            server_conf="location = /returns { ratelimit r bypass; return 200 \"ok\\n\"; }\n"
                        "location = /index.html { ratelimit r static; }\n"
                        "location = /proxied { ratelimit r proxied; "
                        f"proxy_pass http://127.0.0.1:{backend}/; }}")
        n.start()
        self.assertEqual([get(n.port, "/returns")[0] for _ in range(6)], [200] * 6)
        self.assertEqual([get(n.port, "/index.html")[0] for _ in range(6)], [200] * 3 + [429] * 3)
        st = [get(n.port, "/proxied") for _ in range(6)]
        self.assertEqual([x[0] for x in st], [200] * 3 + [429] * 3)
        self.assertEqual(st[0][2], b"backend\n")

    def test_the_readme_minimal_config_runs(self):
        # The module README's first configuration, with its paths made this
        # test's: load_module by absolute path, events, pid, a private prefix.
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.md")) as f:
            readme = f.read()
        conf = re.search(r"```nginx\n(.*?)```", readme, re.S).group(1)
        self.assertIn("load_module /", conf)
        self.assertIn("pid ", conf)
        self.assertIn("events", conf)
        prefix = tempfile.mkdtemp(prefix="rl-nginx-readme-")
        self.addCleanup(shutil.rmtree, prefix, True)
        os.chmod(prefix, 0o755)  # workers may run as another user
        port = free_port()
        conf = (conf.replace("/usr/lib/nginx/modules/ngx_http_ratelimit_module.so", MODULE)
                .replace("/tmp/rl-nginx", prefix).replace("8080", str(port)))
        path = os.path.join(prefix, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        os.makedirs(os.path.join(prefix, "html"), exist_ok=True)
        with open(os.path.join(prefix, "html", "index.html"), "w") as f:
            f.write("ok\n")
        r = subprocess.run([NGINX, "-p", prefix, "-c", path, "-e", os.path.join(prefix, "error.log")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        pidfile = os.path.join(prefix, "nginx.pid")

        def stop():
            with open(pidfile) as pf:
                pid = int(pf.read())
            os.kill(pid, signal.SIGQUIT)
            wait_until(lambda: not _alive(pid), "nginx to exit")
        self.addCleanup(stop)
        wait_until(lambda: os.path.exists(pidfile), "the pid file")
        statuses = [wait_until(lambda: _status_or_none(port, "/"), "nginx to answer")]
        statuses += [get(port, "/")[0] for _ in range(11)]
        self.assertIn(429, statuses)
        self.assertEqual(statuses[0], 200)

    def test_two_workers_burst_of_5_admits_5(self):
        n = self.nginx("ratelimit_limit name=api rate=1/h burst=5 mode=local;",
                       server_conf="location / { ratelimit api $http_x_api_key; "
                                   "add_header X-Worker $pid always; }")
        n.start()
        check_batches_until_both_workers(self, n, time.monotonic() + WAIT_S)

    def test_reload_keeps_the_buckets(self):
        conf = "ratelimit_limit name=api rate=1/h burst=5 mode=local;"
        n = self.nginx(conf, server_conf="location / { ratelimit api k; }")
        n.start()
        self.assertEqual([get(n.port, "/")[0] for _ in range(3)], [200] * 3)
        old = set(n.worker_pids())
        # A changed configuration: the limit is updated in place, its keys
        # keep what they used (3 tokens: 7 of the new 10 left; a fresh
        # bucket would admit 10).
        n.write("ratelimit_limit name=api rate=2/h burst=10 mode=local;\n"
                "ratelimit_limit name=new rate=1/h burst=1 mode=local;",
                server_conf="location / { ratelimit api k; }")
        r = n.cmd("-s", "reload")
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_new_workers(n, old)
        self.assertEqual([get(n.port, "/")[0] for _ in range(8)], [200] * 7 + [429])
        self.assertNotIn("[emerg]", n.error_log())

    def test_one_worker_burst_admits_exactly_burst(self):
        n = self.nginx("ratelimit_limit name=api rate=5/m burst=5 mode=local;",
                       workers=1, server_conf="location / { ratelimit api $http_x_api_key; }")
        n.start()
        st = [get(n.port, "/", {"X-Api-Key": "k"})[0] for _ in range(10)]
        self.assertEqual(st, [200] * 5 + [429] * 5)

    def test_status_code_and_headers_off(self):
        n = self.nginx("ratelimit_limit name=api rate=1/m burst=1 mode=local;", workers=1,
                       server_conf="location / { ratelimit api k; ratelimit_status 503; "
                                   "ratelimit_headers off; }")
        n.start()
        st, h, _ = get(n.port, "/")
        self.assertEqual(st, 200)
        self.assertNotIn("x-ratelimit-limit", h)
        st, h, _ = get(n.port, "/")
        self.assertEqual(st, 503)
        self.assertNotIn("retry-after", h)

    def test_all_or_nothing_across_rules(self):
        # A request denied by one rule charges none of the others.
        n = self.nginx("ratelimit_limit name=a rate=3/h burst=3 mode=local;\n"
                       "ratelimit_limit name=b rate=3/h burst=3 mode=local;", workers=1,
                       server_conf="location / { ratelimit a $arg_a; ratelimit b $arg_b; }")
        n.start()
        for _ in range(3):
            self.assertEqual(get(n.port, "/?a=x&b=y")[0], 200)
        self.assertEqual(get(n.port, "/?a=z&b=y")[0], 429)  # b denies; a=z not charged
        for i in range(3):
            self.assertEqual(get(n.port, f"/?a=z&b=w{i}")[0], 200)
        self.assertEqual(get(n.port, "/?a=z&b=w9")[0], 429)

    def test_cost(self):
        n = self.nginx("ratelimit_limit name=a rate=10/h burst=10 mode=local;", workers=1,
                       server_conf="location / { ratelimit a k cost=4; }")
        n.start()
        self.assertEqual([get(n.port, "/")[0] for _ in range(3)], [200, 200, 429])

    def test_dry_run_logs_never_denies(self):
        n = self.nginx("ratelimit_limit name=api rate=1/h burst=1 mode=local;", workers=1,
                       server_conf="location / { ratelimit api k; ratelimit_dry_run on; "
                                   "ratelimit_log_level warn; }")
        n.start()
        self.assertEqual([get(n.port, "/")[0] for _ in range(4)], [200] * 4)
        wait_until(lambda: "would deny (dry run) by limit \"api\"" in n.error_log(),
                   "the dry-run log line")

    def test_internal_redirect_is_not_charged_twice(self):
        n = self.nginx("ratelimit_limit name=api rate=2/h burst=2 mode=local;", workers=1,
                       server_conf="location / { ratelimit api k; try_files /nope @named; }\n"
                                   "location @named { ratelimit api k; }")
        n.start()
        # try_files -> @named is an internal redirect: one charge per request
        # (a second charge there would deny the second request).
        self.assertEqual([get(n.port, "/")[0] for _ in range(3)], [200, 200, 429])

    def test_metrics_answer_for_the_host(self):
        n = self.nginx("ratelimit_limit name=api rate=1/h burst=3 mode=local;",
                       server_conf="location / { ratelimit api k; }")
        n.start()
        for _ in range(10):
            get(n.port, "/")
        # Whichever worker answers, the figures are the host's.
        for _ in range(6):
            text = get(n.port, "/metrics")[2].decode()
            self.assertEqual(metric_sum(text, "ratelimit_limit_admitted_total"), 3)
            self.assertEqual(metric_sum(text, "ratelimit_limit_denied_total"), 7)
            helps = [l for l in text.splitlines() if l.startswith("# HELP ")]
            self.assertEqual(len(helps), len(set(helps)), "a family's HELP twice")


def check_exposition(test, text):
    """One # HELP per family, samples under their family, and no worker
    label: the text is the host's shared instance's."""
    helps = [l for l in text.splitlines() if l.startswith("# HELP ")]
    test.assertEqual(len(helps), len(set(helps)), "a family's HELP twice")
    fam = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            fam = line.split()[2]
        elif line and not line.startswith("#"):
            test.assertTrue(line.startswith(fam), line)
            test.assertNotIn('worker="', line)


BAD_CONFIGS = [
    ("ratelimit_limit name=api rate=5/x;", "", "ratelimit_limit", "5/x"),
    ("ratelimit_limit name=api rate=5/s bogus=1;", "", "ratelimit_limit", "bogus"),
    ("ratelimit_limit name=api rate=5/s;", "location / { ratelimit nope $uri; }",
     "ratelimit", "nope"),
    ("ratelimit_limit name=api rate=5/s burst=2;", "location / { ratelimit api $uri cost=3; }",
     "ratelimit", "cost=3"),
    ("ratelimit_limit name=api rate=5/s;", "location / { ratelimit api $uri weight=3; }",
     "ratelimit", "weight=3"),
    ("ratelimit_secret_file /nonexistent/rl-secret;", "", "ratelimit_secret_file",
     "/nonexistent/rl-secret"),
    ("ratelimit_redis redis://127.0.0.1:1;", "", "ratelimit_redis", "ratelimit_secret_file"),
    ("ratelimit_limit name=api rate=5/s;\nratelimit_limit name=api rate=6/s;", "",
     "ratelimit_limit", "api"),
    ("ratelimit_node_id bad/id;", "", "ratelimit_node_id", "bad/id"),
    # The library's lengths: a node id of 64 bytes, a key prefix of 32.
    ("ratelimit_node_id " + "n" * 65 + ";", "", "ratelimit_node_id", "1 to 64 bytes"),
    ("ratelimit_key_prefix " + "p" * 33 + ";", "", "ratelimit_key_prefix", "1 to 32 bytes"),
    ("ratelimit_key_prefix app/1;", "", "ratelimit_key_prefix", "app/1"),
    ("ratelimit_key_prefix a;\nratelimit_key_prefix b;", "", "ratelimit_key_prefix",
     "duplicate"),
    # The library's URL parser names the part at fault (no connection made).
    ("ratelimit_redis http://127.0.0.1:6379;", "", "ratelimit_redis", 'scheme "http"'),
    ("ratelimit_redis redis://127.0.0.1:99999;", "", "ratelimit_redis", "port"),
    ("ratelimit_redis redis://127.0.0.1:6379/abc;", "", "ratelimit_redis", "db"),
    ("ratelimit_limit name=a rate=5/s mode=exact;\nratelimit_limit name=b rate=5/s mode=exact;",
     "location / { ratelimit a $uri; ratelimit b $uri; }", "ratelimit", '"b"'),
    ("ratelimit_exact_timeout 61s;", "", "ratelimit_exact_timeout", "60s"),
    # Exact and tiered need Redis: refused, naming the limit, never per worker.
    ("ratelimit_limit name=login rate=5/m burst=5 mode=exact;", "", "ratelimit_limit",
     'mode=exact needs Redis, and there is no ratelimit_redis'),
    ("ratelimit_limit name=t rate=5/m mode=tiered;", "", "ratelimit_limit",
     "mode=tiered needs Redis"),
    # Quotas: the spec's word at fault, and the rules that use them.
    ("ratelimit_quota name=p amount=5 perod=month;", "", "ratelimit_quota", "perod"),
    ("ratelimit_quota name=p amount=5 period=fortnight;", "", "ratelimit_quota", "fortnight"),
    ("ratelimit_quota name=p amount=5;", "location / { ratelimit p $uri; }", "ratelimit_quota",
     "ratelimit_redis"),
    ("ratelimit_limit name=api rate=5/s;\nratelimit_quota name=api amount=5;", "",
     "ratelimit_quota", '"api"'),
    ("ratelimit_quota name=p amount=5;\nratelimit_quota name=p amount=6;", "",
     "ratelimit_quota", '"p"'),
    ("ratelimit_quota name=p amount=5;", "location / { ratelimit p $uri cost=6; }",
     "ratelimit", "cost=6"),
    ("ratelimit_limit name=api rate=5/s;", "location / { ratelimit api $uri id=$http_x; }",
     "ratelimit", "id=$http_x"),
    ("ratelimit_quota name=p amount=5;", "location / { ratelimit p $uri idem=$http_x; }",
     "ratelimit", "idem=$http_x"),
    ("ratelimit_quota name=p amount=5;\nratelimit_limit name=e rate=5/s mode=exact;",
     "location / { ratelimit e $uri; ratelimit p $uri; }", "ratelimit", '"p"'),
    # Deprecated and without effect, but still checked as before.
    ("ratelimit_metrics_slot abc;", "", "ratelimit_metrics_slot", "invalid value"),
    ("ratelimit_metrics_slot 1m;\nratelimit_metrics_slot 2m;", "", "ratelimit_metrics_slot",
     "duplicate"),
]


@unittest.skipUnless(MODULE and os.path.exists(MODULE), "RL_NGINX_MODULE not set")
class TestConfigErrors(unittest.TestCase):
    def test_bad_configs_fail_nginx_t(self):
        for http_conf, server_conf, directive, word in BAD_CONFIGS:
            with self.subTest(http_conf=http_conf, server_conf=server_conf):
                rc, out = nginx_t(http_conf, server_conf)
                self.assertNotEqual(rc, 0, out)
                emerg = [l for l in out.splitlines() if "[emerg]" in l]
                self.assertTrue(emerg, out)
                self.assertIn(directive, emerg[0])
                self.assertIn(word, emerg[0])

    def test_short_secret_and_good_config(self):
        short = write_secret(self, "tooshort\n")
        rc, out = nginx_t(f"ratelimit_secret_file {short};")
        self.assertNotEqual(rc, 0)
        self.assertIn("ratelimit_secret_file", out)
        good = write_secret(self, "0123456789abcdef0123\n")
        rc, out = nginx_t(f"ratelimit_secret_file {good};\nratelimit_redis redis://127.0.0.1:1;\n"
                          "ratelimit_limit name=api rate=5/s;\nratelimit_metrics_slot 1m;",
                          "location / { ratelimit api $binary_remote_addr cost=2; }")
        self.assertEqual(rc, 0, out)

    def test_tiered_with_a_redis_fails_nginx_t(self):
        # The workers' shared instance has no tiered mode: nginx -t says so
        # (before, each worker silently became its own node).
        secret = write_secret(self, "0123456789abcdef0123\n")
        rc, out = nginx_t(f"ratelimit_secret_file {secret};\nratelimit_redis redis://127.0.0.1:1;\n"
                          "ratelimit_limit name=tt rate=5/s mode=tiered;",
                          "location / { ratelimit tt $uri; }")
        self.assertNotEqual(rc, 0, out)
        emerg = [l for l in out.splitlines() if "[emerg]" in l]
        self.assertTrue(emerg, out)
        self.assertIn('"tt"', emerg[0])
        self.assertIn("mode=tiered", emerg[0])


class WrkRun:
    """wrk against one nginx, counting statuses per wall-clock second."""

    SCRIPT = r"""
counts = {}
function response(status, headers, body)
  local k = os.time() .. ":" .. status
  counts[k] = (counts[k] or 0) + 1
end
function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("counts")) do io.write("C ", k, " ", v, "\n") end
  end
end
threads = {}
function setup(thread) table.insert(threads, thread) end
"""

    def __init__(self, port, seconds, path="/", conns=8):
        self.dir = tempfile.mkdtemp(prefix="rl-wrk-")
        script = os.path.join(self.dir, "count.lua")
        with open(script, "w") as f:
            f.write(self.SCRIPT)
        self.proc = subprocess.Popen(
            ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "-s", script,
             f"http://127.0.0.1:{port}{path}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def result(self):
        out, err = self.proc.communicate(timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)
        per = {}
        for line in out.splitlines():
            m = re.match(r"C (\d+):(\d+) (\d+)", line)
            if m:
                sec, status, n = int(m[1]), int(m[2]), int(m[3])
                per.setdefault(sec, {}).setdefault(status, 0)
                per[sec][status] += n
        return per


def redis_ok():
    return shutil.which("redis-server") and shutil.which("wrk")


class FleetCase(unittest.TestCase):
    """A test with a redis-server and a fleet secret of its own, and its
    nodes' configuration."""

    def setUp(self):
        self.redis = Redis()
        self.addCleanup(self.redis.stop)
        self.secret = write_secret(self, "fleet-secret-0123456789\n")

    def fleet_conf(self, node_id, *directives):
        """The http directives of node node_id: this fleet's Redis, secret
        and the node id, then directives."""
        return "\n".join([f"ratelimit_redis redis://127.0.0.1:{self.redis.port};",
                          f"ratelimit_secret_file {self.secret};",
                          f"ratelimit_node_id {node_id};", *directives])

    def started(self, http_conf, server_conf, workers):
        n = Nginx(http_conf, workers=workers, server_conf=server_conf)
        self.addCleanup(n.stop)
        n.start()
        return n


@unittest.skipUnless(MODULE and os.path.exists(MODULE) and redis_ok(),
                     "RL_NGINX_MODULE, redis-server or wrk missing")
class TestSecretFile(FleetCase):
    """The secret file's rule, every component's (docs/fleet.md, "The secret
    file"): one final "\\n" or "\\r\\n" is not the secret's, a second newline
    is. Each server publishes its secret's fingerprint in the node registry."""

    def test_one_final_line_ending_is_not_the_secret(self):
        s = "nginx-secret-0123456789"
        files = {"plain": s, "nl": s + "\n", "crlf": s + "\r\n", "nlnl": s + "\n\n",
                 "nl_crlf": s + "\n\r\n"}
        for name, text in files.items():
            d = tempfile.mkdtemp(prefix="rl-secret-")
            self.addCleanup(shutil.rmtree, d, True)
            path = os.path.join(d, "secret")
            with open(path, "w", newline="") as f:
                f.write(text)
            self.started("\n".join([f"ratelimit_redis redis://127.0.0.1:{self.redis.port};",
                                    f"ratelimit_secret_file {path};",
                                    f"ratelimit_node_id {name};",
                                    "ratelimit_limit name=s rate=10/s;"]),
                         "location / { ratelimit s all; }", workers=1)
        fps = wait_until(lambda: (lambda f: f if len(f) == len(files) else None)(
            registry_fingerprints(self.redis)), "every server's fingerprint")
        self.assertEqual(fps["nl"], fps["plain"])
        self.assertEqual(fps["crlf"], fps["plain"])
        self.assertNotEqual(fps["nlnl"], fps["plain"])
        self.assertEqual(fps["nlnl"], fps["nl_crlf"])


@unittest.skipUnless(MODULE and os.path.exists(MODULE) and redis_ok(),
                     "RL_NGINX_MODULE, redis-server or wrk missing")
class TestKeyPrefix(FleetCase):
    """ratelimit_key_prefix keeps two apps on one Redis apart; a node id may
    be as long as the library's."""

    def test_two_prefixes_on_one_redis_and_a_64_byte_node_id(self):
        long_id = "n" * 64
        for prefix, node in (("app1", long_id), ("app2", "b")):
            n = self.started(self.fleet_conf(node, f"ratelimit_key_prefix {prefix};",
                                             "ratelimit_limit name=api rate=1/h burst=4;"),
                             "location / { ratelimit api $http_x_api_key; }", workers=1)
            self.assertEqual([get(n.port, "/", {"X-Api-Key": "k"})[0] for _ in range(6)],
                             [200] * 4 + [429] * 2, prefix)

        def keys():
            ks = [k.decode() for k in self.redis.command("KEYS", "*")]
            mine = {p for p in ("app1", "app2") if any(k.startswith("{%s:v1:api:" % p)
                                                       for k in ks)}
            return ks if mine == {"app1", "app2"} else None
        ks = wait_until(keys, "both apps' keys in Redis")
        self.assertFalse([k for k in ks if k.startswith("{rl:")], ks)
        self.assertEqual(list(registry_fingerprints(self.redis, "app1")), [long_id])
        self.assertEqual(list(registry_fingerprints(self.redis, "app2")), ["b"])


@unittest.skipUnless(MODULE and os.path.exists(MODULE) and redis_ok(),
                     "RL_NGINX_MODULE, redis-server or wrk missing")
class TestFleet(FleetCase):
    RATE = 400
    BURST = 40

    def fleet_nginx(self, name):
        return self.started(
            self.fleet_conf(name, "ratelimit_expected_nodes 2;",
                            f"ratelimit_limit name=fleet rate={self.RATE}/s burst={self.BURST};"),
            "location / { ratelimit fleet all; }", workers=2)

    def bound(self):
        # README "Tolerance band": N = X = 2 nodes (a server's workers share
        # one node), I = 100 ms, W = 1 s:
        # E_pre = max(0, 2 * ceil(40/2) - 40) = 0, E = rate * I + burst.
        return self.RATE + self.BURST + self.RATE // 10 + self.BURST

    def check_windows(self, per_a, per_b, skip_first=2):
        secs = sorted(set(per_a) | set(per_b))
        # whole seconds only: drop the first (partial, and the pre-sync
        # start) and the last (partial)
        full = secs[skip_first:-1]
        self.assertGreaterEqual(len(full), 3, f"too few full seconds: {secs}")
        admitted = []
        for s in full:
            ok = per_a.get(s, {}).get(200, 0) + per_b.get(s, {}).get(200, 0)
            offered = sum(per_a.get(s, {}).values()) + sum(per_b.get(s, {}).values())
            admitted.append(ok)
            self.assertGreater(offered, self.RATE * 1.5, f"second {s}: offered only {offered}")
            self.assertLessEqual(ok, self.bound(), f"second {s}: admitted {ok}")
        print(f"\n  fleet admitted per 1-s window: {admitted} (bound {self.bound()})",
              file=sys.stderr)
        # Settled: the fleet uses most of the limit (README: 95-100%); a
        # loaded 2-core box gets a wide margin.
        self.assertGreaterEqual(sum(admitted) / len(admitted), 0.75 * self.RATE, admitted)
        return admitted

    def test_fleet_holds_the_global_limit(self):
        a = self.fleet_nginx("a")
        b = self.fleet_nginx("b")
        wa = WrkRun(a.port, 7)
        wb = WrkRun(b.port, 7)
        per_a, per_b = wa.result(), wb.result()
        admitted = self.check_windows(per_a, per_b)
        # /metrics of both instances agree with what the clients saw.
        total_ok = sum(v.get(200, 0) for v in per_a.values()) + \
            sum(v.get(200, 0) for v in per_b.values())

        def scraped():
            t = get(a.port, "/metrics")[2].decode() + get(b.port, "/metrics")[2].decode()
            m = metric_sum(t, "ratelimit_limit_admitted_total", 'limit="fleet"')
            return m if m >= total_ok else None

        m = wait_until(scraped, "the metrics to count every admitted request")
        # Each server's scrape is its host's (both workers' figures in one
        # shared instance, no worker label), and the fleet is 2 nodes: a
        # server's workers are one node.
        text = get(a.port, "/metrics")[2].decode()
        check_exposition(self, text)
        self.assertEqual(metric_value(text, "ratelimit_fleet_nodes"), 2.0, text)
        # The master opened the instance and holds no thread of it (nothing
        # a fork would break): the sync runs in a worker.
        with open(f"/proc/{a.master_pid()}/status") as f:
            self.assertIn("\nThreads:\t1\n", f.read())
        # wrk may stop with requests in flight: nginx admitted them, wrk
        # never counted their answers (at most one per connection).
        self.assertLessEqual(m - total_ok, 16, (m, total_ok, admitted))

    def test_reload_under_load_keeps_the_band(self):
        a = self.fleet_nginx("a")
        b = self.fleet_nginx("b")
        wa = WrkRun(a.port, 8)
        wb = WrkRun(b.port, 8)
        old = set(a.worker_pids())
        wait_until(lambda: get(a.port, "/")[0] in (200, 429) and
                   metric_sum(get(a.port, "/metrics")[2].decode(),
                              "ratelimit_limit_denied_total") > 0,
                   "the load to reach the limit")
        r = a.cmd("-s", "reload")
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_new_workers(a, old)
        per_a, per_b = wa.result(), wb.result()
        self.check_windows(per_a, per_b)
        self.assertNotIn("[emerg]", a.error_log())
        # The new workers took the host's sync over as the same node.
        self.assertEqual(metric_value(get(a.port, "/metrics")[2].decode(),
                                      "ratelimit_fleet_nodes"), 2.0)

    def test_workers_killed_under_load_keep_the_band(self):
        # Both of a server's workers killed with SIGKILL one after the
        # other, so the one holding the host's sync lease is among them:
        # another worker takes the sync over as the same node, the master's
        # respawned workers attach, and the fleet stays in its band.
        a = self.fleet_nginx("a")
        b = self.fleet_nginx("b")
        wa = WrkRun(a.port, 9)
        wb = WrkRun(b.port, 9)
        wait_until(lambda: metric_sum(get(a.port, "/metrics")[2].decode(),
                                      "ratelimit_limit_denied_total") > 0,
                   "the load to reach the limit")
        for victim in sorted(a.worker_pids()):
            os.kill(victim, signal.SIGKILL)
            wait_until(lambda: victim not in a.worker_pids() and
                       len(a.worker_pids()) == 2, "a respawned worker")
        per_a, per_b = wa.result(), wb.result()
        self.check_windows(per_a, per_b)
        self.assertIn("takes the host's sync over from a dead holder", a.error_log())
        self.assertEqual(metric_value(get(a.port, "/metrics")[2].decode(),
                                      "ratelimit_fleet_nodes"), 2.0)


@unittest.skipUnless(MODULE and os.path.exists(MODULE) and redis_ok(),
                     "RL_NGINX_MODULE, redis-server or wrk missing")
class TestExact(FleetCase):
    """mode=exact limits through rl_check_async: Redis decides, no worker waits."""

    def exact_nginx(self, name, limits, server_conf, workers=2):
        return self.started(self.fleet_conf(name, "ratelimit_exact_timeout 5s;", limits),
                            server_conf, workers)

    def test_local_rules_are_refunded_when_the_exact_one_denies(self):
        n = self.exact_nginx(
            "a",
            "ratelimit_limit name=loc rate=1/h burst=3 mode=local;\n"
            "ratelimit_limit name=ex rate=1/h burst=1 mode=exact on_failure=open;",
            "location = /both { ratelimit loc k; ratelimit ex k; alias html/index.html; }\n"
            "location = /local { ratelimit loc k; alias html/index.html; }",
            workers=1)  # one worker: the requests' order is the clients'
        st, h, _ = get(n.port, "/both")
        self.assertEqual(st, 200)
        for _ in range(2):
            st, h, _ = get(n.port, "/both")
            self.assertEqual(st, 429)  # Redis's bucket is empty; on_failure=open never answers
            self.assertIn("retry-after", h)
            self.assertEqual(h.get("x-ratelimit-limit"), "1")
        # Both denials gave loc's token back: 2 of its 3 are left.
        self.assertEqual([get(n.port, "/local")[0] for _ in range(3)], [200, 200, 429])
        self.assertIn('denied by limit "ex" (exact)', n.error_log())

    def test_two_servers_of_two_workers_never_exceed_an_exact_limit(self):
        rate, burst = 50, 20
        conf = (f"ratelimit_limit name=ex rate={rate}/s burst={burst} mode=exact "
                "on_failure=closed;")
        loc = "location / { ratelimit ex all; }"
        a = self.exact_nginx("a", conf, loc)
        b = self.exact_nginx("b", conf, loc)
        t0 = time.monotonic()
        wa, wb = WrkRun(a.port, 4, conns=4), WrkRun(b.port, 4, conns=4)
        per_a, per_b = wa.result(), wb.result()
        elapsed = time.monotonic() - t0
        counts = {}
        for per in (per_a, per_b):
            for sec in per.values():
                for status, k in sec.items():
                    counts[status] = counts.get(status, 0) + k
        admitted = counts.get(200, 0)
        bound = burst + rate * elapsed
        print(f"\n  exact: admitted {admitted} of {sum(counts.values())} in {elapsed:.2f} s "
              f"(bound {bound:.0f})", file=sys.stderr)
        self.assertEqual(set(counts) - {200, 429}, set(), counts)
        # Redis's one bucket, Redis's clock: never more than burst + rate x t.
        self.assertLessEqual(admitted, bound, counts)
        self.assertGreater(counts.get(429, 0), 0, counts)
        self.assertGreaterEqual(admitted, burst, counts)
        # Each host's /metrics (its shared instance, every worker's checks)
        # counts at least what its clients were told was admitted (wrk may
        # drop a response it was sent at the end of its run).
        for n, per in ((a, per_a), (b, per_b)):
            told = sum(sec.get(200, 0) for sec in per.values())
            text = get(n.port, "/metrics")[2].decode()
            self.assertGreaterEqual(metric_sum(text, "ratelimit_limit_admitted_total"), told)

    def test_a_local_limit_beside_an_exact_rule_holds_per_host(self):
        # An exact limit (and a quota) in the configuration once made each
        # worker open its own instance, silently turning every mode=local
        # limit into a per-worker one (issue #16): the host holds it.
        n = self.exact_nginx(
            "a",
            "ratelimit_limit name=api rate=1/h burst=5 mode=local;\n"
            "ratelimit_limit name=ex rate=1/h burst=1000 mode=exact on_failure=closed;\n"
            "ratelimit_quota name=plan amount=1000 period=day;",
            "location / { ratelimit api $http_x_api_key; add_header X-Worker $pid always; }\n"
            "location = /ex { ratelimit ex k; add_header X-Worker $pid always; "
            "alias html/index.html; }\n"
            "location = /q { ratelimit plan k; add_header X-Worker $pid always; "
            "alias html/index.html; }")
        # Both workers answer exact checks and quota charges from Redis.
        seen = {}
        end = time.monotonic() + WAIT_S
        while len(seen) < 4:
            self.assertLess(time.monotonic(), end, "no exact and quota answer from both workers")
            with ThreadPoolExecutor(max_workers=8) as ex:
                res = list(ex.map(lambda p: (p, get(n.port, p)), ["/ex", "/q"] * 8))
            for p, (st, h, _) in res:
                self.assertEqual(st, 200, p)
                seen[(p, h["x-worker"])] = 1
            self.assertLessEqual(len({w for _, w in seen}), 2)
        check_batches_until_both_workers(self, n, end)

    def test_a_frozen_redis_blocks_no_worker(self):
        n = self.exact_nginx(
            "a",
            "ratelimit_limit name=ex rate=1000/s burst=1000 mode=exact on_failure=open;\n"
            "ratelimit_limit name=pl rate=1000/s burst=1000;",
            "location = /exact { ratelimit ex $arg_k; alias html/index.html; }\n"
            "location = /plain { ratelimit pl k; alias html/index.html; }",
            workers=1)  # one worker: if it waited on Redis, nothing else would be served
        self.assertEqual(get(n.port, "/exact?k=warm")[0], 200)  # connected
        pid = n.worker_pids()

        def pending():
            return exact_pending(n)

        self.assertEqual(pending(), 0)
        os.kill(self.redis.proc.pid, signal.SIGSTOP)
        self.addCleanup(os.kill, self.redis.proc.pid, signal.SIGCONT)

        # A client that gives up while its check waits: the request ends,
        # its record is detached, and the late answer resumes nothing.
        gone = "client prematurely closed connection"
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", n.port), timeout=10)
            s.sendall(b"GET /exact?k=gone HTTP/1.1\r\nHost: x\r\n\r\n")

            def waiting_or_answered():
                if pending() >= 1:
                    return "waiting"
                try:
                    if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                        return "answered"  # the stall detector answered first: again
                except BlockingIOError:
                    pass
                return None

            state = wait_until(waiting_or_answered, "the check to wait")
            s.close()
            # Either the close ends the waiting request (logged) or the
            # answer came first; both leave nothing pending.
            wait_until(lambda: pending() == 0, "the request to end")
            if state == "waiting" and gone in n.error_log():
                break
        self.assertIn(gone, n.error_log())

        stop = False
        answers = []

        def load():
            while not stop:
                answers.append(get(n.port, "/exact?k=load")[0])

        with ThreadPoolExecutor(4) as ex:
            futs = [ex.submit(load) for _ in range(4)]
            try:
                # The only worker answers /metrics and /plain while its exact
                # checks wait on the frozen Redis.
                wait_until(lambda: pending() >= 1, "a /metrics answer while checks wait")
                self.assertEqual(get(n.port, "/plain")[0], 200)
            finally:
                os.kill(self.redis.proc.pid, signal.SIGCONT)
                stop = True
                for f in futs:
                    f.result(timeout=60)
        self.assertTrue(answers)
        self.assertEqual(set(answers), {200}, answers)  # Redis or on_failure=open
        wait_until(lambda: pending() == 0, "every check to be answered")
        self.assertEqual(n.worker_pids(), pid)  # no crash, no respawn
        self.assertNotIn("exited on signal", n.error_log())



@unittest.skipUnless(MODULE and os.path.exists(MODULE) and redis_ok(),
                     "RL_NGINX_MODULE, redis-server or wrk missing")
class TestQuota(FleetCase):
    """Quotas through rl_quota_charge_async: one id charged once, 429 to the reset."""

    def quota_conf(self, http_conf):
        return self.fleet_conf("q", "ratelimit_exact_timeout 5s;", http_conf)

    def quota_nginx(self, http_conf, server_conf, workers=1):
        return self.started(self.quota_conf(http_conf), server_conf, workers)

    def test_idempotent_charges_refunds_and_429_to_the_reset(self):
        n = self.quota_nginx(
            "ratelimit_limit name=loc rate=1/h burst=10 mode=local;\n"
            "ratelimit_quota name=plan amount=3 period=month dedup=1h;",
            "location = /q { ratelimit loc $http_x_api_key; "
            "ratelimit plan $http_x_api_key id=$http_idempotency_key; alias html/index.html; }\n"
            "location = /local { ratelimit loc $http_x_api_key; alias html/index.html; }")

        def q(idem=None, user="u"):
            h = {"X-API-Key": user}
            if idem is not None:
                h["Idempotency-Key"] = idem
            return get(n.port, "/q", h)

        st, h, _ = q("a")
        self.assertEqual((st, h.get("x-quota-remaining")), (200, "2"))
        self.assertNotIn("x-quota-duplicate", h)
        st, h, _ = q("a")  # the client's retry: its first answer, not charged again
        self.assertEqual((st, h.get("x-quota-remaining")), (200, "2"))
        self.assertEqual(h.get("x-quota-duplicate"), "true")
        st, h, _ = q()  # no id: the worker's own, charged
        self.assertEqual((st, h.get("x-quota-remaining")), (200, "1"))
        st, h, _ = q("b")
        self.assertEqual((st, h.get("x-quota-remaining")), (200, "0"))
        st, h, _ = q("c")
        self.assertEqual(st, 429)
        retry = int(h["retry-after"])
        self.assertGreaterEqual(retry, 1)
        self.assertLessEqual(retry, 31 * 86400)  # up to the month's reset
        st, h, _ = q("c")
        self.assertEqual(st, 429)
        self.assertEqual(h.get("x-quota-duplicate"), "true")
        # Another key has its own quota.
        self.assertEqual(q("a", user="v")[0], 200)
        # 4 requests of u were served, 2 denied by the quota and refunded:
        # loc (burst 10) has 6 of u's tokens left.
        self.assertEqual([get(n.port, "/local", {"X-API-Key": "u"})[0] for _ in range(7)],
                         [200] * 6 + [429])
        self.assertIn('denied by quota "plan"', n.error_log())
        # An id longer than the module takes is refused, never charged.
        st, _, _ = q("x" * 300)
        self.assertEqual(st, 400)

    def test_reload_redefines_quotas_and_keeps_their_usage(self):
        # The master defines the quotas in the host's shared instance before
        # it forks; a reload replaces them there (their usage is in Redis,
        # under their names), and the new workers, both of them, charge them.
        http = ("ratelimit_quota name=plan amount=%d period=month dedup=1h;\n"
                "ratelimit_quota name=%s amount=5 period=day;")
        loc = ("location = /q { ratelimit plan k id=$http_idempotency_key; "
               "add_header X-Worker $pid always; alias html/index.html; }\n"
               "location = /o { ratelimit %s k; alias html/index.html; }")
        n = self.quota_nginx(http % (3, "one"), loc % "one", workers=2)
        st, h, _ = get(n.port, "/q", {"Idempotency-Key": "a"})
        self.assertEqual((st, h.get("x-quota-remaining")), (200, "2"))
        self.assertEqual(get(n.port, "/o")[0], 200)
        old = set(n.worker_pids())
        n.write(self.quota_conf(http % (10, "two")), server_conf=loc % "two")
        r = n.cmd("-s", "reload")
        self.assertEqual(r.returncode, 0, r.stderr)
        wait_new_workers(n, old)
        # The same id is still charged once; the new amount counts the old use.
        st, h, _ = get(n.port, "/q", {"Idempotency-Key": "a"})
        self.assertEqual((st, h.get("x-quota-remaining"), h.get("x-quota-duplicate")),
                         (200, "9", "true"))
        workers = set()
        end = time.monotonic() + WAIT_S
        i = 0
        while len(workers) < 2:
            self.assertLess(time.monotonic(), end, "no charge answered by both new workers")
            with ThreadPoolExecutor(max_workers=4) as ex:
                res = list(ex.map(lambda k: get(n.port, "/q", {"Idempotency-Key": k}),
                                  [f"r{i}-{j}" for j in range(4)]))
            i += 1
            for st, h, _ in res:
                self.assertIn(st, (200, 429))
                workers.add(h["x-worker"])
            if any(st == 429 for st, _, _ in res):
                break  # the month's 10 used up before both workers answered: enough
        self.assertEqual(get(n.port, "/o")[0], 200)  # the new quota, in the new workers
        self.assertNotIn("[emerg]", n.error_log())

    def test_a_frozen_redis_blocks_no_worker(self):
        n = self.quota_nginx(
            "ratelimit_quota name=plan amount=1000000 period=day on_failure=open;\n"
            "ratelimit_limit name=pl rate=1000/s burst=1000;",
            "location = /q { ratelimit plan $arg_k; alias html/index.html; }\n"
            "location = /plain { ratelimit pl k; alias html/index.html; }")
        self.assertEqual(get(n.port, "/q?k=warm")[0], 200)  # connected
        os.kill(self.redis.proc.pid, signal.SIGSTOP)
        self.addCleanup(os.kill, self.redis.proc.pid, signal.SIGCONT)
        with ThreadPoolExecutor(2) as ex:
            fut = ex.submit(get, n.port, "/q?k=frozen")
            try:
                # The only worker answers while the charge waits on Redis.
                wait_until(lambda: exact_pending(n) >= 1, "the charge to wait")
                self.assertEqual(get(n.port, "/plain")[0], 200)
            finally:
                os.kill(self.redis.proc.pid, signal.SIGCONT)
            self.assertEqual(fut.result(timeout=60)[0], 200)  # Redis, or on_failure=open
        wait_until(lambda: exact_pending(n) == 0, "the charge to be answered")


if __name__ == "__main__":
    unittest.main()
