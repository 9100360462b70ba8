// SPDX-License-Identifier: MIT

// Package ratelimit is the Go binding of libratelimit, an embeddable
// two-tier distributed rate limiter: one lock-free local decision per
// request, with a background thread that syncs each node's share of every
// limit with Redis when a fleet is configured.
//
//	l, err := ratelimit.New(ratelimit.Config{})          // local-only
//	api, err := l.AddLimit("name=api rate=100/s burst=20")
//	d, err := l.Allow(api, "user-42")
//	if err == nil && !d.Allowed { /* 429, retry after d.RetryAfter */ }
//	l.Close()
//
// A Limiter is safe for concurrent use by any number of goroutines. Allow
// and AllowN make exactly one cgo call (rl_check, through a small C wrapper
// that takes the key as a Go string and returns the decision by value): no
// allocation in Go or C, no lock but a read lock that only Close takes for
// writing, no network wait.
// Errors are *Error values wrapping a Code (the library's RL_E* number), so
// errors.Is(err, ratelimit.ErrKeyLen) works.
//
// The package links the installed C library through pkg-config
// (PKG_CONFIG_PATH for a private prefix; README "Install notes").
package ratelimit

/*
#cgo pkg-config: ratelimit
#include <stdlib.h>
#include <string.h>
#include <ratelimit.h>

// The whole per-request crossing: the instance as an integer and the key as
// a Go string (no copy, no pointer check: cgo's check of a pointer argument
// costs a heap allocation per call), the decision back by value, so Allow
// allocates nothing.
typedef struct rlgo_decision {
	int rc;
	uint32_t flags;
	uint64_t limit, remaining, reset_ms, retry_after_ms, window_ms, burst;
} rlgo_decision_t;

// Config.Log's trampoline (log.go exports it).
extern void rlgoLog(void *ud, int32_t level, char *msg);
// The handle travels as an integer: it is not a Go pointer.
static void rlgo_set_log(rl_config_t *c, uintptr_t handle)
{
	c->log = (rl_log_fn)rlgoLog;
	c->log_ud = (void *)handle;
}

static rlgo_decision_t rlgo_check(uintptr_t h, int limit, _GoString_ key, uint32_t cost)
{
	rl_t *rl = (rl_t *)h;
	rl_decision_t d;
	rl_decision_init(&d);
	rlgo_decision_t out;
	out.rc = rl_check(rl, limit, _GoStringPtr(key), _GoStringLen(key), cost, &d);
	out.flags = d.flags;
	out.limit = d.limit;
	out.remaining = d.remaining;
	out.reset_ms = d.reset_ms;
	out.retry_after_ms = d.retry_after_ms;
	out.window_ms = d.window_ms;
	out.burst = d.burst;
	return out;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// ABIMajor is the library major version this package speaks; New refuses a
// library of another major.
const ABIMajor = 0

// MaxKeyLen is the longest key, in bytes (RL_MAX_KEY_LEN).
const MaxKeyLen = C.RL_MAX_KEY_LEN

// Decision flags (RL_FLAG_*).
const (
	FlagDegraded = uint32(C.RL_FLAG_DEGRADED) // decided by on_failure while Redis is out
	FlagShadow   = uint32(C.RL_FLAG_SHADOW)   // a shadow limit would have denied
	FlagNoSlot   = uint32(C.RL_FLAG_NOSLOT)   // the key table had no slot for the key
	FlagInflight = uint32(C.RL_FLAG_INFLIGHT) // an in-flight limit's decision (Acquire)
)

// Config holds an instance's options: rl_config_t's fields, the zero value
// of each meaning the library's default. A fleet sets RedisURL, KeySecret
// (the same bytes on every node), NodeID (unique per process), KeyPrefix
// and ExpectedNodes (README "Fleet quickstart"); the rest tune the sync,
// health, exact mode, quotas and hot keys. A duration is rounded down to
// whole milliseconds; a value the library refuses fails New with ErrRange
// and a Detail naming the C field.
type Config struct {
	RedisURL      string        // "redis://[user:password@]host:port[/db]"; "": local-only
	KeySecret     []byte        // 16..4096 bytes, the same on every node; required with RedisURL
	NodeID        string        // [A-Za-z0-9_.:-]{1,64}; "": the host name
	KeyPrefix     string        // [A-Za-z0-9_.:-]{1,32}; "": "rl"
	ExpectedNodes int           // the fleet's size; 0: 1
	SyncInterval  time.Duration // 50..200 ms; 0: 100 ms
	MaxKeys       int           // key table capacity, 16..2^28; 0: 65536
	MaxLimits     int           // 1..4096; 0: 256
	KeyTTL        time.Duration // an idle synced key keeps its slot this long; 0: 60 s

	DemandAlphaPct       int           // weight of the newest round in smoothed demand, 1..100; 0: 75
	DegradeAfterFailures int           // failed rounds in a row that degrade, 1..100; 0: 1
	RecoverAfterRounds   int           // good rounds in a row that recover, 1..100; 0: 2
	ReconnectMax         time.Duration // cap of the reconnect backoff; 0: 950 ms
	DegradeRamp          time.Duration // ramp to degraded_rate; 0: 1 s

	ExactTimeout  time.Duration // an exact check's wait for Redis, 1 ms..60 s; 0: 100 ms
	ExactPoolSize int           // connections of the exact thread, 1..64; 0: 4

	QuotaTimeout time.Duration // rl_quota_charge's wait for Redis, 1 ms..60 s; 0: 500 ms
	// QuotaJournalMax is the charges of on_failure=open quotas kept while
	// Redis is out, 1..1000000; 0: 10000; negative: none kept (each such
	// charge is lost and counted).
	QuotaJournalMax int

	// MaxReservations is the reservations in flight at once (Reserve,
	// ReserveWait), 1..1048576; 0: 4096; negative: none (Reserve: ErrFull).
	MaxReservations int

	HotkeysK int  // keys each top-K sketch reports (rl_hotkeys), 1..1024; 0: 32
	LogQuiet bool // with no Log: true writes nothing to stderr

	// Log, when set, gets every line the library logs (Log* levels, no
	// trailing newline), unfiltered and not rate-limited, on the library's
	// own threads; it must not call back into the Limiter and should be
	// quick. nil: warnings and errors go to stderr, rate-limited.
	Log func(level int, msg string)
}

// Limiter is an instance (rl_t). Safe for concurrent use.
type Limiter struct {
	mu  sync.RWMutex // read: every call; write: Close
	rl  *C.rl_t
	log cgo.Handle // Config.Log's, freed after rl_close; 0: none
}

// Limit names one limit of a Limiter, as AddLimit or FindLimit return it.
type Limit struct {
	id   C.int
	name string
}

// Name is the limit's name, as its spec gave it.
func (l Limit) Name() string { return l.name }

// ID is the library's id of the limit.
func (l Limit) ID() int { return int(l.id) }

// Decision is the answer to one check.
type Decision struct {
	Allowed    bool
	Remaining  uint64        // whole tokens left after this decision
	Reset      time.Duration // until the bucket is full again
	RetryAfter time.Duration // until this cost could be admitted; 0 if allowed
	Limit      uint64        // the rate's count per window
	Window     time.Duration // the rate's period
	Burst      uint64        // the bucket's capacity
	Flags      uint32        // Flag*
	Policy     string        // the limit's name
	Inflight   uint64        // FlagInflight: the key's permits held after it

	resetMs, retryMs, windowMs uint64 // exact, for the headers
}

// ErrClosed is returned by calls on a Limiter after Close.
var ErrClosed = errors.New("ratelimit: the Limiter is closed")

// Version is the loaded library's version, "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.rl_version()) }

func cstr(s string) *C.char {
	if s == "" {
		return nil
	}
	return C.CString(s)
}

func u32(name string, v int, max uint64) (C.uint32_t, error) {
	if v < 0 || uint64(v) > max {
		return 0, &Error{Code: ErrRange, Op: "New", Detail: fmt.Sprintf("%s=%d", name, v)}
	}
	return C.uint32_t(v), nil
}

// New opens an instance (rl_open). With a RedisURL it starts the sync
// thread; an unreachable Redis does not fail it (it opens degraded), a
// Redis that refuses the credentials does (ErrAuth).
func New(cfg Config) (*Limiter, error) {
	if major := uint32(C.rl_version_hex()) >> 16; major != ABIMajor {
		return nil, &Error{Code: ErrNotSupported, Op: "New",
			Detail: fmt.Sprintf("libratelimit %s has ABI major %d; this package speaks %d",
				Version(), major, ABIMajor)}
	}
	if cfg.RedisURL != "" && len(cfg.KeySecret) == 0 {
		return nil, &Error{Code: ErrInvalid, Op: "New",
			Detail: "a RedisURL needs a KeySecret, the same on every node of the fleet"}
	}
	var c C.rl_config_t
	C.rl_config_init_sized(&c, C.sizeof_rl_config_t)
	if err := setNumbers(&c, &cfg); err != nil {
		return nil, err
	}
	// The library copies every string and the secret at rl_open.
	c.redis_url = cstr(cfg.RedisURL)
	c.node_id = cstr(cfg.NodeID)
	c.key_prefix = cstr(cfg.KeyPrefix)
	defer C.free(unsafe.Pointer(c.redis_url))
	defer C.free(unsafe.Pointer(c.node_id))
	defer C.free(unsafe.Pointer(c.key_prefix))
	if len(cfg.KeySecret) > 0 {
		secret := C.CBytes(cfg.KeySecret)
		defer func() {
			C.memset(secret, 0, C.size_t(len(cfg.KeySecret)))
			C.free(secret)
		}()
		c.key_secret = secret
		c.key_secret_len = C.size_t(len(cfg.KeySecret))
	}
	// rl_open names the field at fault and why in this buffer.
	msg := (*C.char)(C.calloc(1, 512))
	defer C.free(unsafe.Pointer(msg))
	c.err, c.errlen = msg, 512
	l := &Limiter{}
	if cfg.Log != nil {
		l.log = cgo.NewHandle(cfg.Log)
		C.rlgo_set_log(&c, C.uintptr_t(l.log))
	}
	if rc := C.rl_open(&l.rl, &c); rc < 0 {
		if l.log != 0 {
			l.log.Delete()
		}
		return nil, &Error{Code: Code(rc), Op: "rl_open", Detail: C.GoString(msg)}
	}
	return l, nil
}

func millis(d time.Duration) int { return int(d / time.Millisecond) }

// setNumbers copies Config's numeric fields into c, leaving each zero one
// at rl_config_init's default; a negative or oversized one is ErrRange
// (C would wrap it).
func setNumbers(c *C.rl_config_t, cfg *Config) error {
	fields := []struct {
		name string
		v    int
		dst  *C.uint32_t
	}{
		{"ExpectedNodes", cfg.ExpectedNodes, &c.expected_nodes},
		{"SyncInterval(ms)", millis(cfg.SyncInterval), &c.sync_interval_ms},
		{"MaxKeys", cfg.MaxKeys, &c.max_keys},
		{"MaxLimits", cfg.MaxLimits, &c.max_limits},
		{"DemandAlphaPct", cfg.DemandAlphaPct, &c.demand_alpha_pct},
		{"DegradeAfterFailures", cfg.DegradeAfterFailures, &c.degrade_after_failures},
		{"RecoverAfterRounds", cfg.RecoverAfterRounds, &c.recover_after_rounds},
		{"ReconnectMax(ms)", millis(cfg.ReconnectMax), &c.reconnect_max_ms},
		{"DegradeRamp(ms)", millis(cfg.DegradeRamp), &c.degrade_ramp_ms},
		{"ExactTimeout(ms)", millis(cfg.ExactTimeout), &c.exact_timeout_ms},
		{"ExactPoolSize", cfg.ExactPoolSize, &c.exact_pool_size},
		{"QuotaTimeout(ms)", millis(cfg.QuotaTimeout), &c.quota_timeout_ms},
		{"HotkeysK", cfg.HotkeysK, &c.hotkeys_k},
	}
	for _, f := range fields {
		if f.v == 0 {
			continue
		}
		v, err := u32(f.name, f.v, 1<<32-1)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	if cfg.KeyTTL != 0 {
		if cfg.KeyTTL < 0 {
			return &Error{Code: ErrRange, Op: "New", Detail: fmt.Sprintf("KeyTTL=%v", cfg.KeyTTL)}
		}
		c.key_ttl_ms = C.uint64_t(millis(cfg.KeyTTL))
	}
	switch {
	case cfg.QuotaJournalMax < 0:
		c.quota_journal_max = 0
	case cfg.QuotaJournalMax > 0:
		v, err := u32("QuotaJournalMax", cfg.QuotaJournalMax, 1<<32-1)
		if err != nil {
			return err
		}
		c.quota_journal_max = v
	}
	switch {
	case cfg.MaxReservations < 0:
		c.max_reservations = 0
	case cfg.MaxReservations > 0:
		v, err := u32("MaxReservations", cfg.MaxReservations, 1<<32-1)
		if err != nil {
			return err
		}
		c.max_reservations = v
	}
	if cfg.LogQuiet {
		c.log_quiet = 1
	}
	return nil
}

// Close frees the instance (rl_close: with a RedisURL, the last usage is
// reported and the shares handed back, bounded in time). It waits for
// calls in progress; later calls return ErrClosed. Close is idempotent.
func (l *Limiter) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rl != nil {
		C.rl_close(l.rl)
		l.rl = nil
		if l.log != 0 { // no library thread logs after rl_close
			l.log.Delete()
			l.log = 0
		}
	}
	return nil
}

// AddLimit adds a limit from a spec ("name=api rate=100/s burst=20 ...",
// README "Limit specs").
func (l *Limiter) AddLimit(spec string) (Limit, error) {
	var lim C.rl_limit_t
	C.rl_limit_init_sized(&lim, C.sizeof_rl_limit_t)
	cspec := C.CString(spec)
	defer C.free(unsafe.Pointer(cspec))
	var msg [256]C.char
	if rc := C.rl_limit_parse(&lim, cspec, &msg[0], C.size_t(len(msg))); rc < 0 {
		return Limit{}, &Error{Code: Code(rc), Op: "rl_limit_parse", Detail: C.GoString(&msg[0])}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return Limit{}, ErrClosed
	}
	id := C.rl_limit_add(l.rl, &lim)
	if id < 0 {
		return Limit{}, &Error{Code: Code(id), Op: "rl_limit_add", Detail: spec}
	}
	return Limit{id: id, name: C.GoString(&lim.name[0])}, nil
}

// FindLimit returns the limit with this name (ErrNotFound if none).
func (l *Limiter) FindLimit(name string) (Limit, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return Limit{}, ErrClosed
	}
	id := C.rl_limit_find(l.rl, cname)
	if id < 0 {
		return Limit{}, &Error{Code: Code(id), Op: "rl_limit_find", Detail: name}
	}
	return Limit{id: id, name: name}, nil
}

// Allow charges one token to (limit, key) and decides.
func (l *Limiter) Allow(limit Limit, key string) (Decision, error) {
	return l.AllowN(limit, key, 1)
}

// AllowN charges n tokens to (limit, key) and decides; n = 0 peeks. A key
// is 1..MaxKeyLen bytes (ErrKeyLen otherwise); n above the limit's burst
// can never be admitted (ErrCost). One cgo call: rl_check.
func (l *Limiter) AllowN(limit Limit, key string, n uint32) (Decision, error) {
	l.mu.RLock()
	if l.rl == nil {
		l.mu.RUnlock()
		return Decision{}, ErrClosed
	}
	d := C.rlgo_check(C.uintptr_t(uintptr(unsafe.Pointer(l.rl))), limit.id, key, C.uint32_t(n))
	l.mu.RUnlock()
	if rc := d.rc; rc < 0 {
		return Decision{}, &Error{Code: Code(rc), Op: "rl_check"}
	}
	return Decision{
		Allowed:    d.rc == C.RL_ALLOW,
		Remaining:  uint64(d.remaining),
		Reset:      msDuration(uint64(d.reset_ms)),
		RetryAfter: msDuration(uint64(d.retry_after_ms)),
		Limit:      uint64(d.limit),
		Window:     msDuration(uint64(d.window_ms)),
		Burst:      uint64(d.burst),
		Flags:      uint32(d.flags),
		Policy:     limit.name,
		resetMs:    uint64(d.reset_ms),
		retryMs:    uint64(d.retry_after_ms),
		windowMs:   uint64(d.window_ms),
	}, nil
}

func msDuration(ms uint64) time.Duration {
	const max = uint64(1<<63-1) / uint64(time.Millisecond)
	if ms > max {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(ms) * time.Millisecond
}
