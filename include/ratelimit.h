/* SPDX-License-Identifier: MIT */
/*
 * libratelimit: an embeddable, two-tier, distributed rate limiter.
 *
 * This header is the specification of the C API and its stable ABI. Every
 * public symbol has a doc block saying what it does, its thread-safety, who
 * owns what, and every error it returns; a symbol not declared here is not
 * part of the API.
 *
 * Stability: releases with the same RL_VERSION_MAJOR are ABI-compatible (the
 * shared library's SOVERSION is the major version). The promise covers every
 * declaration here but those marked RL_EXPERIMENTAL (see that macro): each
 * function's name, signature and documented behaviour, each struct's layout
 * and each field's meaning, each constant's value.
 *
 * Sections, in the order a program meets them; each opens with an intro,
 * then its constants and types, then its functions:
 *   conventions    the export and RL_EXPERIMENTAL markers, versions,
 *                  verdicts, error codes
 *   instance       rl_t, the log, clock and allocator hooks, rl_config_t,
 *                  rl_open, rl_close
 *   shared         one instance for a pre-fork server's processes
 *   limits         rl_limit_t and the rl_limit_* calls
 *   checks         flags, requests, decisions, rl_check and its forms,
 *                  response headers
 *   stats          counters and the Prometheus text
 *   quotas         durable ledgers with idempotent charges
 *   hot keys       the busiest keys, and what a hot key does
 *   in-flight limits  concurrency caps: permits acquired and released
 *
 * Conventions
 * - Functions return an int: >= 0 on success, a negative RL_E* code on error.
 *   rl_check returns RL_ALLOW (1), RL_DENY (0) or an error: always compare
 *   with RL_ALLOW, so an error is never mistaken for an allow.
 * - Structs that cross the ABI start with a `size` field set by their _init
 *   function. Fields are only ever appended. A struct whose size is larger than
 *   this library knows is accepted only if the unknown tail is all zero bytes
 *   (RL_ESIZE otherwise); one smaller than the oldest layout this library
 *   accepts is RL_ESIZE. An output struct of an older, smaller layout gets
 *   the fields that fit.
 * - Enum-valued fields are int32_t. No varargs, no macro-only features: every
 *   function is callable through an FFI (ctypes, cffi, Rust, cgo).
 * - Nothing a caller passes is kept by pointer (options and strings are
 *   copied), except the hooks: the allocator, clock and log functions and
 *   their opaque / clock_ud / log_ud pointers must outlive the instance.
 * - Each struct's tag is its typedef's name without _t (rl_config_t is
 *   struct rl_config), except where that name is a function's: rl_stats_t
 *   and rl_limit_stats_t are struct rl_stats_s and struct rl_limit_stats_s.
 *   Tags never change: C++ mangles a struct parameter by its tag, so a
 *   rename would change the symbols of a C++ caller's own functions.
 */
#ifndef RATELIMIT_H
#define RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- conventions */

/*
 * What every declaration below relies on: the export macro, the
 * RL_EXPERIMENTAL marker, the version, the verdicts checks and quota charges
 * return, and the error codes with their names and messages.
 */

/* The library's symbols have default visibility; defining RL_STATIC before
 * including this header leaves the declarations without the attribute. */
#if defined(RL_STATIC)
#define RL_EXTERN
#elif defined(__GNUC__) || defined(__clang__)
#define RL_EXTERN __attribute__((visibility("default")))
#else
#define RL_EXTERN
#endif

/*
 * RL_EXPERIMENTAL marks a declaration that is exported and documented but not
 * yet frozen: the newest parts of the API, still moving while their first
 * users try them. A MINOR release may change such a function's signature or
 * behaviour, or remove it. A field so marked keeps its offset and size (the
 * fields after it stay where they are), but its meaning may change, or it
 * may become reserved (must be zero); an enum value so marked keeps its
 * number. CHANGELOG.md names every such change, and the release that freezes
 * a declaration drops its marker. The macro expands to nothing, so every
 * compiler and FFI (ctypes, cffi, cgo) sees the same declarations; constants
 * (#defines) cannot carry it, so those of an experimental field say so in
 * their comment.
 */
#define RL_EXPERIMENTAL

/* The version of this header; rl_version and rl_version_hex give the
 * library's. */
#define RL_VERSION_MAJOR 0
#define RL_VERSION_MINOR 2
#define RL_VERSION_PATCH 0
#define RL_VERSION_HEX \
    ((RL_VERSION_MAJOR << 16) | (RL_VERSION_MINOR << 8) | RL_VERSION_PATCH)

/* rl_check / rl_check_multi verdicts. */
#define RL_DENY 0
#define RL_ALLOW 1
/* rl_check_async: the verdict comes later, through the callback. */
#define RL_PENDING 2

/*
 * Error codes: never renumbered; new ones are appended. The same table
 * generates rl_strerror() and rl_err_name().
 */
#define RL_ERRNO_MAP(XX)                                                          \
    XX(EINVAL, -1, "invalid argument: a required pointer is NULL")                \
    XX(ENOMEM, -2, "out of memory")                                               \
    XX(ENOTFOUND, -3, "no such limit: unknown or removed id, or unknown name")    \
    XX(ERANGE, -4, "value outside the accepted range")                            \
    XX(ESIZE, -5, "struct size unknown to this library, or unknown tail not zero") \
    XX(EKEYLEN, -6, "key length is 0 or larger than RL_MAX_KEY_LEN")              \
    XX(ESPEC, -7, "malformed limit spec")                                         \
    XX(EEXIST, -8, "a limit with that name already exists")                       \
    XX(ELIMITS, -9, "no room for another limit (max_limits reached)")             \
    XX(ECOST, -10, "cost exceeds the limit's burst: it can never be admitted")    \
    XX(EFORKED, -11, "instance inherited across fork(): unusable in the child")   \
    XX(ENOTSUP, -12, "not supported by this build or instance")                   \
    XX(ENAME, -13, "limit name empty, too long, or with a byte outside [A-Za-z0-9_.:-]") \
    XX(EMODE, -14, "unknown mode or on_failure value")                            \
    XX(EAUTH, -15, "Redis refused the credentials in redis_url")                  \
    XX(EFULL, -16, "no free reservation entry: max_reservations are in flight")   \
    XX(EEXPIRED, -17, "reservation expired: it was settled at its estimate")     \
    XX(EUNAVAIL, -18, "Redis did not answer in time: retry the call, it is charged once")

enum {
#define RL_ERRNO_ENUM_(name, value, msg) RL_##name = (value),
    RL_ERRNO_MAP(RL_ERRNO_ENUM_)
#undef RL_ERRNO_ENUM_
};

/* A static message for an error code: "success" for 0, "unknown error" for
 * codes this library does not know. Thread-safe. */
RL_EXTERN const char *rl_strerror(int err);

/* The code's name, e.g. "RL_ENOMEM": "RL_OK" for 0, "RL_EUNKNOWN" for codes
 * this library does not know. Thread-safe. */
RL_EXTERN const char *rl_err_name(int err);

/* The library's version, "MAJOR.MINOR.PATCH". Thread-safe. */
RL_EXTERN const char *rl_version(void);

/* RL_VERSION_HEX of the library actually loaded, to compare with the
 * header's. Thread-safe. */
RL_EXTERN uint32_t rl_version_hex(void);

/* ---------------------------------------------------------------- instance */

/*
 * An instance holds the key table, the limits and, with a redis_url, the
 * sync thread of the global tier: one per process and fleet, opened once.
 * rl_config_t sets it up; the log, clock and allocator hooks hand logging,
 * time and memory to the host.
 */

/* An instance: opaque. */
typedef struct rl rl_t;

/* Log levels for rl_config_t.log. */
enum { RL_LOG_ERROR = 0, RL_LOG_WARN = 1, RL_LOG_INFO = 2, RL_LOG_DEBUG = 3 };

/*
 * Log hook: one line, no trailing newline. Called from the thread where the
 * event happens (the sync thread for Redis events, the exact thread for
 * exact mode's), never once per request,
 * never while the library holds a lock the caller could need. Do not call
 * back into the library from it. Must outlive the instance. A hook gets
 * every level and is never rate-limited: it filters as it likes.
 *
 * With no hook (rl_config_t.log NULL), warnings and errors go to stderr, one
 * line each, as one write(2):
 *   libratelimit: WARN [node_id] sync: cannot connect to 10.0.0.7:6379: ...
 * (levels ERROR and WARN; INFO and DEBUG are not written). The lines are
 * rate-limited per instance, a burst of 10 then one every 6 s: a line
 * after some were dropped says how many; rl_stats_t.log_dropped counts them.
 * To silence it, set rl_config_t.log_quiet to 1, or set a hook that discards.
 */
typedef void (*rl_log_fn)(void *ud, int32_t level, const char *msg);

/* Clock sources, passed to a user clock hook so a test clock can model both. */
enum {
    RL_CLOCK_PRECISE = 0, /* CLOCK_MONOTONIC: about 30 ns through the vDSO */
    RL_CLOCK_COARSE = 1   /* CLOCK_MONOTONIC_COARSE: about 7 ns, ticks every few ms */
};

/*
 * Clock hook: monotonic nanoseconds from an arbitrary origin. `source` says
 * which kind the library wants (RL_CLOCK_PRECISE or RL_CLOCK_COARSE); a test
 * clock may ignore it. Called from any thread that calls rl_check, rl_refund,
 * rl_check_multi, rl_limit_add/update, rl_stats or rl_metrics_text (and from
 * the sync thread, and the exact thread for rl_check_async), concurrently: it must be thread-safe and must not call
 * back into the library. A backward step (of the hook, or of the built-in
 * clocks, e.g. under libfaketime) is absorbed: instance time neither runs
 * back (no tokens are created) nor stands still for the length of the jump.
 * A forward jump refills buckets, to their burst at most. The hook is called
 * once per source at rl_open (on the thread that calls it; the sync thread
 * rl_open starts reads it on its own), and must outlive the instance.
 * Instance time has a horizon: 2^58 ns (about 9.1 years) after rl_open it
 * stops advancing, and no bucket refills from then on; a check that would
 * deny then answers RL_ERANGE (logged once, as an error) instead of
 * denying for ever. Reopen an instance before it runs that long.
 */
typedef uint64_t (*rl_clock_fn)(void *ud, int32_t source);

/*
 * Memory hooks, per instance. `alloc` returns memory aligned to `align` (a
 * power of two, at most 64) or NULL; `free` gets back the same pointer, size
 * and align. The library never uses process-global hooks, nor sets those of
 * libuv or hiredis (whose own allocations use the process allocator).
 * Called from the threads that call rl_open, rl_close, rl_metrics_text and
 * rl_quota_add (and rl_limit_add/update, for the first exact or tiered
 * limit: the exact thread's state), and from the sync, exact and quota
 * threads; never from rl_check. The hooks and
 * `opaque` must outlive the instance. Without hooks (all NULL) blocks come
 * from malloc, except a key table of 2 MB or more: a private anonymous
 * mapping of its own, aligned to 2 MB and advised MADV_HUGEPAGE, so that
 * where the kernel's transparent huge pages allow it (THP "madvise" or
 * "always") one TLB entry covers 2 MB of table (a cold key's lookup skips a
 * page walk); its pages are all made at rl_open (committed memory: no
 * check takes a page fault, and a host that cannot back the table fails
 * rl_open with RL_ENOMEM). Hooks get every block, the table included.
 */
typedef struct rl_allocator {
    void *(*alloc)(void *opaque, size_t size, size_t align);
    void (*free)(void *opaque, void *ptr, size_t size, size_t align);
    void *opaque;
} rl_allocator_t;

/* Instance options. Initialise with rl_config_init, then set what you need. */
typedef struct rl_config {
    size_t size;               /* set by rl_config_init */
    const char *redis_url;     /* NULL: local-only (a complete single-node limiter) */
    const char *node_id;       /* node name, [A-Za-z0-9_.:-]{1,64}; NULL: host name */
    uint32_t sync_interval_ms; /* global tier round, 50..200; default 100 */
    uint32_t max_keys;         /* table capacity in keys, 16..2^28; default 65536 */
    uint32_t expected_nodes;   /* pre-sync share divisor, >= 1; default 1 */
    uint64_t key_ttl_ms;       /* a full, idle synced key keeps its slot this long
                                  before reclaim; default 60000 */
    rl_log_fn log;             /* NULL: warnings and errors to stderr,
                                  rate-limited (see rl_log_fn; log_quiet) */
    void *log_ud;
    rl_allocator_t allocator;  /* all NULL: malloc-based */
    rl_clock_fn clock;         /* NULL: the built-in vDSO clocks */
    void *clock_ud;
    /* --- appended fields --- */
    uint32_t max_limits;          /* 1..RL_MAX_LIMITS; default 256 */
    uint32_t reserved0;           /* must be zero */
    uint64_t clock_coarse_tick_ns; /* tick of the coarse source; 0: measured
                                      (clock_getres), or 4 ms with a user clock */
    const void *key_secret;       /* 16..4096 bytes shared by the fleet, keys
                                     the key hash. Required with a redis_url;
                                     NULL when local-only: random */
    size_t key_secret_len;
    const char *key_prefix;       /* Redis key prefix, [A-Za-z0-9_.:-]{1,32};
                                     NULL: "rl". Fleets sharing a Redis differ here */
    uint32_t demand_alpha_pct;    /* weight of the newest round in a node's
                                     smoothed demand, 1..100; default 75 */
    uint32_t reserved1;           /* must be zero */
    /* Health (see RL_HEALTH_*): failed sync rounds in a row that make the
     * instance degraded (1..100, default 1), successful rounds in a row that
     * make it healthy again (1..100, default 2), the reconnect backoff cap
     * (10..60000 ms, default 950; attempt n waits a random time up to
     * 50 ms x 2^n; at the cap one random phase, then the cap: see
     * src/base/backoff.h for why), and how long a `local`
     * limit takes to move from its last good share to degraded_rate
     * (0..3600000 ms, default 1000). */
    uint32_t degrade_after_failures;
    uint32_t recover_after_rounds;
    uint32_t reconnect_max_ms;
    uint32_t degrade_ramp_ms;
    /* --- appended fields: rl_open's message, the default log --- */
    char *err;          /* when non-NULL and errlen > 0, rl_open writes a
                           NUL-terminated message here: on error, the field at
                           fault and why (e.g. "key_secret: 5 bytes; ..."); on
                           success, "". Used only during rl_open. */
    size_t errlen;
    uint32_t log_quiet; /* with no log hook: 0 (default) writes warnings and
                           errors to stderr, rate-limited; non-zero: nothing */
    uint32_t reserved2; /* must be zero */
    /* --- appended fields: exact mode (RL_MODE_EXACT) --- */
    uint32_t exact_timeout_ms; /* how long an exact check waits for Redis
                                  before its on_failure answers, 1..60000;
                                  default 100 */
    uint32_t exact_pool_size;  /* connections of the exact thread, 1..64;
                                  default 4 (a key always uses the same one).
                                  The thread and its connections start at
                                  the first exact or tiered limit or quota
                                  (rl_open opens none a program never uses) */
    /* --- appended fields: quotas (rl_quota_add) --- */
    uint32_t quota_journal_max; /* charges of on_failure=open quotas kept
                                   while Redis is out, to replay with their
                                   request ids: 0..1000000, default 10000
                                   (0: none kept, each is lost and counted) */
    uint32_t quota_timeout_ms;  /* how long rl_quota_charge / rl_quota_get
                                   wait for Redis: 1..60000, default 500 */
    /* --- appended fields: hot keys (rl_hotkeys) --- */
    uint32_t hotkeys_k;         /* K, the keys each top-K sketch reports
                                   (rl_hotkeys): 1..1024, default 32. A
                                   sketch keeps 8 x K counters, about 1.4 KB
                                   per unit of K, allocated at rl_open (two
                                   sketches with a redis_url, one without);
                                   an update costs O(log K) */
    /* --- appended fields: reservations (rl_reserve) --- */
    uint32_t reserved3;         /* must be zero (the older layout's padding) */
    uint32_t max_reservations;  /* reservations in flight at once (admitted,
                                   not yet settled, released or expired):
                                   0..1048576, default 4096. A fixed table of
                                   64 bytes each, allocated at rl_open; 0
                                   allocates none (rl_reserve: RL_EFULL) */
} rl_config_t;

