# SPDX-License-Identifier: MIT
"""ctypes binding for libratelimit (standard library only).

    from ratelimit import RateLimiter

    with RateLimiter() as rl:                      # local-only; or RateLimiter("redis://...")
        api = rl.add_limit("name=api rate=100/s burst=20")
        d = rl.check(api, "user-42")               # or rl.check("api", b"user-42", cost=1)
        if not d.allowed:
            print(d.retry_after_ms, d.headers())

The shared library is found, in order: the `library` argument of
RateLimiter (or load()); the LIBRATELIMIT_LIBRARY environment variable (or
RL_LIBRARY, its older name); libratelimit.so.0 in the lib directories of
the installed prefix (LIBRATELIMIT_PREFIX, else this Python's prefix, else
/usr/local, CMake's default); then the system loader (ld.so's cache and
LD_LIBRARY_PATH). When none loads, the OSError lists every place tried.

After fork() (a pre-fork server such as gunicorn --preload), the C library
refuses an inherited instance (RL_EFORKED). A RateLimiter notices the new
process by its PID at its next call and reopens itself there with the same
configuration and limits (ids unchanged); nothing is shared between the
processes, as with any instance. With a redis_url, the new instance's
node_id is the parent's (or the host name) with "-PID" appended: every
worker is a node of its own, so count them all in expected_nodes.

The structs below mirror include/ratelimit.h field for field (ctypes lays
them out with the platform's C rules, padding included); every struct is
initialised through the exported *_init_sized function with ctypes.sizeof,
because the header's *_init functions are static inline and have no symbol.
test_ratelimit.py compares every field offset with a C compiler's.

Thread-safety is the C library's: check(), refund(), check_multi() may run
on any number of threads at once (ctypes releases the GIL during the call);
close() must not race any other call on the same instance.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import socket
import sys
import threading
import time
from typing import Callable, List, Optional, Sequence, Tuple, Union

__all__ = [
    "RateLimiter", "Decision", "MultiDecision", "LimitInfo", "RateLimitError", "load",
    "version", "parse_limit", "parse_quota", "read_key_secret", "__version__",
    "QuotaResult", "HotKey",
    "Config", "Limit", "Rate", "Decision_t", "Request", "Stats", "LimitStats", "Allocator",
    "Quota", "QuotaResult_t", "Hotkey", "RetryConfig",
    # one exception class per RL_E* code, each a RateLimitError
    "InvalidArgumentError", "OutOfMemoryError", "LimitNotFoundError", "OutOfRangeError",
    "StructSizeError", "KeyLengthError", "SpecError", "LimitExistsError", "TooManyLimitsError",
    "CostError", "ForkedError", "NotSupportedError", "LimitNameError", "ModeError", "AuthError",
    "ReservationsFullError", "ReservationExpiredError", "UnavailableError",
    # reservations and waits; in-flight limits
    "Reservation", "MultiReservation", "Permit", "InflightFull",
    "Reservation_t", "ReserveStats", "Permit_t",
]

# The package's version: the C library's it was released with (README,
# "Versioning policy"); pyproject.toml says the same, and a test checks it.
__version__ = "0.2.0"

# The ABI this module was written against: the library's major version must
# match (releases with the same major are ABI-compatible).
ABI_MAJOR = 0

RL_MAX_KEY_LEN = 512
RL_NAME_MAX = 64
RL_MAX_LIMITS = 4096
RL_MULTI_MAX = 64

RL_DENY = 0
RL_ALLOW = 1

# Error codes (include/ratelimit.h, RL_ERRNO_MAP): never renumbered.
RL_EINVAL = -1
RL_ENOMEM = -2
RL_ENOTFOUND = -3
RL_ERANGE = -4
RL_ESIZE = -5
RL_EKEYLEN = -6
RL_ESPEC = -7
RL_EEXIST = -8
RL_ELIMITS = -9
RL_ECOST = -10
RL_EFORKED = -11
RL_ENOTSUP = -12
RL_ENAME = -13
RL_EMODE = -14
RL_EAUTH = -15
RL_EFULL = -16
RL_EEXPIRED = -17
RL_EUNAVAIL = -18

RL_MODE_GLOBAL, RL_MODE_LOCAL, RL_MODE_EXACT, RL_MODE_TIERED = 0, 1, 2, 3
RL_FAIL_DEFAULT, RL_FAIL_LOCAL, RL_FAIL_OPEN, RL_FAIL_CLOSED = -1, 0, 1, 2
RL_HEALTH_HEALTHY, RL_HEALTH_DEGRADED, RL_HEALTH_RECOVERING = 0, 1, 2
RL_LOG_ERROR, RL_LOG_WARN, RL_LOG_INFO, RL_LOG_DEBUG = 0, 1, 2, 3

RL_FLAG_DEGRADED = 0x01
RL_FLAG_EXACT = 0x02
RL_FLAG_HOT = 0x04
RL_FLAG_SHADOW = 0x08
RL_FLAG_NOSLOT = 0x10
RL_FLAG_PEEK = 0x20
RL_FLAG_DUPLICATE = 0x40
RL_FLAG_INFLIGHT = 0x80

# ------------------------------------------------------------------ structs

_u32, _i32, _u64, _size = ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64, ctypes.c_size_t

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p)
CLOCK_FN = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int32)
ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                           ctypes.c_size_t)


class Allocator(ctypes.Structure):
    """rl_allocator_t"""
    _fields_ = [("alloc", ALLOC_FN), ("free", FREE_FN), ("opaque", ctypes.c_void_p)]


class Config(ctypes.Structure):
    """rl_config_t"""
    _fields_ = [
        ("size", _size),
        ("redis_url", ctypes.c_char_p),
        ("node_id", ctypes.c_char_p),
        ("sync_interval_ms", _u32),
        ("max_keys", _u32),
        ("expected_nodes", _u32),
        ("key_ttl_ms", _u64),
        ("log", LOG_FN),
        ("log_ud", ctypes.c_void_p),
        ("allocator", Allocator),
        ("clock", CLOCK_FN),
        ("clock_ud", ctypes.c_void_p),
        # appended fields
        ("max_limits", _u32),
        ("reserved0", _u32),
        ("clock_coarse_tick_ns", _u64),
        ("key_secret", ctypes.c_char_p),  # const void *: c_char_p keeps the bytes alive
        ("key_secret_len", _size),
        ("key_prefix", ctypes.c_char_p),
        ("demand_alpha_pct", _u32),
        ("reserved1", _u32),
        ("degrade_after_failures", _u32),
        ("recover_after_rounds", _u32),
        ("reconnect_max_ms", _u32),
        ("degrade_ramp_ms", _u32),
        # appended fields: rl_open's message, the default log
        ("err", ctypes.c_void_p),  # char *: a buffer the binding owns during rl_open
        ("errlen", _size),
        ("log_quiet", _u32),
        ("reserved2", _u32),
        # appended fields: exact mode
        ("exact_timeout_ms", _u32),
        ("exact_pool_size", _u32),
        # appended fields: quotas
        ("quota_journal_max", _u32),
        ("quota_timeout_ms", _u32),
        # appended fields: hot keys
        ("hotkeys_k", _u32),  # keys each top-K sketch reports; 0 is refused
        # appended fields: reservations (rl_reserve; not wrapped here yet)
        ("reserved3", _u32),  # must be zero
        ("max_reservations", _u32),  # reservations in flight at once; default 4096
    ]


class Rate(ctypes.Structure):
    """rl_rate_t"""
    _fields_ = [("count", _u64), ("period_ms", _u64)]


RL_INFLIGHT_CLASSES = 4
RL_INFLIGHT_CLASS_NAME = 16


class InflightClass(ctypes.Structure):
    """rl_inflight_class_t: one class of an in-flight limit"""
    _fields_ = [("name", ctypes.c_char * RL_INFLIGHT_CLASS_NAME), ("share_ppm", _u32)]


class Limit(ctypes.Structure):
    """rl_limit_t"""
    _fields_ = [
        ("size", _size),
        ("name", ctypes.c_char * RL_NAME_MAX),
        ("rate", Rate),
        ("burst", _u64),
        ("mode", _i32),
        ("on_failure", _i32),
        ("degraded_rate", Rate),
        ("shadow", _i32),
        ("max_keys", _u32),
        ("hot_ppm", _u32),  # appended (rl_hotkeys); 0: never hot
        ("near_ppm", _u32),  # appended (tiered); 0: 20% of the burst
        ("hot_policy", _i32),  # appended: 0 sync, 1 local
        ("hot_every", _u32),  # hot_policy=local: rounds between reports; 0: 4
        # appended fields: in-flight limits (experimental in the C API)
        ("kind", _i32),  # 0 rate, 1 in-flight
        ("inflight_algo", _i32),
        ("inflight_max", _u32),
        ("inflight_min", _u32),
        ("max_hold_ms", _u64),
        ("classes", InflightClass * RL_INFLIGHT_CLASSES),
    ]


class Request(ctypes.Structure):
    """rl_request_t"""
    _fields_ = [
        ("size", _size),
        ("limit", _i32),
        ("key", ctypes.c_char_p),  # const void *: c_char_p keeps the bytes alive
        ("key_len", _size),
        ("cost", _u32),
    ]


class Decision_t(ctypes.Structure):
    """rl_decision_t (the Python-side result is Decision)"""
    _fields_ = [
        ("size", _size),
        ("allowed", _i32),
        ("limit", _u64),
        ("remaining", _u64),
        ("reset_ms", _u64),
        ("retry_after_ms", _u64),
        ("flags", _u32),
        # appended fields
        ("window_ms", _u64),
        ("burst", _u64),
        ("policy", ctypes.c_char_p),
        # appended field: in-flight limits (experimental in the C API)
        ("inflight", _u64),
    ]


class Stats(ctypes.Structure):
    """rl_stats_t"""
    _fields_ = [
        ("size", _size),
        ("admitted", _u64),
        ("denied", _u64),
        ("shadow_denied", _u64),
        ("noslot", _u64),
        ("degraded", _u64),
        ("keys_live", _u64),
        ("keys_capacity", _u64),
        ("reclaimed", _u64),
        ("table_slots", _u64),
        ("table_bytes", _u64),
        ("limits", _u32),
        ("reserved0", _u32),
        # appended fields: the global tier and its health
        ("health", _i32),
        ("reserved1", _u32),
        ("health_since_ms", _u64),
        ("ms_healthy", _u64),
        ("ms_degraded", _u64),
        ("ms_recovering", _u64),
        ("health_transitions", _u64),
        ("degraded_open", _u64),
        ("degraded_closed", _u64),
        ("degraded_local", _u64),
        ("sync_rounds", _u64),
        ("sync_rounds_failed", _u64),
        ("sync_reports", _u64),
        ("sync_errors", _u64),
        ("sync_connected", _u64),
        ("health_since_round", _u64),
        # appended fields: sync errors by class, round latency
        ("sync_err_connect", _u64),
        ("sync_err_timeout", _u64),
        ("sync_err_noscript", _u64),
        ("sync_err_readonly", _u64),
        ("sync_err_loading", _u64),
        ("sync_err_busy", _u64),
        ("sync_err_oom", _u64),
        ("sync_err_auth", _u64),
        ("sync_err_other", _u64),
        ("sync_rounds_completed", _u64),
        ("sync_round_us_sum", _u64),
        ("sync_round_us_last", _u64),
        ("sync_round_us_max", _u64),
        ("sync_reports_last_round", _u64),
        # appended fields: the fleet as the node registry shows it, the log
        ("fleet_nodes", _u64),
        ("fleet_split_rounds", _u64),
        ("fleet_split_fingerprints", _u64),
        ("log_dropped", _u64),
        # appended fields: quotas
        ("quota_charges", _u64),
        ("quota_duplicates", _u64),
        ("quota_degraded", _u64),
        ("quota_journaled", _u64),
        ("quota_replayed", _u64),
        ("quota_lost", _u64),
        ("quota_journal_len", _u64),
    ]


class LimitStats(ctypes.Structure):
    """rl_limit_stats_t"""
    _fields_ = [
        ("size", _size),
        ("admitted", _u64),
        ("denied", _u64),
        ("shadow_denied", _u64),
        ("noslot", _u64),
        ("degraded", _u64),
        ("keys_live", _u64),
        # appended fields: the last complete sync window of the limit's keys
        ("sync_keys", _u64),
        ("overshoot_keys", _u64),
        ("usage_max_ppm", _u32),
        ("share_skew_max_ppm", _u32),
        ("nodes_max", _u32),
        ("reserved0", _u32),
        # appended field: runs of degraded answers, each logged
        ("degraded_spells", _u64),
        # appended fields: in-flight limits (experimental in the C API)
        ("inflight", _u64),
        ("inflight_limit", _u64),
        ("inflight_reclaimed", _u64),
        ("inflight_late", _u64),
    ]


RL_PERIOD_HOUR, RL_PERIOD_DAY, RL_PERIOD_WEEK, RL_PERIOD_MONTH, RL_PERIOD_FIXED = 0, 1, 2, 3, 4
RL_QUOTA_MAX = 256
RL_QUOTA_ID_MAX = 256
RL_QUOTA_AMOUNT_MAX = (1 << 53) - 1
RL_HOTKEY_KEY_BYTES = 64


RETRY_RANDOM_FN = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)


class RetryConfig(ctypes.Structure):
    """rl_retry_config_t (libratelimit.retry.Retry builds one)"""
    _fields_ = [
        ("size", _size),
        ("base_ms", _u32),
        ("throttled_base_ms", _u32),
        ("cap_ms", _u32),
        ("hint_cap_ms", _u32),
        ("max_retries", _u32),
        ("budget_k_milli", _u32),
        ("budget_window_ms", _u32),
        ("budget_min_requests", _u32),
        ("seed", _u64),
        ("random", RETRY_RANDOM_FN),
        ("random_ud", ctypes.c_void_p),
    ]


class Quota(ctypes.Structure):
    """rl_quota_t"""
    _fields_ = [
        ("size", _size),
        ("name", ctypes.c_char * RL_NAME_MAX),
        ("amount", _u64),
        ("period", _i32),
        ("on_failure", _i32),
        ("period_ms", _u64),
        ("dedup_ms", _u64),
    ]


class QuotaResult_t(ctypes.Structure):
    """rl_quota_result_t (the Python-side result is QuotaResult)"""
    _fields_ = [
        ("size", _size),
        ("allowed", _i32),
        ("flags", _u32),
        ("amount", _u64),
        ("used", _u64),
        ("remaining", _u64),
        ("reset_unix_ms", _u64),
    ]


class Hotkey(ctypes.Structure):
    """rl_hotkey_t (the Python-side result is HotKey)"""
    _fields_ = [
        ("size", _size),
        ("limit", _i32),
        ("hot", _i32),
        ("key_len", _u64),
        ("key_kept", _u32),
        ("reserved0", _u32),
        ("key", ctypes.c_ubyte * RL_HOTKEY_KEY_BYTES),
        ("demand_per_s", ctypes.c_double),
        ("share_per_s", ctypes.c_double),
        ("fleet_per_s", ctypes.c_double),
        ("count", _u64),
        ("count_err", _u64),
    ]


# --------------------------------------------- reservations and in-flight

RL_RESERVE_TTL_MAX_MS = 86400000
RL_WAIT_MAX_MS = 86400000
RL_COST_SETTLE_MAX = 1 << 30
RL_KIND_RATE, RL_KIND_INFLIGHT = 0, 1
RL_INFLIGHT_FIXED, RL_INFLIGHT_GRADIENT2, RL_INFLIGHT_VEGAS, RL_INFLIGHT_AIMD = 0, 1, 2, 3
RL_INFLIGHT_SUCCESS, RL_INFLIGHT_DROPPED, RL_INFLIGHT_IGNORED = 0, 1, 2
RL_INFLIGHT_NO_CLASS = -1
RL_INFLIGHT_RECLAIMED = 1


class Reservation_t(ctypes.Structure):
    """rl_reservation_t: what rl_reserve admitted (its token is opaque)"""
    _fields_ = [
        ("size", _size),
        ("token", _u64 * 2),
        ("limit", _i32),
        ("estimate", _u32),
        ("ready_in_ms", _u64),
    ]


class ReserveStats(ctypes.Structure):
    """rl_reserve_stats_t: the reservation table's and rl_wait's counters"""
    _fields_ = [("size", _size)] + [(n, _u64) for n in (
        "reserved", "denied", "settled_up", "settled_down", "settled_even", "released",
        "expired", "debt_tokens", "refund_tokens", "in_flight", "capacity", "full", "waits",
        "waits_slept", "waits_refused")]


class Permit_t(ctypes.Structure):
    """rl_permit_t: a held in-flight permit (opaque words)"""
    _fields_ = [("opaque", _u64 * 3)]


def _as_dict(s: ctypes.Structure) -> dict:
    """A stats struct's counters, without the size and reserved fields."""
    return {name: getattr(s, name) for name, _ in s._fields_
            if name != "size" and not name.startswith("reserved")}


