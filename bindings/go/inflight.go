// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <stdlib.h>
#include <ratelimit.h>

static int rlgo_acquire(uintptr_t h, int limit, _GoString_ key, int32_t cls, rl_permit_t *p,
                        rl_decision_t *d)
{
	rl_decision_init(d);
	return rl_inflight_acquire((rl_t *)h, limit, _GoStringPtr(key), _GoStringLen(key), cls, p, d);
}
*/
import "C"

import (
	"time"
	"unsafe"
)

// InflightOutcome is what became of a request held by a permit; an adaptive limit
// samples it with the latency.
type InflightOutcome int32

const (
	InflightSuccess InflightOutcome = C.RL_INFLIGHT_SUCCESS // served: its latency is a sample
	InflightDropped InflightOutcome = C.RL_INFLIGHT_DROPPED // overloaded, timed out, shed
	InflightIgnored InflightOutcome = C.RL_INFLIGHT_IGNORED // neither (a client error): not sampled
)

// Permit is a held permit of an in-flight limit (Acquire). A refused one
// (Allowed false) holds nothing. Release it once, typically deferred:
//
//	p, err := l.Acquire(db, key)
//	if err != nil || !p.Allowed() { /* 503, Retry-After p.Decision.RetryAfter */ }
//	outcome := ratelimit.InflightSuccess
//	defer func() { p.Release(outcome, 0) }() // 0: the latency since Acquire
type Permit struct {
	Decision Decision // the acquire's decision (Inflight, Limit, RetryAfter)

	l        *Limiter
	c        C.rl_permit_t // no Go pointers: passed to C as is
	start    time.Time
	released bool
	// Reclaimed is set by Release when the permit had been held past the
	// limit's max_hold and reclaimed (the release was a counted no-op).
	Reclaimed bool
}

// Allowed is whether the permit was granted.
func (p *Permit) Allowed() bool { return p.Decision.Allowed }

// NoClass is Acquire's class: none named.
const NoClass = C.RL_INFLIGHT_NO_CLASS

// Acquire takes a permit of an in-flight limit for key
// (rl_inflight_acquire). A full limit answers a refused Permit with the
// in-flight decision (its SetHeaders renders a 503's Retry-After). ErrMode
// for a rate limit. Lock-free; one cgo call.
func (l *Limiter) Acquire(limit Limit, key string) (*Permit, error) {
	return l.AcquireClass(limit, key, NoClass)
}

// AcquireClass is Acquire in a class of the limit's partitions (its
// index: InflightClass finds it by name; NoClass for none). ErrRange for
// an index the limit does not have.
func (l *Limiter) AcquireClass(limit Limit, key string, class int) (*Permit, error) {
	p := &Permit{l: l}
	var d C.rl_decision_t
	l.mu.RLock()
	if l.rl == nil {
		l.mu.RUnlock()
		return nil, ErrClosed
	}
	if class < -1<<31 || class >= 1<<31 {
		class = 1<<31 - 1 // no such class: the library's ErrRange
	}
	p.start = time.Now()
	rc := C.rlgo_acquire(C.uintptr_t(uintptr(unsafe.Pointer(l.rl))), limit.id, key,
		C.int32_t(class), &p.c, &d)
	l.mu.RUnlock()
	if rc < 0 {
		return nil, &Error{Code: Code(rc), Op: "rl_inflight_acquire"}
	}
	p.Decision = decisionOf(&d, limit.name)
	p.released = rc != C.RL_ALLOW
	return p, nil
}

// InflightClass is the index of a named class of an in-flight limit
// (rl_inflight_class): ErrNotFound for no such class, ErrMode for a rate
// limit.
func (l *Limiter) InflightClass(limit Limit, name string) (int, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return 0, ErrClosed
	}
	rc := C.rl_inflight_class(l.rl, limit.id, cname)
	if rc < 0 {
		return 0, &Error{Code: Code(rc), Op: "rl_inflight_class", Detail: name}
	}
	return int(rc), nil
}

// Release gives the permit back with its outcome and latency (0: the time
// since Acquire), which feed an adaptive limit (rl_inflight_release).
// ErrInvalid for a permit released already or never granted; ErrRange for
// an unknown outcome (the permit stays held).
func (p *Permit) Release(outcome InflightOutcome, latency time.Duration) error {
	if p == nil || p.released {
		return &Error{Code: ErrInvalid, Op: "rl_inflight_release",
			Detail: "released already or never granted"}
	}
	if outcome != InflightSuccess && outcome != InflightDropped && outcome != InflightIgnored {
		return &Error{Code: ErrRange, Op: "rl_inflight_release", Detail: "unknown outcome"}
	}
	if latency <= 0 {
		latency = time.Since(p.start)
		if latency <= 0 {
			latency = 1
		}
	}
	l := p.l
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return ErrClosed
	}
	rc := C.rl_inflight_release(l.rl, &p.c, C.int32_t(outcome), C.uint64_t(latency))
	p.released = true
	if rc < 0 {
		return &Error{Code: Code(rc), Op: "rl_inflight_release"}
	}
	p.Reclaimed = rc == C.RL_INFLIGHT_RECLAIMED
	return nil
}