/*
 * Initialisers. Each *_init_sized(p, size) zeroes `size` bytes of *p, sets
 * p->size = size and fills in the defaults of the fields that fit. The
 * *_init forms are inline so `size` is the caller's own sizeof: a program
 * built against an older header never has a newer library write past its
 * structs. FFI callers use the _sized forms with their own struct size.
 * Thread-safe; NULL (or a size smaller than the `size` field) is a no-op.
 */
RL_EXTERN void rl_config_init_sized(rl_config_t *cfg, size_t size);
static inline void rl_config_init(rl_config_t *cfg) { rl_config_init_sized(cfg, sizeof *cfg); }

/*
 * Create an instance. cfg NULL (or cfg->redis_url NULL) gives a local-only
 * instance: a complete single-node limiter. The key table and everything the
 * check path uses is allocated here, once; rl_check never allocates. The
 * config is copied: its strings may be freed after return.
 * Thread-safe: instances are independent; the library has no global state.
 * Errors (*out is set to NULL on every error; when cfg->err is set, it
 * receives a message naming the field and why, "" on success):
 *   RL_EINVAL  out is NULL
 *   RL_ESIZE   cfg->size unknown, or a non-zero unknown tail
 *   RL_ERANGE  a field out of the range its comment gives (sync_interval_ms,
 *              max_keys, expected_nodes, key_ttl_ms, max_limits,
 *              clock_coarse_tick_ns, key_secret/key_secret_len (16..4096
 *              bytes), demand_alpha_pct, the health fields), only one of
 *              allocator.alloc/free set, a reserved field non-zero
 *   RL_ERANGE  also: a redis_url without a key_secret; a malformed redis_url
 *              (the message names the part: scheme, host list, host N,
 *              port, socket path, master name, db), a malformed node_id or
 *              key_prefix. redis_url is one of
 *                redis://[[user]:password@]host[:port][/db]
 *                redis+unix://[[user]:password@]/path/to/sock[?db=N]
 *                  (or unix://... or unix:/path)
 *                redis+cluster://[[user]:password@]host[:port][,host[:port]...]
 *                  (Redis Cluster seeds; db 0 only)
 *                redis+sentinel://[[user]:password@]host[:port][,...]/MASTER[/db]
 *                  (Sentinels, asked without AUTH, and the master's name)
 *              with at most 8 hosts; a host is letters,
 *              digits, '.', '-', '_', or a bracketed IPv6 address ([::1]);
 *              user and password are percent-decoded (RFC 3986: %40 is '@';
 *              a '%' not before two hex digits is itself); no control byte
 *              or space anywhere. A db the server refuses (SELECT) fails
 *              the connection: degraded, logged, never db 0. rediss://,
 *              rediss+cluster:// and rediss+sentinel:// are the same over
 *              TLS, in a build with TLS (RL_TLS; others refuse them), with
 *              the query ?tls_ca_file=PEM, tls_ca_dir=DIR, tls_cert=PEM and
 *              tls_key=PEM (together), tls_server_name=NAME (SNI and the
 *              name verified); chain and name are always verified, and a
 *              TLS file that does not load fails rl_open (its message
 *              names the file)
 *   RL_ENOMEM  an allocation failed, or the system's random source
 *              (getrandom) did not answer (nothing is leaked)
 *   RL_EAUTH   Redis answered, and refused redis_url's user or password
 * With a redis_url, a sync thread is started (every signal blocked in it).
 * rl_open waits for its first connection at most 1.1 s: a reachable Redis that
 * refuses the credentials fails rl_open (RL_EAUTH); an unreachable one does
 * not: the instance opens degraded, logs it, and keeps trying (with backoff).
 * On a Cluster each key's reports go to the master of its hash tag's slot
 * (MOVED and ASK followed, the slot map asked again after a failover);
 * behind Sentinels to the master they name, followed through a failover.
 * While a key's server is unreachable the limit's on_failure decides, and
 * what the node admitted is reported again once it is back.
 *
 * A fleet is the set of nodes sharing redis_url, key_prefix and key_secret:
 * they name keys alike, so they share limits. Each node publishes a
 * fingerprint of its key_secret (a keyed hash, never the secret) in the node
 * registry; a node that sees a live node of its key_prefix with another
 * fingerprint logs an error and counts it (rl_stats_t.fleet_split_rounds,
 * ratelimit_fleet_split_total), and `ratelimit nodes` shows the split;
 * while it lasts, the node takes at most rate / (live nodes of the prefix,
 * any secret) of each key, so the split fleet stays within the limit.
 * A key's pessimistic share (before its first sync, and the default
 * degraded_rate) is rate / the live node count the node last saw in the
 * registry; before it has seen one, rate / expected_nodes: set
 * expected_nodes to the fleet's size for a cold start.
 */
RL_EXTERN int rl_open(rl_t **out, const rl_config_t *cfg);

/*
 * Check a redis_url the way rl_open reads it, without connecting: every
 * form rl_config_t.redis_url documents (redis://, redis+unix:// and
 * unix://, redis+cluster://, redis+sentinel://). For configuration checks
 * that must not open an instance (nginx -t, a CLI's check). Returns 0, or
 * RL_EINVAL for a NULL url, or RL_ERANGE with a message in err (when err
 * is not NULL and errlen > 0) naming the bad part; the message never
 * echoes a password. Thread-safe, no allocation.
 */
RL_EXTERN int rl_redis_url_check(const char *url, char *err, size_t errlen);

/*
 * Destroy an instance and free everything it allocated. NULL is a no-op.
 * With a global tier it first reports the last usage and hands this node's
 * shares back to Redis, waiting at most max(500 ms, 3 sync intervals); with
 * quotas, also at most quota_timeout_ms for a journal replay in flight
 * (what the journal still holds is lost: see rl_stats_t.quota_lost).
 * No other call on the same instance may run concurrently with or after it
 * (a check racing rl_close is undefined behaviour). In a child after fork(),
 * rl_close frees only what the parent's copy owns, safely. A shared
 * instance (rl_open_shared): this process's view only, after detaching it
 * from the host's sync if it attached (rl_shared_attach says what the last
 * one out does).
 */
RL_EXTERN void rl_close(rl_t *rl);

/* ------------------------------------------------------------------ shared */

/*
 * Shared instances: one instance in a shared mapping for a pre-fork server's
 * processes (rl_open_shared), so a limit holds per host, not per process.
 * Every other call works on it as on any instance, with the exceptions its
 * doc block lists. Local-only, a shared instance is stable; with a
 * redis_url, the host's sync that each process joins (rl_shared_attach) is
 * RL_EXPERIMENTAL.
 */

/*
 * Create an instance shared by this process and every process forked from
 * it afterwards: the multi-process mode for pre-fork servers (nginx,
 * gunicorn, php-fpm, Apache prefork). Open it in the parent before the
 * workers are forked; each worker uses the same handle, and all of them
 * share one key table, one limit registry and one set of counters, so a
 * limit holds per host, not per process: with 2 workers, a burst of 5 admits
 * 5. Every call works from every such process as it does from threads:
 * checks are lock-free across processes (the same atomics on one shared
 * mapping), rl_limit_* calls serialise on a process-shared robust mutex
 * (a process that dies holding it blocks nobody; its interrupted change
 * either happened or did not), limit ids are the same in every process,
 * and rl_stats / rl_metrics_text report the whole host from any of them.
 * A process that dies in the middle of a check costs at most one table
 * slot (a key it was inserting) until the instance is closed; no other key
 * is touched.
 * Everything is allocated at this call, in one MAP_SHARED anonymous mapping
 * sized from cfg (max_keys, max_limits) and fixed for the instance's life.
 * rl_close in any process drops that process's view only; the others keep
 * working, and the memory goes with the last of them.
 * An unrelated process cannot attach (there is no name to attach by).
 *
 * With cfg->redis_url, the host is one node of the fleet (node_id, the host
 * name by default): global limits are synced for all its processes by one
 * of them at a time. This call starts no thread and opens no connection
 * (nothing a fork could break); each process that should take part calls
 * rl_shared_attach after the fork, and rl_close detaches it. Until some
 * process attached and started the host's sync, the instance is degraded
 * (rl_stats_t.health: RL_HEALTH_DEGRADED, nobody syncs): global limits
 * answer by their on_failure policy, so a forgotten attach shows. Exact limits and
 * quotas work in every attached process, on that process's own
 * connections (rl_shared_attach starts them; their state is in Redis):
 * an exact limit admits at most burst + rate x elapsed across the host as
 * across a fleet, and a request id is charged once whichever process
 * sends it. A process that did not attach gets RL_ENOTSUP (logged) from
 * an exact check, rl_quota_charge(_async) and rl_quota_get. Quotas are
 * defined (rl_quota_add, rl_quota_remove) in a process that did not
 * attach (the opener, or a process forked from it that forks the workers,
 * as a daemon's master), before it forks the workers that use them: each
 * process has its own copy of the quotas its parent had when it forked,
 * with the same ids. An attached process may not change them (RL_ENOTSUP,
 * logged): the change would be its alone. Tiered limits
 * (rl_limit_add/update: RL_ENOTSUP, logged) and hot-key detection
 * (rl_hotkeys: RL_ENOTSUP) are not supported.
 * Errors (with cfg->err's message, as rl_open): those of rl_open, and
 *   RL_ENOTSUP  cfg->allocator set (the shared mapping is the allocator)
 *   RL_ENOMEM   the mapping could not be created
 */
RL_EXTERN int rl_open_shared(rl_t **out, const rl_config_t *cfg);

/*
 * Join this process to the host's sync of a shared instance opened with a
 * redis_url (rl_open_shared): call it in each process after the fork (a
 * worker's start), never before one. Every attached process runs one lease
 * thread; one of them at a time holds the sync lease and runs the host's
 * sync thread and connection, the others wait. When the holder detaches
 * (rl_close) the next takes the lease at once; when it dies (even by
 * SIGKILL) within about a millisecond (the kernel frees a dead thread's
 * robust mutex). The new holder then connects (at most 1 s) and runs its
 * first round a sync interval later; until then checks go on at the shares
 * they hold. Either way the host stays one node in Redis and
 * keeps its shares and counts: the new holder continues the same report
 * state (epochs and cumulative counters live in the shared mapping), so
 * Redis counts every admitted request once and no share is dropped.
 * (One gap: a holder killed between taking a key's counters to 0 and
 * storing them, a few instructions, loses that key's counts since the last
 * round.) rl_close detaches; the last attached process to close sends the
 * host's final round, which hands its shares back: it waits at most
 * max(500 ms, 3 sync intervals) for the lease, then (if it did not hold it)
 * at most about 1 s to connect, then for the round as rl_close does.
 * It also starts this process's own exact thread and connections
 * (exact_pool_size of them, connecting in the background) for exact
 * checks and quota charges, and the quota journal's replay thread when the
 * opener defined quotas (rl_open_shared); rl_close stops them, answering
 * every asynchronous check and charge still in flight first.
 * A child forked from an attached process is not attached (it may attach
 * itself). The lease, sync, exact and replay threads block every signal.
 * Returns 0 (also when already attached, and on a shared instance without
 * a redis_url, where there is nothing to join).
 * Errors: RL_EINVAL rl is NULL; RL_ENOTSUP rl is not a shared instance;
 * RL_ENOMEM no thread or memory, or more than 512 processes attached.
 * Thread-safe; one attachment per process.
 */
RL_EXPERIMENTAL
RL_EXTERN int rl_shared_attach(rl_t *rl);

/* ------------------------------------------------------------------ limits */

/*
 * A limit: a named token bucket applied per key, with a rate, a burst, a
 * mode (where its decisions come from) and an on_failure policy. Limits are
 * added to an instance and addressed by id; they can be updated in place
 * and removed while checks run. Tiered mode (RL_MODE_TIERED, near_ppm) is
 * RL_EXPERIMENTAL; the constants of the hot-key fields (hot_ppm, hot_policy,
 * hot_every) are with the hot keys, the last section.
 */

/* A limit name is 1..RL_NAME_MAX-1 bytes of [A-Za-z0-9_.:-], NUL-terminated. */
#define RL_NAME_MAX 64
/* Most limits one instance can hold (rl_config_t.max_limits caps it lower). */
#define RL_MAX_LIMITS 4096

/* rl_limit_t.mode: where a limit's decisions come from. */
enum {
    /* Shared across every node through Redis (local-only instances: local). */
    RL_MODE_GLOBAL = 0,
    /* Per node, never synced. */
    RL_MODE_LOCAL = 1,
    /* One atomic Redis round trip per check: Redis's token bucket decides,
     * so the fleet never admits more than burst + rate x elapsed. rl_check
     * blocks up to exact_timeout_ms; rl_check_async does not block. When
     * Redis does not answer in time, on_failure decides (RL_FLAG_DEGRADED).
     * Requires burst x period under 2^53 token-microseconds (RL_ERANGE).
     * An instance without a redis_url refuses it (RL_ENOTSUP, logged). */
    RL_MODE_EXACT = 2,
    /* Global with Redis confirming near the limit: a key far from its limit
     * is decided locally and synced as RL_MODE_GLOBAL; once the fleet-wide
     * remaining of the key (from the last sync round) is under 20% of its
     * burst plus a token per live node, each check the local tier admits
     * is confirmed by the exact script against the same Redis ledger
     * (RL_FLAG_EXACT; rl_check blocks up to exact_timeout_ms, rl_check_async
     * returns RL_PENDING), and one the local tier denies never reaches
     * Redis. Confirmed checks are never reported again by sync. Same 2^53
     * requirement as RL_MODE_EXACT. rl_check_multi decides a tiered request
     * locally, unconfirmed. Refused without a redis_url, as exact. */
    RL_EXPERIMENTAL
    RL_MODE_TIERED = 3
};

/* rl_limit_t.on_failure: what a limit does when it cannot decide normally
 * (Redis degraded or late, or no table slot for a new key). */
enum {
    /* rl_limit_init's value, resolved by mode when the limit is parsed or
     * added: RL_FAIL_CLOSED for exact and tiered (a limit declared exact
     * never admits past its bound), RL_FAIL_LOCAL for global and local. */
    RL_FAIL_DEFAULT = -1,
    /* Enforce a pessimistic share locally (degraded_rate). */
    RL_FAIL_LOCAL = 0,
    /* Allow, flagged RL_FLAG_DEGRADED. */
    RL_FAIL_OPEN = 1,
    /* Deny, with retry_after_ms until the next recovery attempt. */
    RL_FAIL_CLOSED = 2
};

/* A limit's rate: `count` tokens per `period_ms` milliseconds, stored exactly. */
typedef struct rl_rate {
    uint64_t count;
    uint64_t period_ms;
} rl_rate_t;

/* rl_limit_t.kind: what a limit counts (the in-flight limits section). */
#define RL_KIND_RATE 0     /* a token bucket: rl_check */
#define RL_KIND_INFLIGHT 1 /* permits held at once: rl_inflight_acquire */

/* An in-flight limit's named classes (rl_limit_t.classes): at most this
 * many, each name 1..RL_INFLIGHT_CLASS_NAME-1 bytes of [A-Za-z0-9_.:-]. */
#define RL_INFLIGHT_CLASSES 4
#define RL_INFLIGHT_CLASS_NAME 16

/* One class of an in-flight limit: its name and its share of the limit. */
typedef struct rl_inflight_class {
    char name[RL_INFLIGHT_CLASS_NAME]; /* NUL-terminated; "" ends the list */
    uint32_t share_ppm;                /* 1..1000000: its share of the limit */
} rl_inflight_class_t;