# ------------------------------------------------------------------ library

_P = ctypes.POINTER
_c_rl = ctypes.c_void_p  # rl_t *: opaque

# name: (restype, argtypes). rl_metrics_text is optional (newer builds).
_PROTOTYPES = {
    "rl_config_init_sized": (None, [_P(Config), _size]),
    "rl_open": (ctypes.c_int, [_P(_c_rl), _P(Config)]),
    "rl_close": (None, [_c_rl]),
    "rl_limit_init_sized": (None, [_P(Limit), _size]),
    "rl_limit_parse": (ctypes.c_int, [_P(Limit), ctypes.c_char_p, _P(ctypes.c_char), _size]),
    "rl_limit_parse_sized": (ctypes.c_int, [_P(Limit), _size, ctypes.c_char_p,
                                            _P(ctypes.c_char), _size]),
    "rl_limit_add": (ctypes.c_int, [_c_rl, _P(Limit)]),
    "rl_limit_update": (ctypes.c_int, [_c_rl, ctypes.c_int, _P(Limit)]),
    "rl_limit_remove": (ctypes.c_int, [_c_rl, ctypes.c_int]),
    "rl_limit_find": (ctypes.c_int, [_c_rl, ctypes.c_char_p]),
    "rl_limit_get": (ctypes.c_int, [_c_rl, ctypes.c_int, _P(Limit)]),
    "rl_decision_init_sized": (None, [_P(Decision_t), _size]),
    "rl_check": (ctypes.c_int, [_c_rl, ctypes.c_int, ctypes.c_char_p, _size, _u32,
                                _P(Decision_t)]),
    "rl_refund": (ctypes.c_int, [_c_rl, ctypes.c_int, ctypes.c_char_p, _size, _u32]),
    "rl_request_init_sized": (None, [_P(Request), _size]),
    "rl_check_multi": (ctypes.c_int, [_c_rl, _P(Request), _size, _size, _P(Decision_t),
                                      _P(_size)]),
    "rl_headers": (ctypes.c_int, [_P(Decision_t), _P(ctypes.c_char), _size]),
    "rl_stats_init_sized": (None, [_P(Stats), _size]),
    "rl_limit_stats_init_sized": (None, [_P(LimitStats), _size]),
    "rl_stats": (ctypes.c_int, [_c_rl, _P(Stats)]),
    "rl_limit_stats": (ctypes.c_int, [_c_rl, ctypes.c_int, _P(LimitStats)]),
    "rl_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "rl_err_name": (ctypes.c_char_p, [ctypes.c_int]),
    "rl_version": (ctypes.c_char_p, []),
    "rl_version_hex": (_u32, []),
    "rl_metrics_text": (ctypes.c_int, [_c_rl, _P(ctypes.c_char), _size]),
    "rl_quota_init_sized": (None, [_P(Quota), _size]),
    "rl_quota_result_init_sized": (None, [_P(QuotaResult_t), _size]),
    "rl_quota_parse": (ctypes.c_int, [_P(Quota), ctypes.c_char_p, _P(ctypes.c_char), _size]),
    "rl_quota_add": (ctypes.c_int, [_c_rl, _P(Quota)]),
    "rl_quota_remove": (ctypes.c_int, [_c_rl, ctypes.c_int]),
    "rl_quota_charge": (ctypes.c_int, [_c_rl, ctypes.c_int, ctypes.c_char_p, _size, _u64,
                                       ctypes.c_char_p, _size, _P(QuotaResult_t)]),
    "rl_quota_get": (ctypes.c_int, [_c_rl, ctypes.c_int, ctypes.c_char_p, _size,
                                    _P(QuotaResult_t)]),
    "rl_hotkey_init_sized": (None, [_P(Hotkey), _size]),
    "rl_hotkeys": (ctypes.c_int, [_c_rl, ctypes.c_int, _P(Hotkey), _size]),
    "rl_retry_config_init_sized": (None, [_P(RetryConfig), _size]),
    "rl_retry_new": (ctypes.c_int, [_P(ctypes.c_void_p), _P(RetryConfig), _P(ctypes.c_char),
                                    _size]),
    "rl_retry_free": (None, [ctypes.c_void_p]),
    "rl_retry_admit": (ctypes.c_int, [ctypes.c_void_p, _u64]),
    "rl_retry_record": (ctypes.c_int, [ctypes.c_void_p, _u64, ctypes.c_int]),
    "rl_retry_delay": (ctypes.c_int, [ctypes.c_void_p, _u32, ctypes.c_int, ctypes.c_int64,
                                      _P(_u64)]),
    "rl_retry_hint": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, _u64,
                                     _P(ctypes.c_int64)]),
    "rl_retry_budget": (ctypes.c_int, [ctypes.c_void_p, _u64, _P(_u64), _P(_u64), _P(_u32)]),
    "rl_reservation_init_sized": (None, [_P(Reservation_t), _size]),
    "rl_reserve_stats_init_sized": (None, [_P(ReserveStats), _size]),
    "rl_reserve": (ctypes.c_int, [_c_rl, ctypes.c_int, ctypes.c_char_p, _size, _u32, _u32,
                                  _P(Reservation_t), _P(Decision_t)]),
    "rl_settle": (ctypes.c_int, [_c_rl, _P(Reservation_t), _u32]),
    "rl_release": (ctypes.c_int, [_c_rl, _P(Reservation_t)]),
    "rl_reserve_wait": (ctypes.c_int, [_c_rl, ctypes.c_int, ctypes.c_char_p, _size, _u32, _u32,
                                       _u32, _P(Reservation_t), _P(Decision_t)]),
    "rl_wait": (ctypes.c_int, [_c_rl, ctypes.c_int, ctypes.c_char_p, _size, _u32, _u32,
                               _P(Decision_t)]),
    "rl_reserve_multi": (ctypes.c_int, [_c_rl, _P(Request), _size, _size, _u32,
                                        _P(Reservation_t), _P(Decision_t), _P(_size)]),
    "rl_reserve_stats": (ctypes.c_int, [_c_rl, _P(ReserveStats)]),
    "rl_inflight_acquire": (ctypes.c_int, [_c_rl, ctypes.c_int, ctypes.c_char_p, _size, _i32,
                                           _P(Permit_t), _P(Decision_t)]),
    "rl_inflight_release": (ctypes.c_int, [_c_rl, _P(Permit_t), _i32, _u64]),
    "rl_inflight_class": (ctypes.c_int, [_c_rl, ctypes.c_int, ctypes.c_char_p]),
}
# Newer than the first 0.x releases: a library without them still loads,
# and the methods that need them raise NotSupportedError.
_OPTIONAL = {"rl_metrics_text", "rl_limit_parse_sized", "rl_quota_init_sized",
             "rl_quota_result_init_sized", "rl_quota_parse", "rl_quota_add", "rl_quota_remove",
             "rl_quota_charge", "rl_quota_get", "rl_hotkey_init_sized", "rl_hotkeys",
             "rl_retry_config_init_sized", "rl_retry_new", "rl_retry_free", "rl_retry_admit",
             "rl_retry_record", "rl_retry_delay", "rl_retry_hint", "rl_retry_budget",
             "rl_reservation_init_sized", "rl_reserve_stats_init_sized", "rl_reserve",
             "rl_settle", "rl_release", "rl_reserve_wait", "rl_wait", "rl_reserve_multi",
             "rl_reserve_stats", "rl_inflight_acquire", "rl_inflight_release",
             "rl_inflight_class"}

