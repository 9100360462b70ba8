# SPDX-License-Identifier: MIT
"""WSGI middleware: rate-limit every request before the application sees it
(standard library only).

    from libratelimit import RateLimiter
    from libratelimit.wsgi import RateLimitMiddleware

    limiter = RateLimiter()                 # or RateLimiter(redis_url, key_secret=..., ...)
    limiter.add_limit("name=per_client rate=20/s burst=40")
    app = RateLimitMiddleware(app, limiter, "per_client")

Each request is charged to a key, by default its X-API-Key header, else its
client address (REMOTE_ADDR). A denied request gets 429 Too Many Requests
with the headers rl_headers renders (RateLimit-Policy, RateLimit,
X-RateLimit-*, Retry-After) and a small JSON body; an admitted one goes to
the application, and its response carries the same headers for the limit
with the fewest tokens left. With several limits, they are checked all or
nothing (rl_check_multi): a request denied by one is charged to none.

Keys are untrusted: one longer than the library's RL_MAX_KEY_LEN is charged
as its SHA-256 digest, so a long header can neither fail the check nor
share a bucket with another key. When the check itself fails (a
RateLimitError: a removed limit, a closed limiter), on_error decides:
"open" (the default) serves the request without headers, "closed" answers
503; the error goes to the `error` callback if one is given.

Pre-fork servers (gunicorn --preload): a RateLimiter made before the fork
reopens itself in each worker at its first call (libratelimit.binding).
"""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Iterable, List, Optional, Sequence, Union

from .binding import RL_MAX_KEY_LEN, RateLimiter, RateLimitError

LimitRef = Union[int, str]
KeyFunc = Callable[[dict], Union[str, bytes, None]]

__all__ = ["RateLimitMiddleware", "default_key"]


def default_key(environ: dict) -> Union[str, bytes, None]:
    """X-API-Key when the request has one, else the client's address."""
    return environ.get("HTTP_X_API_KEY") or environ.get("REMOTE_ADDR") or None


def _bounded(key: Union[str, bytes]) -> bytes:
    k = key.encode("utf-8", "surrogateescape") if isinstance(key, str) else bytes(key)
    if len(k) == 0 or len(k) > RL_MAX_KEY_LEN:
        return b"sha256:" + hashlib.sha256(k).digest()
    return k


class RateLimitMiddleware:
    """Wraps a WSGI application. limits: one limit (id or name) or a sequence
    of them; key(environ) names whose bucket a request is charged to (None:
    the request is not limited); cost(environ) its cost (default 1)."""

    def __init__(self, app: Callable, limiter: RateLimiter,
                 limits: Union[LimitRef, Sequence[LimitRef]], *,
                 key: KeyFunc = default_key,
                 cost: Optional[Callable[[dict], int]] = None,
                 on_error: str = "open",
                 error: Optional[Callable[[Exception, dict], None]] = None):
        if on_error not in ("open", "closed"):
            raise ValueError('on_error is "open" or "closed"')
        self.app = app
        self.limiter = limiter
        self.limits: List[LimitRef] = (
            [limits] if isinstance(limits, (int, str)) else list(limits))
        if not self.limits:
            raise ValueError("at least one limit")
        self.key = key
        self.cost = cost
        self.on_error = on_error
        self.error = error

    def _decide(self, key: bytes, cost: int):
        if len(self.limits) == 1:
            d = self.limiter.check(self.limits[0], key, cost)
            return d.allowed, d
        allowed, decisions, denied = self.limiter.check_multi(
            [(lim, key, cost) for lim in self.limits])
        if not allowed:
            return False, decisions[denied]
        return True, min(decisions, key=lambda d: d.remaining)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        raw = self.key(environ)
        if raw is None:
            return self.app(environ, start_response)
        try:
            cost = self.cost(environ) if self.cost is not None else 1
            allowed, d = self._decide(_bounded(raw), cost)
            headers = d.header_items()
        except RateLimitError as e:
            if self.error is not None:
                self.error(e, environ)
            if self.on_error == "open":
                return self.app(environ, start_response)
            body = b'{"error":"rate limiter unavailable"}'
            start_response("503 Service Unavailable",
                           [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))])
            return [body]
        if not allowed:
            body = json.dumps({"error": "rate limited", "limit": d.policy,
                               "retry_after_ms": d.retry_after_ms}).encode()
            start_response("429 Too Many Requests",
                           [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))] + headers)
            return [body]

        def with_headers(status, response_headers, exc_info=None):
            names = {n.lower() for n, _ in response_headers}
            extra = [(n, v) for n, v in headers if n.lower() not in names]
            if exc_info is not None:
                return start_response(status, list(response_headers) + extra, exc_info)
            return start_response(status, list(response_headers) + extra)

        return self.app(environ, with_headers)