/*
 * A limit. Initialise with rl_limit_init (or rl_limit_parse), then set fields.
 * Accepted ranges (RL_ERANGE otherwise):
 * - rate: count >= 1, 1 ms <= period_ms <= 30 days, and the emission interval
 *   period/count between 10 ns (100M/s) and 30 days.
 * - burst: 1..10^9; 0 means "count" (one period's worth). The time to refill
 *   a whole burst, burst * period / count, must be at most 4 years.
 * - degraded_rate: {0, 0} means rate / expected_nodes (burst likewise
 *   divided, rounded up); else as rate, with a burst of min(its count, burst).
 * - hot_ppm: 0..RL_HOT_PPM_MAX (1000 times the rate).
 * - near_ppm: 0..RL_NEAR_PPM_MAX (the whole burst); only with
 *   mode = RL_MODE_TIERED, any other mode refuses a non-zero value (it would
 *   have no effect there; clear it when an update leaves tiered).
 * - hot_policy: RL_HOT_POLICY_SYNC or RL_HOT_POLICY_LOCAL (RL_EMODE
 *   otherwise); LOCAL only with mode = RL_MODE_GLOBAL and a non-zero
 *   hot_ppm. hot_every: 0 or 2..RL_HOT_EVERY_MAX, non-zero only with LOCAL.
 * - kind: RL_KIND_RATE or RL_KIND_INFLIGHT (RL_EMODE otherwise). A rate
 *   limit leaves the in-flight fields 0 (RL_ERANGE otherwise); an in-flight
 *   limit leaves rate, burst, degraded_rate, hot_*, near_ppm and shadow 0,
 *   and takes the ranges of the in-flight limits section.
 */
typedef struct rl_limit {
    size_t size;             /* set by rl_limit_init */
    char name[RL_NAME_MAX];  /* NUL-terminated, [A-Za-z0-9_.:-], unique per instance */
    rl_rate_t rate;
    uint64_t burst;
    int32_t mode;            /* RL_MODE_*; default RL_MODE_GLOBAL */
    int32_t on_failure;      /* RL_FAIL_*; default RL_FAIL_DEFAULT: closed
                                for exact and tiered, local otherwise */
    rl_rate_t degraded_rate;
    int32_t shadow;          /* non-zero: decide and count, never deny */
    uint32_t max_keys;       /* cap on this limit's table slots; 0: no own cap */
    /* --- appended fields (see rl_hotkeys) --- */
    uint32_t hot_ppm;        /* a key whose demand reaches this share of the
                                rate, in ppm, is marked hot; 0: never */
    /* --- appended fields (tiered mode) --- */
    RL_EXPERIMENTAL
    uint32_t near_ppm;       /* tiered: a key is near its limit, and every
                                check the local tier admits is confirmed in
                                Redis, while the fleet-wide remaining is
                                under this share of the burst, in ppm
                                (rounded up, at least one token), plus one
                                token per live node; 0: the default,
                                RL_NEAR_PPM_DEFAULT (20%) */
    /* --- appended fields (hot-key policy) --- */
    RL_EXPERIMENTAL
    int32_t hot_policy;      /* RL_HOT_POLICY_*: how a key marked hot syncs;
                                default RL_HOT_POLICY_SYNC (as any key) */
    RL_EXPERIMENTAL
    uint32_t hot_every;      /* RL_HOT_POLICY_LOCAL: a hot key near its share
                                reports every this many sync rounds, 2..
                                RL_HOT_EVERY_MAX; 0: RL_HOT_EVERY_DEFAULT */
    /* --- appended fields (in-flight limits; see that section) --- */
    RL_EXPERIMENTAL
    int32_t kind;            /* RL_KIND_*; default RL_KIND_RATE */
    RL_EXPERIMENTAL
    int32_t inflight_algo;   /* RL_INFLIGHT_FIXED (default) or an adaptive
                                algorithm, RL_INFLIGHT_GRADIENT2, _VEGAS, _AIMD */
    RL_EXPERIMENTAL
    uint32_t inflight_max;   /* fixed: permits a key may hold at once;
                                adaptive: the limit's ceiling (0: the
                                algorithm's default) */
    RL_EXPERIMENTAL
    uint32_t inflight_min;   /* adaptive: the limit's floor (0: the
                                algorithm's default); fixed: 0 */
    RL_EXPERIMENTAL
    uint64_t max_hold_ms;    /* a permit held longer is reclaimed; 0:
                                RL_INFLIGHT_HOLD_DEFAULT_MS */
    RL_EXPERIMENTAL
    rl_inflight_class_t classes[RL_INFLIGHT_CLASSES]; /* partitions, in
                                order (an acquire names one by index) */
} rl_limit_t;

/* rl_limit_t.near_ppm: its largest value (the whole burst: every admitted
 * check confirms) and what 0 stands for (20% of the burst). Experimental,
 * as the field is. */
#define RL_NEAR_PPM_MAX 1000000u
#define RL_NEAR_PPM_DEFAULT 200000u

/* Defaults for a limit (see the initialisers above rl_open). Thread-safe. */
RL_EXTERN void rl_limit_init_sized(rl_limit_t *lim, size_t size);
static inline void rl_limit_init(rl_limit_t *lim) { rl_limit_init_sized(lim, sizeof *lim); }

/*
 * Parse a limit spec into *out (which is first rl_limit_init-ed). Grammar:
 * space-separated word=value pairs, each at most once:
 *   name=api rate=100/s burst=200 mode=local on_failure=local
 *   degraded_rate=20/s shadow=0 max_keys=100000 hot=0.5 near=0.3
 *   hot_policy=local hot_every=4
 * rate and degraded_rate are COUNT/UNIT or COUNT/NUNIT with a whole COUNT,
 * UNIT one of s m h d (ms is accepted too) and an optional whole multiplier N
 * ("5/10s"); they are stored exactly as count per period. name and rate are
 * required. mode: global local exact tiered. on_failure: local open closed.
 * shadow: 0 1 true false. hot: a fraction of the rate (rl_limit_t.hot_ppm),
 * digits with an optional point and 1 to 6 decimals, in (0, 1000]. near:
 * tiered mode's confirm threshold, a fraction of the burst
 * (rl_limit_t.near_ppm) in the same form, in (0, 1]; only with mode=tiered
 * (RL_ERANGE otherwise). hot_policy: sync local (rl_limit_t.hot_policy;
 * local only with mode=global and hot=, RL_ERANGE otherwise). hot_every:
 * 2..10, only with hot_policy=local (RL_ERANGE otherwise).
 * kind: rate inflight. An in-flight limit (kind=inflight) takes, instead of
 * rate and its companions: max (1..RL_INFLIGHT_MAX; required unless
 * limit=adaptive), max_hold (a duration as dedup's: "30s", "500ms"),
 * limit (fixed adaptive), algo (gradient2 vegas aimd; only with
 * limit=adaptive, which defaults it to gradient2), min (adaptive only), and
 * partitions (NAME:FRACTION,... up to RL_INFLIGHT_CLASSES, fractions as
 * near's summing to at most 1: "live:0.8,batch:0.2"). Without a mode word
 * an in-flight limit is mode=local; mode=global and mode=exact are
 * fleet-wide (the in-flight limits section): mode=global is RL_EMODE with
 * limit=adaptive or partitions; mode=exact needs max_hold (RL_ERANGE
 * without), and limit=adaptive and partitions are RL_EMODE with it; tiered
 * is RL_EMODE. on_failure other than closed only with mode=global or
 * mode=exact (RL_ERANGE).
 * Other numbers are decimal integers without sign.
 * In C and C++ rl_limit_parse is a macro for rl_limit_parse_sized(out,
 * sizeof(rl_limit_t), ...), as rl_limit_init is for rl_limit_init_sized, so every
 * field of the caller's header is parsed. The exported function of the same
 * name, which binaries built against 0.1 call, writes the 0.1 layout and
 * answers RL_ESIZE to a word whose field it lacks (hot=, near=,
 * hot_policy=local).
 * On error, *out is unspecified and `err` (when errlen > 0) receives a
 * NUL-terminated message that names the offending word.
 * Thread-safe (no shared state).
 * Errors: RL_EINVAL (out or spec NULL), RL_ESPEC (syntax: unknown word,
 * duplicate, missing '=', missing name or rate, malformed number or unit),
 * RL_ERANGE (zero, negative, non-finite or too large values), RL_ENAME,
 * RL_EMODE.
 */
RL_EXTERN int rl_limit_parse(rl_limit_t *out, const char *spec, char *err, size_t errlen);

/*
 * rl_limit_parse into a struct of `size` bytes (the caller's sizeof; FFI
 * callers pass their own struct size), as rl_limit_init_sized sizes it:
 * size bytes are zeroed, out->size = size, and the fields that fit are set.
 * rl_limit_parse itself writes the 0.1 layout of rl_limit_t (128 bytes on
 * LP64), whatever the header a caller was built with; a caller whose
 * rl_limit_t may be newer uses this form: rl_limit_parse_sized(&lim,
 * sizeof lim, spec, err, sizeof err). Thread-safe.
 * Errors: those of rl_limit_parse, and RL_ESIZE for a size smaller than the
 * 0.1 layout (out untouched).
 */
RL_EXTERN int rl_limit_parse_sized(rl_limit_t *out, size_t size, const char *spec, char *err,
                                   size_t errlen);
#define rl_limit_parse(out, spec, err, errlen) \
    rl_limit_parse_sized((out), sizeof(rl_limit_t), (spec), (err), (errlen))

/*
 * Add a limit; returns its id (>= 0). Ids are never reused for a different
 * limit while the instance lives (an id carries a generation), so a stale id
 * answers RL_ENOTFOUND. Thread-safe against every other call, checks included:
 * the rl_limit_* calls serialise on one mutex of the instance (checks never
 * take it). No allocation, except that the instance's first exact or
 * tiered limit (rl_limit_update into one too) starts the exact thread and
 * its exact_pool_size connections, which connect in the background.
 * Errors: RL_EINVAL, RL_ESIZE, RL_ENAME, RL_EMODE, RL_ERANGE, RL_EEXIST,
 * RL_ELIMITS, RL_EFORKED; RL_ENOTSUP for a tiered limit in a shared
 * instance with a redis_url (rl_open_shared; logged); RL_ENOMEM (the exact
 * thread could not start).
 */
RL_EXTERN int rl_limit_add(rl_t *rl, const rl_limit_t *lim);

/*
 * Replace a limit's parameters in place; every key keeps the tokens it has
 * consumed: its debt is converted to the new rate exactly (rounded against
 * the key) and is not cut to the new burst, so a key that owes more than
 * the new burst stays empty until it has paid the difference (lowering a
 * burst, then restoring it, gives nothing back). Only a debt of more than
 * about 4.6 years at the new rate is cut to that.
 * Exact across updates: over any interval, a local key admits at most the
 * largest burst in force during it plus the tokens the rates in force
 * refilled; with the clock frozen, at most the largest burst. This holds
 * whatever checks and updates from any threads interleave. Checks running
 * concurrently see either the old or the new parameters, never a mix; a
 * check stalled across two whole updates of its limit may be charged twice
 * (never less). (A synced key's local share is rescaled by the sync thread.)
 * An update that changes the rate converts every key of the limit before it
 * returns (a walk of the key table; updates serialise on the instance's
 * mutex); one that keeps the rate is O(1). The name must stay the same.
 * Errors: those of rl_limit_add, plus RL_ENOTFOUND; RL_ENAME if the name
 * differs.
 */
RL_EXTERN int rl_limit_update(rl_t *rl, int id, const rl_limit_t *lim);

/*
 * Remove a limit and free its table slots. Its id becomes RL_ENOTFOUND for
 * every later call. Checks racing the removal may still be answered from the
 * old limit. Thread-safe. Errors: RL_EINVAL, RL_ENOTFOUND, RL_EFORKED.
 */
RL_EXTERN int rl_limit_remove(rl_t *rl, int id);

/*
 * The id of the limit with this name, or RL_ENOTFOUND. Thread-safe.
 * Errors: RL_EINVAL (rl or name NULL), RL_ENOTFOUND, RL_EFORKED.
 */
RL_EXTERN int rl_limit_find(rl_t *rl, const char *name);

/*
 * Copy a limit's current parameters into *out (out->size must be set, e.g.
 * by rl_limit_init). Errors: RL_EINVAL, RL_ESIZE, RL_ENOTFOUND, RL_EFORKED.
 */
RL_EXTERN int rl_limit_get(rl_t *rl, int id, rl_limit_t *out);

/* ------------------------------------------------------------------ checks */

/*
 * Checks: charge tokens to a (limit, key) and decide. rl_check is the one
 * every program uses; rl_refund gives tokens back, rl_check_multi charges
 * several limits all or nothing, rl_check_batch decides many independent
 * requests in one call, and rl_check_async is the form for event loops
 * (never blocks: an exact or tiered limit's answer comes through a
 * callback). The decision carries what a response needs: rl_headers renders
 * it as HTTP header fields.
 */

/* Keys are 1..RL_MAX_KEY_LEN bytes, binary-safe (NUL bytes allowed). */
#define RL_MAX_KEY_LEN 512
/* Most requests in one rl_check_multi batch. */
#define RL_MULTI_MAX 64
/* The most requests one rl_check_batch call takes. */
#define RL_BATCH_MAX 4096

/* rl_decision_t.flags */
#define RL_FLAG_DEGRADED 0x01u /* decided by the limit's on_failure policy */
#define RL_FLAG_EXACT 0x02u    /* decided by Redis's bucket (exact; tiered near its limit) */
#define RL_FLAG_HOT 0x04u      /* a key marked hot (rl_limit_t.hot_ppm, rl_hotkeys) */
#define RL_FLAG_SHADOW 0x08u   /* a shadow limit that would have denied */
#define RL_FLAG_NOSLOT 0x10u   /* no table slot for this key (table or max_keys full) */
#define RL_FLAG_PEEK 0x20u     /* cost 0: state reported, nothing charged */
#define RL_FLAG_DUPLICATE 0x40u /* quota: a seen request id, its first answer repeated */
#define RL_FLAG_INFLIGHT 0x80u /* an in-flight limit's decision (rl_inflight_acquire) */

/* One element of an rl_check_multi batch. */
typedef struct rl_request {
    size_t size;          /* set by rl_request_init */
    int32_t limit;        /* a limit id */
    const void *key;
    size_t key_len;
    uint32_t cost;
} rl_request_t;

/*
 * The answer to one check, written by the library into caller-owned memory.
 * A deny that is certain on the coarse clock is decided there, without the
 * precise read, for a limit that would otherwise read the precise clock
 * (burst 1, at most 62/s at a 4 ms tick; built-in clocks only): its
 * remaining, reset_ms and retry_after_ms are then figured at the coarse
 * time, at most one coarse tick before the precise one, so retry_after_ms
 * is never early and at most a tick (rounded up to a millisecond) late.
 */
typedef struct rl_decision {
    size_t size;             /* set by rl_decision_init; the library writes
                                only the fields that fit in it */
    int32_t allowed;         /* RL_ALLOW or RL_DENY (shadow limits: RL_ALLOW) */
    uint64_t limit;          /* the limit's rate count per window */
    uint64_t remaining;      /* whole tokens left after this decision */
    uint64_t reset_ms;       /* until the bucket is full again */
    uint64_t retry_after_ms; /* until this cost could be admitted; 0 if allowed */
    uint32_t flags;          /* RL_FLAG_* */
    /* --- appended fields --- */
    uint64_t window_ms;      /* the rate's period */
    uint64_t burst;          /* the bucket's capacity in tokens */
    const char *policy;      /* the limit's name: points into the instance,
                                valid until that limit is removed or rl_close */
    /* --- appended field (in-flight limits) --- */
    RL_EXPERIMENTAL
    uint64_t inflight;       /* RL_FLAG_INFLIGHT: the key's permits held
                                after this decision (limit is its limit) */
} rl_decision_t;

/*
 * The answer of an rl_check_async that returned RL_PENDING: rc is RL_ALLOW,
 * RL_DENY, or RL_ENOTFOUND (the limit was removed while the check was in
 * flight; d is then NULL). d, when not NULL, is the decision as rl_check
 * would write it (a full rl_decision_t of this library's size), valid only
 * during the call. Runs on the instance's exact thread: it must be quick,
 * must not block (an rl_check of an exact limit from it would wait out its
 * whole deadline: the thread that would answer it is this one), and must
 * not call rl_close; it may call rl_check_async again. A libuv host hands the answer back to its own loop with
 * uv_async_send (examples/gateway does).
 */
typedef void (*rl_check_cb)(void *ud, int rc, const rl_decision_t *d);

/* Zero a decision and set its size (see the initialisers above rl_open).
 * Thread-safe. */
RL_EXTERN void rl_decision_init_sized(rl_decision_t *d, size_t size);
static inline void rl_decision_init(rl_decision_t *d) { rl_decision_init_sized(d, sizeof *d); }