_libs: dict = {}
_libs_lock = threading.Lock()

# This process's PID, refreshed in a forked child, so a call notices that
# it runs in a new process without a getpid() each time.
_pid = [os.getpid()]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _pid.__setitem__(0, os.getpid()))


class _Lib:
    """The loaded library with its prototypes declared."""

    def __init__(self, path: str):
        self.path = path
        self.dll = ctypes.CDLL(path)
        for name, (res, args) in _PROTOTYPES.items():
            try:
                fn = getattr(self.dll, name)
            except AttributeError:
                if name in _OPTIONAL:
                    setattr(self, name, None)
                    continue
                raise OSError(f"{path}: no symbol {name}: not libratelimit?") from None
            fn.restype = res
            fn.argtypes = args
            setattr(self, name, fn)
        hexv = self.rl_version_hex()
        if hexv >> 16 != ABI_MAJOR:
            raise OSError(f"{path}: libratelimit {self.rl_version().decode()} has ABI major "
                          f"{hexv >> 16}; this binding speaks {ABI_MAJOR}")

    def err_name(self, code: int) -> str:
        return self.rl_err_name(code).decode()

    def strerror(self, code: int) -> str:
        return self.rl_strerror(code).decode()


SONAME = f"libratelimit.so.{ABI_MAJOR}"


def _prefix_dirs() -> List[Tuple[str, str]]:
    """(directory, why) for the lib directories of the installed prefixes."""
    prefixes = []
    env = os.environ.get("LIBRATELIMIT_PREFIX")
    if env:
        prefixes.append((env, "LIBRATELIMIT_PREFIX"))
    for p in (sys.prefix, sys.base_prefix):
        prefixes.append((p, "the Python prefix"))
    prefixes.append(("/usr/local", "CMake's default prefix"))
    multiarch = getattr(sys.implementation, "_multiarch", None)
    out, seen = [], set()
    for prefix, why in prefixes:
        subs = ["lib", "lib64"] + ([os.path.join("lib", multiarch)] if multiarch else [])
        for sub in subs:
            d = os.path.join(prefix, sub)
            if d not in seen:
                seen.add(d)
                out.append((d, why))
    return out


def _candidates(library: Optional[str]) -> List[Tuple[str, str]]:
    """(path or name, where it came from), in the documented order."""
    if library:
        return [(library, "the library argument")]
    env = os.environ.get("LIBRATELIMIT_LIBRARY") or os.environ.get("RL_LIBRARY")
    if env:
        name = "LIBRATELIMIT_LIBRARY" if os.environ.get("LIBRATELIMIT_LIBRARY") else "RL_LIBRARY"
        return [(env, name)]
    out = [(os.path.join(d, SONAME), f"{why}") for d, why in _prefix_dirs()
           if os.path.exists(os.path.join(d, SONAME))]
    out.append((SONAME, "the system loader"))
    found = ctypes.util.find_library("ratelimit")
    if found and found != SONAME:
        out.append((found, "the system loader (find_library)"))
    return out


def load(library: Optional[str] = None) -> _Lib:
    """Load (once per path) and return the library, from the first place of
    the documented order where it loads; OSError lists every place tried."""
    tried = []
    for path, why in _candidates(library):
        with _libs_lock:
            lib = _libs.get(path)
            if lib is not None:
                return lib
            try:
                lib = _libs[path] = _Lib(path)
                return lib
            except OSError as e:
                tried.append(f"{path} ({why}): {e}")
    if library is None and not (os.environ.get("LIBRATELIMIT_LIBRARY")
                                or os.environ.get("RL_LIBRARY")):
        looked = ", ".join(d for d, _ in _prefix_dirs())
        tried.insert(0, f"{SONAME} in the installed prefixes' lib directories: "
                        f"{looked}: not there")
    raise OSError("libratelimit not found; tried:\n  " + "\n  ".join(tried) +
                  "\npass library=PATH, set LIBRATELIMIT_LIBRARY=PATH or "
                  "LIBRATELIMIT_PREFIX=PREFIX, or run ldconfig after installing")


def version(library: Optional[str] = None) -> str:
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return load(library).rl_version().decode()


class RateLimitError(Exception):
    """A negative RL_E* code from the library: the base of one subclass per
    code (SpecError for RL_ESPEC, ...), so `except SpecError` catches one
    kind and `except RateLimitError` every kind. RateLimitError(code, ...)
    itself builds the code's subclass.

    code: the number (e.g. -7); name: rl_err_name (e.g. "RL_ESPEC");
    message: rl_strerror; function: the C function that failed; detail: more
    text when there is some (rl_limit_parse's message naming the bad word,
    rl_open's naming the field and why).
    """

    code_class: dict = {}  # RL_E* number -> its subclass

    def __new__(cls, code: int = 0, *args, **kwargs):
        if cls is RateLimitError:
            cls = RateLimitError.code_class.get(code, RateLimitError)
        return super().__new__(cls)

    def __reduce__(self):
        return (_rebuild_error, (self.code, self.function, self.detail))

    def __init__(self, code: int, function: str, detail: Optional[str] = None,
                 lib: Optional[_Lib] = None):
        self.code = code
        self.function = function
        self.detail = detail or None
        if lib is None:
            try:
                lib = load()
            except OSError:
                lib = None
        self.name = lib.err_name(code) if lib else f"RL_E({code})"
        self.message = lib.strerror(code) if lib else "error"
        text = f"{function}: {self.name}: {self.message}"
        if self.detail:
            text += f": {self.detail}"
        super().__init__(text)


def _rebuild_error(code: int, function: str, detail: Optional[str]) -> "RateLimitError":
    return RateLimitError(code, function, detail)


def _error_class(name: str, code: int, doc: str) -> type:
    cls = type(name, (RateLimitError,), {
        "__doc__": f"{doc} ({code}) from the library: a RateLimitError.", "CODE": code})
    RateLimitError.code_class[code] = cls
    return cls


