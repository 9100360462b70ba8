# SPDX-License-Identifier: MIT
"""Tests of the libratelimit package beyond the ctypes layer (unittest,
standard library only): the WSGI middleware through a real wsgiref server,
the reopen after fork(), where the shared library is looked for, and the
README's install commands, offline, in a plain venv (the package builds
with its own backend, build_backend/, standard library only).

    RL_LIBRARY=build/libratelimit.so python3 -m unittest bindings/python/test_package.py

ctest runs it as python_package. The install cases need `python3 -m venv`
with its bundled pip (Debian: python3-venv).
"""

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
import zipfile
from wsgiref.simple_server import WSGIRequestHandler, make_server

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import libratelimit  # noqa: E402  (after the path tweak)
from libratelimit import RateLimiter, RateLimitError  # noqa: E402
from libratelimit.wsgi import RateLimitMiddleware  # noqa: E402


def setUpModule():
    if not (os.environ.get("RL_LIBRARY") or os.environ.get("LIBRATELIMIT_LIBRARY")):
        guess = os.path.join(ROOT, "build", "libratelimit.so")
        if os.path.exists(guess):
            os.environ["RL_LIBRARY"] = guess
    libratelimit.load()


def library_path():
    return os.path.abspath(os.environ.get("LIBRATELIMIT_LIBRARY") or os.environ["RL_LIBRARY"])


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class Server:
    """A wsgiref server on a free loopback port, in a thread."""

    def __init__(self, app):
        self.httpd = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
        self.port = self.httpd.server_port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def get(self, path="/", headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", path, headers=headers or {})
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class Wsgi(unittest.TestCase):
    def setUp(self):
        self.calls = []
        self.rl = RateLimiter()

        def app(environ, start_response):
            self.calls.append(environ["PATH_INFO"])
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]

        self.app = app

    def tearDown(self):
        self.rl.close()

    def serve(self, mw):
        srv = Server(mw)
        self.addCleanup(srv.close)
        return srv

    def test_429_and_headers(self):
        self.rl.add_limit("name=api rate=1/h burst=3")
        srv = self.serve(RateLimitMiddleware(self.app, self.rl, "api"))
        got = [srv.get("/x", {"X-API-Key": "k1"}) for _ in range(4)]
        self.assertEqual([g[0] for g in got], [200, 200, 200, 429])
        self.assertEqual(self.calls, ["/x"] * 3)  # the denied request never reached the app
        status, h, body = got[0]
        self.assertEqual(body, b"ok")
        self.assertEqual(h["ratelimit-policy"], '"api";q=1;w=3600')
        self.assertEqual(h["x-ratelimit-remaining"], "2")
        self.assertNotIn("retry-after", h)
        status, h, body = got[3]
        self.assertEqual(h["retry-after"], "3600")
        self.assertEqual(h["x-ratelimit-remaining"], "0")
        self.assertEqual(h["content-type"], "application/json")
        doc = json.loads(body)
        self.assertEqual(doc["error"], "rate limited")
        self.assertEqual(doc["limit"], "api")
        self.assertTrue(3500 * 1000 <= doc["retry_after_ms"] <= 3600 * 1000, doc)
        # Another key has its own bucket; without a key, the client address.
        self.assertEqual(srv.get("/x", {"X-API-Key": "k2"})[0], 200)
        self.assertEqual([srv.get("/y")[0] for _ in range(4)], [200, 200, 200, 429])

    def test_all_or_nothing(self):
        wide = self.rl.add_limit("name=wide rate=1/h burst=10")
        self.rl.add_limit("name=narrow rate=1/h burst=1")
        srv = self.serve(RateLimitMiddleware(self.app, self.rl, ["wide", "narrow"]))
        s1, h1, _ = srv.get("/", {"X-API-Key": "k"})
        self.assertEqual(s1, 200)
        # The headers of the limit with the fewest tokens left.
        self.assertEqual(h1["ratelimit-policy"], '"narrow";q=1;w=3600')
        s2, h2, body = srv.get("/", {"X-API-Key": "k"})
        self.assertEqual(s2, 429)
        self.assertEqual(json.loads(body)["limit"], "narrow")
        # The denied request charged "wide" nothing: 10 - 1 left.
        self.assertEqual(self.rl.check(wide, "k", cost=0).remaining, 9)

    def test_untrusted_keys(self):
        self.rl.add_limit("name=api rate=1/h burst=1")
        srv = self.serve(RateLimitMiddleware(self.app, self.rl, "api"))
        long_a, long_b = "a" * 5000, "a" * 4999 + "b"
        self.assertEqual(srv.get("/", {"X-API-Key": long_a})[0], 200)
        self.assertEqual(srv.get("/", {"X-API-Key": long_a})[0], 429)
        self.assertEqual(srv.get("/", {"X-API-Key": long_b})[0], 200)  # not the same bucket

    def test_errors(self):
        self.rl.add_limit("name=api rate=1/h burst=5")
        seen = []
        closed = RateLimitMiddleware(self.app, self.rl, "gone", on_error="closed",
                                     error=lambda e, env: seen.append(e.name))
        opened = RateLimitMiddleware(self.app, self.rl, "gone")
        srv_c, srv_o = self.serve(closed), self.serve(opened)
        self.assertEqual(srv_c.get("/")[0], 503)
        self.assertEqual(seen, ["RL_ENOTFOUND"])
        status, h, _ = srv_o.get("/")
        self.assertEqual(status, 200)
        self.assertNotIn("ratelimit-policy", h)
        with self.assertRaises(ValueError):
            RateLimitMiddleware(self.app, self.rl, "api", on_error="maybe")


