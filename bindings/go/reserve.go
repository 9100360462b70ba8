// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <stdlib.h>
#include <ratelimit.h>

// The key as a Go string (no copy, no pointer check), as rlgo_check takes it.
static int rlgo_reserve(uintptr_t h, int limit, _GoString_ key, uint32_t estimate,
                        uint32_t max_wait_ms, uint32_t ttl_ms, int wait,
                        rl_reservation_t *res, rl_decision_t *d)
{
	rl_reservation_init(res);
	rl_decision_init(d);
	if (wait)
		return rl_reserve_wait((rl_t *)h, limit, _GoStringPtr(key), _GoStringLen(key), estimate,
		                       max_wait_ms, ttl_ms, res, d);
	return rl_reserve((rl_t *)h, limit, _GoStringPtr(key), _GoStringLen(key), estimate, ttl_ms,
	                  res, d);
}

static int rlgo_wait(uintptr_t h, int limit, _GoString_ key, uint32_t cost, uint32_t max_wait_ms,
                     rl_decision_t *d)
{
	rl_decision_init(d);
	return rl_wait((rl_t *)h, limit, _GoStringPtr(key), _GoStringLen(key), cost, max_wait_ms, d);
}

static int rlgo_reserve_stats(rl_t *rl, rl_reserve_stats_t *s)
{
	rl_reserve_stats_init(s);
	return rl_reserve_stats(rl, s);
}
*/
import "C"

import (
	"time"
	"unsafe"
)

// MaxSettle is the largest actual Settle takes (RL_COST_SETTLE_MAX).
const MaxSettle = C.RL_COST_SETTLE_MAX

// Reservation is what Reserve or ReserveWait admitted: its tokens are held
// on the key's bucket until Settle or Release (once), or until its ttl,
// when the library settles it at the estimate. A refused one (Allowed
// false) holds nothing.
type Reservation struct {
	Decision Decision      // the admission's decision
	Estimate uint32        // the tokens it holds
	ReadyIn  time.Duration // ReserveWait: when the caller may proceed (0: now)

	l    *Limiter
	c    C.rl_reservation_t // C memory layout, no Go pointers: passed to C as is
	done bool
}

// Allowed is whether the reservation was admitted.
func (r *Reservation) Allowed() bool { return r.Decision.Allowed }

func decisionOf(d *C.rl_decision_t, policy string) Decision {
	return Decision{
		Allowed: d.allowed == C.RL_ALLOW, Remaining: uint64(d.remaining),
		Reset: msDuration(uint64(d.reset_ms)), RetryAfter: msDuration(uint64(d.retry_after_ms)),
		Limit: uint64(d.limit), Window: msDuration(uint64(d.window_ms)), Burst: uint64(d.burst),
		Flags: uint32(d.flags), Policy: policy, Inflight: uint64(d.inflight),
		resetMs: uint64(d.reset_ms), retryMs: uint64(d.retry_after_ms), windowMs: uint64(d.window_ms),
	}
}

// ms is a duration in whole milliseconds for a uint32 argument; out of
// range, a value the library refuses (0 for a ttl, over the maximum for a
// wait) so the error is the library's.
func ms(d time.Duration, bad uint32) C.uint32_t {
	v := d / time.Millisecond
	if d < 0 || v > 1<<32-1 {
		return C.uint32_t(bad)
	}
	return C.uint32_t(v)
}

// Reserve holds estimate tokens (1..the limit's burst) of (limit, key) for
// at most ttl (rl_reserve), deciding as AllowN would. Settle the returned
// reservation at the real cost once the work is done, or Release it.
// ErrFull when every reservation entry is in flight (Config's
// MaxReservations), ErrMode for an exact or tiered limit.
func (l *Limiter) Reserve(limit Limit, key string, estimate uint32, ttl time.Duration) (*Reservation, error) {
	return l.reserve(limit, key, estimate, 0, ttl, false)
}

// ReserveWait is the non-blocking wait (rl_reserve_wait): admitted when the
// tokens can be had within maxWait, with ReadyIn saying after how long the
// caller may proceed (let ttl cover it); refused at once, nothing held, when
// the wait needed is longer (Decision.RetryAfter says how long). Release is
// the cancel: it gives back exactly the estimate.
func (l *Limiter) ReserveWait(limit Limit, key string, estimate uint32, maxWait, ttl time.Duration) (*Reservation, error) {
	return l.reserve(limit, key, estimate, maxWait, ttl, true)
}