# One class per code of include/ratelimit.h's RL_ERRNO_MAP (CODE: its number).
InvalidArgumentError = _error_class("InvalidArgumentError", RL_EINVAL, "RL_EINVAL")
OutOfMemoryError = _error_class("OutOfMemoryError", RL_ENOMEM, "RL_ENOMEM")
LimitNotFoundError = _error_class("LimitNotFoundError", RL_ENOTFOUND, "RL_ENOTFOUND")
OutOfRangeError = _error_class("OutOfRangeError", RL_ERANGE, "RL_ERANGE")
StructSizeError = _error_class("StructSizeError", RL_ESIZE, "RL_ESIZE")
KeyLengthError = _error_class("KeyLengthError", RL_EKEYLEN, "RL_EKEYLEN")
SpecError = _error_class("SpecError", RL_ESPEC, "RL_ESPEC")
LimitExistsError = _error_class("LimitExistsError", RL_EEXIST, "RL_EEXIST")
TooManyLimitsError = _error_class("TooManyLimitsError", RL_ELIMITS, "RL_ELIMITS")
CostError = _error_class("CostError", RL_ECOST, "RL_ECOST")
ForkedError = _error_class("ForkedError", RL_EFORKED, "RL_EFORKED")
NotSupportedError = _error_class("NotSupportedError", RL_ENOTSUP, "RL_ENOTSUP")
LimitNameError = _error_class("LimitNameError", RL_ENAME, "RL_ENAME")
ModeError = _error_class("ModeError", RL_EMODE, "RL_EMODE")
AuthError = _error_class("AuthError", RL_EAUTH, "RL_EAUTH")
ReservationsFullError = _error_class("ReservationsFullError", RL_EFULL, "RL_EFULL")
ReservationExpiredError = _error_class("ReservationExpiredError", RL_EEXPIRED, "RL_EEXPIRED")
UnavailableError = _error_class("UnavailableError", RL_EUNAVAIL, "RL_EUNAVAIL")


def _check_rc(lib: _Lib, rc: int, function: str, detail: Optional[str] = None) -> int:
    if rc < 0:
        raise RateLimitError(rc, function, detail, lib)
    return rc


def _snprintf_text(lib: _Lib, fn, function: str, first) -> str:
    """Call an snprintf-style function until its text fits (it may grow
    between calls, e.g. metrics while limits are added)."""
    size = 1024
    while True:
        buf = ctypes.create_string_buffer(size)
        n = _check_rc(lib, fn(first, buf, size), function)
        if n < size:
            return buf.raw[:n].decode("utf-8", "replace")
        size = n + 1 + n // 8


def _key_bytes(key: Union[bytes, bytearray, memoryview, str]) -> bytes:
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return bytes(key)
    raise TypeError(f"key must be bytes or str, not {type(key).__name__}")


def read_key_secret(path: Union[str, "os.PathLike[str]"]) -> bytes:
    """A fleet's key_secret from a file, by the rule of every component that
    reads one (docs/fleet.md, "The secret file"): the file's bytes less one
    final "\\n" or "\\r\\n", so a file written with echo holds the secret
    the CLI, the gateway and the nginx module read from it. Pass the result
    as RateLimiter(key_secret=...); rl_open checks its length (16..4096)."""
    with open(path, "rb") as f:
        data = f.read(4099)  # the longest secret, its line ending, one more byte
    if data.endswith(b"\r\n"):
        return data[:-2]
    if data.endswith(b"\n"):
        return data[:-1]
    return data


def _cost(lib: _Lib, cost: int, function: str) -> int:
    if not isinstance(cost, int) or isinstance(cost, bool):
        raise TypeError(f"cost must be an int, not {type(cost).__name__}")
    if not 0 <= cost <= 0xFFFFFFFF:
        raise RateLimitError(RL_ERANGE, function, f"cost {cost} is outside 0..2**32-1", lib)
    return cost


def parse_limit(spec: str, library: Optional[str] = None) -> Limit:
    """rl_limit_parse: a spec string as an rl_limit_t (raises RateLimitError
    whose detail names the offending word)."""
    lib = load(library)
    return _parse(lib, spec)


def parse_quota(spec: str, library: Optional[str] = None) -> Quota:
    """rl_quota_parse: a quota spec ("name=plan amount=1000000 period=month
    dedup=24h on_failure=open") as an rl_quota_t (raises RateLimitError
    whose detail names the offending word)."""
    return _parse_quota(load(library), spec)


def _need(lib: _Lib, name: str) -> None:
    if getattr(lib, name) is None:
        raise RateLimitError(RL_ENOTSUP, name, f"this libratelimit has no {name}", lib)


def _parse_quota(lib: _Lib, spec: Union[str, Quota]) -> Quota:
    if isinstance(spec, Quota):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"spec must be str or Quota, not {type(spec).__name__}")
    _need(lib, "rl_quota_parse")
    q = Quota()
    err = ctypes.create_string_buffer(256)
    rc = lib.rl_quota_parse(ctypes.byref(q), spec.encode("utf-8"), err, ctypes.sizeof(err))
    _check_rc(lib, rc, "rl_quota_parse", err.value.decode("utf-8", "replace"))
    return q


def _parse(lib: _Lib, spec: Union[str, Limit]) -> Limit:
    if isinstance(spec, Limit):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"spec must be str or Limit, not {type(spec).__name__}")
    lim = Limit()
    lib.rl_limit_init_sized(ctypes.byref(lim), ctypes.sizeof(lim))
    err = ctypes.create_string_buffer(256)
    if lib.rl_limit_parse_sized is not None:  # writes exactly this binding's struct size
        rc = lib.rl_limit_parse_sized(ctypes.byref(lim), ctypes.sizeof(lim),
                                      spec.encode("utf-8"), err, ctypes.sizeof(err))
    else:
        rc = lib.rl_limit_parse(ctypes.byref(lim), spec.encode("utf-8"), err, ctypes.sizeof(err))
    _check_rc(lib, rc, "rl_limit_parse", err.value.decode("utf-8", "replace"))
    return lim


class Decision:
    """The answer to one check.

    allowed (bool), remaining, retry_after_ms, reset_ms, limit (the rate's
    count), window_ms, burst, flags (RL_FLAG_*), policy (the limit's name).
    headers() renders the rate-limit response headers (rl_headers). A
    Decision owns a copy of everything it refers to, so it stays usable after
    its limit is removed or the instance closed.
    """

    __slots__ = ("_lib", "_d", "_policy")

    def __init__(self, lib: _Lib, d: Decision_t):
        self._lib = lib
        self._d = d
        # d.policy points into the instance: take a copy and point at it, so
        # headers() never reads freed memory.
        self._policy = d.policy
        d.policy = self._policy

    allowed = property(lambda self: self._d.allowed == RL_ALLOW)
    remaining = property(lambda self: self._d.remaining)
    retry_after_ms = property(lambda self: self._d.retry_after_ms)
    reset_ms = property(lambda self: self._d.reset_ms)
    limit = property(lambda self: self._d.limit)
    window_ms = property(lambda self: self._d.window_ms)
    burst = property(lambda self: self._d.burst)
    flags = property(lambda self: self._d.flags)
    policy = property(lambda self: self._policy.decode() if self._policy is not None else None)
    inflight = property(lambda self: self._d.inflight)  # in-flight limits: held after it
    degraded = property(lambda self: bool(self._d.flags & RL_FLAG_DEGRADED))
    shadow = property(lambda self: bool(self._d.flags & RL_FLAG_SHADOW))

    def __bool__(self) -> bool:
        return self.allowed

    def headers(self) -> str:
        """The header lines, CRLF-terminated, as rl_headers renders them."""
        return _snprintf_text(self._lib, self._lib.rl_headers, "rl_headers",
                              ctypes.byref(self._d))

    def header_items(self) -> List[Tuple[str, str]]:
        """headers() as (name, value) pairs, for a web framework's response."""
        items = []
        for line in self.headers().split("\r\n"):
            if line:
                name, _, value = line.partition(":")
                items.append((name, value.strip()))
        return items

    def __repr__(self) -> str:
        return (f"Decision(allowed={self.allowed}, remaining={self.remaining}, "
                f"retry_after_ms={self.retry_after_ms}, flags={self.flags:#x}, "
                f"policy={self.policy!r})")


class MultiDecision(tuple):
    """check_multi's answer: (allowed, decisions, denied_index), a tuple so
    it unpacks as before, and false when denied, as a Decision is:
    `if rl.check_multi(...):` means "every request was admitted"."""

    __slots__ = ()

    def __new__(cls, allowed: bool, decisions: List[Decision], denied_index: int):
        return super().__new__(cls, (allowed, decisions, denied_index))

    allowed = property(lambda self: self[0])
    decisions = property(lambda self: self[1])
    denied_index = property(lambda self: self[2])

    def __bool__(self) -> bool:
        return self[0]

    def __repr__(self) -> str:
        return (f"MultiDecision(allowed={self[0]}, denied_index={self[2]}, "
                f"decisions={self[1]!r})")


class QuotaResult:
    """The answer to a quota charge or read (rl_quota_result_t): allowed
    (bool; the object is false when denied), amount (per period), used (in
    the period, after this charge), remaining, reset_unix_ms (the period's
    end, Unix ms), flags (RL_FLAG_*), duplicate (a request id seen before:
    its first answer, nothing charged), degraded (Redis did not answer in
    time: the quota's on_failure decided and used is unknown, 0)."""

    __slots__ = ("allowed", "amount", "used", "remaining", "reset_unix_ms", "flags")

    def __init__(self, r: QuotaResult_t):
        self.allowed = r.allowed == RL_ALLOW
        self.amount = r.amount
        self.used = r.used
        self.remaining = r.remaining
        self.reset_unix_ms = r.reset_unix_ms
        self.flags = r.flags

    duplicate = property(lambda self: bool(self.flags & RL_FLAG_DUPLICATE))
    degraded = property(lambda self: bool(self.flags & RL_FLAG_DEGRADED))

    def __bool__(self) -> bool:
        return self.allowed

    def __repr__(self) -> str:
        return (f"QuotaResult(allowed={self.allowed}, used={self.used}/{self.amount}, "
                f"remaining={self.remaining}, reset_unix_ms={self.reset_unix_ms}, "
                f"flags={self.flags:#x})")