/*
 * Charge `cost` tokens to (limit id, key) and decide. cost 0 peeks: the
 * decision reports the state and charges nothing. `out` may be NULL.
 * Lock-free: no lock, no allocation, no system call but the clock, never a
 * network wait. Thread-safe: any number of threads may check the same or
 * different keys at once.
 * Except on an exact limit (RL_MODE_EXACT, an instance with Redis): there
 * the check is one round trip to Redis's bucket, made by the instance's
 * exact thread while this thread waits, at most exact_timeout_ms (then
 * on_failure decides, flagged RL_FLAG_DEGRADED; a Redis decision is flagged
 * RL_FLAG_EXACT). A timeout does not mean "not charged": Redis may still
 * run the check after the caller stopped waiting.
 * Returns RL_ALLOW (1), RL_DENY (0), or an error (and *out, if given, is
 * left with allowed = RL_DENY):
 *   RL_EINVAL   rl NULL, or key NULL with key_len > 0
 *   RL_EKEYLEN  key_len 0 or > RL_MAX_KEY_LEN
 *   RL_ENOTFOUND unknown or removed limit id
 *   RL_ECOST    cost larger than the limit's burst: never admissible
 *   RL_ESIZE    out->size smaller than the oldest rl_decision_t layout
 *   RL_EFORKED  called in a child process on an inherited instance
 *   RL_ENOTSUP  an exact limit of a shared instance, in a process that did
 *               not rl_shared_attach (logged)
 *   RL_ERANGE   a deny after instance time reached its horizon, about 9.1
 *               years after rl_open (see rl_clock_fn; logged once)
 * A key that cannot get a table slot (table, or the limit's max_keys, full of
 * keys that are not yet idle) is decided by the limit's on_failure, flagged
 * RL_FLAG_NOSLOT and counted: open allows, closed denies, local charges one
 * overflow bucket per limit shared by all such keys. No other key's state is
 * touched.
 */
RL_EXTERN int rl_check(rl_t *rl, int id, const void *key, size_t key_len,
                       uint32_t cost, rl_decision_t *out);

/*
 * Give back `cost` tokens to (limit id, key), e.g. when a request was not
 * served after all. A bucket never holds more than its burst. A key with no
 * state (never charged, or reclaimed) is already full: nothing to do.
 * Counts nothing: the request stays admitted in rl_stats, the metrics and
 * the usage a synced key reports to Redis (rl_stats_t), and the tokens it
 * gives back count again when a later check is admitted with them.
 * Lock-free and thread-safe like rl_check.
 * Returns 0 or an error: those of rl_check but RL_ECOST and RL_ESIZE, and
 * RL_ENOTSUP for an exact limit (Redis's bucket takes no refunds).
 */
RL_EXTERN int rl_refund(rl_t *rl, int id, const void *key, size_t key_len, uint32_t cost);

/* Zero a request, set its size and cost = 1 (see the initialisers above
 * rl_open). Thread-safe. */
RL_EXTERN void rl_request_init_sized(rl_request_t *req, size_t size);
static inline void rl_request_init(rl_request_t *req) { rl_request_init_sized(req, sizeof *req); }

/*
 * Check n requests as one: either every bucket is charged (RL_ALLOW), or none
 * is (RL_DENY; the charges already made are refunded). `req_size` is
 * sizeof(rl_request_t) as the caller knows it, so the array stride is the
 * caller's; likewise out[0].size is the stride of `out`. `out` (n decisions,
 * each initialised) may be NULL; if given,
 * it receives every request's decision (after a deny, those checked before the
 * denier report the state after their refund; those after it are not checked
 * and report allowed = RL_DENY, flags 0). `denied_index` (may be NULL) gets the
 * index of the request that denied, or n when none did. Every request is
 * validated before anything is charged: an invalid one returns its error,
 * charges nothing, and *denied_index is its index. Under concurrency another
 * check may briefly observe the tokens a failed batch held before its refund.
 * Counted by the batch's answer (rl_stats_t): a denied batch admits none of
 * its requests, and reports none of its refunded charges to Redis as usage.
 * Errors: those of rl_check, and RL_EINVAL for reqs NULL with n > 0,
 * RL_ESIZE for a req_size/size this library does not know, RL_ERANGE for
 * n > RL_MULTI_MAX, RL_ENOTSUP for a request on an exact limit (all or
 * nothing needs refunds, which Redis's bucket does not take).
 */
RL_EXTERN int rl_check_multi(rl_t *rl, const rl_request_t *reqs, size_t n, size_t req_size,
                             rl_decision_t *out, size_t *denied_index);

/*
 * Check n independent requests in one call: each is decided, charged and
 * counted exactly as its own rl_check would be, in array order, and gets its
 * own verdict (not all or nothing: see rl_check_multi for that). Faster than
 * n calls when keys are cold: every key is hashed and its table slot's cache
 * line requested before any request is charged, so the memory misses of
 * independent keys overlap instead of following one another. The batch is
 * worked through 32 requests at a time, each group decided at one clock
 * reading per clock source, as if its checks had run back to back then.
 * `req_size` and out[0].size are the strides, as for rl_check_multi; every
 * out[i] must be initialised. `out` (n decisions) and `results` (n ints)
 * may each be NULL; results[i] receives what rl_check would have returned
 * for request i: RL_ALLOW, RL_DENY or that request's own error (RL_EKEYLEN,
 * RL_EINVAL for a NULL key with key_len > 0, RL_ENOTFOUND, RL_ECOST, RL_ESIZE
 * for a request whose size is not req_size or has unknown non-zero tail
 * bytes), in which case out[i] has allowed = RL_DENY and the other requests
 * are still checked. cost 0 peeks, as in rl_check.
 * Lock-free and thread-safe like rl_check (a request on an exact limit
 * waits for Redis as rl_check does); the arrays are the caller's and
 * are only read (reqs) or written (out, results) during the call.
 * Returns the number of requests allowed (0..n), or an error for the call as
 * a whole, when nothing is checked and nothing written: RL_EINVAL (rl NULL,
 * or reqs NULL with n > 0), RL_ERANGE (n > RL_BATCH_MAX), RL_ESIZE
 * (req_size or out[0].size smaller than the oldest layout), RL_EFORKED.
 */
RL_EXTERN int rl_check_batch(rl_t *rl, const rl_request_t *reqs, size_t n, size_t req_size,
                             rl_decision_t *out, int *results);

/*
 * rl_check for event-loop hosts: never blocks. A limit decided locally
 * (every mode but exact, or any limit of a local-only instance) is decided
 * inline, exactly as rl_check(rl, id, key, key_len, cost, NULL) would:
 * the verdict (RL_ALLOW, RL_DENY) is returned and cb is not called. An exact
 * limit's check, and a tiered limit's check that the local tier admitted
 * near the limit (RL_MODE_TIERED), is sent to Redis and RL_PENDING
 * returned; cb then runs
 * exactly once, on the instance's exact thread, by exact_timeout_ms (plus
 * the thread's scheduling), with Redis's verdict (RL_FLAG_EXACT) or, when
 * Redis did not answer in time, the limit's on_failure (RL_FLAG_DEGRADED;
 * a timeout does not mean "not charged"). When the exact thread has no room
 * for another check in flight (exact_pool_size x 256 of them), on_failure
 * answers inline instead (RL_ALLOW/RL_DENY, cb not called).
 * rl_close with checks in flight calls each pending cb once, before it
 * returns and never after, with the limit's on_failure verdict, flagged
 * RL_FLAG_DEGRADED (a local limit charges its local share), as for a Redis
 * timeout. The key bytes are only read during the call. Thread-safe like
 * rl_check.
 * Returns RL_ALLOW, RL_DENY, RL_PENDING, or an error (cb not called): those
 * of rl_check but RL_ESIZE, and RL_EINVAL for cb NULL.
 */
RL_EXTERN int rl_check_async(rl_t *rl, int id, const void *key, size_t key_len, uint32_t cost,
                             rl_check_cb cb, void *ud);

/*
 * Render the rate-limit response header fields for a decision into buf, as
 * CRLF-terminated lines:
 *   RateLimit-Policy and RateLimit (IETF draft-ietf-httpapi-ratelimit-headers-11),
 *   X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (seconds),
 *   and Retry-After (whole seconds, rounded up, at least 1) when the decision
 *   is a deny. RateLimit's t is the seconds until the bucket is full on an
 *   allow, and on a deny the Retry-After value itself (the draft: Retry-After
 *   SHOULD NOT end before the effective window t does); t saturates at 15
 *   digits, so past 10^15 s Retry-After is the later of the two.
 * snprintf-style: returns the length the full text needs (excluding the NUL);
 * writes at most len bytes, always NUL-terminated when len > 0; buf may be
 * NULL when len is 0. Thread-safe, pure; it reads d->policy, the limit's
 * name, so the decision's limit (and instance) must still exist.
 * Errors: RL_EINVAL (d NULL, or buf NULL with len > 0), RL_ESIZE.
 */
RL_EXTERN int rl_headers(const rl_decision_t *d, char *buf, size_t len);

/*
 * rl_headers with Retry-After spread (off unless called: rl_headers never
 * jitters). On a deny, Retry-After (and RateLimit's t, which follows it) is
 * rendered from retry_after_ms + (rnd mod (jitter_ms + 1)) instead of
 * retry_after_ms: jitter only adds, so a client that waits it is never
 * early, and clients one bucket refused together come back spread over up
 * to jitter_ms instead of together. Deterministic: rnd is the caller's,
 * a random value per response (clients spread apart) or a keyed hash of the
 * key (one client told the same wait on each retry); the same d, jitter_ms
 * and rnd give the same text. An allow is rendered as rl_headers renders
 * it, and jitter_ms 0 is rl_headers. Whole seconds are rounded up after
 * the jitter is added, so a jitter below 1000 ms moves Retry-After by at
 * most one second. jitter_ms: 0..3600000 (one hour). Errors: those of
 * rl_headers, and RL_ERANGE (jitter_ms above one hour; nothing written).
 */
RL_EXTERN int rl_headers_jitter(const rl_decision_t *d, uint32_t jitter_ms, uint64_t rnd,
                                char *buf, size_t len);

/* ------------------------------------------------------------------- stats */

/*
 * Statistics and metrics: instance-wide and per-limit counters, read without
 * stopping checks, and the same figures as Prometheus text. A scrape walks
 * the key table: call these from a monitor, not per request.
 */

/* rl_stats_t.health */
enum { RL_HEALTH_HEALTHY = 0, RL_HEALTH_DEGRADED = 1, RL_HEALTH_RECOVERING = 2 };

/*
 * Instance-wide counters, read with rl_stats. Versioned by size: fields are
 * only appended.
 *
 * admitted and denied count requests by the answer their caller got: an
 * rl_check answered RL_ALLOW (shadow would-denies included) or RL_DENY, and
 * each request an rl_check_multi checked, on its own limit, by the batch's
 * answer: an allowed batch admits all of them, a denied one admits none (the
 * requests checked up to the denier count as denied, even those whose charge
 * was made and then refunded; those after it are not counted; a batch that
 * meets a limit removed under it answers RL_ENOTFOUND and counts those before
 * it as denied). A check with cost 0 (a peek) and a call rejected with an
 * error count nothing. rl_refund changes no count: it
 * gives tokens back, the request it follows stays admitted. A hot key's
 * tokens leased to a CPU (rl_hotkey_t, Leases) count as admitted when they
 * are leased, so its admitted count runs ahead of its answers by the
 * tokens its leases hold: at most S x 64 per key, S <= 8. A synced key
 * with a table slot reports its tokens to Redis as its usage: the same
 * figure for checks of cost 1, so rl_stats, rl_limit_stats,
 * rl_metrics_text and the fleet's usage agree; a check of cost c counts
 * one request here and c tokens there (a reservation its settled amount:
 * reservations and waits, below).
 */
typedef struct rl_stats_s {
    size_t size;            /* set by rl_stats_init */
    uint64_t admitted;      /* requests answered RL_ALLOW (above) */
    uint64_t denied;        /* requests answered RL_DENY (above) */
    uint64_t shadow_denied; /* shadow checks that would have denied */
    uint64_t noslot;        /* checks with no table slot (on_failure applied) */
    uint64_t degraded;      /* checks decided by an on_failure policy */
    uint64_t keys_live;     /* keys holding a table slot now */
    uint64_t keys_capacity; /* max_keys */
    uint64_t reclaimed;     /* slots reclaimed since rl_open */
    uint64_t table_slots;   /* slots allocated (max_keys plus headroom) */
    uint64_t table_bytes;   /* bytes allocated for the key table */
    uint32_t limits;        /* limits defined now */
    uint32_t reserved0;
    /* --- appended fields: the global tier and its health --- */
    int32_t health;              /* RL_HEALTH_*; healthy when local-only */
    uint32_t reserved1;
    uint64_t health_since_ms;    /* how long the instance has been in it */
    uint64_t ms_healthy;         /* time spent in each state, past stays */
    uint64_t ms_degraded;
    uint64_t ms_recovering;
    uint64_t health_transitions;
    uint64_t degraded_open;      /* degraded decisions, by on_failure policy */
    uint64_t degraded_closed;
    uint64_t degraded_local;
    uint64_t sync_rounds;        /* sync rounds started / failed */
    uint64_t sync_rounds_failed;
    uint64_t sync_reports;       /* key reports sent */
    uint64_t sync_errors;        /* error replies, timeouts, failed connects */
    uint64_t sync_connected;     /* 1 while connected with scripts loaded */
    uint64_t health_since_round; /* sync rounds started when it entered it */
    /* --- appended fields: sync errors by class, round latency --- */
    uint64_t sync_err_connect;   /* refused, unreachable, connect deadline */
    uint64_t sync_err_timeout;   /* a round's replies missed its deadline */
    uint64_t sync_err_noscript;  /* script cache flushed (reloaded) */
    uint64_t sync_err_readonly;  /* a replica now, after a failover */
    uint64_t sync_err_loading;   /* the server was loading its dataset */
    uint64_t sync_err_busy;      /* a script or DEBUG SLEEP held the server */
    uint64_t sync_err_oom;       /* maxmemory reached */
    uint64_t sync_err_auth;      /* NOAUTH, WRONGPASS, NOPERM */
    uint64_t sync_err_other;     /* any other error, or a malformed reply */
    uint64_t sync_rounds_completed; /* rounds whose every reply arrived */
    uint64_t sync_round_us_sum;  /* their latencies: start to last reply */
    uint64_t sync_round_us_last;
    uint64_t sync_round_us_max;
    uint64_t sync_reports_last_round; /* key reports of the last round */
    /* --- appended fields: the fleet as the node registry shows it, and the
     * default log (all 0 when local-only) --- */
    uint64_t fleet_nodes;        /* live nodes of this key_prefix at the last
                                    registry heartbeat, this one included;
                                    0: none seen yet */
    uint64_t fleet_split_rounds; /* heartbeats that saw a live node of this
                                    key_prefix with another key_secret
                                    fingerprint: a split fleet */
    uint64_t fleet_split_fingerprints; /* other fingerprints live at the last
                                    heartbeat: non-zero while split */
    uint64_t log_dropped;        /* stderr log lines the rate limit dropped */
    /* --- appended fields: quotas (rl_quota_charge; all 0 without quotas) --- */
    uint64_t quota_charges;      /* charges Redis answered (duplicates included) */
    uint64_t quota_duplicates;   /* of those, request ids seen before */
    uint64_t quota_degraded;     /* charges answered by on_failure (Redis out) */
    uint64_t quota_journaled;    /* open charges put in the journal */
    uint64_t quota_replayed;     /* journal entries Redis has acknowledged */
    uint64_t quota_lost;         /* open charges never counted in Redis: the
                                    journal was full, or their quota removed
                                    (what the journal holds at rl_close is
                                    lost too, uncounted) */
    uint64_t quota_journal_len;  /* entries in the journal now */
} rl_stats_t;

