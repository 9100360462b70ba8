# SPDX-License-Identifier: MIT
"""Client retry: back off after a 429 without coming back in a herd.

    from libratelimit.retry import Retry, Throttled, retrying

    retry = Retry()                          # one per client: its budget is the client's

    @retrying(retry)
    def fetch(url):
        return urllib.request.urlopen(url)   # a 429/503 HTTPError is retried, after its hint

    fetch("https://api.example.com/v1/things")

A wrapper of the C library's rl_retry_* (include/ratelimit.h, "Client
retry"), so every binding backs off by one documented rule: retry n waits
U(0, min(cap, base x 2^n)) (full jitter; base 100 ms, or 1 s after a
throttling answer; cap 20 s), and never less than the server's hint
(Retry-After, or RateLimit's t where r=0): hint + U(0, ...). A hint longer
than hint_cap_ms (60 s) gives up. The retry budget (the SRE book's
client-side throttling, K = 2) rejects an attempt locally with probability
max(0, (requests - K x accepts) / (requests + 1)) over the last two
minutes, once they hold 10 requests, raising RetryBudgetExceeded without
sending it.

Thread-safety: one Retry may be shared by every thread of a client (the C
object has a lock); call() and the decorator keep each call's attempt
count on the caller's stack.
"""

from __future__ import annotations

import ctypes
import functools
import time
import urllib.error
from typing import Any, Callable, Mapping, Optional, Tuple

from .binding import (RL_ALLOW, RL_ERANGE, RateLimitError, RetryConfig, RETRY_RANDOM_FN,
                      _check_rc, _need, load)

__all__ = ["Retry", "Throttled", "RetryBudgetExceeded", "retrying", "hint_ms",
           "OK", "THROTTLED", "FAILED"]

OK, THROTTLED, FAILED = 0, 1, 2  # RL_RETRY_OK, RL_RETRY_THROTTLED, RL_RETRY_FAILED


class Throttled(Exception):
    """Raise it (or a subclass) from a retried call to say the server
    refused for load; hint_ms is when it said to come back (None: it did
    not say). Retry.call reads it; after the last retry it is re-raised."""

    def __init__(self, message: str = "throttled", hint_ms: Optional[int] = None):
        super().__init__(message)
        self.hint_ms = hint_ms


class RetryBudgetExceeded(Exception):
    """The retry budget rejected an attempt locally: the server has been
    accepting less than 1/K of what this client sends. __cause__ is the last
    attempt's error, if there was one."""


def hint_ms(retry_after: Optional[str] = None, ratelimit: Optional[str] = None,
            now_unix_ms: Optional[int] = None, library: Optional[str] = None) -> Optional[int]:
    """The server's hint in milliseconds from its Retry-After and RateLimit
    header values (rl_retry_hint), or None when neither says when, or when
    a value is malformed (a hint is advice: a bad one is no hint)."""
    lib = load(library)
    _need(lib, "rl_retry_hint")
    now = int(time.time() * 1000) if now_unix_ms is None else now_unix_ms
    out = ctypes.c_int64(-1)
    rc = lib.rl_retry_hint(None if retry_after is None else retry_after.encode("latin-1"),
                           None if ratelimit is None else ratelimit.encode("latin-1"),
                           now, ctypes.byref(out))
    return out.value if rc == 1 else None


def _headers_hint(headers: Optional[Mapping[str, str]]) -> Optional[int]:
    if headers is None:
        return None
    return hint_ms(headers.get("Retry-After"), headers.get("RateLimit"))


def classify(exc: BaseException) -> Tuple[Optional[int], Optional[int]]:
    """The default classifier of Retry.call: (outcome, hint_ms) for an
    exception, outcome None for one not to retry. Throttled: THROTTLED with
    its hint. urllib's HTTPError 429, or 503 with a hint: THROTTLED with the
    hint of its headers; 502, 503 and 504 otherwise: FAILED; any other
    HTTPError was answered (not retried). ConnectionError, TimeoutError and
    other OSErrors (urllib.error.URLError among them): FAILED."""
    if isinstance(exc, Throttled):
        return THROTTLED, exc.hint_ms
    if isinstance(exc, urllib.error.HTTPError):
        hint = _headers_hint(exc.headers)
        if exc.code == 429 or (exc.code == 503 and hint is not None):
            return THROTTLED, hint
        return (FAILED, None) if exc.code in (502, 503, 504) else (None, None)
    if isinstance(exc, OSError):
        return FAILED, None
    return None, None