@unittest.skipUnless(hasattr(os, "fork"), "needs fork()")
class Fork(unittest.TestCase):
    def in_child(self, fn):
        """Run fn() in a forked child; return what it returned (a str)."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, then leave without cleanup handlers
            os.close(r)
            try:
                out = fn()
            except BaseException as e:  # noqa: BLE001
                out = f"raised {e!r}"
            os.write(w, out.encode())
            os._exit(0)
        os.close(w)
        chunks = []
        while True:
            b = os.read(r, 4096)
            if not b:
                break
            chunks.append(b)
        os.close(r)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        return b"".join(chunks).decode()

    def test_preloaded_limiter_works_in_workers(self):
        # gunicorn --preload: the app (and its limiter) is made in the master.
        with RateLimiter() as rl:
            api = rl.add_limit("name=api rate=1/h burst=2")
            self.assertTrue(rl.allow(api, "k"))

            def worker():
                got = [rl.check(api, "k").allowed for _ in range(3)]
                return f"{got} {rl.find_limit('api') == api}"

            # A new process, a new instance: its own full bucket.
            self.assertEqual(self.in_child(worker), "[True, True, False] True")
            # The master's instance is untouched by the child.
            self.assertEqual([rl.allow(api, "k") for _ in range(2)], [True, False])

    def test_fleet_worker_is_a_node_of_its_own(self):
        # Nothing listens on port 1: the instance opens degraded, which is
        # enough to see the configuration the worker reopened with.
        with RateLimiter("redis://127.0.0.1:1", node_id="web", key_secret=b"s" * 32) as rl:
            api = rl.add_limit("name=api rate=10/s")

            def worker():
                allowed = rl.allow(api, "k")
                return f"{rl._cfg.node_id.decode()} {os.getpid()} {allowed}"

            node_id, pid, allowed = self.in_child(worker).split()
            self.assertEqual(node_id, f"web-{pid}")
            self.assertEqual(allowed, "True")
            self.assertEqual(rl._cfg.node_id, b"web")  # the parent's is unchanged

    def test_ids_survive_removal_before_fork(self):
        with RateLimiter() as rl:
            a = rl.add_limit("name=a rate=1/h burst=1")
            b = rl.add_limit("name=b rate=1/h burst=2")
            rl.remove_limit(a)

            def worker():
                c = rl.add_limit("name=c rate=1/h burst=3")  # may take a's old slot
                out = [rl.check(b, "k").limit, rl.check("b", "k").burst,
                       rl.check(c, "k").burst, c != b]
                try:
                    rl.check(a, "k")
                    out.append("a answered")
                except RateLimitError as e:
                    out.append(e.name)
                rl.update_limit(b, "name=b rate=2/h burst=2")
                out.append(rl.get_limit("b").rate.count)
                return repr(out)

            self.assertEqual(self.in_child(worker), "[1, 2, 3, True, 'RL_ENOTFOUND', 2]")


class Loader(unittest.TestCase):
    def run_py(self, code, **env):
        e = {k: v for k, v in os.environ.items()
             if k not in ("RL_LIBRARY", "LIBRATELIMIT_LIBRARY", "LIBRATELIMIT_PREFIX")}
        e.update(env)
        e["PYTHONPATH"] = HERE
        return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True,
                              text=True, timeout=60)

    def test_explicit_path_wins_and_failure_lists_it(self):
        r = self.run_py("import libratelimit as l\n"
                        "try:\n    l.load('/nonexistent/libratelimit.so.0')\n"
                        "except OSError as e:\n    print(e)\n",
                        LIBRATELIMIT_LIBRARY=library_path())
        self.assertIn("/nonexistent/libratelimit.so.0 (the library argument)", r.stdout)

    def test_environment_variable(self):
        r = self.run_py("import libratelimit as l; print(l.load().path)",
                        LIBRATELIMIT_LIBRARY=library_path())
        self.assertEqual(r.stdout.strip(), library_path(), r.stderr)

    def test_installed_prefix(self):
        prefix = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, prefix)
        os.makedirs(os.path.join(prefix, "lib"))
        so = os.path.join(prefix, "lib", "libratelimit.so.0")
        os.symlink(os.path.realpath(library_path()), so)
        r = self.run_py("import libratelimit as l; print(l.load().path)",
                        LIBRATELIMIT_PREFIX=prefix)
        self.assertEqual(r.stdout.strip(), so, r.stderr)

    def test_not_found_lists_every_place(self):
        prefix = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, prefix)
        r = self.run_py("import libratelimit as l\n"
                        "try:\n    print('loaded', l.load().path)\n"
                        "except OSError as e:\n    print(e)\n",
                        LIBRATELIMIT_PREFIX=prefix, LD_LIBRARY_PATH="")
        if r.stdout.startswith("loaded"):
            self.skipTest("a libratelimit is installed system-wide: " + r.stdout.strip())
        self.assertIn(os.path.join(prefix, "lib"), r.stdout)
        self.assertIn("libratelimit.so.0 (the system loader)", r.stdout)
        self.assertIn("LIBRATELIMIT_LIBRARY", r.stdout)


def _readme_install_block():
    """The first ```sh block under "## Install" in this directory's README:
    the commands a user runs, tested as written."""
    with open(os.path.join(HERE, "README.md")) as f:
        text = f.read()
    sec = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"^```sh\n(.*?)^```$", sec, re.S | re.M)
    if m is None:
        raise AssertionError("bindings/python/README.md: no ```sh block under ## Install")
    return m.group(1)