/* Per-limit counters, read with rl_limit_stats. Versioned by size. */
typedef struct rl_limit_stats_s {
    size_t size; /* set by rl_limit_stats_init */
    uint64_t admitted; /* this limit's requests answered RL_ALLOW (rl_stats_t) */
    uint64_t denied;   /* this limit's requests answered RL_DENY (rl_stats_t) */
    uint64_t shadow_denied;
    uint64_t noslot;
    uint64_t degraded;
    uint64_t keys_live; /* this limit's table slots now */
    /* --- appended fields: what Redis said of this limit's keys, over the
     * last complete window of RL_STATS_SYNC_WINDOW sync rounds (a quiet key
     * reports at least once in it); all 0 for a local limit --- */
    uint64_t sync_keys;          /* keys reported in the window */
    uint64_t overshoot_keys;     /* of those, keys the fleet admitted faster
                                    than the limit's rate */
    uint32_t usage_max_ppm;      /* the highest fleet-wide admitted rate of a
                                    key, in ppm of the rate (smoothed as the
                                    shares are): > 1000000 is overshoot */
    uint32_t share_skew_max_ppm; /* the highest share this node got of a key,
                                    in ppm of an even split among the key's
                                    live nodes (1000000: even) */
    uint32_t nodes_max;          /* the most live nodes seen on one key */
    uint32_t reserved0;
    /* --- appended field: degraded spells --- */
    uint64_t degraded_spells; /* runs of `degraded` answers: one begins at
                                 the first after the instance's health
                                 changed, or a minute after the last began;
                                 each is logged (WARN) naming the limit */
    /* --- appended fields: in-flight limits (all 0 for a rate limit) --- */
    RL_EXPERIMENTAL
    uint64_t inflight;           /* permits held now, all keys together */
    RL_EXPERIMENTAL
    uint64_t inflight_limit;     /* the limit now (adaptive: as it moved) */
    RL_EXPERIMENTAL
    uint64_t inflight_reclaimed; /* permits reclaimed past max_hold */
    RL_EXPERIMENTAL
    uint64_t inflight_late;      /* releases of a permit already reclaimed */
} rl_limit_stats_t;

/* Sync rounds in one window of rl_limit_stats' sync fields. */
#define RL_STATS_SYNC_WINDOW 10

/* Zero a stats struct and set its size (see the initialisers above rl_open).
 * Thread-safe. */
RL_EXTERN void rl_stats_init_sized(rl_stats_t *s, size_t size);
static inline void rl_stats_init(rl_stats_t *s) { rl_stats_init_sized(s, sizeof *s); }
RL_EXTERN void rl_limit_stats_init_sized(rl_limit_stats_t *s, size_t size);
static inline void rl_limit_stats_init(rl_limit_stats_t *s)
{
    rl_limit_stats_init_sized(s, sizeof *s);
}

/*
 * Read instance-wide counters (s->size set by rl_stats_init). Counters are
 * read without stopping checks: each is exact, together they are a snapshot
 * only while no check runs. Thread-safe. Cost: one key-table walk per 64
 * limit indexes in use, O(max_keys) each: a scrape, not a per-request call.
 * Errors: RL_EINVAL, RL_ESIZE, RL_EFORKED.
 */
RL_EXTERN int rl_stats(rl_t *rl, rl_stats_t *s);

/* Read one limit's counters. Thread-safe; one key-table walk, O(max_keys).
 * Errors: those of rl_stats, plus RL_ENOTFOUND. */
RL_EXTERN int rl_limit_stats(rl_t *rl, int id, rl_limit_stats_t *s);

/*
 * Render the instance's counters in the Prometheus text exposition format
 * (version 0.0.4; serve it as "text/plain; version=0.0.4"): every family with
 * its # HELP and # TYPE lines, counters named *_total, label values escaped
 * as the format requires. Families, all prefixed ratelimit_:
 *   per limit, label limit="<name>": limit_admitted_total,
 *     limit_denied_total, limit_shadow_denied_total, limit_noslot_total,
 *     limit_degraded_total, limit_degraded_spells_total (counters),
 *     limit_keys (gauge); with a redis_url
 *     also the gauges of rl_limit_stats_t's sync window: limit_sync_keys,
 *     limit_overshoot_keys, limit_usage_max_ratio,
 *     limit_share_skew_max_ratio, limit_nodes_max;
 *   hot keys (not in an rl_open_shared instance): hot_key_demand_per_second
 *     {limit,key} (gauge: the 3 busiest keys of each limit, as rl_hotkeys
 *     reports them; key is the first 64 bytes, a byte other than printable
 *     ASCII written \\xNN, "..." when cut, "#N" before the bytes are kept)
 *     and hot_keys{limit} (gauge: keys marked hot now); a scrape whose
 *     last one is a second old or more is one rl_hotkeys call (it also
 *     harvests the local limits' keys), a quicker one reads the same report;
 *   per in-flight limit, label limit (none without one): limit_inflight,
 *     limit_inflight_limit (gauges), limit_inflight_reclaimed_total,
 *     limit_inflight_late_total (rl_limit_stats_t's in-flight fields);
 *   the instance: limits, keys_live, keys_capacity, table_slots, table_bytes
 *     (gauges), keys_reclaimed_total;
 *   reservations and waits (not in an rl_open_shared instance), as
 *     rl_reserve_stats_t says: reserve_reserved_total, reserve_denied_total,
 *     reserve_settled_up_total, reserve_settled_down_total,
 *     reserve_settled_even_total, reserve_released_total,
 *     reserve_expired_total, reserve_debt_tokens_total,
 *     reserve_refund_tokens_total, reserve_full_total, reserve_in_flight and
 *     reserve_capacity (gauges), wait_admitted_total, wait_slept_total,
 *     wait_refused_total (a scrape also expires the reservations due);
 *   with a redis_url only: health{state="healthy|degraded|recovering"}
 *     (1 for the current state, else 0), health_state_seconds,
 *     health_seconds_total{state}, health_transitions_total,
 *     degraded_decisions_total{policy="open|closed|local"},
 *     sync_rounds_total, sync_rounds_failed_total, sync_reports_total,
 *     sync_errors_total, sync_errors_by_class_total{class="connect|timeout|
 *     noscript|readonly|loading|busy|oom|auth|other"}, sync_connected
 *     (gauge), sync_round_seconds (a summary: _sum and _count of completed
 *     rounds), sync_round_last_seconds, sync_round_max_seconds,
 *     sync_reports_last_round (gauges); the node registry's fleet_nodes
 *     (gauge), fleet_split_total, fleet_split_fingerprints (gauge),
 *     log_dropped_total, and the quota ledger's quota_charges_total,
 *     quota_duplicates_total, quota_degraded_total, quota_journaled_total,
 *     quota_replayed_total, quota_lost_total and quota_journal_entries
 *     (gauge) (rl_stats_t's quota_* fields).
 * snprintf-style: returns the length the full text needs (excluding the NUL);
 * writes at most len bytes, always NUL-terminated when len > 0; buf may be
 * NULL when len is 0. The text can grow between two calls (limits added,
 * counters gaining digits): size the buffer with some headroom and call
 * again if the result is >= len.
 * Thread-safe against every call but rl_close, checks and limit changes
 * included: each counter is read as by rl_stats / rl_limit_stats; a limit
 * removed during the call is left out. Holds the limit registry's lock only
 * to copy names (never during a table walk); allocates a temporary snapshot
 * through the instance's allocator, freed before return. Cost: one key-table
 * walk per 64 limit indexes in use, O(max_keys) each: a scrape, not a
 * per-request call.
 * Errors: RL_EINVAL (rl NULL, or buf NULL with len > 0), RL_ENOMEM,
 * RL_EFORKED.
 */
RL_EXTERN int rl_metrics_text(rl_t *rl, char *buf, size_t len);

/* ------------------------------------------------------------------ quotas */

/*
 * Quotas: durable ledgers ("1000000 requests a month", "500 SMS a day"),
 * not pressure valves. A quota's usage lives in Redis only (an instance
 * needs a redis_url to hold one), per (quota, key) and period, and every
 * charge carries a request id: a charge retried with the same id within the
 * quota's dedup window is answered with the first answer and never charged
 * twice. The wall clock is Redis's (TIME), never the node's. What survives
 * a Redis restart depends on its persistence settings: see the README
 * ("Quotas: what is durable"). The non-blocking charge (rl_quota_cb,
 * rl_quota_charge_async) is RL_EXPERIMENTAL.
 */

/* rl_quota_t.period: calendar periods start at UTC boundaries; a fixed
 * period is period_ms long, its boundaries multiples of it since the Unix
 * epoch. */
enum {
    RL_PERIOD_HOUR = 0,  /* hh:00:00.000 UTC */
    RL_PERIOD_DAY = 1,   /* 00:00:00.000 UTC */
    RL_PERIOD_WEEK = 2,  /* ISO week: Monday 00:00 UTC */
    RL_PERIOD_MONTH = 3, /* the 1st, 00:00 UTC */
    RL_PERIOD_FIXED = 4  /* period_ms */
};

/* Most quotas one instance holds. */
#define RL_QUOTA_MAX 256
/* Longest request id, in bytes (ids are binary-safe). */
#define RL_QUOTA_ID_MAX 256
/* Largest amount: usage is counted exactly by Redis's Lua (2^53 - 1). */
#define RL_QUOTA_AMOUNT_MAX UINT64_C(9007199254740991)

/*
 * A quota. Initialise with rl_quota_init (or rl_quota_parse), then set
 * fields. Accepted values (rl_quota_add answers RL_ERANGE or RL_EMODE
 * otherwise):
 * - name: as a limit's name (RL_ENAME), unique among the instance's quotas.
 * - amount: 1..RL_QUOTA_AMOUNT_MAX units per period.
 * - period: RL_PERIOD_*; period_ms (RL_PERIOD_FIXED only, else 0): 1 s to
 *   400 days, a whole number of seconds.
 * - dedup_ms: how long a request id is remembered, 1 s to 31 days; default
 *   24 h.
 * - on_failure: RL_FAIL_CLOSED (default: deny while Redis cannot answer) or
 *   RL_FAIL_OPEN (allow, and journal the charge to replay it later);
 *   RL_FAIL_LOCAL has no meaning for a ledger: RL_EMODE.
 */
typedef struct rl_quota {
    size_t size;            /* set by rl_quota_init */
    char name[RL_NAME_MAX]; /* NUL-terminated, [A-Za-z0-9_.:-] */
    uint64_t amount;
    int32_t period;         /* RL_PERIOD_*; default RL_PERIOD_MONTH */
    int32_t on_failure;     /* RL_FAIL_OPEN or RL_FAIL_CLOSED (default) */
    uint64_t period_ms;     /* RL_PERIOD_FIXED: its length; else 0 */
    uint64_t dedup_ms;      /* request id memory; default 86400000 */
} rl_quota_t;

/* The answer to a charge or a read of a quota, into caller-owned memory. */
typedef struct rl_quota_result {
    size_t size;            /* set by rl_quota_result_init */
    int32_t allowed;        /* RL_ALLOW or RL_DENY */
    uint32_t flags;         /* RL_FLAG_DUPLICATE, RL_FLAG_DEGRADED */
    uint64_t amount;        /* the quota's amount per period */
    uint64_t used;          /* units charged in the period (after this charge) */
    uint64_t remaining;     /* amount - used */
    uint64_t reset_unix_ms; /* the period's end (the next boundary), Unix ms */
} rl_quota_result_t;

/*
 * The answer of an rl_quota_charge_async that returned RL_PENDING: rc is
 * RL_ALLOW or RL_DENY, and r the result as rl_quota_charge would write it
 * (a full rl_quota_result_t of this library's size; never NULL), valid only
 * during the call. Runs on the instance's exact thread (rl_close's
 * answers too: it waits for them before it returns). It must be quick, must not block (a blocking rl_quota_charge from it would
 * wait out its whole deadline: the thread that would answer it is this
 * one), and must not call rl_close; it may call rl_quota_charge_async
 * again. A libuv host hands the answer back to its own loop with
 * uv_async_send (examples/gateway does).
 */
RL_EXPERIMENTAL
typedef void (*rl_quota_cb)(void *ud, int rc, const rl_quota_result_t *r);

/* Zero a quota, set its size and the defaults (period month, dedup 24 h,
 * on_failure closed). Thread-safe; NULL or a size smaller than the size
 * field is a no-op. */
RL_EXTERN void rl_quota_init_sized(rl_quota_t *q, size_t size);
static inline void rl_quota_init(rl_quota_t *q) { rl_quota_init_sized(q, sizeof *q); }

/* Zero a result and set its size. Thread-safe. */
RL_EXTERN void rl_quota_result_init_sized(rl_quota_result_t *r, size_t size);
static inline void rl_quota_result_init(rl_quota_result_t *r)
{
    rl_quota_result_init_sized(r, sizeof *r);
}

/*
 * Parse a quota spec into *q, which it first initialises as rl_quota_init
 * does with the size of this first layout of rl_quota_t (q->size need not
 * be set; a later, larger rl_quota_t will come with a _sized form). Grammar:
 * space-separated word=value pairs, each at most once:
 *   name=plan amount=1000000 period=month dedup=24h on_failure=open
 * name and amount are required. period: hour, day, week, month, or a fixed
 * duration COUNT UNIT with UNIT s m h d ("30d", "90m"). dedup: a duration
 * ("24h", "600s"; "ms" is accepted too). on_failure: open or closed.
 * Numbers are decimal integers without sign. On error, *q is unspecified
 * and `err` (when err_len > 0) receives a NUL-terminated message that names
 * the offending word. Thread-safe (no shared state).
 * Errors: RL_EINVAL (q or spec NULL), RL_ESPEC
 * (unknown word, duplicate, missing '=', missing name or amount, malformed
 * number, unknown period or unit), RL_ERANGE (a value outside the ranges of
 * rl_quota_t), RL_ENAME, RL_EMODE (on_failure not open or closed).
 */
RL_EXTERN int rl_quota_parse(rl_quota_t *q, const char *spec, char *err, size_t err_len);

/*
 * Add a quota; returns its id (>= 0, never reused for another quota while
 * the instance lives). Charges go through the instance's exact thread and
 * its exact_pool_size connections (one pool for exact checks and quotas);
 * the first quota of an instance starts the journal's replay thread, and
 * the exact thread if no exact or tiered limit has yet.
 * Thread-safe (quota changes serialise on a mutex of the instance).
 * Errors: RL_EINVAL, RL_ESIZE, RL_ENAME, RL_ERANGE, RL_EMODE, RL_EEXIST (a
 * quota of that name), RL_ELIMITS (RL_QUOTA_MAX quotas), RL_ENOTSUP (a
 * local-only instance: a quota in volatile memory is not a quota; or a
 * shared instance, in a process that attached: see rl_open_shared;
 * logged), RL_ENOMEM, RL_EFORKED.
 */
RL_EXTERN int rl_quota_add(rl_t *rl, const rl_quota_t *q);

/*
 * Remove a quota: its id answers RL_ENOTFOUND from then on. Its usage stays
 * in Redis until it expires (a quota added again under the same name finds
 * it). Journaled charges of the quota not yet replayed are dropped and
 * counted in quota_lost. A charge racing the removal may still be answered.
 * Thread-safe. Errors: RL_EINVAL, RL_ENOTFOUND, RL_EFORKED; RL_ENOTSUP in
 * a shared instance, in a process that attached (logged).
 */
RL_EXTERN int rl_quota_remove(rl_t *rl, int quota);

/*
 * Charge `cost` units of a quota to a key, once per request id: one atomic
 * script in Redis remembers the id for the quota's dedup window (SET NX)
 * and moves the period's counter only when the id is new. A charge that
 * would take the usage past the amount is denied and charges nothing.
 * The same id again within the window (a retry) gets the first answer,
 * allowed or denied with the same figures, flagged RL_FLAG_DUPLICATE, and
 * charges nothing. Ids are per (quota, key).
 * Blocks for at most the instance's quota_timeout_ms. When Redis cannot
 * answer in time (down, unreachable, or slow), the quota's on_failure
 * answers, flagged RL_FLAG_DEGRADED: closed denies; open allows and puts the
 * charge in the journal (quota_journal_max entries), which is replayed with
 * its request ids once Redis answers again, so a charge that did reach
 * Redis before its answer was lost is not counted twice. Replayed charges
 * count in the period current when they are replayed; a replayed charge
 * that would pass the amount is denied by Redis like any other (the
 * request was already served: the overage is not recorded). A full journal
 * drops the charge (counted in quota_lost). A degraded answer does not
 * know the usage: used 0, remaining = amount, and reset_unix_ms the
 * period's end by this node's clock.
 * A timeout does not mean "not charged": the script may have run.
 * Thread-safe: any number of threads may charge at once.
 * Returns RL_ALLOW, RL_DENY, or an error (and *out, if given, has allowed
 * = RL_DENY):
 *   RL_EINVAL   rl NULL, key or request_id NULL with a length > 0
 *   RL_EKEYLEN  key_len 0 or > RL_MAX_KEY_LEN
 *   RL_ERANGE   id_len 0 or > RL_QUOTA_ID_MAX, or cost 0
 *   RL_ECOST    cost larger than the quota's amount: never admissible
 *   RL_ENOTFOUND unknown or removed quota id
 *   RL_ESIZE    out->size smaller than rl_quota_result_t
 *   RL_EFORKED  called in a child process on an inherited instance
 *   RL_ENOTSUP  a shared instance, in a process that did not
 *               rl_shared_attach (logged)
 * `out` may be NULL.
 */