class HotKey:
    """One of a limit's busiest keys, as hot_keys() reports it (rl_hotkey_t):
    limit (the id as this RateLimiter hands it out), hot (bool: marked hot
    by the limit's hot_ppm), key (the key's first bytes, at most
    RL_HOTKEY_KEY_BYTES; None until the library has kept them), key_len
    (the key's full length; 0 until kept), truncated (the key is longer
    than what key holds), demand_per_s (offered on this node), share_per_s
    (this node's share of the rate; 0 for a local limit), fleet_per_s (what
    hot_ppm is compared with), count and count_err (the sketch's ranking
    count and how much of it may be another key's)."""

    __slots__ = ("limit", "hot", "key", "key_len", "demand_per_s", "share_per_s",
                 "fleet_per_s", "count", "count_err")

    def __init__(self, hk: Hotkey, limit: int):
        self.limit = limit
        self.hot = bool(hk.hot)
        self.key_len = hk.key_len
        self.key = bytes(hk.key[:hk.key_kept]) if hk.key_len else None
        self.demand_per_s = hk.demand_per_s
        self.share_per_s = hk.share_per_s
        self.fleet_per_s = hk.fleet_per_s
        self.count = hk.count
        self.count_err = hk.count_err

    truncated = property(lambda self: self.key is not None and len(self.key) < self.key_len)

    def __repr__(self) -> str:
        return (f"HotKey(limit={self.limit}, key={self.key!r}, hot={self.hot}, "
                f"demand_per_s={self.demand_per_s:.1f}, fleet_per_s={self.fleet_per_s:.1f})")


_MODES = {RL_MODE_GLOBAL: "global", RL_MODE_LOCAL: "local", RL_MODE_EXACT: "exact",
          RL_MODE_TIERED: "tiered"}
_FAILS = {RL_FAIL_DEFAULT: "default", RL_FAIL_LOCAL: "local", RL_FAIL_OPEN: "open",
          RL_FAIL_CLOSED: "closed"}
_HOT_POLICIES = {0: "sync", 1: "local"}


class RateInfo(tuple):
    """A rate: count tokens per period_ms."""

    __slots__ = ()

    def __new__(cls, count: int, period_ms: int):
        return super().__new__(cls, (count, period_ms))

    count = property(lambda self: self[0])
    period_ms = property(lambda self: self[1])

    def __repr__(self) -> str:
        return f"RateInfo(count={self[0]}, period_ms={self[1]})"


class LimitInfo:
    """A limit's parameters, as get_limit() reads them (rl_limit_get): name
    (str), rate and degraded_rate (RateInfo: count, period_ms; a degraded
    rate of 0/0 is the library's default), burst, mode and on_failure and
    hot_policy (the spec's words: "exact", "closed", ...; mode_code,
    on_failure_code, hot_policy_code: the RL_* numbers), shadow (bool),
    max_keys, hot_ppm, near_ppm, hot_every. A plain copy: changing it
    changes nothing; update_limit() takes a spec or a Limit."""

    __slots__ = ("name", "rate", "burst", "mode_code", "on_failure_code", "degraded_rate",
                 "shadow", "max_keys", "hot_ppm", "near_ppm", "hot_policy_code", "hot_every")

    def __init__(self, lim: "Limit"):
        self.name = lim.name.decode("utf-8", "replace")
        self.rate = RateInfo(lim.rate.count, lim.rate.period_ms)
        self.burst = lim.burst
        self.mode_code = lim.mode
        self.on_failure_code = lim.on_failure
        self.degraded_rate = RateInfo(lim.degraded_rate.count, lim.degraded_rate.period_ms)
        self.shadow = bool(lim.shadow)
        self.max_keys = lim.max_keys
        self.hot_ppm = lim.hot_ppm
        self.near_ppm = lim.near_ppm
        self.hot_policy_code = lim.hot_policy
        self.hot_every = lim.hot_every

    mode = property(lambda self: _MODES.get(self.mode_code, str(self.mode_code)))
    on_failure = property(lambda self: _FAILS.get(self.on_failure_code,
                                                  str(self.on_failure_code)))
    hot_policy = property(lambda self: _HOT_POLICIES.get(self.hot_policy_code,
                                                         str(self.hot_policy_code)))

    def __eq__(self, other) -> bool:
        if not isinstance(other, LimitInfo):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self) -> str:
        return (f"LimitInfo(name={self.name!r}, rate={self.rate.count}/{self.rate.period_ms}ms, "
                f"burst={self.burst}, mode={self.mode!r}, on_failure={self.on_failure!r}, "
                f"shadow={self.shadow})")


LimitRef = Union[int, str]
KeyType = Union[bytes, bytearray, memoryview, str]


class Reservation:
    """What reserve() (or reserve_wait()) answered: true when admitted.

    decision is the Decision; estimate the tokens it holds; ready_in_ms, for
    reserve_wait, after how long the caller may proceed (0: now). Settle it
    once with settle(actual) (the real cost: a larger one is debt the key
    pays back by refill, a smaller one is refunded) or release() (the work
    never happened). As a context manager it is released on leaving unless
    settled inside (the work did not complete)."""

    __slots__ = ("_rl", "_r", "decision", "done")

    def __init__(self, rl: "RateLimiter", r: Optional[Reservation_t], decision: "Decision"):
        self._rl = rl
        self._r = r
        self.decision = decision
        self.done = r is None

    allowed = property(lambda self: self._r is not None)
    estimate = property(lambda self: self._r.estimate if self._r is not None else 0)
    ready_in_ms = property(lambda self: self._r.ready_in_ms if self._r is not None else 0)

    def __bool__(self) -> bool:
        return self.allowed

    def settle(self, actual: int) -> None:
        self._rl.settle(self, actual)

    def release(self) -> None:
        self._rl.release(self)

    def __enter__(self) -> "Reservation":
        return self

    def __exit__(self, *exc) -> None:
        if not self.done:
            self.release()

    def __repr__(self) -> str:
        return (f"Reservation(allowed={self.allowed}, estimate={self.estimate}, "
                f"ready_in_ms={self.ready_in_ms}, done={self.done})")


class MultiReservation(tuple):
    """reserve_multi's answer: (allowed, reservations, denied_index); false
    when denied (then no reservation holds anything)."""

    __slots__ = ()

    def __new__(cls, allowed: bool, reservations: List[Reservation], denied_index: int):
        return super().__new__(cls, (allowed, reservations, denied_index))

    allowed = property(lambda self: self[0])
    reservations = property(lambda self: self[1])
    denied_index = property(lambda self: self[2])

    def __bool__(self) -> bool:
        return self[0]


class InflightFull(Exception):
    """inflight()'s refusal: the key (or the pool) holds the limit. decision
    carries the in-flight count, the limit and retry_after_ms (a 503's
    Retry-After: decision.headers())."""

    def __init__(self, decision: "Decision"):
        super().__init__(f"in-flight limit {decision.policy!r} full: {decision.inflight} of "
                         f"{decision.limit} held, retry after {decision.retry_after_ms} ms")
        self.decision = decision
        self.retry_after_ms = decision.retry_after_ms


class Permit:
    """A held in-flight permit (inflight_acquire, inflight()): true when
    admitted. Release it once with release(outcome, latency_ns); the
    context manager releases it on leaving with `outcome` (RL_INFLIGHT_SUCCESS
    unless set inside; RL_INFLIGHT_DROPPED on an exception) and the latency
    measured since the acquire."""

    __slots__ = ("_rl", "_p", "decision", "outcome", "started_ns", "released", "reclaimed")

    def __init__(self, rl: "RateLimiter", p: Optional[Permit_t], decision: "Decision"):
        self._rl = rl
        self._p = p
        self.decision = decision
        self.outcome = RL_INFLIGHT_SUCCESS
        self.started_ns = time.monotonic_ns()
        self.released = p is None
        self.reclaimed = False

    allowed = property(lambda self: self._p is not None)

    def __bool__(self) -> bool:
        return self.allowed

    def release(self, outcome: Optional[int] = None, latency_ns: Optional[int] = None) -> bool:
        """Give the permit back; True when it had been reclaimed past max_hold
        (a counted no-op)."""
        return self._rl.inflight_release(self, self.outcome if outcome is None else outcome,
                                         latency_ns)

    def __enter__(self) -> "Permit":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.released:
            self.release(RL_INFLIGHT_DROPPED if exc_type is not None else self.outcome)

    def __repr__(self) -> str:
        return f"Permit(allowed={self.allowed}, released={self.released})"