func (l *Limiter) reserve(limit Limit, key string, estimate uint32, maxWait, ttl time.Duration, wait bool) (*Reservation, error) {
	r := &Reservation{l: l, Estimate: estimate}
	var d C.rl_decision_t
	op := "rl_reserve"
	w := C.int(0)
	if wait {
		op, w = "rl_reserve_wait", 1
	}
	l.mu.RLock()
	if l.rl == nil {
		l.mu.RUnlock()
		return nil, ErrClosed
	}
	rc := C.rlgo_reserve(C.uintptr_t(uintptr(unsafe.Pointer(l.rl))), limit.id, key,
		C.uint32_t(estimate), ms(maxWait, C.RL_WAIT_MAX_MS+1), ms(ttl, 0), w, &r.c, &d)
	l.mu.RUnlock()
	if rc < 0 {
		return nil, &Error{Code: Code(rc), Op: op}
	}
	r.Decision = decisionOf(&d, limit.name)
	r.done = rc != C.RL_ALLOW
	if rc == C.RL_ALLOW {
		r.ReadyIn = msDuration(uint64(r.c.ready_in_ms))
	}
	return r, nil
}

func (r *Reservation) spend(op string) error {
	if r == nil || r.done {
		return &Error{Code: ErrInvalid, Op: op, Detail: "settled, released or never admitted"}
	}
	return nil
}

// Settle charges the real cost (0..MaxSettle): above the estimate the
// difference is debt (the key is refused until refill has paid it back),
// below it the difference is refunded. ErrExpired when its ttl had passed
// (it was settled at its estimate; actual is not charged).
func (r *Reservation) Settle(actual uint32) error {
	if err := r.spend("rl_settle"); err != nil {
		return err
	}
	l := r.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return ErrClosed
	}
	rc := C.rl_settle(l.rl, &r.c, C.uint32_t(actual))
	if rc == C.RL_ERANGE { // nothing done: the reservation stays in flight
		return &Error{Code: Code(rc), Op: "rl_settle"}
	}
	r.done = true
	if rc < 0 {
		return &Error{Code: Code(rc), Op: "rl_settle"}
	}
	return nil
}

// Release gives the whole estimate back (rl_release): the work never
// happened, or a waiter gave up.
func (r *Reservation) Release() error {
	if err := r.spend("rl_release"); err != nil {
		return err
	}
	l := r.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return ErrClosed
	}
	rc := C.rl_release(l.rl, &r.c)
	r.done = true
	if rc < 0 {
		return &Error{Code: Code(rc), Op: "rl_release"}
	}
	return nil
}

// Wait blocks until cost tokens are admitted, at most maxWait (rl_wait):
// an allowed Decision; a refused one at once, without sleeping, when the
// wait needed is longer (x/time/rate's WaitN rule). Waiters on a key are
// served in arrival order. It blocks its OS thread: from many goroutines
// at once, prefer ReserveWait and a timer.
func (l *Limiter) Wait(limit Limit, key string, cost uint32, maxWait time.Duration) (Decision, error) {
	var d C.rl_decision_t
	l.mu.RLock()
	if l.rl == nil {
		l.mu.RUnlock()
		return Decision{}, ErrClosed
	}
	rc := C.rlgo_wait(C.uintptr_t(uintptr(unsafe.Pointer(l.rl))), limit.id, key,
		C.uint32_t(cost), ms(maxWait, C.RL_WAIT_MAX_MS+1), &d)
	l.mu.RUnlock()
	if rc < 0 {
		return Decision{}, &Error{Code: Code(rc), Op: "rl_wait"}
	}
	return decisionOf(&d, limit.name), nil
}

// ReserveStats are the reservation table's and Wait's counters
// (rl_reserve_stats_t).
type ReserveStats struct {
	Reserved, Denied                    uint64
	SettledUp, SettledDown, SettledEven uint64
	Released, Expired                   uint64
	DebtTokens, RefundTokens            uint64
	InFlight, Capacity, Full            uint64
	Waits, WaitsSlept, WaitsRefused     uint64
}

// ReserveStats reads the counters (and expires the reservations due).
func (l *Limiter) ReserveStats() (ReserveStats, error) {
	var s C.rl_reserve_stats_t
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return ReserveStats{}, ErrClosed
	}
	if rc := C.rlgo_reserve_stats(l.rl, &s); rc < 0 {
		return ReserveStats{}, &Error{Code: Code(rc), Op: "rl_reserve_stats"}
	}
	return ReserveStats{
		Reserved: uint64(s.reserved), Denied: uint64(s.denied),
		SettledUp: uint64(s.settled_up), SettledDown: uint64(s.settled_down),
		SettledEven: uint64(s.settled_even), Released: uint64(s.released),
		Expired: uint64(s.expired), DebtTokens: uint64(s.debt_tokens),
		RefundTokens: uint64(s.refund_tokens), InFlight: uint64(s.in_flight),
		Capacity: uint64(s.capacity), Full: uint64(s.full), Waits: uint64(s.waits),
		WaitsSlept: uint64(s.waits_slept), WaitsRefused: uint64(s.waits_refused),
	}, nil
}