RL_EXTERN int rl_quota_charge(rl_t *rl, int quota, const void *key, size_t key_len,
                              uint64_t cost, const void *request_id, size_t id_len,
                              rl_quota_result_t *out);

/*
 * A key's usage of a quota in the current period, without charging:
 * allowed is RL_ALLOW while remaining > 0. Blocks like rl_quota_charge;
 * when Redis cannot answer, the answer is a degraded one as for a charge
 * (used unknown: 0), allowed as the quota's on_failure says. Thread-safe.
 * Returns RL_ALLOW, RL_DENY or an error: those of rl_quota_charge but
 * RL_ERANGE and RL_ECOST.
 */
RL_EXTERN int rl_quota_get(rl_t *rl, int quota, const void *key, size_t key_len,
                           rl_quota_result_t *out);

/*
 * rl_quota_charge for event-loop hosts: never blocks. The charge is sent to
 * Redis and RL_PENDING returned; cb then runs exactly once, by
 * quota_timeout_ms (plus the exact thread's scheduling), with Redis's
 * answer (RL_FLAG_DUPLICATE for a retried id, as for rl_quota_charge) or,
 * when Redis did not answer in time, the quota's on_failure
 * (RL_FLAG_DEGRADED; open journals the charge exactly as the blocking form
 * does, and a timeout does not mean "not charged"). When the exact thread
 * has no room for another request in flight (exact_pool_size x 256 of them,
 * shared with exact checks), on_failure answers inline instead: RL_ALLOW or
 * RL_DENY is returned, journaled likewise, and cb is not called. rl_close
 * with charges in flight calls each pending cb once, before it returns and
 * never after, with the quota's on_failure answer flagged RL_FLAG_DEGRADED
 * (an open quota's charge is journaled, and that journal dies with the
 * instance: counted in quota_journaled, never replayed). A quota removed
 * while its charge is in flight is still answered. The key and id bytes are
 * only read during the call. Thread-safe like rl_quota_charge; no call may
 * race rl_close.
 * Returns RL_PENDING, RL_ALLOW, RL_DENY (inline on_failure), or an error
 * (cb not called): those of rl_quota_charge but RL_ESIZE, and RL_EINVAL
 * for cb NULL.
 */
RL_EXPERIMENTAL
RL_EXTERN int rl_quota_charge_async(rl_t *rl, int quota, const void *key, size_t key_len,
                                    uint64_t cost, const void *request_id, size_t id_len,
                                    rl_quota_cb cb, void *ud);

/* ---------------------------------------------------------------- hot keys */

/*
 * Hot keys: the busiest keys of a limit, found by a top-K sketch
 * (rl_hotkeys), and what a key whose demand passes its limit's hot_ppm does:
 * its checks answer RL_FLAG_HOT, a fast one's tokens are leased per CPU,
 * and its limit's hot_policy may let it report to Redis less often. The
 * policy (rl_limit_t.hot_policy, hot_every and their constants) is
 * RL_EXPERIMENTAL.
 */

/* rl_limit_t.hot_ppm's largest value: a demand of 1000 times the rate. */
#define RL_HOT_PPM_MAX 1000000000u

/*
 * rl_limit_t.hot_policy: what a key marked hot (hot_ppm) does in the global
 * tier (mode=global only; every other mode refuses LOCAL, RL_ERANGE, and so
 * does a limit without hot_ppm, whose keys are never hot). A local-only
 * instance has no global tier: there the policy changes nothing.
 * - RL_HOT_POLICY_SYNC (0, the default): a hot key syncs as any other key,
 *   every round while it is near its share.
 * - RL_HOT_POLICY_LOCAL: a hot key near its share reports its usage only
 *   every hot_every rounds (its counters are cumulative: nothing is lost,
 *   nothing counted twice) and keeps the share its last report brought
 *   back (Redis's demand-weighted split, not rate / nodes), frozen, in
 *   between. Its reports fall to about 1/hot_every; the fleet's overshoot
 *   bound's share-move term grows from one round to hot_every rounds at the
 *   whole rate (bench/accuracy/README.md, "Hot keys"). It reports at once
 *   when it has no share yet, when its demand falls (a round under half
 *   its mean since the last report; then it lingers as any key does), and
 *   when it is no longer hot.
 * Experimental, as the field is (RL_EXPERIMENTAL).
 */
#define RL_HOT_POLICY_SYNC 0
#define RL_HOT_POLICY_LOCAL 1
/* rl_limit_t.hot_every: what 0 stands for, and its largest value (a quiet
 * key's report period: the key's Redis entries are kept that long).
 * Experimental, as the field is. */
#define RL_HOT_EVERY_DEFAULT 4u
#define RL_HOT_EVERY_MAX 10u

/* Key bytes an rl_hotkey_t carries (a longer key is cut; key_len says). */
#define RL_HOTKEY_KEY_BYTES 64

/*
 * One of the busiest keys, as rl_hotkeys reports it. Versioned by size:
 * fields are only appended.
 *
 * Where the figures come from: a Space-Saving top-K sketch (8 x K counters,
 * K = rl_config_t.hotkeys_k, default 32, per instance, and as many again for
 * the local limits of an instance with a redis_url) fed with the per-key
 * decision counts the library already harvests; checks do no extra work but for the keys asked about (below).
 * - With a redis_url, synced limits' keys are fed by the sync thread each
 *   round: demand_per_s is the key's offered rate on this node (admitted +
 *   denied), averaged over rounds (each round half the weight of the next);
 *   fleet_per_s and share_per_s come from the key's last sync reply.
 * - Local limits (every limit of a local-only instance) are fed when
 *   rl_hotkeys is called: demand_per_s is the key's offered rate since the
 *   previous call (since rl_open for the first), and fleet_per_s is that
 *   same local rate.
 * Keys of exact limits (mode=exact) take no table slot and are never
 * reported nor marked.
 * Which keys are held is the sketch's count (decayed by half per round or
 * call, as is the total): a held key's count overestimates its demand by at
 * most total / (8 x K) (count_err says by how much at most), and a key
 * whose demand exceeds total / (8 x K) is always held. They are reported by
 * demand_per_s, highest first (count breaks ties).
 *
 * Key bytes: the table keeps only a keyed hash of each key, so a key's bytes
 * are copied (at most RL_HOTKEY_KEY_BYTES) by the first check of that key
 * after it entered the report and was asked for; until then key_kept is 0.
 * Memory is fixed at rl_open (a bit per table slot and 64 copy cells):
 * however many distinct keys callers send, the report holds at most
 * 2 x 8 x K entries.
 *
 * hot: the key's fleet_per_s reached hot_ppm of its limit's rate in
 * RL_HOT_ENTER (2) evaluations (sync rounds, or rl_hotkeys calls for local
 * limits) in a row; it stays hot until it is below 3/4 of that for
 * RL_HOT_EXIT (3) in a row, so a demand hovering at the threshold does not
 * flap. Checks of a hot key answer RL_FLAG_HOT, and the instance logs one
 * line (RL_LOG_INFO) when a key enters and one when it leaves.
 *
 * Leases: a hot key whose bucket runs at 100,000/s or more (this node's
 * share, for a synced key) with a burst of at least 8 x S, where S is the
 * instance's lease stripes (the CPUs configured, rounded up to a power of
 * two, at most 8), is charged by rl_check, rl_check_batch and
 * rl_check_async of cost 1 in batches: one check takes B = min(burst /
 * (4 x S), 64) tokens from the key's bucket, keeps one and leases the rest
 * to the CPU it runs on, whose next checks of the key take them without
 * writing the key's slot, so threads on several CPUs no longer contend on
 * one line (bench/README.md, "One key, many threads"). The bucket stays
 * the key's only one and a lease holds tokens it has paid for: from a
 * key's first check, it admits at most burst + rate x elapsed, as any key;
 * over a window that starts later, at most what leases held at its start
 * more, (S + threads then inside a check) x B. Before a check is denied it
 * takes a token another CPU's lease holds, if any; tokens leased and not yet
 * handed out, by which a key may admit less than its bucket paid for, are
 * at most S x B. A batch counts as admitted when it is leased
 * (rl_stats_t), and rl_refund gives tokens back to the bucket as for any
 * key. Exact and tiered limits, checks of another cost, rl_check_multi and
 * rl_open_shared instances (which mark no key hot) never lease.
 */
typedef struct rl_hotkey {
    size_t size;            /* set by rl_hotkey_init */
    int32_t limit;          /* the limit id */
    int32_t hot;            /* 1: marked hot (above) */
    uint64_t key_len;       /* the key's full length; 0 until its bytes are kept */
    uint32_t key_kept;      /* bytes of key[] that are the key's: min(key_len, 64) */
    uint32_t reserved0;
    unsigned char key[RL_HOTKEY_KEY_BYTES]; /* the key's first bytes (binary-safe) */
    double demand_per_s;    /* offered on this node (admitted + denied) per second */
    double share_per_s;     /* this node's share of the key's rate (global tier; 0
                               before its first share, and for local limits) */
    double fleet_per_s;     /* the demand hot_ppm is compared with: the fleet's
                               admitted rate or this node's demand, whichever is
                               higher (local limits: this node's demand) */
    uint64_t count;         /* the sketch's (decayed) count: the ranking */
    uint64_t count_err;     /* how much of count may be another key's */
} rl_hotkey_t;

/* Initialise (see the initialisers above rl_open). Thread-safe. */
RL_EXTERN void rl_hotkey_init_sized(rl_hotkey_t *hk, size_t size);
static inline void rl_hotkey_init(rl_hotkey_t *hk) { rl_hotkey_init_sized(hk, sizeof *hk); }

/*
 * The busiest keys of one limit (limit = its id) or of all (limit = -1),
 * highest demand_per_s first, into out[0..n): returns how many were
 * written (0..n). out is an array of n structs of out[0].size bytes each
 * (rl_hotkey_init every one, or the first and copy it); every element's size
 * must equal out[0].size. Local limits' keys are harvested by this call (a
 * walk of the key table, O(max_keys): a scrape, not a per-request call),
 * which also evaluates their hot marks; synced limits' keys are as of the
 * last sync round. A key whose bytes are not kept yet is reported with
 * key_len 0.
 * Thread-safe against every call but rl_close; calls serialise on a mutex of
 * the instance (the sync thread takes it once a round).
 * Errors: RL_EINVAL (rl NULL, or out NULL with n > 0), RL_ESIZE (out[0].size
 * smaller than the first rl_hotkey_t, or an element's size differs, or an
 * unknown tail not zero), RL_ENOTFOUND (limit neither -1 nor a live id),
 * RL_ENOTSUP (an instance of rl_open_shared: its table is shared by
 * processes, and so would its reports be), RL_EFORKED.
 */
RL_EXTERN int rl_hotkeys(rl_t *rl, int limit, rl_hotkey_t *out, size_t n);

/* -------------------------------------------------------- in-flight limits */

/*
 * In-flight limits: how many requests a key may have in progress at once
 * (a semaphore per key), rather than how many it may start per second. A
 * limit of kind RL_KIND_INFLIGHT ("name=db kind=inflight max=64") is added,
 * updated, found and removed as any limit; rl_inflight_acquire takes a
 * permit and rl_inflight_release gives it back, both lock-free and
 * allocation-free (the permits are a fixed pool allocated by rl_limit_add).
 * rl_check, rl_refund and the other checks refuse such a limit
 * (RL_ENOTSUP), and rl_inflight_acquire refuses a rate limit (RL_EMODE).
 *
 * The bound: a key never holds more than the limit at once (max, or the
 * adaptive limit; when an update or the algorithm lowers it, permits held
 * stay until released: at most the highest limit any of them was taken
 * under) when the limit has no classes; with classes,
 * a class under its cap (its share of the limit, rounded up) may pass a
 * full limit (Netflix's partitions: idle capacity is borrowed, and a
 * borrowing class is refused only once the whole limit is full), so a key
 * holds at most the limit plus the classes' caps. That is mode=local, per
 * process (a struct left at RL_MODE_GLOBAL is local on an instance without
 * a redis_url); tiered is RL_EMODE; fleet-wide with mode=global or
 * mode=exact, below.
 *
 * mode=exact (an instance with a redis_url; RL_ENOTSUP without): "exactly
 * max, never max + 1" across every instance that shares the Redis and the
 * key secret. Each acquire and each release is one atomic script in Redis
 * on the key's holders (a sorted set of permit ids scored by their lease
 * end in Redis TIME, never an instance's clock), blocking up to
 * exact_timeout_ms: an acquire removes the holders whose lease ended, then
 * admits when fewer than max remain (flagged RL_FLAG_EXACT). The lease is
 * max_hold, which mode=exact requires (RL_ERANGE when it is 0): no sync
 * round renews a permit, so max_hold is both the longest a request may
 * hold one (its holder then expires, and its release is late) and the
 * longest an instance killed while holding permits keeps them from the
 * fleet (they come back when their leases end, not before). Fixed limits
 * without classes only (limit=adaptive or classes: RL_EMODE). A deny's
 * retry_after_ms is the wait for the key's first lease to end, at most
 * 1000. When Redis does not answer an acquire within exact_timeout_ms, the
 * limit's on_failure decides, flagged RL_FLAG_DEGRADED and counted in
 * rl_limit_stats_t.degraded: closed (the default) denies; open admits;
 * local takes a permit of this instance's own cap, ceil(max / N) per key,
 * which its release gives back locally (N: the larger of expected_nodes
 * and the live node count the node registry had seen when the limit was
 * added or last updated). A release
 * Redis does not answer returns 0 and leaves the holder to its lease (the
 * fleet loses that permit for at most max_hold; it never gains one). The
 * bound, per key, with N as above and k instances Redis does not answer: held <= max; <= max + k x ceil(max / N) with on_failure=local;
 * unbounded with open while cut off; and after Redis loses its data
 * (restarted empty, flushed, evicted) the permits it forgot, at most max,
 * come on top until released. A release answers RL_INFLIGHT_RECLAIMED
 * (counted in inflight_late) when the permit's lease ended or Redis lost
 * it, and RL_EINVAL for a second release of a copy while its lease runs.
 * rl_limit_stats_t.inflight is what this instance holds (its permits in
 * Redis and its local ones), inflight_limit max.
 *
 * Fleet-wide (mode=global on an instance with a redis_url; a fixed max,
 * no classes, max_keys at most 16384: RL_EMODE / RL_ERANGE otherwise, and
 * an update cannot move a limit between local and global, RL_EMODE): a
 * key holds at most max permits across the fleet. Each sync round leases
 * the node a block of each key's permits by demand (the most held at once
 * since the last round, one more per acquire denied; a quarter of it and one
 * more of headroom while no other node lacks, and free permits split in
 * proportion to what each node lacks when some do); blocks are scored by
 * Redis TIME and expire after a lease, 2 x sync_interval_ms, unrenewed;
 * the node uses its blocks for 3/4 of a lease after the round that renewed
 * them. An acquire admits within its key's block (a key's first acquire on
 * a node is denied until a round brings its block); once the lease is not
 * valid (Redis unreachable, or before the first round) by on_failure:
 * closed (the default) admits no new permit, local up to
 * floor(max / nodes) per key (nodes: the registry's live count,
 * expected_nodes before it answers), open up to max. The bound, per key at
 * every moment: held across the fleet <= max + the sum over the nodes
 * without a valid lease of max(h_i, F_i), h_i what node i held when its
 * lease lapsed and F_i its on_failure cap (0, floor(max / nodes), max).
 * After such an outage, or a Redis that lost the hashes, no block is
 * handed out while the fleet holds more than max, and for one lease after
 * a loss no block grows. rl_close hands the node's blocks back.
 *
 * Keys are hashed with the instance's keyed hash into a table of their own
 * per limit, of max_keys entries (0: RL_INFLIGHT_KEYS_DEFAULT); a key that
 * finds no entry, or a permit when the pool (max_keys x the largest limit,
 * at most RL_INFLIGHT_POOL_MAX) is empty, is denied, flagged
 * RL_FLAG_NOSLOT. A permit held longer than max_hold is reclaimed by a
 * later acquire of the same limit (a sweep at most every max_hold / 4),
 * counted (rl_limit_stats_t.inflight_reclaimed, the metrics) and logged
 * once per limit; its late release is a counted no-op. A removed in-flight
 * limit's memory (its key entries and permit pool) is kept until rl_close,
 * so that acquires and releases never count themselves in and out: each
 * remove and add again of one holds one more such block until then
 * (rl_limit_update changes a limit in place and holds nothing more). Once
 * removed blocks hold RL_INFLIGHT_RETIRED_MAX bytes or more, rl_limit_add
 * of an in-flight limit returns RL_ENOMEM and logs why: the memory an
 * instance holds stays bounded however often limits are replaced.
 *
 * Adaptive limits (limit=adaptive) move the limit between its min and max
 * from what releases report: each release's latency and outcome feeds a
 * window (at least RL_INFLIGHT_WINDOW_SAMPLES samples and
 * RL_INFLIGHT_WINDOW_MS long; latencies under RL_INFLIGHT_RTT_FLOOR_NS are
 * ignored, as are RL_INFLIGHT_IGNORED outcomes), and each full window moves
 * the limit once by the algorithm (Netflix concurrency-limits' defaults):
 * - Gradient2: queue size 4, smoothing 0.2, RTT tolerance 1.5, a long RTT
 *   averaged over 600 windows; min 20, max 200, initially 20. A window of
 *   drops only halves the gradient's target (it does not freeze).
 * - Vegas: alpha 3 x log10(limit), beta 6 x log10(limit), the no-load RTT
 *   re-probed every 30 x limit windows with jitter; min 1, max 1000,
 *   initially 20; a drop decreases by log10(limit).
 * - AIMD: +1 per window while the limit is used, x 0.9 on a drop or a
 *   window mean over 5 s; min 20, max 200, initially 20.
 * The whole section is RL_EXPERIMENTAL.
 */

