# SPDX-License-Identifier: MIT
"""Tests of the ctypes binding (unittest, standard library only).

    RL_LIBRARY=build/libratelimit.so python3 -m unittest bindings/python/test_ratelimit.py

RL_INCLUDE (default: ../../include from here) is the header the struct
layout test compiles against with the cc on PATH; the global-tier test
starts its own redis-server when one is on PATH. Either is skipped when its
tool is missing.
"""

import ctypes
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import libratelimit.binding as rlm  # noqa: E402  (after the path tweak)
from libratelimit import RateLimiter, RateLimitError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))

# How long a test waits for an event before it fails (tests/testutil.h's
# RL_TEST_WAIT_MS): generous, for a loaded machine under `ctest -j2`.
WAIT_S = 30.0


def wait_for(pred, timeout=WAIT_S):
    """Poll pred() until it is true or `timeout` seconds have passed; return
    its last value. The last call comes after the deadline, so a descheduled
    test never times out on an event that did come."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        late = time.monotonic() > deadline
        got = pred()
        if got or late:
            return got
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def setUpModule():
    # Convenience for a manual run from a source tree: the default build dir.
    if not os.environ.get("RL_LIBRARY"):
        guess = os.path.join(ROOT, "build", "libratelimit.so")
        if os.path.exists(guess):
            os.environ["RL_LIBRARY"] = guess
    rlm.load()  # fails the run loudly when no library can be found


class Basics(unittest.TestCase):
    def setUp(self):
        self.rl = RateLimiter()

    def tearDown(self):
        self.rl.close()

    def test_version(self):
        v = rlm.version()
        self.assertRegex(v, r"^\d+\.\d+\.\d+$")
        self.assertEqual(int(v.split(".")[0]), rlm.ABI_MAJOR)

    def test_limit_enforced(self):
        api = self.rl.add_limit("name=api rate=1/m burst=3")
        got = [self.rl.check(api, "user-1").allowed for _ in range(5)]
        self.assertEqual(got, [True, True, True, False, False])
        # Other keys have their own buckets.
        self.assertTrue(self.rl.check(api, "user-2"))
        self.assertTrue(self.rl.allow(api, "user-3"))
        # A refund gives a token back.
        self.rl.refund(api, "user-1")
        self.assertTrue(self.rl.check(api, "user-1").allowed)
        self.assertFalse(self.rl.check(api, "user-1").allowed)
        # By name as well as by id.
        self.assertEqual(self.rl.find_limit("api"), api)
        self.assertFalse(self.rl.check("api", "user-1").allowed)

    def test_decision_fields(self):
        api = self.rl.add_limit("name=api rate=10/s burst=3")
        d = self.rl.check(api, b"k")
        self.assertTrue(d.allowed)
        self.assertTrue(d)
        self.assertEqual(d.limit, 10)
        self.assertEqual(d.window_ms, 1000)
        self.assertEqual(d.burst, 3)
        self.assertEqual(d.remaining, 2)
        self.assertEqual(d.retry_after_ms, 0)
        self.assertEqual(d.flags, 0)
        self.assertEqual(d.policy, "api")
        self.rl.check(api, b"k", cost=2)
        d = self.rl.check(api, b"k")
        self.assertFalse(d.allowed)
        self.assertFalse(d)
        self.assertEqual(d.remaining, 0)
        self.assertGreater(d.retry_after_ms, 0)
        self.assertLessEqual(d.retry_after_ms, 100)
        # cost 0 peeks: nothing charged, flagged.
        p = self.rl.check(api, b"fresh", cost=0)
        self.assertTrue(p.allowed)
        self.assertEqual(p.remaining, 3)
        self.assertTrue(p.flags & rlm.RL_FLAG_PEEK)

    def test_shadow_flag(self):
        sh = self.rl.add_limit("name=sh rate=1/m burst=1 shadow=1")
        self.assertEqual(self.rl.check(sh, "k").flags & rlm.RL_FLAG_SHADOW, 0)
        d = self.rl.check(sh, "k")
        self.assertTrue(d.allowed)  # a shadow limit never denies
        self.assertTrue(d.shadow)
        self.assertEqual(self.rl.limit_stats(sh)["shadow_denied"], 1)

    def test_binary_and_str_keys(self):
        api = self.rl.add_limit("name=api rate=1/m burst=1")
        self.assertTrue(self.rl.check(api, b"a\x00b").allowed)
        self.assertTrue(self.rl.check(api, b"a\x00c").allowed)  # NUL-safe: another key
        self.assertFalse(self.rl.check(api, bytearray(b"a\x00b")).allowed)
        self.assertTrue(self.rl.check(api, "h\u00e9").allowed)
        self.assertFalse(self.rl.check(api, "h\u00e9".encode("utf-8")).allowed)  # str is UTF-8
        self.assertTrue(self.rl.check(api, b"x" * rlm.RL_MAX_KEY_LEN).allowed)

    def test_headers_text(self):
        api = self.rl.add_limit("name=api rate=1/m burst=2")
        ok = self.rl.check(api, "k")
        self.rl.check(api, "k")
        deny = self.rl.check(api, "k")
        self.assertFalse(deny.allowed)
        # A minute per token, so the figures cannot move within the test.
        self.assertEqual(deny.headers(),
                         'RateLimit-Policy: "api";q=1;w=60\r\n'
                         'RateLimit: "api";r=0;t=60\r\n'
                         "X-RateLimit-Limit: 1\r\n"
                         "X-RateLimit-Remaining: 0\r\n"
                         "X-RateLimit-Reset: 120\r\n"
                         "Retry-After: 60\r\n")
        self.assertEqual(deny.header_items()[-1], ("Retry-After", "60"))
        self.assertNotIn("Retry-After", ok.headers())
        self.assertIn("X-RateLimit-Remaining: 1\r\n", ok.headers())
        # The decision owns its policy name: still fine after the limit and
        # the instance are gone.
        self.rl.remove_limit(api)
        self.rl.close()
        self.assertTrue(deny.headers().startswith('RateLimit-Policy: "api";'))

    def test_check_multi(self):
        a = self.rl.add_limit("name=a rate=1/m burst=5")
        b = self.rl.add_limit("name=b rate=1/m burst=1")
        ok, decs, idx = self.rl.check_multi([(a, "k"), (b, "k")])
        self.assertTrue(ok)
        self.assertEqual(idx, 2)
        self.assertEqual([d.remaining for d in decs], [4, 0])
        # b is empty now: nothing is charged to a either.
        ok, decs, idx = self.rl.check_multi([(a, "k", 2), ("b", b"k")])
        self.assertFalse(ok)
        self.assertEqual(idx, 1)
        self.assertEqual(self.rl.check(a, "k", cost=0).remaining, 4)
        with self.assertRaises(RateLimitError) as cm:
            self.rl.check_multi([(a, "k"), (a, b"")])
        self.assertEqual(cm.exception.name, "RL_EKEYLEN")

    def test_stats(self):
        api = self.rl.add_limit("name=api rate=1/m burst=1")
        self.rl.check(api, "k")
        self.rl.check(api, "k")
        s = self.rl.stats()
        self.assertEqual((s["admitted"], s["denied"], s["limits"], s["keys_live"]), (1, 1, 1, 1))
        self.assertEqual(s["health"], rlm.RL_HEALTH_HEALTHY)
        self.assertNotIn("size", s)
        ls = self.rl.limit_stats("api")
        self.assertEqual((ls["admitted"], ls["denied"], ls["keys_live"]), (1, 1, 1))

    def test_limit_management(self):
        api = self.rl.add_limit("name=api rate=1/m burst=1")
        lim = self.rl.get_limit(api)
        self.assertEqual(lim.name, "api")
        self.assertEqual((lim.rate.count, lim.rate.period_ms, lim.burst), (1, 60000, 1))
        self.rl.check(api, "k")
        self.rl.update_limit(api, "name=api rate=1/m burst=5")
        self.assertEqual(self.rl.get_limit("api").burst, 5)
        self.assertTrue(self.rl.check(api, "k").allowed)
        self.rl.remove_limit(api)
        with self.assertRaises(RateLimitError) as cm:
            self.rl.check(api, "k")
        self.assertEqual(cm.exception.code, rlm.RL_ENOTFOUND)
        # A Limit struct is accepted as well as a spec.
        lim = rlm.parse_limit("name=p rate=5/10s")
        self.assertEqual((lim.rate.count, lim.rate.period_ms), (5, 10000))
        self.assertGreater(self.rl.add_limit(lim), 0)

    def test_metrics_text(self):
        if rlm.load().rl_metrics_text is None:
            self.skipTest("library without rl_metrics_text")
        api = self.rl.add_limit("name=api rate=1/m burst=1")
        self.rl.check(api, "k")
        self.rl.check(api, "k")
        text = self.rl.metrics_text()
        self.assertIn('ratelimit_limit_admitted_total{limit="api"} 1\n', text)
        self.assertIn('ratelimit_limit_denied_total{limit="api"} 1\n', text)
        self.assertIn("# TYPE ratelimit_keys_live gauge\n", text)

    def test_threads(self):
        # ctypes drops the GIL during each call: checks really run at once,
        # and the bucket still admits exactly its burst.
        api = self.rl.add_limit("name=api rate=1/h burst=1000")
        admitted = []

        def run():
            admitted.append(sum(self.rl.allow(api, "shared") for _ in range(500)))

        ts = [threading.Thread(target=run) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(sum(admitted), 1000)

    def test_log_callback(self):
        # The first line need not follow the move to degraded: the sync
        # thread logs the failed connect ("cannot connect to ...") before it
        # publishes the new health, so a reader woken by that line can still
        # see healthy. Wait for each event on its own.
        msgs = []
        with RateLimiter("redis://127.0.0.1:1", sync_interval_ms=50,
                         key_secret=b"python-fleet-secret-0123",
                         log=lambda level, msg: msgs.append((level, msg))) as rl:
            degraded = wait_for(lambda: rl.stats()["health"] == rlm.RL_HEALTH_DEGRADED)
            self.assertTrue(degraded, f"not degraded with nothing listening; logged {msgs}")
            self.assertTrue(wait_for(lambda: msgs), "no log line from an unreachable Redis")
        for level, msg in msgs:
            self.assertIsInstance(msg, str)
            self.assertIn(level, (rlm.RL_LOG_ERROR, rlm.RL_LOG_WARN, rlm.RL_LOG_INFO,
                                  rlm.RL_LOG_DEBUG))


class SecretFile(unittest.TestCase):
    """read_key_secret follows the one rule for a secret file (docs/fleet.md,
    "The secret file"): one final "\\n" or "\\r\\n" is not the secret's."""

    def read(self, data):
        d = tempfile.mkdtemp(prefix="rl-secret-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, "secret")
        with open(path, "wb") as f:
            f.write(data)
        return rlm.read_key_secret(path)

    def test_one_final_line_ending_is_dropped(self):
        s = b"python-secret-0123456789"
        self.assertEqual(self.read(s), s)
        self.assertEqual(self.read(s + b"\n"), s)
        self.assertEqual(self.read(s + b"\r\n"), s)
        self.assertEqual(self.read(s + b"\n\n"), s + b"\n")
        self.assertEqual(self.read(s + b"\r"), s + b"\r")
        self.assertEqual(self.read(b"\n" + s), b"\n" + s)

    def test_the_secret_opens_a_limiter(self):
        secret = self.read(b"python-secret-0123456789\n")
        rl = RateLimiter("redis://127.0.0.1:1", key_secret=secret, node_id="secret-test",
                         log_quiet=True)
        rl.close()


class Errors(unittest.TestCase):
    def setUp(self):
        self.rl = RateLimiter()
        self.api = self.rl.add_limit("name=api rate=10/s burst=5")

    def tearDown(self):
        self.rl.close()

    def assertRlError(self, name, fn, *args, **kw):
        with self.assertRaises(RateLimitError) as cm:
            fn(*args, **kw)
        e = cm.exception
        self.assertEqual(e.name, name)
        self.assertEqual(e.code, getattr(rlm, name))
        self.assertEqual(e.message, rlm.load().strerror(e.code))
        self.assertIn(name, str(e))
        return e

    def test_bad_spec_names_the_word(self):
        e = self.assertRlError("RL_ESPEC", self.rl.add_limit, "name=x rate=10/s bogus=1")
        self.assertEqual(e.function, "rl_limit_parse")
        self.assertIn("bogus", e.detail)
        self.assertIn("bogus", str(e))
        e = self.assertRlError("RL_ESPEC", rlm.parse_limit, "name=x rate=10/fortnight")
        self.assertIn("fortnight", str(e))
        self.assertRlError("RL_EMODE", self.rl.add_limit, "name=x rate=10/s mode=psychic")
        self.assertRlError("RL_ENAME", self.rl.add_limit, "name=bad/name rate=10/s")
        self.assertRlError("RL_ERANGE", self.rl.add_limit, "name=x rate=0/s")

    def test_key_length(self):
        self.assertRlError("RL_EKEYLEN", self.rl.check, self.api, b"k" * (rlm.RL_MAX_KEY_LEN + 1))
        self.assertRlError("RL_EKEYLEN", self.rl.check, self.api, "")
        self.assertRlError("RL_EKEYLEN", self.rl.refund, self.api, b"")

    def test_other_errors(self):
        self.assertRlError("RL_EEXIST", self.rl.add_limit, "name=api rate=1/s")
        self.assertRlError("RL_ENOTFOUND", self.rl.check, 12345, "k")
        self.assertRlError("RL_ENOTFOUND", self.rl.check, 1 << 40, "k")
        self.assertRlError("RL_ENOTFOUND", self.rl.check, "nosuch", "k")
        self.assertRlError("RL_ECOST", self.rl.check, self.api, "k", cost=6)
        self.assertRlError("RL_ERANGE", self.rl.check, self.api, "k", cost=-1)
        self.assertRlError("RL_ERANGE", self.rl.check, self.api, "k", cost=1 << 32)
        self.assertRlError("RL_ERANGE", RateLimiter, max_keys=1)
        self.assertRlError("RL_ERANGE", RateLimiter, key_secret=b"short")
        self.assertRlError("RL_ERANGE", RateLimiter, redis_url="http://nope",
                           key_secret=b"python-fleet-secret-0123")

    def test_open_errors_name_the_field(self):
        # rl_open's message, as the exception's detail: the field and why.
        secret = b"python-fleet-secret-0123"
        cases = [
            ({"redis_url": "redis://127.0.0.1:1"}, ["key_secret", "required with a redis_url"]),
            ({"redis_url": "127.0.0.1:6379", "key_secret": secret}, ["redis_url", "no scheme"]),
            ({"redis_url": "rediss://h:6379", "key_secret": secret}, ["redis_url", "TLS"]),
            ({"redis_url": "unix://tmp/redis.sock", "key_secret": secret},
             ["redis_url", "socket path"]),
            ({"redis_url": "redis://bad\r\nInjected-Line=yes", "key_secret": secret},
             ["redis_url", "0x0d"]),
            ({"key_secret": b"short"}, ["key_secret", "5 bytes"]),
            ({"node_id": "has space"}, ["node_id", "byte 3 is 0x20"]),
            ({"sync_interval_ms": 20}, ["sync_interval_ms", "20 is outside 50..200"]),
        ]
        for kw, says in cases:
            e = self.assertRlError("RL_ERANGE", RateLimiter, **kw)
            self.assertEqual(e.function, "rl_open")
            for word in says:
                self.assertIn(word, e.detail, kw)
                self.assertIn(word, str(e), kw)

    def test_log_quiet_and_stats_fields(self):
        with RateLimiter(log_quiet=True) as q:
            st = q.stats()
            for name in ("fleet_nodes", "fleet_split_rounds", "fleet_split_fingerprints",
                         "log_dropped"):
                self.assertEqual(st[name], 0, name)
        with self.assertRaises(TypeError):
            self.rl.check(self.api, 42)
        with self.assertRaises(TypeError):
            self.rl.check(3.5, "k")

    def test_closed(self):
        self.rl.close()
        self.rl.close()  # idempotent
        self.assertTrue(self.rl.closed)
        e = self.assertRlError("RL_EINVAL", self.rl.check, self.api, "k")
        self.assertIn("closed", str(e))

    def test_unknown_code(self):
        e = RateLimitError(-999, "f")
        self.assertEqual(e.name, "RL_EUNKNOWN")



class Reservations(unittest.TestCase):
    """reserve/settle/release, reserve_multi, reserve_wait, wait and
    reserve_stats. Rates per hour where a count must be exact: nothing
    refills during a test."""

    def setUp(self):
        self.rl = RateLimiter()
        self.rl.add_limit("name=tpm rate=10/h burst=10 mode=local")

    def tearDown(self):
        self.rl.close()

    def peek(self, key, limit="tpm"):
        return self.rl.check(limit, key, 0).remaining

    def test_settle_up_is_debt(self):
        r = self.rl.reserve("tpm", "k", 4, ttl_ms=60000)
        self.assertTrue(r)
        self.assertEqual((r.estimate, r.ready_in_ms, r.decision.remaining), (4, 0, 6))
        self.rl.settle(r, 12)  # 12 used of 10: the key owes 2
        self.assertTrue(r.done)
        self.assertFalse(self.rl.check("tpm", "k"))
        self.assertFalse(self.rl.reserve("tpm", "k", 1))
        st = self.rl.reserve_stats()
        self.assertEqual((st["reserved"], st["settled_up"], st["debt_tokens"], st["in_flight"]),
                         (1, 1, 8, 0))
        self.assertEqual(st["denied"], 1)
        with self.assertRaises(rlm.InvalidArgumentError):
            r.settle(1)  # settled once already: refused, nothing charged

    def test_settle_down_refunds_and_release_gives_all_back(self):
        r = self.rl.reserve("tpm", "a", 6)
        r.settle(2)
        self.assertEqual(self.peek("a"), 8)
        r = self.rl.reserve("tpm", "b", 7)
        self.assertEqual(self.peek("b"), 3)
        r.release()
        self.assertEqual(self.peek("b"), 10)
        with self.rl.reserve("tpm", "c", 5) as r:  # left without a settle: released
            self.assertEqual(self.peek("c"), 5)
        self.assertEqual(self.peek("c"), 10)
        st = self.rl.reserve_stats()
        self.assertEqual((st["settled_down"], st["released"], st["refund_tokens"]), (1, 2, 16))

    def test_denied_and_bad_reservations(self):
        self.assertFalse(self.rl.reserve("tpm", "d", 10).settle(10) or False)
        r = self.rl.reserve("tpm", "d", 1)
        self.assertFalse(r)
        self.assertGreater(r.decision.retry_after_ms, 0)
        with self.assertRaises(rlm.InvalidArgumentError):
            r.release()  # a denied reservation holds nothing
        with self.assertRaises(rlm.CostError):
            self.rl.reserve("tpm", "d", 11)  # above the burst
        with self.assertRaises(rlm.InvalidArgumentError):
            self.rl.reserve("tpm", "d", 1, ttl_ms=0)
        with self.assertRaises(rlm.OutOfRangeError):
            self.rl.reserve("tpm", "e", 1).settle(rlm.RL_COST_SETTLE_MAX + 1)

    def test_reserve_multi_is_all_or_nothing(self):
        self.rl.add_limit("name=rpm rate=1/h burst=1 mode=local")
        m = self.rl.reserve_multi([("tpm", "k", 3), ("rpm", "k", 1)])
        self.assertTrue(m)
        self.assertEqual(m.denied_index, 2)
        self.assertEqual(self.peek("k"), 7)
        m2 = self.rl.reserve_multi([("tpm", "k", 3), ("rpm", "k", 1)])
        self.assertFalse(m2)
        self.assertEqual(m2.denied_index, 1)
        self.assertFalse(any(m2.reservations))
        self.assertEqual(self.peek("k"), 7)  # the denied batch holds nothing
        m.reservations[0].settle(5)
        m.reservations[1].settle(1)
        self.assertEqual(self.peek("k"), 5)

    def test_reserve_wait_tells_when_and_cancels_exactly(self):
        self.rl.add_limit("name=pace rate=1/s burst=1 mode=local")
        first = self.rl.reserve_wait("pace", "w", 1, 0)
        self.assertTrue(first)
        self.assertEqual(first.ready_in_ms, 0)
        second = self.rl.reserve_wait("pace", "w", 1, 5000)
        self.assertTrue(second)
        self.assertTrue(0 < second.ready_in_ms <= 1000, second.ready_in_ms)
        third = self.rl.reserve_wait("pace", "w", 1, 100)  # needs about 2 s
        self.assertFalse(third)
        self.assertGreater(third.decision.retry_after_ms, 100)
        second.release()  # the cancel: exactly its token back
        again = self.rl.reserve_wait("pace", "w", 1, 5000)
        self.assertTrue(again)
        self.assertLessEqual(again.ready_in_ms, second.ready_in_ms)
        again.release()
        first.settle(1)

    def test_max_reservations(self):
        with RateLimiter(max_reservations=1) as rl:
            rl.add_limit("name=a rate=10/h mode=local")
            r = rl.reserve("a", "k", 1)
            with self.assertRaises(rlm.ReservationsFullError):
                rl.reserve("a", "k", 1)
            r.settle(1)
            self.assertEqual(rl.reserve_stats()["capacity"], 1)

    def test_wait_refuses_at_once_when_too_long(self):
        self.rl.add_limit("name=slow rate=1/h burst=1 mode=local")
        self.assertTrue(self.rl.wait("slow", "x", 1, max_wait_ms=10))
        t0 = time.monotonic()
        d = self.rl.wait("slow", "x", 1, max_wait_ms=10)
        self.assertFalse(d)
        self.assertLess(time.monotonic() - t0, 5)  # refused, not slept on
        self.assertGreater(d.retry_after_ms, 10)
        st = self.rl.reserve_stats()
        self.assertEqual((st["waits"], st["waits_refused"]), (1, 1))


class Inflight(unittest.TestCase):
    """inflight_acquire/release and the with-block permit."""

    def setUp(self):
        self.rl = RateLimiter()
        self.rl.add_limit("name=db kind=inflight max=2")

    def tearDown(self):
        self.rl.close()

    def held(self):
        return self.rl.limit_stats("db")["inflight"]

    def test_with_block_holds_and_releases(self):
        with self.rl.inflight("db", "k") as p1:
            self.assertTrue(p1)
            self.assertEqual(p1.decision.inflight, 1)
            with self.rl.inflight("db", "k"):
                self.assertEqual(self.held(), 2)
                with self.assertRaises(rlm.InflightFull) as cm:
                    with self.rl.inflight("db", "k"):
                        self.fail("a third permit was handed out")
                d = cm.exception.decision
                self.assertEqual((d.inflight, d.limit, d.allowed), (2, 2, False))
                self.assertTrue(d.flags & rlm.RL_FLAG_INFLIGHT)
                self.assertGreaterEqual(cm.exception.retry_after_ms, 1)
                self.assertIn("Retry-After:", d.headers())
            self.assertEqual(self.held(), 1)
        self.assertEqual(self.held(), 0)
        self.assertTrue(p1.released)

    def test_exception_releases_as_dropped(self):
        with self.assertRaises(KeyError):
            with self.rl.inflight("db", "k") as p:
                raise KeyError("the work failed")
        self.assertTrue(p.released)
        self.assertEqual(self.held(), 0)
        with self.assertRaises(rlm.InvalidArgumentError):
            p.release()  # once only

    def test_acquire_release_by_hand(self):
        p = self.rl.inflight_acquire("db", b"\x00bin")
        self.assertTrue(p)
        self.assertFalse(p.release(rlm.RL_INFLIGHT_IGNORED, 1000))
        with self.assertRaises(rlm.OutOfRangeError):
            self.rl.inflight_acquire("db", "k").release(7)
        with self.assertRaises(rlm.ModeError):
            self.rl.add_limit("name=r rate=1/s")
            self.rl.inflight_acquire("r", "k")

    def test_classes(self):
        self.rl.add_limit("name=pool kind=inflight max=4 partitions=live:0.5,batch:0.5")
        self.assertEqual(self.rl.inflight_class("pool", "live"), 0)
        self.assertEqual(self.rl.inflight_class("pool", "batch"), 1)
        with self.assertRaises(rlm.LimitNotFoundError):
            self.rl.inflight_class("pool", "nosuch")
        with self.rl.inflight("pool", "k", cls="batch") as p:
            self.assertTrue(p)
        with self.rl.inflight("pool", "k", cls=0) as p:
            self.assertTrue(p)
        with self.assertRaises(rlm.OutOfRangeError):
            self.rl.inflight_acquire("pool", "k", cls=3)


class StructLayout(unittest.TestCase):
    """Every ctypes field's offset, and each struct's size, against what a C
    compiler makes of include/ratelimit.h."""

    STRUCTS = {
        "rl_allocator_t": rlm.Allocator,
        "rl_config_t": rlm.Config,
        "rl_rate_t": rlm.Rate,
        "rl_limit_t": rlm.Limit,
        "rl_request_t": rlm.Request,
        "rl_decision_t": rlm.Decision_t,
        "rl_stats_t": rlm.Stats,
        "rl_limit_stats_t": rlm.LimitStats,
        "rl_quota_t": rlm.Quota,
        "rl_quota_result_t": rlm.QuotaResult_t,
        "rl_hotkey_t": rlm.Hotkey,
        "rl_retry_config_t": rlm.RetryConfig,
        "rl_reservation_t": rlm.Reservation_t,
        "rl_reserve_stats_t": rlm.ReserveStats,
        "rl_permit_t": rlm.Permit_t,
    }

    def test_offsets_match_c(self):
        cc = shutil.which(os.environ.get("CC", "cc"))
        include = os.environ.get("RL_INCLUDE", os.path.join(ROOT, "include"))
        if cc is None or not os.path.exists(os.path.join(include, "ratelimit.h")):
            self.skipTest("needs a C compiler and include/ratelimit.h (RL_INCLUDE)")
        lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <ratelimit.h>",
                 "int main(void) {"]
        want = {}
        for cname, cls in self.STRUCTS.items():
            lines.append(f'printf("{cname} %zu\\n", sizeof({cname}));')
            want[cname] = ctypes.sizeof(cls)
            for field, _ in cls._fields_:
                lines.append(f'printf("{cname}.{field} %zu\\n", offsetof({cname}, {field}));')
                want[f"{cname}.{field}"] = getattr(cls, field).offset
        lines += ["return 0;", "}"]
        with tempfile.TemporaryDirectory() as tmp:
            src, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
            with open(src, "w") as f:
                f.write("\n".join(lines) + "\n")
            subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", include, src, "-o", exe],
                           check=True)
            out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
        got = dict(line.rsplit(" ", 1) for line in out.splitlines())
        self.assertEqual({k: int(v) for k, v in got.items()}, want)

    def test_sizes_are_accepted(self):
        # The library takes each struct at the size ctypes gives it.
        lib = rlm.load()
        for init, cls in (("rl_config_init_sized", rlm.Config),
                          ("rl_limit_init_sized", rlm.Limit),
                          ("rl_request_init_sized", rlm.Request),
                          ("rl_decision_init_sized", rlm.Decision_t),
                          ("rl_stats_init_sized", rlm.Stats),
                          ("rl_limit_stats_init_sized", rlm.LimitStats),
                          ("rl_quota_init_sized", rlm.Quota),
                          ("rl_quota_result_init_sized", rlm.QuotaResult_t),
                          ("rl_hotkey_init_sized", rlm.Hotkey),
                          ("rl_retry_config_init_sized", rlm.RetryConfig)):
            s = cls()
            getattr(lib, init)(ctypes.byref(s), ctypes.sizeof(s))
            self.assertEqual(s.size, ctypes.sizeof(cls), init)
        cfg = rlm.Config()
        lib.rl_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
        self.assertEqual(cfg.sync_interval_ms, 100)  # a default the library filled in
        self.assertEqual(cfg.max_keys, 65536)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ping(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class PrivateRedis:
    """A private redis-server on a free loopback port for each test, stopped
    by its PID (never a fixed port)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        for _ in range(5):  # another process may grab the free port first
            self.port = _free_port()
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", self.tmp.name],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if wait_for(lambda: self.proc.poll() is not None or _ping(self.port)) and \
                    self.proc.poll() is None:
                return
            self.proc.kill()
            self.proc.wait()
        self.fail("redis-server did not start")

    def tearDown(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.tmp.cleanup()


@unittest.skipIf(shutil.which("redis-server") is None, "redis-server not on PATH")
class GlobalTier(PrivateRedis, unittest.TestCase):
    """Two instances (nodes) sharing a limit through a real redis-server."""

    def node(self, name):
        return RateLimiter(f"redis://127.0.0.1:{self.port}", node_id=name,
                           key_secret=b"python-fleet-secret-0123", key_prefix="py",
                           sync_interval_ms=50, expected_nodes=1)

    def test_two_nodes_share_a_limit(self):
        a, b = self.node("a"), self.node("b")
        try:
            wait_for(lambda: a.stats()["sync_connected"] and b.stats()["sync_connected"])
            self.assertEqual((a.stats()["sync_connected"], b.stats()["sync_connected"]), (1, 1))
            ia = a.add_limit("name=g rate=20/s burst=5")
            ib = b.add_limit("name=g rate=20/s burst=5")
            # Both nodes want far more than the limit. Alone, each would admit
            # burst + 20/s (130 in 3 s, 260 for the two); sharing, the fleet
            # admits about burst + 20/s as a whole.
            t0 = time.monotonic()
            admitted = {"a": 0, "b": 0}
            while time.monotonic() - t0 < 3.0:
                admitted["a"] += a.allow(ia, "tenant")
                admitted["b"] += b.allow(ib, "tenant")
                time.sleep(0.002)
            elapsed = time.monotonic() - t0
            total = admitted["a"] + admitted["b"]
            # Pre-sync, each node starts with the whole burst (expected_nodes=1);
            # allow that and a round's worth of slack on top of burst + rate x t.
            bound = 2 * 5 + 20 * elapsed + 20
            self.assertLessEqual(total, bound, f"fleet admitted {admitted} in {elapsed:.2f} s")
            self.assertGreaterEqual(total, 20 * elapsed * 0.5, f"admitted only {admitted}")
            self.assertGreater(admitted["a"], 0)
            self.assertGreater(admitted["b"], 0)
            # A report is sent in the round after the checks: wait for it.
            self.assertTrue(wait_for(lambda: a.stats()["sync_reports"] > 0),
                            "node a never reported its key")
        finally:
            a.close()
            b.close()


@unittest.skipIf(shutil.which("redis-server") is None, "redis-server not on PATH")
class Quotas(PrivateRedis, unittest.TestCase):
    """rl_quota_*: parse, add, charge once per request id, read, remove,
    against a private redis-server."""

    def limiter(self, **kw):
        return RateLimiter(f"redis://127.0.0.1:{self.port}", node_id="quota-node",
                           key_secret=b"python-quota-secret-0123", key_prefix="pyq",
                           log_quiet=True, **kw)

    def test_charge_is_idempotent_per_request_id(self):
        with self.limiter() as rl:
            plan = rl.add_quota("name=plan amount=5 period=day dedup=1h")
            first = rl.charge_quota(plan, "tenant", "req-1", cost=2)
            self.assertTrue(first)
            self.assertIsInstance(first, rlm.QuotaResult)
            self.assertEqual((first.used, first.remaining, first.amount), (2, 3, 5))
            self.assertFalse(first.duplicate or first.degraded)
            again = rl.charge_quota("plan", "tenant", b"req-1", cost=2)  # a retry
            self.assertTrue(again.duplicate)
            self.assertEqual((again.allowed, again.used, again.remaining), (True, 2, 3))
            self.assertEqual(rl.charge_quota(plan, "tenant", "req-2", cost=3).remaining, 0)
            over = rl.charge_quota(plan, "tenant", "req-3")
            self.assertFalse(over)
            self.assertEqual((over.used, over.remaining), (5, 0))
            self.assertTrue(rl.charge_quota(plan, "other", "req-3"))  # ids are per key
            got = rl.get_quota(plan, "tenant")
            self.assertEqual((got.allowed, got.used, got.remaining), (False, 5, 0))
            self.assertGreater(got.reset_unix_ms, time.time() * 1000)
            self.assertLessEqual(got.reset_unix_ms, time.time() * 1000 + 86400000)
            st = rl.stats()
            self.assertEqual((st["quota_charges"], st["quota_duplicates"]), (5, 1))
            with self.assertRaises(rlm.CostError):
                rl.charge_quota(plan, "tenant", "req-4", cost=6)
            with self.assertRaises(rlm.OutOfRangeError):
                rl.charge_quota(plan, "tenant", "", cost=1)  # an empty request id
            with self.assertRaises(rlm.OutOfRangeError):
                rl.charge_quota(plan, "tenant", "req-5", cost=-1)
            with self.assertRaises(rlm.LimitExistsError):
                rl.add_quota("name=plan amount=9")
            rl.remove_quota("plan")
            with self.assertRaises(rlm.LimitNotFoundError):
                rl.charge_quota(plan, "tenant", "req-6")
            with self.assertRaises(rlm.LimitNotFoundError):
                rl.get_quota("plan", "tenant")

    def test_usage_is_in_redis_not_the_node(self):
        # A second node (another instance) sees the first one's charges, and
        # a retry sent to it is still recognised.
        with self.limiter() as a, self.limiter() as b:
            qa = a.add_quota(rlm.parse_quota("name=sms amount=3 period=1h"))
            qb = b.add_quota("name=sms amount=3 period=1h")
            self.assertTrue(a.charge_quota(qa, "u", "x"))
            retried = b.charge_quota(qb, "u", "x")
            self.assertTrue(retried.duplicate)
            self.assertEqual(b.get_quota(qb, "u").used, 1)

    @unittest.skipUnless(hasattr(os, "fork"), "needs fork()")
    def test_quotas_survive_the_reopen_after_fork(self):
        # A pre-fork server: the quota is added in the master, charged in a
        # worker, whose reopened instance adds it again (the usage is Redis's).
        with self.limiter() as rl:
            plan = rl.add_quota("name=plan amount=5 period=day")
            rl.remove_quota(rl.add_quota("name=gone amount=1"))  # ids now differ from a re-add
            sms = rl.add_quota("name=sms amount=3 period=day")
            self.assertTrue(rl.charge_quota(plan, "t", "r1"))
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    a = rl.charge_quota(plan, "t", "r1")  # a retry in the worker
                    b = rl.charge_quota(sms, "t", "s1", cost=2)
                    out = f"{a.duplicate} {a.used} {b.used} {rl.get_quota('sms', 't').used}"
                except BaseException as e:  # noqa: BLE001
                    out = f"raised {e!r}"
                os.write(w, out.encode())
                os._exit(0)
            os.close(w)
            got = os.read(r, 4096).decode()
            os.close(r)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
            self.assertEqual(got, "True 1 2 2")
            self.assertEqual(rl.get_quota(sms, "t").used, 2)

    def test_refusals(self):
        with self.assertRaises(rlm.SpecError) as cm:
            rlm.parse_quota("name=p amount=10 period=fortnight")
        self.assertIn("fortnight", cm.exception.detail)
        with self.assertRaises(rlm.ModeError):
            rlm.parse_quota("name=p amount=10 on_failure=local")
        q = rlm.parse_quota("name=p amount=10 period=week on_failure=open dedup=600s")
        self.assertEqual((q.amount, q.period, q.on_failure, q.dedup_ms),
                         (10, rlm.RL_PERIOD_WEEK, rlm.RL_FAIL_OPEN, 600000))
        with RateLimiter() as local:  # no redis_url: a quota in memory is no quota
            with self.assertRaises(rlm.NotSupportedError):
                local.add_quota(q)
            with self.assertRaises(rlm.LimitNotFoundError):
                local.charge_quota(7, "k", "r")
            with self.assertRaises(TypeError):
                local.charge_quota(1.5, "k", "r")


class HotKeys(unittest.TestCase):
    """rl_hotkeys through hot_keys(): a local-only instance's busiest keys."""

    def test_the_busiest_key_is_reported_and_marked(self):
        with RateLimiter(hotkeys_k=4) as rl:
            hot = rl.add_limit("name=h rate=100/s burst=100 mode=local hot=0.5")
            calm = rl.add_limit("name=c rate=100/s burst=100 mode=local")
            self.assertEqual(rl.hot_keys(hot), [])
            reports = []
            for _ in range(4):  # hot marks need RL_HOT_ENTER evaluations in a row
                for _ in range(2000):
                    rl.check(hot, b"busy")
                for i in range(20):
                    rl.check(hot, f"quiet-{i}")
                for _ in range(500):  # second busiest: within the K=4 reported
                    rl.check(calm, "c-key")
                time.sleep(0.01)
                reports.append(rl.hot_keys(hot, n=8))
            last = reports[-1]
            self.assertGreater(len(last), 0)
            top = last[0]
            self.assertIsInstance(top, rlm.HotKey)
            self.assertEqual((top.key, top.key_len, top.limit), (b"busy", 4, hot))
            self.assertFalse(top.truncated)
            self.assertTrue(top.hot)
            self.assertGreater(top.demand_per_s, 0)
            self.assertGreaterEqual(top.count, top.count_err)
            self.assertTrue(rl.check(hot, b"busy").flags & rlm.RL_FLAG_HOT)
            self.assertTrue(all(k.limit == hot for k in last))
            every = rl.hot_keys(None, n=64)
            self.assertIn(calm, {k.limit for k in every})
            self.assertEqual(len(rl.hot_keys(None, n=1)), 1)
            with self.assertRaises(rlm.LimitNotFoundError):
                rl.hot_keys(12345)
            with self.assertRaises(rlm.OutOfRangeError):
                rl.hot_keys(hot, n=0)


class ClientRetry(unittest.TestCase):
    """libratelimit.retry: the C helper's rule through the class and the
    decorator, on a fake clock (nothing sleeps)."""

    def setUp(self):
        from libratelimit import retry as rmod
        self.rmod = rmod
        self.now = 1000.0
        self.slept = []

    def fake(self, **kw):
        def sleep(s):
            self.slept.append(s)
            self.now += s
        return self.rmod.Retry(clock=lambda: self.now, sleep=sleep, **kw)

    def test_delays_follow_the_rule(self):
        with self.fake(seed=11, max_retries=50) as a, self.fake(seed=11, max_retries=50) as b:
            for retry in range(12):
                ceiling = min(20.0, 1.0 * 2 ** retry)
                da = a.delay(retry, self.rmod.THROTTLED, hint_ms=3000)
                self.assertEqual(da, b.delay(retry, self.rmod.THROTTLED, hint_ms=3000))
                self.assertGreaterEqual(da, 3.0)
                self.assertLessEqual(da, 3.0 + ceiling)
                dn = a.delay(retry, self.rmod.FAILED)
                b.delay(retry, self.rmod.FAILED)
                self.assertLessEqual(dn, min(20.0, 0.1 * 2 ** retry))
            self.assertIsNone(a.delay(50))                       # max_retries
            self.assertIsNone(a.delay(0, hint_ms=60001))         # past hint_cap_ms
        with self.fake(random=lambda: 12345) as r:
            self.assertEqual(r.delay(0, self.rmod.FAILED), (12345 % 101) / 1000)
            self.assertEqual(r.delay(1, self.rmod.THROTTLED, 250), (250 + 12345 % 2001) / 1000)

    def test_hints(self):
        h = self.rmod.hint_ms
        self.assertEqual(h("120"), 120000)
        self.assertEqual(h(None, '"api";r=0;t=5'), 5000)
        self.assertEqual(h("3", '"api";r=0;t=7'), 7000)
        self.assertIsNone(h(None, '"api";r=2;t=7'))
        self.assertIsNone(h("soon"))
        self.assertIsNone(h())
        self.assertEqual(h("Sun, 06 Nov 1994 08:49:47 GMT", now_unix_ms=784111777000), 10000)

    def test_call_retries_after_the_hint(self):
        calls = []

        def flaky():
            calls.append(self.now)
            if len(calls) < 3:
                raise self.rmod.Throttled(hint_ms=1000)
            return "done"
        with self.fake(seed=3) as r:
            self.assertEqual(r.call(flaky), "done")
            self.assertEqual(len(calls), 3)
            self.assertEqual(len(self.slept), 2)
            self.assertTrue(1.0 <= self.slept[0] <= 2.0, self.slept)
            self.assertTrue(1.0 <= self.slept[1] <= 3.0, self.slept)
            self.assertEqual(r.budget()["requests"], 3)
            self.assertEqual(r.budget()["accepts"], 1)

    def test_gives_up_and_reraises(self):
        calls = []

        def always_down():
            calls.append(1)
            raise ConnectionResetError("reset")
        with self.fake(seed=4, max_retries=3, budget_k=0) as r:
            with self.assertRaises(ConnectionResetError):
                r.call(always_down)
            self.assertEqual(len(calls), 4)
            for i, s in enumerate(self.slept):
                self.assertLessEqual(s, 0.1 * 2 ** i)

        def not_retryable():
            calls.append(1)
            raise ValueError("bad request")
        calls.clear()
        with self.fake(seed=4) as r:
            with self.assertRaises(ValueError):
                r.call(not_retryable)
            self.assertEqual(len(calls), 1)
            self.assertEqual(r.budget()["accepts"], 1)  # answered: not the server's load

    def test_http_429_reads_its_headers(self):
        import email.message
        import urllib.error
        hdrs = email.message.Message()
        hdrs["Retry-After"] = "2"
        calls = []

        def fetch():
            calls.append(1)
            if len(calls) == 1:
                raise urllib.error.HTTPError("http://x", 429, "Too Many Requests", hdrs, None)
            return 200
        with self.fake(seed=5) as r:
            self.assertEqual(r.call(fetch), 200)
            self.assertTrue(2.0 <= self.slept[0] <= 3.0, self.slept)

    def test_budget_rejects_locally(self):
        sent = []

        def refused():
            sent.append(1)
            raise self.rmod.Throttled()
        with self.fake(seed=6, max_retries=0) as r:
            rejected = 0
            for _ in range(200):
                try:
                    r.call(refused)
                except self.rmod.RetryBudgetExceeded:
                    rejected += 1
                except self.rmod.Throttled:
                    pass
            b = r.budget()
            self.assertEqual(b["requests"], 200)
            self.assertEqual(len(sent) + rejected, 200)
            self.assertGreater(rejected, 150)
            self.assertAlmostEqual(b["reject_probability"], 200 / 201, places=5)

    def test_decorator_and_refusals(self):
        retry = self.fake(seed=7)
        n = []

        @self.rmod.retrying(retry)
        def twice():
            n.append(1)
            if len(n) == 1:
                raise TimeoutError()
            return len(n)
        self.assertEqual(twice(), 2)
        self.assertIs(twice.retry, retry)

        @retry
        def once():
            return "ok"
        self.assertEqual(once(), "ok")
        retry.close()
        with self.assertRaises(ValueError):
            retry.admit()
        with self.assertRaises(rlm.OutOfRangeError) as cm:
            self.rmod.Retry(base_ms=0)
        self.assertTrue(cm.exception.detail.startswith("base_ms:"), cm.exception.detail)
        with self.assertRaises(rlm.OutOfRangeError):
            self.rmod.Retry(budget_k=0.5)
        with self.assertRaises(TypeError):
            self.rmod.Retry(cap_ms="20s")


class FirstClass(unittest.TestCase):
    """The Python-shaped API: falsy results on deny, a limit as an object,
    one exception class per code, the version, every config field."""

    def setUp(self):
        self.rl = RateLimiter()

    def tearDown(self):
        self.rl.close()

    def test_check_multi_is_falsy_on_deny_like_check(self):
        a = self.rl.add_limit("name=a rate=1/m burst=1")
        first = self.rl.check_multi([(a, "k")])
        self.assertTrue(first)
        self.assertTrue(self.rl.check(a, "other"))
        denied = self.rl.check_multi([(a, "k")])
        self.assertFalse(denied)
        self.assertFalse(self.rl.check(a, "k"))
        self.assertIsInstance(denied, rlm.MultiDecision)
        self.assertEqual((denied.allowed, denied.denied_index), (False, 0))
        self.assertFalse(denied.decisions[0].allowed)
        ok, decs, idx = denied  # still unpacks as (allowed, decisions, denied_index)
        self.assertEqual((ok, len(decs), idx), (False, 1, 0))

    def test_get_limit_is_an_object(self):
        api = self.rl.add_limit("name=api rate=5/10s burst=7 mode=local shadow=1 max_keys=100")
        lim = self.rl.get_limit(api)
        self.assertIsInstance(lim, rlm.LimitInfo)
        self.assertNotIsInstance(lim, ctypes.Structure)
        self.assertEqual(lim.name, "api")
        self.assertEqual(lim.rate, (5, 10000))
        self.assertEqual((lim.rate.count, lim.rate.period_ms, lim.burst), (5, 10000, 7))
        self.assertEqual((lim.mode, lim.shadow, lim.max_keys), ("local", True, 100))
        self.assertEqual(lim.mode_code, rlm.RL_MODE_LOCAL)
        self.assertIn(lim.on_failure, ("local", "open", "closed", "default"))
        self.assertEqual(lim, self.rl.get_limit("api"))
        self.assertIn("api", repr(lim))

    def test_one_exception_class_per_code(self):
        seen = set()
        for name in dir(rlm):
            code = getattr(rlm, name)
            if not (name.startswith("RL_E") and isinstance(code, int) and code < 0):
                continue
            cls = rlm.RateLimitError.code_class.get(code)
            self.assertIsNotNone(cls, f"{name} has no exception class")
            self.assertTrue(issubclass(cls, RateLimitError))
            self.assertEqual(cls.CODE, code)
            self.assertNotIn(cls, seen, f"{name} shares its class")
            seen.add(cls)
            e = RateLimitError(code, "f")
            self.assertIs(type(e), cls)
            self.assertEqual((e.code, e.name), (code, name))
            self.assertTrue(hasattr(rlm, cls.__name__), cls.__name__)
        self.assertEqual(len(seen), 18)
        with self.assertRaises(rlm.SpecError) as cm:
            self.rl.add_limit("name=x rate=fast")
        self.assertEqual(cm.exception.code, rlm.RL_ESPEC)
        self.rl.add_limit("name=x rate=1/s")
        with self.assertRaises(rlm.LimitExistsError):
            self.rl.add_limit("name=x rate=1/s")
        with self.assertRaises(rlm.LimitNotFoundError):
            self.rl.check("nope", "k")
        with self.assertRaises(rlm.KeyLengthError):
            self.rl.check("x", b"")
        self.assertIs(type(RateLimitError(-999, "f")), RateLimitError)

    def test_version(self):
        import libratelimit
        self.assertEqual(libratelimit.__version__, rlm.load().rl_version().decode())
        with open(os.path.join(HERE, "pyproject.toml")) as f:
            self.assertIn(f'version = "{libratelimit.__version__}"', f.read())

    def test_every_config_field_reaches_rl_open(self):
        """Each keyword is rl_config_t's field: out of its range, rl_open
        refuses it naming that field; in range, it opens."""
        bad = {"exact_timeout_ms": 60001, "exact_pool_size": 65, "quota_journal_max": 1000001,
               "quota_timeout_ms": 60001, "hotkeys_k": 1025, "clock_coarse_tick_ns": 10**9 + 1,
               "key_ttl_ms": 10, "demand_alpha_pct": 101, "degrade_after_failures": 101,
               "recover_after_rounds": 101, "reconnect_max_ms": 60001,
               "degrade_ramp_ms": 3600001, "max_limits": 5000, "expected_nodes": 100001,
               "sync_interval_ms": 10, "max_keys": 8, "max_reservations": 1048577}
        for field, value in bad.items():
            with self.assertRaises(rlm.OutOfRangeError, msg=field) as cm:
                RateLimiter(**{field: value}).close()
            self.assertTrue(cm.exception.detail.startswith(field + ":"), cm.exception.detail)
        good = {"exact_timeout_ms": 250, "exact_pool_size": 2, "quota_journal_max": 0,
                "quota_timeout_ms": 1000, "hotkeys_k": 8, "clock_coarse_tick_ns": 4000000}
        RateLimiter(**good).close()
        with self.assertRaises(TypeError):
            RateLimiter(exact_pool_size="2")


if __name__ == "__main__":
    unittest.main()