class Install(unittest.TestCase):
    """The documented install, offline (PIP_NO_INDEX: any download fails),
    in a plain venv of this Python: no setuptools, no wheel, no
    --system-site-packages."""

    def setUp(self):
        self.work = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.work)
        # The commands name ./bindings/python: a link to this directory, so
        # the venv and the build's by-products never land in the tree.
        os.makedirs(os.path.join(self.work, "bindings"))
        os.symlink(HERE, os.path.join(self.work, "bindings", "python"))
        self.env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                        PYTHONNOUSERSITE="1")
        for k in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_FIND_LINKS"):
            self.env.pop(k, None)

    def run_sh(self, script):
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.work,
                           env=dict(self.env, PATH=os.path.dirname(sys.executable) + ":" +
                                    self.env.get("PATH", "")),
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, f"{script}\n{r.stdout}\n{r.stderr}")
        return r

    def assertInstalled(self, venv):
        """The venv's python imports the installed package, not the tree's."""
        code = ("import libratelimit, libratelimit.wsgi, importlib.metadata as m, sys\n"
                "print(libratelimit.__file__)\n"
                "md = m.distribution('libratelimit').metadata\n"
                "print(md['Name'], md['Version'], md['License'])\n"
                "print(libratelimit.__version__)\n"
                "print(libratelimit.RateLimiter().add_limit('name=a rate=1/s') >= 0)\n")
        py = os.path.join(self.work, venv, "bin", "python")
        r = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd="/",
                           env=dict(self.env, LIBRATELIMIT_LIBRARY=library_path()), timeout=60)
        lines = r.stdout.split("\n")
        self.assertTrue(lines[0].startswith(os.path.join(self.work, venv)), r.stdout + r.stderr)
        version = libratelimit.__version__
        self.assertEqual(lines[1], f"libratelimit {version} MIT")
        self.assertEqual(lines[2], version)
        self.assertEqual(lines[3], "True")

    def test_version_matches_the_header(self):
        with open(os.path.join(ROOT, "include", "ratelimit.h")) as f:
            h = f.read()
        v = ".".join(re.search(r"#define RL_VERSION_%s (\d+)" % p, h).group(1)
                     for p in ("MAJOR", "MINOR", "PATCH"))
        with open(os.path.join(HERE, "pyproject.toml")) as f:
            self.assertIn(f'version = "{v}"', f.read())
        self.assertEqual(libratelimit.__version__, v)

    def test_readme_install_in_a_plain_venv(self):
        block = _readme_install_block()
        self.assertIn("python3 -m venv v", block)
        self.assertIn("v/bin/pip install ./bindings/python", block)
        self.run_sh(block)
        self.assertInstalled("v")

    def test_without_build_isolation_or_setuptools(self):
        """The build runs in the venv itself here: with no setuptools (some
        Pythons' venvs carry one, 3.12's do not) and no wheel, it still
        builds."""
        self.run_sh("python3 -m venv v\n"
                    "v/bin/pip uninstall -y -q setuptools wheel 2>/dev/null || true\n"
                    "! v/bin/python -c 'import setuptools' 2>/dev/null\n"
                    "! v/bin/python -c 'import wheel' 2>/dev/null\n"
                    "v/bin/pip install --no-build-isolation ./bindings/python\n")
        self.assertInstalled("v")

    def test_the_wheel_alone(self):
        """The wheel the python_wheel target writes installs with pip alone."""
        r = self.run_sh("python3 bindings/python/build_backend/libratelimit_build.py dist")
        wheel = r.stdout.strip()
        self.assertTrue(wheel.endswith("-py3-none-any.whl"), wheel)
        with zipfile.ZipFile(os.path.join(self.work, wheel)) as z:
            names = z.namelist()
            self.assertIn("libratelimit/binding.py", names)
            record = z.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
        self.assertEqual(sorted(line.split(",")[0] for line in record.split()), sorted(names))
        self.run_sh(f"python3 -m venv w\nw/bin/pip install {wheel}\n")
        self.assertInstalled("w")

if __name__ == "__main__":
    unittest.main()