/* rl_limit_t.inflight_algo */
enum {
    RL_INFLIGHT_FIXED = 0,     /* limit=fixed: the limit is inflight_max */
    RL_INFLIGHT_GRADIENT2 = 1, /* limit=adaptive algo=gradient2 (its default) */
    RL_INFLIGHT_VEGAS = 2,     /* algo=vegas */
    RL_INFLIGHT_AIMD = 3       /* algo=aimd */
};

/* rl_inflight_release's outcome: what became of the request. */
enum {
    RL_INFLIGHT_SUCCESS = 0, /* served: its latency is a sample */
    RL_INFLIGHT_DROPPED = 1, /* overloaded, timed out, shed: a drop sample */
    RL_INFLIGHT_IGNORED = 2  /* neither (a client error): not sampled */
};

/* rl_inflight_acquire's class for an acquire that names none. */
#define RL_INFLIGHT_NO_CLASS (-1)
/* rl_inflight_release's answer for a permit reclaimed before its release. */
#define RL_INFLIGHT_RECLAIMED 1

/* Ranges and defaults: inflight_max, max_hold_ms, max_keys, the pool. */
#define RL_INFLIGHT_MAX 1000000u
#define RL_INFLIGHT_HOLD_DEFAULT_MS 60000u
#define RL_INFLIGHT_HOLD_MAX_MS 86400000u
#define RL_INFLIGHT_KEYS_DEFAULT 1024u
#define RL_INFLIGHT_KEYS_MAX 1048576u
#define RL_INFLIGHT_POOL_MAX 1048576u
/* Removed in-flight limits' blocks an instance keeps until rl_close before
 * it refuses to add another in-flight limit (RL_ENOMEM): 256 MiB. */
#define RL_INFLIGHT_RETIRED_MAX (UINT64_C(256) << 20)
/* The adaptive limits' window. */
#define RL_INFLIGHT_WINDOW_SAMPLES 10u
#define RL_INFLIGHT_WINDOW_MS 1000u
#define RL_INFLIGHT_RTT_FLOOR_NS 100000u

/* A held permit: written by rl_inflight_acquire, given back to
 * rl_inflight_release. Its words are the library's (which instance, limit,
 * pool entry and generation); copy it freely, never edit it. */
typedef struct rl_permit {
    uint64_t opaque[3];
} rl_permit_t;

/*
 * Take a permit of an in-flight limit for a key (1..RL_MAX_KEY_LEN bytes,
 * as rl_check's), in class `cls` (an index into the limit's classes, or
 * RL_INFLIGHT_NO_CLASS). RL_ALLOW: *permit holds it until
 * rl_inflight_release. RL_DENY: the key holds the limit (or no entry or
 * permit was free: RL_FLAG_NOSLOT), *permit is zeroed. `out` (may be NULL)
 * gets limit (the limit now), remaining (limit minus held, 0 when full),
 * inflight (held after this decision), retry_after_ms on a deny (the mean
 * latency of the limit's last window of releases, at least 1; 1000 before
 * the first; a fixed limit samples one release in 16), policy (the name), flags RL_FLAG_INFLIGHT (and NOSLOT); rl_headers
 * renders it. Lock-free and allocation-free; the sweep for held-too-long
 * permits runs in an acquire at most every max_hold / 4 and walks the pool,
 * and an acquire looks for a free permit from one its permit's address
 * picks (one look while the pool has room; up to the whole pool when it is
 * nearly all held). mode=exact: one Redis round trip instead (the section
 * above), its decision flagged RL_FLAG_EXACT or RL_FLAG_DEGRADED.
 * Counted as a check is (rl_limit_stats_t admitted, denied, noslot).
 * Errors: RL_EINVAL (rl or permit NULL, key NULL with key_len > 0),
 * RL_EKEYLEN, RL_ENOTFOUND, RL_EMODE (a rate limit), RL_ERANGE (cls not a
 * class of the limit), RL_ESIZE (out->size), RL_EFORKED.
 */
RL_EXPERIMENTAL
RL_EXTERN int rl_inflight_acquire(rl_t *rl, int limit, const void *key, size_t key_len,
                                  int32_t cls, rl_permit_t *permit, rl_decision_t *out);

/*
 * Give a permit back, with what became of its request (RL_INFLIGHT_*) and
 * its latency in ns (0: the time since its acquire on the instance clock);
 * an adaptive limit samples both. *permit is zeroed. Returns 0, or
 * RL_INFLIGHT_RECLAIMED for a permit reclaimed past max_hold (a no-op,
 * counted in inflight_late, once: its record has not been handed out twice
 * since). Lock-free and allocation-free. mode=exact: one Redis round
 * trip (RL_INFLIGHT_RECLAIMED when its lease ended or Redis lost it; 0
 * when Redis did not answer, its holder left to its lease).
 * Errors: RL_EINVAL (rl or permit NULL; a permit released already, zeroed,
 * or of another instance: nothing is changed), RL_ERANGE (outcome unknown),
 * RL_ENOTFOUND (its limit was removed), RL_EFORKED.
 */
RL_EXPERIMENTAL
RL_EXTERN int rl_inflight_release(rl_t *rl, rl_permit_t *permit, int32_t outcome,
                                  uint64_t latency_ns);

/* The index of a class of an in-flight limit by name, for
 * rl_inflight_acquire. Errors: RL_EINVAL, RL_ENOTFOUND (no such limit or
 * class), RL_EMODE (a rate limit), RL_EFORKED. */
RL_EXPERIMENTAL
RL_EXTERN int rl_inflight_class(rl_t *rl, int limit, const char *name);
/* ------------------------------------------------- reservations and waits */

/*
 * Costs known after the fact, and callers that would rather wait. A
 * reservation admits an estimate as rl_check admits a cost, holds it on the
 * key's bucket, and is then settled at the real cost (rl_settle: the
 * difference either way), released (rl_release: the work never happened)
 * or, when neither came within its ttl, expired: settled at its estimate.
 * rl_wait admits a cost within a deadline or refuses at once. All of it is
 * RL_EXPERIMENTAL.
 *
 * Modes: local and global limits (on an instance without a redis_url a
 * global limit is local), exact and tiered limits (below). A wait with a
 * max_wait_ms above 0 (rl_wait, rl_reserve_wait) is a local bucket's turn:
 * refused for exact and tiered limits (RL_EMODE). An rl_open_shared
 * instance has no reservation table (RL_ENOTSUP).
 *
 * Exact limits: one atomic script call per reserve, per settle and per
 * release, on the key's bucket in Redis (lua/exact.lua's, the same state
 * and units: rl_check and rl_reserve on one key share one budget). The
 * reserve takes the estimate from the bucket if it is there (denied
 * otherwise, nothing charged) and records it under the reservation's id
 * (the instance's random 64-bit tag and the handle's entry word) in a
 * Redis key beside the bucket's (same hash tag), with a PX of ttl_ms + 5 s.
 * A settle charges actual - estimate to the bucket: debt past the burst
 * (down to -2^31 tokens, or less when burst x period in us would pass
 * 2^53), a refund never past the burst. Settles are idempotent by that
 * id: the first that reaches Redis charges and marks the record settled
 * (kept until the record's PX ends); any later one with the same id,
 * whatever its actual, is answered from the mark (0) and charges nothing.
 * A settle Redis does not answer within exact_timeout_ms (frozen, down,
 * no connection) returns RL_EUNAVAIL and leaves the reservation in flight:
 * retry it with the same handle, it is charged at most once. A record
 * that is gone (its PX ended, or Redis lost it: a restart empty, a
 * FLUSHALL, a failover that lost it) means the reservation ended at its
 * estimate, or with Redis's data: its settle answers RL_EEXPIRED, counted
 * expired and logged, charges nothing, and the handle is spent. Expiry is
 * at the estimate on both sides: the local entry's ttl (as below) and the
 * record's PX leave the estimate charged to the bucket. Redis unavailable
 * at a reserve: the limit's on_failure decides, as rl_check's (open:
 * admitted, nothing held, its settle charges nothing; closed: denied;
 * local: the key's table slot at the degraded rate, settled there); a
 * release is then queued behind the reserve, so what it may have taken in
 * Redis is given back. RL_EEXPIRED on a settle that earlier returned
 * RL_EUNAVAIL can also mean the earlier one ran and its reply was lost
 * before the ttl passed; in no case is a reservation charged twice.
 *
 * Tiered limits: the local pre-filter first (the node's share, charged as
 * rl_check charges it), then the exact reserve above in Redis, always
 * (not only near the limit). A pre-filter's deny, or its degraded or
 * shadow answer, decides alone; Redis's deny keeps the pre-filter's local
 * charge (rl_check's rule). The pre-filter's charge is counted on the
 * limit's statistics, never reported by the sync thread (Redis holds it);
 * a settle or release moves both, Redis first.
 *
 * Debt: a settle whose actual exceeds the estimate charges the difference
 * without an admission test, so the bucket may owe more than its burst: its
 * key then denies (rl_check, rl_reserve, rl_wait alike) until refill has
 * paid the debt back, exactly (the bucket's arrival time moves by
 * (actual - estimate) x period / rate). A smaller actual is given back, never
 * filling the bucket past its burst.
 *
 * Overshoot bound (local limits, and a global limit's node bucket): a key's
 * bucket starts full; at every admission (a reservation's, a check's, a
 * wait's) the tokens used by the work admitted so far (a reservation at its
 * actual, a released one at 0, an expired one at its estimate) are at most
 * burst + rate x elapsed + the sum over the reservations then in flight of
 * max(0, actual - estimate). Settled reservations add nothing: their debt is
 * charged. With a global tier, add the mode's band (the global tier's
 * bound, README "Accuracy"): from full buckets, at every admission the
 * fleet's tokens are at most rate x elapsed + burst + E plus the sum over
 * the reservations then in flight of max(0, actual - estimate). There a
 * key's bucket is this node's share: what it owes beyond the share's
 * burst (a settle's debt, or waiters' turns) is kept across the key's sync
 * replies, in tokens: each reply re-bases the bucket on the share it
 * brings, the part within the old burst rescaled (and capped at the new
 * burst) as for any key, the part beyond converted at the new rate and
 * never capped, so the node pays its debt back at its share's rate and a
 * waiter's turn is handed out once. The global tier reports tokens to
 * Redis: a check or an admission of cost c counts c, a reservation its
 * settled amount (its estimate when admitted, the difference when
 * settled; an expired one its estimate, a released one nothing). Tokens
 * a settle gives back are taken off the key's next admissions, as
 * Redis's counters only grow: until then Redis counts the estimate.
 *
 * The reservation table: max_reservations entries (rl_config_t), allocated
 * at rl_open; a reservation takes one from rl_reserve until it is settled,
 * released or expired, and nothing is allocated after rl_open. Each entry
 * has a generation, carried in the caller's rl_reservation_t: a second
 * settle, a settle of a released reservation, or of another instance's,
 * is refused (RL_EINVAL) and changes nothing. Expiry is lazy and bounded:
 * an rl_reserve that meets an expired entry while looking for a free one,
 * an rl_settle or rl_release that comes too late, and rl_reserve_stats
 * (which looks at every entry) expire it, once: counted
 * (rl_reserve_stats_t.expired) and logged, one RL_LOG_WARN line per expired
 * reservation through the instance's log (rate-limited without a hook,
 * rl_log_fn). A late settle answers RL_EEXPIRED
 * (its actual is not charged) while the entry has not been reused, else
 * RL_EINVAL.
 */

/* What an rl_reserve admitted, in the caller's memory: pass it to
 * rl_settle or rl_release once. Versioned by size; the token is opaque. */
typedef struct rl_reservation {
    size_t size;          /* set by rl_reservation_init */
    uint64_t token[2];    /* the instance, the entry and its generation */
    int32_t limit;        /* the limit id it was made on */
    uint32_t estimate;    /* the tokens it holds */
    uint64_t ready_in_ms; /* rl_reserve_wait: after how long the caller may
                             proceed (0: now); rl_reserve: 0 */
} rl_reservation_t;

/* Counters of the reservation table and of rl_wait, read with
 * rl_reserve_stats. Versioned by size: fields are only appended. */
typedef struct rl_reserve_stats {
    size_t size;             /* set by rl_reserve_stats_init */
    uint64_t reserved;       /* reservations admitted (rl_reserve, rl_reserve_wait) */
    uint64_t denied;         /* reservations denied */
    uint64_t settled_up;     /* settled with actual > estimate (debt charged) */
    uint64_t settled_down;   /* settled with actual < estimate (refunded) */
    uint64_t settled_even;   /* settled with actual == estimate */
    uint64_t released;       /* given back whole (rl_release) */
    uint64_t expired;        /* not settled within their ttl: at the estimate */
    uint64_t debt_tokens;    /* sum of actual - estimate over settled_up */
    uint64_t refund_tokens;  /* sum of estimate - actual over settled_down,
                                and of the estimates released */
    uint64_t in_flight;      /* entries held now */
    uint64_t capacity;       /* max_reservations */
    uint64_t full;           /* rl_reserve calls refused RL_EFULL */
    uint64_t waits;          /* rl_wait calls admitted */
    uint64_t waits_slept;    /* of those, the ones that had to sleep */
    uint64_t waits_refused;  /* rl_wait calls refused at once (the wait
                                needed exceeded max_wait_ms) */
} rl_reserve_stats_t;

/* The longest ttl_ms and max_wait_ms: one day. */
#define RL_RESERVE_TTL_MAX_MS 86400000u
#define RL_WAIT_MAX_MS 86400000u
/* The largest actual rl_settle takes: a debt of more than 2^30 tokens is a
 * caller's bug, not a cost. */
#define RL_COST_SETTLE_MAX 1073741824u

/* Initialise (see the initialisers above rl_open). Thread-safe. */
RL_EXTERN RL_EXPERIMENTAL void rl_reservation_init_sized(rl_reservation_t *r, size_t size);
static inline void rl_reservation_init(rl_reservation_t *r)
{
    rl_reservation_init_sized(r, sizeof *r);
}
RL_EXTERN RL_EXPERIMENTAL void rl_reserve_stats_init_sized(rl_reserve_stats_t *s, size_t size);
static inline void rl_reserve_stats_init(rl_reserve_stats_t *s)
{
    rl_reserve_stats_init_sized(s, sizeof *s);
}