class RateLimiter:
    """An instance (rl_t). redis_url None: local-only, a complete single-node
    limiter; else the global tier syncs through Redis, and key_secret is
    required: bytes or str, 16..4096 bytes, the same on every node of a fleet
    (nodes with different secrets keep separate keys: each would enforce the
    whole limit). The other arguments are rl_config_t's fields, by the same
    names (None: the library's default; include/ratelimit.h gives each
    range): the fleet's node_id, key_prefix, expected_nodes; max_keys,
    max_limits, sync_interval_ms, key_ttl_ms, demand_alpha_pct; health
    (degrade_after_failures, recover_after_rounds, reconnect_max_ms,
    degrade_ramp_ms); exact mode (exact_timeout_ms, exact_pool_size);
    quotas (quota_journal_max, quota_timeout_ms); hot keys (hotkeys_k);
    reservations (max_reservations: in flight at once, 0 for none);
    clock_coarse_tick_ns. log, if given, is called as log(level, message) from
    the library's threads; without it, warnings and errors go to stderr,
    rate-limited, unless log_quiet=True. A bad argument raises
    RateLimitError whose detail names the field and why (rl_open's message)."""

    def __init__(self, redis_url: Optional[str] = None, *,
                 node_id: Optional[str] = None,
                 key_secret: Union[bytes, str, None] = None,
                 key_prefix: Optional[str] = None,
                 max_keys: Optional[int] = None,
                 max_limits: Optional[int] = None,
                 sync_interval_ms: Optional[int] = None,
                 expected_nodes: Optional[int] = None,
                 key_ttl_ms: Optional[int] = None,
                 demand_alpha_pct: Optional[int] = None,
                 degrade_after_failures: Optional[int] = None,
                 recover_after_rounds: Optional[int] = None,
                 reconnect_max_ms: Optional[int] = None,
                 degrade_ramp_ms: Optional[int] = None,
                 clock_coarse_tick_ns: Optional[int] = None,
                 exact_timeout_ms: Optional[int] = None,
                 exact_pool_size: Optional[int] = None,
                 quota_journal_max: Optional[int] = None,
                 quota_timeout_ms: Optional[int] = None,
                 hotkeys_k: Optional[int] = None,
                 max_reservations: Optional[int] = None,
                 log: Optional[Callable[[int, str], None]] = None,
                 log_quiet: bool = False,
                 library: Optional[str] = None):
        self._rl = None
        self._lib = lib = load(library)
        cfg = Config()
        lib.rl_config_init_sized(ctypes.byref(cfg), ctypes.sizeof(cfg))
        if redis_url is not None:
            cfg.redis_url = redis_url.encode("utf-8")
            if key_secret is None:
                # The library refuses too (with this message); said here
                # first so the error names the Python argument.
                raise RateLimitError(RL_ERANGE, "rl_open",
                                     "key_secret: required with a redis_url (every node of a "
                                     "fleet must share it, or each node keeps its own keys "
                                     "and the fleet admits the limit once per node)", lib)
        if node_id is not None:
            cfg.node_id = node_id.encode("utf-8")
        if key_prefix is not None:
            cfg.key_prefix = key_prefix.encode("utf-8")
        if key_secret is not None:
            secret = _key_bytes(key_secret)
            cfg.key_secret = secret
            cfg.key_secret_len = len(secret)
        for name, value in (("max_keys", max_keys), ("max_limits", max_limits),
                            ("sync_interval_ms", sync_interval_ms),
                            ("expected_nodes", expected_nodes), ("key_ttl_ms", key_ttl_ms),
                            ("demand_alpha_pct", demand_alpha_pct),
                            ("degrade_after_failures", degrade_after_failures),
                            ("recover_after_rounds", recover_after_rounds),
                            ("reconnect_max_ms", reconnect_max_ms),
                            ("degrade_ramp_ms", degrade_ramp_ms),
                            ("clock_coarse_tick_ns", clock_coarse_tick_ns),
                            ("exact_timeout_ms", exact_timeout_ms),
                            ("exact_pool_size", exact_pool_size),
                            ("quota_journal_max", quota_journal_max),
                            ("quota_timeout_ms", quota_timeout_ms),
                            ("hotkeys_k", hotkeys_k),
                            ("max_reservations", max_reservations)):
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError(f"{name} must be an int, not {type(value).__name__}")
                # ctypes would wrap a negative or oversized value silently.
                bits = 64 if name in ("key_ttl_ms", "clock_coarse_tick_ns") else 32
                if not 0 <= value < 1 << bits:
                    raise RateLimitError(RL_ERANGE, "rl_open", f"{name}={value}", lib)
                setattr(cfg, name, value)
        self._log_cb = None
        if log is not None:
            def _log(_ud, level, msg, _user=log):
                try:  # an exception must not unwind into C
                    _user(level, msg.decode("utf-8", "replace"))
                except Exception:  # noqa: BLE001
                    pass
            # Kept referenced for the instance's life: C holds the pointer.
            self._log_cb = LOG_FN(_log)
            cfg.log = self._log_cb
        # Kept for a reopen after fork(): the config (which references the
        # secret's bytes) and every limit by the id the caller holds.
        # A library older than these fields would see a non-zero unknown
        # tail (RL_ESIZE): rl_limit_parse_sized came with them.
        if lib.rl_limit_parse_sized is not None:
            cfg.log_quiet = 1 if log_quiet else 0
        self._cfg = cfg
        self._defs: dict = {}
        self._u2c: Optional[dict] = None  # caller's id -> this process's id, once reopened
        self._c2u: dict = {}
        self._synth_id = 1 << 31  # above any id the library hands out (< 2**31)
        # Quotas likewise: caller's id -> its definition, and -> this
        # process's id (the library's ids are never reused, so the caller's
        # stay unique across a reopen); a name -> the caller's id.
        self._qdefs: dict = {}
        self._q_u2c: dict = {}
        self._q_names: dict = {}
        self._reopen_lock = threading.Lock()
        self._rl = self._open()
        self._pid = _pid[0]

    def _open(self):
        err = ctypes.create_string_buffer(512)
        if self._lib.rl_limit_parse_sized is not None:
            self._cfg.err = ctypes.cast(err, ctypes.c_void_p)
            self._cfg.errlen = ctypes.sizeof(err)
        handle = _c_rl()
        rc = self._lib.rl_open(ctypes.byref(handle), ctypes.byref(self._cfg))
        self._cfg.err, self._cfg.errlen = None, 0  # the buffer is ours; nothing keeps it
        _check_rc(self._lib, rc, "rl_open", err.value.decode("utf-8", "replace"))
        return handle

    def _reopen(self) -> None:
        """In a forked child: the inherited instance answers RL_EFORKED, so
        free it (rl_close is safe there) and open a new one with the same
        config and limits. The limits are re-added in slot order, which
        gives them the ids they had unless some were removed before the
        fork; the caller's ids are mapped either way."""
        with self._reopen_lock:
            if self._pid == _pid[0] or self._rl is None:
                return
            old, self._rl = self._rl, None
            self._lib.rl_close(old)
            if self._cfg.redis_url:
                # Each process is a node of its own in the fleet: two with
                # one node_id would overwrite each other's reports.
                base = (self._cfg.node_id or socket.gethostname().encode()).decode()
                suffix = f"-{_pid[0]}"
                base = re.sub(r"[^A-Za-z0-9_.:-]", "-", base)[:64 - len(suffix)]
                self._cfg.node_id = (base + suffix).encode()
            rl = self._open()
            u2c, c2u = {}, {}
            try:
                for uid in sorted(self._defs, key=lambda u: (u & 0xFFF, u)):
                    lim = Limit.from_buffer_copy(self._defs[uid])
                    cid = _check_rc(self._lib, self._lib.rl_limit_add(rl, ctypes.byref(lim)),
                                    "rl_limit_add")
                    u2c[uid], c2u[cid] = cid, uid
                q_u2c = {}
                for uid in sorted(self._qdefs):
                    q = Quota.from_buffer_copy(self._qdefs[uid])
                    q_u2c[uid] = _check_rc(self._lib, self._lib.rl_quota_add(rl, ctypes.byref(q)),
                                           "rl_quota_add")
            except RateLimitError:
                self._lib.rl_close(rl)
                raise
            self._u2c, self._c2u = u2c, c2u
            self._q_u2c = q_u2c
            self._rl = rl
            self._pid = _pid[0]

    def _caller_id(self, cid: int) -> int:
        """The id to hand the caller for this process's id cid."""
        if self._u2c is None:
            return cid
        uid = cid
        while uid in self._u2c:  # an id the caller holds for another limit
            self._synth_id += 1
            uid = self._synth_id
        self._u2c[uid], self._c2u[cid] = cid, uid
        return uid

    # -------------------------------------------------------------- lifetime

    def close(self) -> None:
        """rl_close. Idempotent. No other call on this instance may run
        concurrently with it or after it."""
        rl, self._rl = self._rl, None
        if rl is not None:
            self._lib.rl_close(rl)

    def __enter__(self) -> "RateLimiter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    @property
    def closed(self) -> bool:
        return self._rl is None

    def _h(self, function: str):
        if self._pid != _pid[0]:
            self._reopen()
        rl = self._rl
        if rl is None:
            raise RateLimitError(RL_EINVAL, function, "the RateLimiter is closed", self._lib)
        return rl

    # ---------------------------------------------------------------- limits

    def add_limit(self, spec: Union[str, Limit]) -> int:
        """Add a limit from a spec ("name=api rate=100/s burst=20") or a
        Limit struct; returns its id."""
        lim = _parse(self._lib, spec)
        cid = _check_rc(self._lib, self._lib.rl_limit_add(self._h("rl_limit_add"),
                                                          ctypes.byref(lim)), "rl_limit_add")
        uid = self._caller_id(cid)
        self._defs[uid] = Limit.from_buffer_copy(lim)
        return uid

    def update_limit(self, limit: LimitRef, spec: Union[str, Limit]) -> None:
        """Replace a limit's parameters (same name); keys keep their tokens."""
        lim = _parse(self._lib, spec)
        uid = self._uid(limit)
        rc = self._lib.rl_limit_update(self._h("rl_limit_update"), self._id(uid),
                                       ctypes.byref(lim))
        _check_rc(self._lib, rc, "rl_limit_update")
        self._defs[uid] = Limit.from_buffer_copy(lim)

    def remove_limit(self, limit: LimitRef) -> None:
        uid = self._uid(limit)
        rc = self._lib.rl_limit_remove(self._h("rl_limit_remove"), self._id(uid))
        _check_rc(self._lib, rc, "rl_limit_remove")
        self._defs.pop(uid, None)

    def find_limit(self, name: str) -> int:
        """The id of the limit with this name (RateLimitError RL_ENOTFOUND)."""
        rc = self._lib.rl_limit_find(self._h("rl_limit_find"), name.encode("utf-8"))
        cid = _check_rc(self._lib, rc, "rl_limit_find", name)
        return self._c2u.get(cid, cid)

    def get_limit(self, limit: LimitRef) -> LimitInfo:
        """A copy of the limit's current parameters (rl_limit_get)."""
        out = Limit()
        self._lib.rl_limit_init_sized(ctypes.byref(out), ctypes.sizeof(out))
        rc = self._lib.rl_limit_get(self._h("rl_limit_get"), self._id(limit), ctypes.byref(out))
        _check_rc(self._lib, rc, "rl_limit_get")
        return LimitInfo(out)

    def _uid(self, limit: LimitRef) -> int:
        """The caller's id for an id or a name."""
        if isinstance(limit, str):
            return self.find_limit(limit)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an id (int) or a name (str), "
                            f"not {type(limit).__name__}")
        return limit

    def _id(self, limit: LimitRef) -> int:
        """This process's id for the caller's id or name."""
        if self._pid != _pid[0]:
            self._reopen()
        limit = self._uid(limit)
        if self._u2c is not None:
            # every id the caller may hold is mapped; any other is unknown
            limit = self._u2c.get(limit, 0)
        if not -(1 << 31) <= limit < 1 << 31:
            return 0  # no such id: the library answers RL_ENOTFOUND
        return limit

    # ---------------------------------------------------------------- checks

    def check(self, limit: LimitRef, key: KeyType, cost: int = 1) -> Decision:
        """Charge cost tokens to (limit, key) and decide; cost 0 peeks.
        limit is an id, or a name (looked up on every call)."""
        lib = self._lib
        k = _key_bytes(key)
        d = Decision_t()
        lib.rl_decision_init_sized(ctypes.byref(d), ctypes.sizeof(d))
        rc = lib.rl_check(self._h("rl_check"), self._id(limit), k, len(k),
                          _cost(lib, cost, "rl_check"), ctypes.byref(d))
        _check_rc(lib, rc, "rl_check")
        return Decision(lib, d)

    def allow(self, limit: LimitRef, key: KeyType, cost: int = 1) -> bool:
        """check() without a decision to build: just allowed or not."""
        lib = self._lib
        k = _key_bytes(key)
        rc = lib.rl_check(self._h("rl_check"), self._id(limit), k, len(k),
                          _cost(lib, cost, "rl_check"), None)
        return _check_rc(lib, rc, "rl_check") == RL_ALLOW

    def refund(self, limit: LimitRef, key: KeyType, cost: int = 1) -> None:
        """Give cost tokens back (the request was not served after all)."""
        lib = self._lib
        k = _key_bytes(key)
        rc = lib.rl_refund(self._h("rl_refund"), self._id(limit), k, len(k),
                           _cost(lib, cost, "rl_refund"))
        _check_rc(lib, rc, "rl_refund")

    def check_multi(self, requests: Sequence[Tuple]) -> MultiDecision:
        """All-or-nothing check of (limit, key) or (limit, key, cost) tuples.
        Returns a MultiDecision: (allowed, decisions, denied_index), false
        when denied; denied_index is len(requests) when nothing denied. An
        invalid request raises, and nothing is charged."""
        lib = self._lib
        n = len(requests)
        reqs = (Request * max(n, 1))()
        decs = (Decision_t * max(n, 1))()
        for i, r in enumerate(requests):
            limit, key, cost = (r[0], r[1], 1) if len(r) == 2 else r
            lib.rl_request_init_sized(ctypes.byref(reqs[i]), ctypes.sizeof(Request))
            k = _key_bytes(key)
            reqs[i].limit = self._id(limit)
            reqs[i].key = k  # the struct keeps a reference to the bytes
            reqs[i].key_len = len(k)
            reqs[i].cost = _cost(lib, cost, "rl_check_multi")
            lib.rl_decision_init_sized(ctypes.byref(decs[i]), ctypes.sizeof(Decision_t))
        denied = _size(n)
        rc = lib.rl_check_multi(self._h("rl_check_multi"), reqs, n, ctypes.sizeof(Request),
                                decs, ctypes.byref(denied))
        _check_rc(lib, rc, "rl_check_multi",
                  f"request {denied.value}" if denied.value < n else None)
        out = []
        for i in range(n):
            out.append(Decision(lib, Decision_t.from_buffer_copy(decs[i])))
        return MultiDecision(rc == RL_ALLOW, out, denied.value)

    # ----------------------------------------------------------------- stats

    def stats(self) -> dict:
        """rl_stats as a dict (admitted, denied, ..., health, sync_*)."""
        s = Stats()
        self._lib.rl_stats_init_sized(ctypes.byref(s), ctypes.sizeof(s))
        _check_rc(self._lib, self._lib.rl_stats(self._h("rl_stats"), ctypes.byref(s)),
                  "rl_stats")
        return _as_dict(s)

    def limit_stats(self, limit: LimitRef) -> dict:
        """rl_limit_stats as a dict."""
        s = LimitStats()
        self._lib.rl_limit_stats_init_sized(ctypes.byref(s), ctypes.sizeof(s))
        rc = self._lib.rl_limit_stats(self._h("rl_limit_stats"), self._id(limit),
                                      ctypes.byref(s))
        _check_rc(self._lib, rc, "rl_limit_stats")
        return _as_dict(s)

    def metrics_text(self) -> str:
        """Prometheus text exposition (rl_metrics_text); RL_ENOTSUP from a
        library built before it existed."""
        fn = self._lib.rl_metrics_text
        if fn is None:
            raise RateLimitError(RL_ENOTSUP, "rl_metrics_text",
                                 "this libratelimit has no rl_metrics_text", self._lib)
        return _snprintf_text(self._lib, fn, "rl_metrics_text", self._h("rl_metrics_text"))

    # ---------------------------------------------------------------- quotas

    def add_quota(self, spec: Union[str, Quota]) -> int:
        """Add a quota from a spec ("name=plan amount=1000000 period=month
        dedup=24h on_failure=open") or a Quota struct (rl_quota_add); returns
        its id. Needs a redis_url: a local-only instance raises
        NotSupportedError (a quota in volatile memory is not a quota)."""
        lib = self._lib
        q = _parse_quota(lib, spec)
        _need(lib, "rl_quota_add")
        cid = _check_rc(lib, lib.rl_quota_add(self._h("rl_quota_add"), ctypes.byref(q)),
                        "rl_quota_add", q.name.decode("utf-8", "replace"))
        uid = cid
        while uid in self._q_u2c:  # reopened: the caller holds ids of the parent's numbering
            self._synth_id += 1
            uid = self._synth_id
        self._q_u2c[uid] = cid
        self._qdefs[uid] = Quota.from_buffer_copy(q)
        self._q_names[q.name.decode("utf-8")] = uid
        return uid

    def remove_quota(self, quota: LimitRef) -> None:
        """rl_quota_remove: the quota's usage stays in Redis until it expires;
        its journaled charges not yet replayed are dropped (quota_lost)."""
        uid = self._quota_uid(quota)
        _need(self._lib, "rl_quota_remove")
        rc = self._lib.rl_quota_remove(self._h("rl_quota_remove"), self._quota_id(uid))
        _check_rc(self._lib, rc, "rl_quota_remove")
        q = self._qdefs.pop(uid, None)
        self._q_u2c.pop(uid, None)
        if q is not None:
            self._q_names.pop(q.name.decode("utf-8"), None)

    def charge_quota(self, quota: LimitRef, key: KeyType, request_id: KeyType,
                     cost: int = 1) -> QuotaResult:
        """Charge cost units of a quota to key, once per request_id
        (rl_quota_charge): the same id again within the quota's dedup window
        (a retry) gets the first answer, duplicate=True, and charges
        nothing. Blocks at most quota_timeout_ms (the GIL released); when
        Redis does not answer, the quota's on_failure decides
        (degraded=True). quota is an id or the name of a quota added here."""
        lib = self._lib
        _need(lib, "rl_quota_charge")
        k, rid = _key_bytes(key), _key_bytes(request_id)
        if not isinstance(cost, int) or isinstance(cost, bool):
            raise TypeError(f"cost must be an int, not {type(cost).__name__}")
        if not 0 <= cost < 1 << 64:
            raise RateLimitError(RL_ERANGE, "rl_quota_charge", f"cost {cost} is outside "
                                 "0..2**64-1", lib)
        r = QuotaResult_t()
        lib.rl_quota_result_init_sized(ctypes.byref(r), ctypes.sizeof(r))
        qid = self._quota_id(self._quota_uid(quota))
        rc = lib.rl_quota_charge(self._h("rl_quota_charge"), qid, k, len(k), cost, rid,
                                 len(rid), ctypes.byref(r))
        _check_rc(lib, rc, "rl_quota_charge")
        return QuotaResult(r)

    def get_quota(self, quota: LimitRef, key: KeyType) -> QuotaResult:
        """A key's usage of a quota in the current period, charging nothing
        (rl_quota_get); allowed while remaining > 0. Blocks like
        charge_quota."""
        lib = self._lib
        _need(lib, "rl_quota_get")
        k = _key_bytes(key)
        r = QuotaResult_t()
        lib.rl_quota_result_init_sized(ctypes.byref(r), ctypes.sizeof(r))
        qid = self._quota_id(self._quota_uid(quota))
        rc = lib.rl_quota_get(self._h("rl_quota_get"), qid, k, len(k), ctypes.byref(r))
        _check_rc(lib, rc, "rl_quota_get")
        return QuotaResult(r)

    def _quota_uid(self, quota: LimitRef) -> int:
        if isinstance(quota, str):
            uid = self._q_names.get(quota)
            if uid is None:
                raise RateLimitError(RL_ENOTFOUND, "rl_quota_charge",
                                     f"no quota named {quota!r} was added here", self._lib)
            return uid
        if isinstance(quota, bool) or not isinstance(quota, int):
            raise TypeError(f"quota must be an id (int) or a name (str), "
                            f"not {type(quota).__name__}")
        return quota

    def _quota_id(self, uid: int) -> int:
        if self._pid != _pid[0]:
            self._reopen()
        # an id this RateLimiter never handed out: -1, which the library
        # answers RL_ENOTFOUND
        return self._q_u2c.get(uid, -1)

    # -------------------------------------------------------------- hot keys

    def hot_keys(self, limit: Optional[LimitRef] = None, n: int = 32) -> List[HotKey]:
        """The busiest keys of one limit (an id or a name) or of every limit
        (None), highest demand first, at most n (rl_hotkeys). A scrape, not
        a per-request call: it walks the key table for local limits."""
        lib = self._lib
        _need(lib, "rl_hotkeys")
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= 65536:
            raise RateLimitError(RL_ERANGE, "rl_hotkeys", f"n={n!r}: 1..65536", lib)
        out = (Hotkey * n)()
        for i in range(n):
            lib.rl_hotkey_init_sized(ctypes.byref(out[i]), ctypes.sizeof(Hotkey))
        lid = -1 if limit is None else self._id(limit)
        got = _check_rc(lib, lib.rl_hotkeys(self._h("rl_hotkeys"), lid, out, n), "rl_hotkeys")
        return [HotKey(out[i], self._c2u.get(out[i].limit, out[i].limit)) for i in range(got)]

    # ------------------------------------------- reservations and waits

    def _reservation(self) -> Reservation_t:
        r = Reservation_t()
        self._lib.rl_reservation_init_sized(ctypes.byref(r), ctypes.sizeof(r))
        return r

    def reserve(self, limit: LimitRef, key: KeyType, estimate: int,
                ttl_ms: int = 60000) -> Reservation:
        """Reserve estimate tokens of (limit, key) for at most ttl_ms
        (rl_reserve): a Reservation, false when denied. Settle or release it
        once; unsettled after ttl_ms, the library settles it at the
        estimate."""
        return self.reserve_wait(limit, key, estimate, 0, ttl_ms, _function="rl_reserve")

    def reserve_wait(self, limit: LimitRef, key: KeyType, estimate: int, max_wait_ms: int,
                     ttl_ms: int = 60000, *, _function: str = "rl_reserve_wait") -> Reservation:
        """The non-blocking wait (rl_reserve_wait): admitted when the tokens
        can be had within max_wait_ms; its ready_in_ms says when the caller
        may proceed (schedule the work then: an event loop's timer). False
        at once, nothing held, when the wait needed is longer
        (decision.retry_after_ms says how long). release() is the cancel."""
        lib = self._lib
        _need(lib, _function)
        k = _key_bytes(key)
        r = self._reservation()
        d = Decision_t()
        lib.rl_decision_init_sized(ctypes.byref(d), ctypes.sizeof(d))
        h = self._h(_function)
        est = _cost(lib, estimate, _function)
        # out of the C range: a value the library refuses (RL_EINVAL)
        ttl = ttl_ms if 0 <= ttl_ms < 1 << 32 else 0
        mw = max_wait_ms if 0 <= max_wait_ms <= RL_WAIT_MAX_MS else RL_WAIT_MAX_MS + 1
        if _function == "rl_reserve":
            rc = lib.rl_reserve(h, self._id(limit), k, len(k), est, ttl, ctypes.byref(r),
                                ctypes.byref(d))
        else:
            rc = lib.rl_reserve_wait(h, self._id(limit), k, len(k), est, mw, ttl,
                                     ctypes.byref(r), ctypes.byref(d))
        _check_rc(lib, rc, _function)
        return Reservation(self, r if rc == RL_ALLOW else None, Decision(lib, d))

    def _spend(self, res: Reservation, function: str) -> Reservation_t:
        if not isinstance(res, Reservation) or res._rl is not self:
            raise RateLimitError(RL_EINVAL, function, "not a reservation of this RateLimiter",
                                 self._lib)
        if res.done:
            raise RateLimitError(RL_EINVAL, function, "settled or released already"
                                 if res.allowed else "a denied reservation holds nothing",
                                 self._lib)
        return res._r

    def settle(self, res: Reservation, actual: int) -> None:
        """Settle at the real cost (rl_settle). ReservationExpiredError when
        its ttl had passed (settled at its estimate; actual not charged)."""
        lib = self._lib
        r = self._spend(res, "rl_settle")
        if isinstance(actual, bool) or not isinstance(actual, int) or \
                not 0 <= actual <= RL_COST_SETTLE_MAX:
            raise RateLimitError(RL_ERANGE, "rl_settle", f"actual={actual!r}: "
                                 f"0..{RL_COST_SETTLE_MAX}", lib)
        rc = lib.rl_settle(self._h("rl_settle"), ctypes.byref(r), actual)
        res.done = True
        _check_rc(lib, rc, "rl_settle")

    def release(self, res: Reservation) -> None:
        """Give the whole estimate back (rl_release): the work never
        happened, or a waiter gave up."""
        lib = self._lib
        r = self._spend(res, "rl_release")
        rc = lib.rl_release(self._h("rl_release"), ctypes.byref(r))
        res.done = True
        _check_rc(lib, rc, "rl_release")

    def wait(self, limit: LimitRef, key: KeyType, cost: int = 1,
             max_wait_ms: int = 1000) -> Decision:
        """Block until cost tokens are admitted, at most max_wait_ms
        (rl_wait; the GIL is released meanwhile): an allowed Decision; a
        denied one at once, without sleeping, when the wait needed is
        longer. Never from an event loop (use reserve_wait)."""
        lib = self._lib
        _need(lib, "rl_wait")
        k = _key_bytes(key)
        d = Decision_t()
        lib.rl_decision_init_sized(ctypes.byref(d), ctypes.sizeof(d))
        mw = max_wait_ms if 0 <= max_wait_ms <= RL_WAIT_MAX_MS else RL_WAIT_MAX_MS + 1
        rc = lib.rl_wait(self._h("rl_wait"), self._id(limit), k, len(k),
                         _cost(lib, cost, "rl_wait"), mw, ctypes.byref(d))
        _check_rc(lib, rc, "rl_wait")
        return Decision(lib, d)

    def reserve_multi(self, requests: Sequence[Tuple], ttl_ms: int = 60000) -> MultiReservation:
        """Reserve several budgets as one, all or nothing (rl_reserve_multi):
        (limit, key, estimate) tuples. A MultiReservation (allowed,
        reservations, denied_index), each reservation settled or released on
        its own; false when denied, nothing held."""
        lib = self._lib
        _need(lib, "rl_reserve_multi")
        n = len(requests)
        reqs = (Request * max(n, 1))()
        res = (Reservation_t * max(n, 1))()
        decs = (Decision_t * max(n, 1))()
        keep = []
        for i, (limit, key, estimate) in enumerate(requests):
            lib.rl_request_init_sized(ctypes.byref(reqs[i]), ctypes.sizeof(Request))
            k = _key_bytes(key)
            keep.append(k)
            reqs[i].limit = self._id(limit)
            reqs[i].key = k
            reqs[i].key_len = len(k)
            reqs[i].cost = _cost(lib, estimate, "rl_reserve_multi")
            lib.rl_reservation_init_sized(ctypes.byref(res[i]), ctypes.sizeof(Reservation_t))
            lib.rl_decision_init_sized(ctypes.byref(decs[i]), ctypes.sizeof(Decision_t))
        denied = _size(n)
        ttl = ttl_ms if 0 <= ttl_ms < 1 << 32 else 0
        rc = lib.rl_reserve_multi(self._h("rl_reserve_multi"), reqs, n, ctypes.sizeof(Request),
                                  ttl, res, decs, ctypes.byref(denied))
        _check_rc(lib, rc, "rl_reserve_multi",
                  f"request {denied.value}" if denied.value < n else None)
        ok = rc == RL_ALLOW
        out = [Reservation(self, Reservation_t.from_buffer_copy(res[i]) if ok else None,
                           Decision(lib, Decision_t.from_buffer_copy(decs[i])))
               for i in range(n)]
        return MultiReservation(ok, out, denied.value)

    def reserve_stats(self) -> dict:
        """rl_reserve_stats as a dict (reserved, denied, settled_up, ...,
        in_flight, capacity, waits, waits_slept, waits_refused); it also
        expires the reservations due."""
        lib = self._lib
        _need(lib, "rl_reserve_stats")
        st = ReserveStats()
        lib.rl_reserve_stats_init_sized(ctypes.byref(st), ctypes.sizeof(st))
        _check_rc(lib, lib.rl_reserve_stats(self._h("rl_reserve_stats"), ctypes.byref(st)),
                  "rl_reserve_stats")
        return {name: getattr(st, name) for name, _ in st._fields_ if name != "size"}

    # ------------------------------------------------------ in-flight limits

    def inflight_class(self, limit: LimitRef, name: str) -> int:
        """The index of a named class (partitions=) of an in-flight limit."""
        lib = self._lib
        _need(lib, "rl_inflight_class")
        rc = lib.rl_inflight_class(self._h("rl_inflight_class"), self._id(limit),
                                   name.encode("utf-8"))
        return _check_rc(lib, rc, "rl_inflight_class", name)

    def inflight_acquire(self, limit: LimitRef, key: KeyType,
                         cls: Union[None, int, str] = None) -> Permit:
        """Take a permit of an in-flight limit (rl_inflight_acquire), in a
        class (its index or name; None: no class): a Permit, false when the
        key holds the limit. Release it once (Permit.release)."""
        lib = self._lib
        _need(lib, "rl_inflight_acquire")
        k = _key_bytes(key)
        if cls is None:
            c = RL_INFLIGHT_NO_CLASS
        elif isinstance(cls, str):
            c = self.inflight_class(limit, cls)
        else:
            c = cls
        p = Permit_t()
        d = Decision_t()
        lib.rl_decision_init_sized(ctypes.byref(d), ctypes.sizeof(d))
        rc = lib.rl_inflight_acquire(self._h("rl_inflight_acquire"), self._id(limit), k, len(k),
                                     c, ctypes.byref(p), ctypes.byref(d))
        _check_rc(lib, rc, "rl_inflight_acquire")
        return Permit(self, p if rc == RL_ALLOW else None, Decision(lib, d))

    def inflight_release(self, permit: Permit, outcome: int = RL_INFLIGHT_SUCCESS,
                         latency_ns: Optional[int] = None) -> bool:
        """Give a permit back with its outcome (RL_INFLIGHT_SUCCESS, _DROPPED,
        _IGNORED) and latency (None: measured since the acquire), which feed
        an adaptive limit. True when it had been reclaimed past max_hold (a
        counted no-op)."""
        lib = self._lib
        if not isinstance(permit, Permit) or permit._rl is not self:
            raise RateLimitError(RL_EINVAL, "rl_inflight_release",
                                 "not a permit of this RateLimiter", lib)
        if permit.released:
            raise RateLimitError(RL_EINVAL, "rl_inflight_release", "released already"
                                 if permit.allowed else "a denied acquire holds nothing", lib)
        if latency_ns is None:
            latency_ns = max(1, time.monotonic_ns() - permit.started_ns)
        rc = lib.rl_inflight_release(self._h("rl_inflight_release"), ctypes.byref(permit._p),
                                     outcome, latency_ns)
        permit.released = True
        _check_rc(lib, rc, "rl_inflight_release")
        permit.reclaimed = rc == RL_INFLIGHT_RECLAIMED
        return permit.reclaimed

    def inflight(self, limit: LimitRef, key: KeyType,
                 cls: Union[None, int, str] = None) -> Permit:
        """A permit for a with block: `with rl.inflight(lim, key) as permit:`
        runs the block holding it and releases it on leaving, with outcome
        success (or permit.outcome, if set inside), dropped when the block
        raised, and the block's latency. Raises InflightFull (carrying the
        decision) when the key holds the limit."""
        permit = self.inflight_acquire(limit, key, cls)
        if not permit:
            raise InflightFull(permit.decision)
        return permit