class Retry:
    """A client's retry helper (rl_retry_t). Keywords are rl_retry_config_t's
    fields (None: the library's default): base_ms, throttled_base_ms,
    cap_ms, hint_cap_ms, max_retries, budget_k (K as a number, 2.0 by
    default; 0 turns the budget off), budget_window_ms, budget_min_requests
    (10: below it nothing is rejected), seed (0 or None:
    from getrandom; set it for a reproducible sequence), random (a
    callable returning a uniform 64-bit int, instead of the PRNG). clock
    (monotonic seconds) and sleep are time.monotonic and time.sleep unless
    given, so a test can run it without waiting. A bad value raises
    OutOfRangeError naming the field."""

    def __init__(self, *, base_ms: Optional[int] = None, throttled_base_ms: Optional[int] = None,
                 cap_ms: Optional[int] = None, hint_cap_ms: Optional[int] = None,
                 max_retries: Optional[int] = None, budget_k: Optional[float] = None,
                 budget_window_ms: Optional[int] = None,
                 budget_min_requests: Optional[int] = None, seed: Optional[int] = None,
                 random: Optional[Callable[[], int]] = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 classify: Callable[[BaseException], Tuple[Optional[int], Optional[int]]] = classify,
                 library: Optional[str] = None):
        self._r = None
        self._lib = lib = load(library)
        _need(lib, "rl_retry_new")
        cfg = RetryConfig()
        lib.rl_retry_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
        fields = {"base_ms": base_ms, "throttled_base_ms": throttled_base_ms, "cap_ms": cap_ms,
                  "hint_cap_ms": hint_cap_ms, "max_retries": max_retries,
                  "budget_window_ms": budget_window_ms,
                  "budget_min_requests": budget_min_requests,
                  "budget_k_milli": None if budget_k is None else round(budget_k * 1000)}
        for name, value in fields.items():
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if not 0 <= value < 1 << 32:
                raise RateLimitError(RL_ERANGE, "rl_retry_new", f"{name}: {value}", lib)
            setattr(cfg, name, value)
        if seed is not None:
            if not 0 <= seed < 1 << 64:
                raise RateLimitError(RL_ERANGE, "rl_retry_new", f"seed: {seed}", lib)
            cfg.seed = seed
        self._random = None
        if random is not None:
            def _draw(_ud, _user=random):
                try:  # an exception must not unwind into C
                    return _user() & 0xFFFFFFFFFFFFFFFF
                except Exception:  # noqa: BLE001
                    return 0
            self._random = RETRY_RANDOM_FN(_draw)  # kept alive as long as the object
            cfg.random = self._random
        err = ctypes.create_string_buffer(256)
        handle = ctypes.c_void_p()
        rc = lib.rl_retry_new(ctypes.byref(handle), ctypes.byref(cfg), err, ctypes.sizeof(err))
        _check_rc(lib, rc, "rl_retry_new", err.value.decode("utf-8", "replace"))
        self._r = handle
        self.max_retries = cfg.max_retries
        self._clock, self._sleep, self._classify = clock, sleep, classify

    def close(self) -> None:
        """Free the C object (idempotent); no call may race it."""
        r, self._r = self._r, None
        if r is not None:
            self._lib.rl_retry_free(r)

    def __enter__(self) -> "Retry":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def _h(self):
        if self._r is None:
            raise ValueError("the Retry is closed")
        return self._r

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def admit(self) -> bool:
        """Before each attempt: True to send it, False when the budget
        rejects it locally (rl_retry_admit)."""
        return _check_rc(self._lib, self._lib.rl_retry_admit(self._h(), self._now_ms()),
                         "rl_retry_admit") == RL_ALLOW

    def record(self, outcome: int) -> None:
        """After each attempt sent: OK, THROTTLED or FAILED (rl_retry_record)."""
        _check_rc(self._lib, self._lib.rl_retry_record(self._h(), self._now_ms(), outcome),
                  "rl_retry_record")

    def delay(self, retry: int, outcome: int = THROTTLED,
              hint_ms: Optional[int] = None) -> Optional[float]:
        """Seconds to wait before retry number `retry` (0 for the first), or
        None to give up (rl_retry_delay)."""
        out = ctypes.c_uint64()
        rc = self._lib.rl_retry_delay(self._h(), max(0, min(retry, 0xFFFFFFFF)), outcome,
                                      -1 if hint_ms is None else hint_ms, ctypes.byref(out))
        rc = _check_rc(self._lib, rc, "rl_retry_delay")
        return out.value / 1000.0 if rc == RL_ALLOW else None

    def budget(self) -> dict:
        """The budget now: requests and accepts in the window, and the
        probability an attempt is rejected locally (rl_retry_budget)."""
        req, acc, ppm = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint32()
        _check_rc(self._lib, self._lib.rl_retry_budget(self._h(), self._now_ms(),
                                                       ctypes.byref(req), ctypes.byref(acc),
                                                       ctypes.byref(ppm)), "rl_retry_budget")
        return {"requests": req.value, "accepts": acc.value,
                "reject_probability": ppm.value / 1e6}

    def call(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """fn(*args, **kwargs), retried: before each attempt the budget
        (RetryBudgetExceeded), after a failure the classifier (an error it
        does not retry is recorded as accepted and re-raised) and the
        delay; the last error is re-raised once the helper gives up."""
        retry = 0
        last: Optional[BaseException] = None
        while True:
            if not self.admit():
                raise RetryBudgetExceeded("retry budget: attempt rejected locally") from last
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 (classified below)
                outcome, hint = self._classify(exc)
                if outcome is None:
                    self.record(OK)
                    raise
                self.record(outcome)
                wait = self.delay(retry, outcome, hint)
                if wait is None:
                    raise
                last = exc
                retry += 1
                self._sleep(wait)
                continue
            self.record(OK)
            return result

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Use the Retry itself as a decorator: @retry."""
        return retrying(self)(fn)


def retrying(retry: Optional[Retry] = None, **config) -> Callable:
    """A decorator retrying the function through retry (or a Retry made
    from the keywords, one for the decorated function)."""
    helper = retry if retry is not None else Retry(**config)

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            return helper.call(fn, *args, **kwargs)
        inner.retry = helper
        return inner
    return wrap