/*
 * Reserve `estimate` tokens (1..the limit's burst) of key under limit `id`
 * for at most ttl_ms (1..RL_RESERVE_TTL_MAX_MS) of instance time. Decides as
 * rl_check(rl, id, key, key_len, estimate, out) would: RL_ALLOW, with the
 * tokens charged to the key's bucket and *res filled in, or RL_DENY
 * (nothing held; *res is left unusable). out (may be NULL) gets the
 * decision. A shadow limit's would-deny, and an on_failure=open answer (no
 * table slot for the key, or a global limit while the instance is
 * degraded) admit without holding tokens: their settle and release charge
 * nothing. Counted in the limit's admitted/denied as a check is.
 * Thread-safe, lock-free, no allocation, no system call but the clock.
 * Errors (out, if given, is a deny): RL_EINVAL (rl, res NULL, res->size
 * unknown, estimate 0, ttl_ms 0 or too large), RL_ESIZE (out->size), RL_EKEYLEN,
 * RL_ENOTFOUND, RL_ECOST (estimate > burst), RL_EFULL (every entry in
 * flight: counted, nothing charged), RL_ENOTSUP (an rl_open_shared
 * instance), RL_EFORKED. Exact and tiered limits: one Redis round trip (at
 * most exact_timeout_ms), not lock-free; Redis's answer or on_failure
 * decides (above).
 */
RL_EXTERN RL_EXPERIMENTAL int rl_reserve(rl_t *rl, int id, const void *key, size_t key_len,
                                         uint32_t estimate, uint32_t ttl_ms,
                                         rl_reservation_t *res, rl_decision_t *out);

/*
 * Settle a reservation at its real cost, `actual` (0..RL_COST_SETTLE_MAX):
 * above the estimate, the difference is charged to the key's bucket without
 * an admission test (debt, above); below it, the difference is given back;
 * equal, nothing moves. The entry is then free and *res spent.
 * Thread-safe; lock-free.
 * Returns 0, or: RL_EINVAL (rl or res NULL, res->size unknown, a reservation
 * already settled or released, of another instance, or never admitted),
 * RL_EEXPIRED (its ttl had passed: it was settled at its estimate and actual
 * is not charged; exact and tiered: the record in Redis is gone, above),
 * RL_EUNAVAIL (exact and tiered: Redis did not answer; still in flight,
 * retry with the same handle: charged at most once), RL_ENOTFOUND (its
 * limit was removed since: nothing to charge; the entry is freed),
 * RL_ERANGE (actual too large: nothing done, the reservation stays in
 * flight), RL_EFORKED. Exact and tiered: one Redis round trip.
 */
RL_EXTERN RL_EXPERIMENTAL int rl_settle(rl_t *rl, rl_reservation_t *res, uint32_t actual);

/*
 * Give a reservation's estimate back whole (the work never happened, or a
 * waiter gave up). As rl_settle(rl, res, 0), counted as released; its
 * errors. After rl_reserve_wait, this is the cancel: it gives back exactly
 * the estimate, whether or not ready_in_ms has passed.
 */
RL_EXTERN RL_EXPERIMENTAL int rl_release(rl_t *rl, rl_reservation_t *res);

/*
 * The non-blocking wait: reserve `estimate` tokens now if they can be
 * admitted within max_wait_ms (0..RL_WAIT_MAX_MS) of instance time. RL_ALLOW
 * with res->ready_in_ms set: the tokens are the caller's from then on (the
 * event loop proceeds after that long), and the reservation is settled or
 * released as any (ttl_ms counts from now, so make it cover ready_in_ms).
 * RL_DENY at once, nothing held, when the wait it would need exceeds
 * max_wait_ms (out->retry_after_ms says how long it would be). max_wait_ms
 * 0 is rl_reserve. Arguments and errors as rl_reserve, and RL_EMODE for an
 * exact or tiered limit with max_wait_ms above 0.
 *
 * Order: a waiter's turn is taken when its tokens are charged (one CAS on
 * the key's bucket word), so waiters on a key are served in the order they
 * arrived at the bucket, whatever their costs: a later waiter's
 * ready_in_ms is never before an earlier one's (at the same clock), a large
 * cost is never passed by small ones, and a check (rl_check) arriving
 * while waiters are queued is denied until their tokens have refilled.
 */
RL_EXTERN RL_EXPERIMENTAL int rl_reserve_wait(rl_t *rl, int id, const void *key,
                                              size_t key_len, uint32_t estimate,
                                              uint32_t max_wait_ms, uint32_t ttl_ms,
                                              rl_reservation_t *res, rl_decision_t *out);

/*
 * Wait for `cost` tokens (1..burst) at most max_wait_ms (0..RL_WAIT_MAX_MS):
 * RL_ALLOW once they are admitted, having slept at most max_wait_ms (until
 * the instance clock reaches the turn, or, with a clock hook that stands
 * still, as long in real time); RL_DENY at once, without sleeping, when the
 * wait needed exceeds max_wait_ms (x/time/rate's WaitN rule: never sleep
 * only to be refused), nothing charged. Waiters on a key are served in
 * arrival order, as rl_reserve_wait says. The tokens are charged when the
 * wait begins, as the turn; no reservation entry is used. out (may be NULL)
 * gets the decision, retry_after_ms the wait needed. Blocks the calling
 * thread; never call it from an event loop (use rl_reserve_wait).
 * Errors: those of rl_check, plus RL_EINVAL (max_wait_ms too large) and
 * RL_EMODE (exact or tiered limit).
 */
RL_EXTERN RL_EXPERIMENTAL int rl_wait(rl_t *rl, int id, const void *key, size_t key_len,
                                      uint32_t cost, uint32_t max_wait_ms, rl_decision_t *out);

/*
 * Reserve n budgets as one (rl_check_multi's all or nothing): an LLM
 * request reserves its input tokens, its output tokens (estimated from
 * max_tokens) and one request, on three limits, at once. Each request's
 * cost is its estimate. RL_ALLOW: every one is admitted and res[i] holds
 * it, each settled or released on its own (its own ttl_ms, the same for
 * all). RL_DENY: none is held (those admitted before the denier are given
 * back, and counted denied, as rl_check_multi counts them), every res[i]
 * unusable; *denied_index (may be NULL) is the denier's index, or n. res
 * is an array of n reservations of res[0].size bytes each (each
 * initialised); out (may be NULL) is as rl_check_multi's. Every request is
 * validated, and n entries of the table claimed, before anything is
 * charged: an invalid request returns its error (*denied_index its index),
 * fewer than n free entries RL_EFULL, charging nothing. Under concurrency
 * another check may briefly see the tokens a denied batch held before they
 * were given back. Exact and tiered requests are reserved in Redis one
 * call each, in request order (their keys' hash tags differ in general, so
 * no one script can hold them all); when a later request denies, each one
 * taken is released there, one blocking call each, before RL_DENY returns
 * (a release Redis does not answer leaves its record to expire at the
 * estimate). Errors: those of rl_reserve and rl_check_multi (RL_ERANGE:
 * n > RL_MULTI_MAX, out left alone); on every error but RL_ESIZE and
 * RL_ERANGE each out[i] is a deny.
 */
RL_EXTERN RL_EXPERIMENTAL int rl_reserve_multi(rl_t *rl, const rl_request_t *reqs, size_t n,
                                               size_t req_size, uint32_t ttl_ms,
                                               rl_reservation_t *res, rl_decision_t *out,
                                               size_t *denied_index);

/*
 * The reservation table's and rl_wait's counters (s->size set by
 * rl_reserve_stats_init); expires the entries whose ttl has passed first (a
 * walk of max_reservations entries: a scrape, not a per-request call).
 * Thread-safe. Errors: RL_EINVAL, RL_ESIZE, RL_EFORKED.
 */
RL_EXTERN RL_EXPERIMENTAL int rl_reserve_stats(rl_t *rl, rl_reserve_stats_t *s);
/* ------------------------------------------------------------ client retry */

/*
 * Client retry: the other side of a 429. A client (an SDK, a job worker,
 * a service calling a limited API) asks this helper when to try again, so
 * a fleet of clients refused together does not come back together:
 * full-jitter exponential backoff (base x 2^n, capped), a longer base after
 * a throttling answer, a server's Retry-After or RateLimit hint honoured up
 * to a cap, and a retry budget (client-side throttling: while the server
 * accepts less than 1/K of what a client sends, the client rejects that
 * share of its own requests locally, before they load the server). Pure:
 * no clock (the caller passes now_ms, any monotonic milliseconds), no I/O,
 * no thread, no global state; each object has its own seeded PRNG or uses
 * the caller's randomness. The Python and Go bindings wrap it (Retry,
 * retrying(); ratelimit.Retry). bench/retryherd measures the herd it
 * spreads (bench/README.md, "Retry herd").
 */

/* rl_retry_record's outcome of one attempt. */
enum {
    RL_RETRY_OK = 0,        /* the server accepted the request (any answer
                               but a refusal for load: a 404 is accepted) */
    RL_RETRY_THROTTLED = 1, /* refused for load: 429, or 503 with a hint */
    RL_RETRY_FAILED = 2     /* no answer or a transient failure (timeout,
                               reset, 502): not accepted either */
};

/*
 * Randomness for rl_retry_t: a uniformly distributed 64-bit value per call.
 * Called with the object's lock held, from the thread that called
 * rl_retry_admit or rl_retry_delay; it must not call back into the object.
 */
typedef uint64_t (*rl_retry_random_fn)(void *ud);

/*
 * A retry helper's settings. Initialise with rl_retry_config_init, then set
 * what you need (rl_retry_new answers RL_ERANGE, naming the field, for a
 * value outside its range):
 * - base_ms: the first retry's ceiling (1..60000, default 100: AWS's full
 *   jitter); retry n (from 0) waits U(0, min(cap_ms, base x 2^n)).
 * - throttled_base_ms: the base after RL_RETRY_THROTTLED (base_ms..60000,
 *   default 1000): a server refusing for load needs longer than a lost
 *   packet does.
 * - cap_ms: the largest backoff (throttled_base_ms..3600000, default 20000).
 * - hint_cap_ms: the longest server hint (Retry-After, RateLimit's t)
 *   waited for (0..86400000, default 60000); a longer one gives up.
 * - max_retries: retries after the first attempt (0..1000, default 5).
 * - budget_k_milli: K x 1000 of the retry budget (1000..100000, default
 *   2000: K = 2); 0 turns the budget off.
 * - budget_window_ms: how far back the budget counts (1000..3600000,
 *   default 120000, the SRE book's two minutes), in 8 slots.
 * - budget_min_requests: below this many requests in the window the budget
 *   rejects nothing (0..1000000, default 10): the formula's p is 1/2 after
 *   a client's first refusal, and a client that has sent one request has
 *   no history worth throttling on. 0: the formula from the first request.
 * - seed: the object's PRNG seed (xorshift64*, jitter only, never
 *   security); 0 takes one from getrandom(2) at rl_retry_new, so clients
 *   differ. Tests set it for a reproducible sequence.
 * - random, random_ud: non-NULL: the caller's randomness instead of the
 *   PRNG (seed is then ignored).
 */
typedef struct rl_retry_config {
    size_t size; /* set by rl_retry_config_init */
    uint32_t base_ms;
    uint32_t throttled_base_ms;
    uint32_t cap_ms;
    uint32_t hint_cap_ms;
    uint32_t max_retries;
    uint32_t budget_k_milli;
    uint32_t budget_window_ms;
    uint32_t budget_min_requests;
    uint64_t seed;
    rl_retry_random_fn random;
    void *random_ud;
} rl_retry_config_t;

/* A retry helper: opaque; one per client (its budget is the client's). */
typedef struct rl_retry rl_retry_t;

/* Zero a config, set its size and the defaults above (see the initialisers
 * above rl_open). Thread-safe. */
RL_EXTERN void rl_retry_config_init_sized(rl_retry_config_t *cfg, size_t size);
static inline void rl_retry_config_init(rl_retry_config_t *cfg)
{
    rl_retry_config_init_sized(cfg, sizeof *cfg);
}

/*
 * Create a retry helper (malloc; cfg NULL: the defaults). The config is
 * copied. On error *out is NULL and err (when errlen > 0) names the field.
 * Errors: RL_EINVAL (out NULL), RL_ESIZE, RL_ERANGE, RL_ENOMEM (malloc, or
 * getrandom failed for seed 0).
 */
RL_EXTERN int rl_retry_new(rl_retry_t **out, const rl_retry_config_t *cfg, char *err,
                           size_t errlen);

/* Free a retry helper. NULL is a no-op; no call may race it. */
RL_EXTERN void rl_retry_free(rl_retry_t *r);

/*
 * Before each attempt, the first and every retry: RL_ALLOW to send it, or
 * RL_DENY to fail it locally (the retry budget: with `requests` attempts
 * and `accepts` RL_RETRY_OK outcomes in the window, each attempt is
 * rejected with probability max(0, (requests - K x accepts) / (requests +
 * 1)), the SRE book's client-side throttling, once requests reaches
 * budget_min_requests; with the budget off, always RL_ALLOW). Either
 * answer counts as a request, as the book's
 * formula wants: a client that keeps failing locally stays throttled until
 * accepts come back or the window forgets. Thread-safe.
 * Errors: RL_EINVAL (r NULL).
 */
RL_EXTERN int rl_retry_admit(rl_retry_t *r, uint64_t now_ms);

/*
 * After each attempt that was sent: its outcome (RL_RETRY_*); OK counts as
 * an accept. Thread-safe. Errors: RL_EINVAL (r NULL, or an unknown outcome).
 */
RL_EXTERN int rl_retry_record(rl_retry_t *r, uint64_t now_ms, int outcome);

/*
 * How long to wait before retry number `retry` (0 for the first retry)
 * after an attempt ended with `outcome` (RL_RETRY_THROTTLED or
 * RL_RETRY_FAILED), given the server's hint in milliseconds (hint_ms < 0:
 * none; rl_retry_hint reads one from the headers). With c = min(cap_ms,
 * base x 2^retry), base being throttled_base_ms after THROTTLED:
 *   no hint:  *delay_ms = U(0, c)            (full jitter)
 *   a hint h: *delay_ms = h + U(0, c)        (never before the server
 *             asked; the jitter spreads the clients it refused together,
 *             who were all handed the same h)
 * Returns RL_ALLOW (retry after *delay_ms) or RL_DENY (give up: retry >=
 * max_retries, or h > hint_cap_ms; *delay_ms is then h, or 0). Thread-safe.
 * Errors: RL_EINVAL (r or delay_ms NULL, outcome not THROTTLED or FAILED).
 */
RL_EXTERN int rl_retry_delay(rl_retry_t *r, uint32_t retry, int outcome, int64_t hint_ms,
                             uint64_t *delay_ms);

/*
 * A server's hint from its response headers' values (either may be NULL):
 * Retry-After as delta-seconds or an IMF-fixdate (RFC 9110, "Sun, 06 Nov
 * 1994 08:49:37 GMT", read against now_unix_ms: a date past is 0), and
 * RateLimit (draft-ietf-httpapi-ratelimit-headers, as rl_headers writes
 * it: `"name";r=0;t=5`, items separated by commas): the largest t of an
 * item whose r is 0. With both, the later. Returns 1 and sets *hint_ms, or
 * 0 when neither says when (*hint_ms = -1). Thread-safe, pure.
 * Errors: RL_EINVAL (hint_ms NULL), RL_ESPEC (a value that is neither form;
 * *hint_ms = -1: treat it as no hint).
 */
RL_EXTERN int rl_retry_hint(const char *retry_after, const char *ratelimit,
                            uint64_t now_unix_ms, int64_t *hint_ms);

/*
 * The budget's state at now_ms: requests and accepts in the window, and the
 * probability rl_retry_admit rejects with, in parts per million (0 when the
 * budget is off or requests is below budget_min_requests). Any output may
 * be NULL. Thread-safe.
 * Errors: RL_EINVAL (r NULL).
 */
RL_EXTERN int rl_retry_budget(rl_retry_t *r, uint64_t now_ms, uint64_t *requests,
                              uint64_t *accepts, uint32_t *reject_ppm);

#ifdef __cplusplus
}
#endif
#endif /* RATELIMIT_H */
