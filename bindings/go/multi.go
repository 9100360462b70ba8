// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <stdlib.h>
#include <ratelimit.h>

static rl_request_t *rlgo_requests_new(size_t n)
{
	rl_request_t *a = calloc(n, sizeof *a);
	for (size_t i = 0; a != NULL && i < n; i++)
		rl_request_init(&a[i]);
	return a;
}

static rl_decision_t *rlgo_decisions_new(size_t n)
{
	rl_decision_t *a = calloc(n, sizeof *a);
	for (size_t i = 0; a != NULL && i < n; i++)
		rl_decision_init(&a[i]);
	return a;
}

static void rlgo_request_set(rl_request_t *a, size_t i, int limit, void *key, size_t len,
                             uint32_t cost)
{
	a[i].limit = limit;
	a[i].key = key;
	a[i].key_len = len;
	a[i].cost = cost;
}

static rl_decision_t *rlgo_decision_at(rl_decision_t *a, size_t i) { return &a[i]; }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// MaxMulti is the most requests one CheckMulti takes (RL_MULTI_MAX).
const MaxMulti = C.RL_MULTI_MAX

// Request is one (limit, key, cost) of a CheckMulti.
type Request struct {
	Limit Limit
	Key   string
	Cost  uint32
}

// MultiDecision is CheckMulti's answer: Allowed when every request was
// admitted; DeniedIndex is the first request denied (len(requests) when
// none was). Decisions has one Decision per request.
type MultiDecision struct {
	Allowed     bool
	Decisions   []Decision
	DeniedIndex int
}

// CheckMulti checks up to MaxMulti requests all or nothing
// (rl_check_multi): either every one is charged, or none is. An invalid
// request fails the call (its index in Detail) and charges nothing.
func (l *Limiter) CheckMulti(reqs []Request) (MultiDecision, error) {
	n := len(reqs)
	if n == 0 || n > MaxMulti {
		return MultiDecision{}, &Error{Code: ErrRange, Op: "rl_check_multi",
			Detail: fmt.Sprintf("%d requests: 1..%d", n, MaxMulti)}
	}
	creq := C.rlgo_requests_new(C.size_t(n))
	cdec := C.rlgo_decisions_new(C.size_t(n))
	defer C.free(unsafe.Pointer(creq))
	defer C.free(unsafe.Pointer(cdec))
	if creq == nil || cdec == nil {
		return MultiDecision{}, &Error{Code: ErrNoMemory, Op: "rl_check_multi"}
	}
	for i, r := range reqs {
		key := C.CBytes([]byte(r.Key + "\x00")) // C memory: the call keeps the pointers
		defer C.free(key)
		C.rlgo_request_set(creq, C.size_t(i), r.Limit.id, key, C.size_t(len(r.Key)),
			C.uint32_t(r.Cost))
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return MultiDecision{}, ErrClosed
	}
	var denied C.size_t
	rc := C.rl_check_multi(l.rl, creq, C.size_t(n), C.sizeof_rl_request_t, cdec, &denied)
	if rc < 0 {
		return MultiDecision{}, &Error{Code: Code(rc), Op: "rl_check_multi",
			Detail: fmt.Sprintf("request %d", int(denied))}
	}
	out := MultiDecision{Allowed: rc == C.RL_ALLOW, DeniedIndex: int(denied),
		Decisions: make([]Decision, n)}
	for i := range reqs {
		d := C.rlgo_decision_at(cdec, C.size_t(i))
		out.Decisions[i] = Decision{
			Allowed: d.allowed == C.RL_ALLOW, Remaining: uint64(d.remaining),
			Reset: msDuration(uint64(d.reset_ms)), RetryAfter: msDuration(uint64(d.retry_after_ms)),
			Limit: uint64(d.limit), Window: msDuration(uint64(d.window_ms)), Burst: uint64(d.burst),
			Flags: uint32(d.flags), Policy: reqs[i].Limit.name,
			resetMs: uint64(d.reset_ms), retryMs: uint64(d.retry_after_ms), windowMs: uint64(d.window_ms),
		}
	}
	return out, nil
}
