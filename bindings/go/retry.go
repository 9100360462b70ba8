// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <stdlib.h>
#include <ratelimit.h>
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"
	"unsafe"
)

// Outcome is what an attempt came to, for Retry.Record (RL_RETRY_*).
type Outcome int

// The outcomes of an attempt.
const (
	RetryOK        Outcome = C.RL_RETRY_OK        // accepted (any answer but a refusal for load)
	RetryThrottled Outcome = C.RL_RETRY_THROTTLED // refused for load: 429, or 503 with a hint
	RetryFailed    Outcome = C.RL_RETRY_FAILED    // no answer, or a transient failure
)

// RetryConfig holds a Retry's settings (rl_retry_config_t); the zero value
// of each is the library's default. Durations are rounded down to whole
// milliseconds.
type RetryConfig struct {
	Base          time.Duration // the first retry's jitter ceiling; 0: 100 ms
	ThrottledBase time.Duration // the base after RetryThrottled; 0: 1 s
	Cap           time.Duration // the largest backoff; 0: 20 s
	HintCap       time.Duration // the longest server hint waited for; 0: 60 s
	MaxRetries    int           // retries after the first attempt; 0: 5; negative: none
	// BudgetK is the retry budget's K: an attempt is rejected locally with
	// probability max(0, (requests - K x accepts) / (requests + 1)); 0: 2;
	// negative: no budget.
	BudgetK           float64
	BudgetWindow      time.Duration // how far back the budget counts; 0: 2 min
	BudgetMinRequests int           // below this the budget rejects nothing; 0: 10; negative: 0
	Seed              uint64        // the PRNG's seed (jitter only); 0: from getrandom
}

// Retry is a client's retry helper (rl_retry_t): full-jitter backoff, the
// server's hint as a floor, and a retry budget. One per client (the budget
// is the client's); safe for concurrent use by any number of goroutines.
type Retry struct {
	mu    sync.RWMutex // read: every call; write: Close
	r     *C.rl_retry_t
	start time.Time
	// test hooks: the monotonic clock and the sleep Do uses
	now   func() time.Duration
	sleep func(ctx context.Context, d time.Duration) error
}

// ErrRetryBudget is returned (wrapped, with the last attempt's error) when
// the retry budget rejects an attempt locally: the server has been
// accepting less than 1/K of what this client sends.
var ErrRetryBudget = errors.New("ratelimit: retry budget: attempt rejected locally")

// ThrottledError is what a function run by Do returns when the server
// refused for load; Hint is when it said to come back (negative: it did
// not say). RetryHint reads it from response headers.
type ThrottledError struct {
	Hint time.Duration
	Err  error
}

func (e *ThrottledError) Error() string {
	if e.Err != nil {
		return "throttled: " + e.Err.Error()
	}
	return "throttled"
}

func (e *ThrottledError) Unwrap() error { return e.Err }

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks an error Do must not retry (the server answered: a 400,
// a 404); the attempt counts as accepted.
func Permanent(err error) error { return permanent{err} }

func durMs(name string, d time.Duration, dst *C.uint32_t) error {
	if d == 0 {
		return nil
	}
	ms := d / time.Millisecond
	if ms < 0 || ms > math.MaxUint32 {
		return &Error{Code: ErrRange, Op: "rl_retry_new", Detail: fmt.Sprintf("%s=%v", name, d)}
	}
	*dst = C.uint32_t(ms)
	return nil
}

// NewRetry creates a retry helper (rl_retry_new).
func NewRetry(cfg RetryConfig) (*Retry, error) {
	var c C.rl_retry_config_t
	C.rl_retry_config_init_sized(&c, C.sizeof_rl_retry_config_t)
	for _, f := range []struct {
		name string
		d    time.Duration
		dst  *C.uint32_t
	}{
		{"Base", cfg.Base, &c.base_ms}, {"ThrottledBase", cfg.ThrottledBase, &c.throttled_base_ms},
		{"Cap", cfg.Cap, &c.cap_ms}, {"HintCap", cfg.HintCap, &c.hint_cap_ms},
		{"BudgetWindow", cfg.BudgetWindow, &c.budget_window_ms},
	} {
		if err := durMs(f.name, f.d, f.dst); err != nil {
			return nil, err
		}
	}
	count := func(name string, v int, dst *C.uint32_t) error {
		switch {
		case v < 0:
			*dst = 0
		case v > math.MaxUint32:
			return &Error{Code: ErrRange, Op: "rl_retry_new", Detail: fmt.Sprintf("%s=%d", name, v)}
		case v > 0:
			*dst = C.uint32_t(v)
		}
		return nil
	}
	if err := count("MaxRetries", cfg.MaxRetries, &c.max_retries); err != nil {
		return nil, err
	}
	if err := count("BudgetMinRequests", cfg.BudgetMinRequests, &c.budget_min_requests); err != nil {
		return nil, err
	}
	switch k := cfg.BudgetK; {
	case k < 0:
		c.budget_k_milli = 0
	case k > 0:
		if k*1000 > math.MaxUint32 || math.IsNaN(k) {
			return nil, &Error{Code: ErrRange, Op: "rl_retry_new", Detail: fmt.Sprintf("BudgetK=%v", k)}
		}
		c.budget_k_milli = C.uint32_t(math.Round(k * 1000))
	}
	c.seed = C.uint64_t(cfg.Seed)
	var msg [256]C.char
	r := &Retry{start: time.Now()}
	if rc := C.rl_retry_new(&r.r, &c, &msg[0], C.size_t(len(msg))); rc < 0 {
		return nil, &Error{Code: Code(rc), Op: "rl_retry_new", Detail: C.GoString(&msg[0])}
	}
	return r, nil
}

// Close frees the helper; later calls fail (Admit false, Delay give up).
func (r *Retry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.r != nil {
		C.rl_retry_free(r.r)
		r.r = nil
	}
}

func (r *Retry) nowMs() C.uint64_t {
	if r.now != nil {
		return C.uint64_t(r.now() / time.Millisecond)
	}
	return C.uint64_t(time.Since(r.start) / time.Millisecond)
}

// Admit is called before each attempt: true to send it, false when the
// retry budget rejects it locally (rl_retry_admit).
func (r *Retry) Admit() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.r != nil && C.rl_retry_admit(r.r, r.nowMs()) == C.RL_ALLOW
}

// Record is called after each attempt that was sent (rl_retry_record).
func (r *Retry) Record(o Outcome) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.r != nil {
		C.rl_retry_record(r.r, r.nowMs(), C.int(o))
	}
}

// Delay is how long to wait before retry number retry (0 for the first)
// after an attempt ended with o (RetryThrottled or RetryFailed), given the
// server's hint (negative: none): U(0, min(Cap, base x 2^retry)), after
// the hint when there is one. ok is false to give up (MaxRetries reached,
// or a hint past HintCap).
func (r *Retry) Delay(retry int, o Outcome, hint time.Duration) (d time.Duration, ok bool) {
	if retry < 0 {
		retry = 0
	}
	if retry > math.MaxUint32 {
		retry = math.MaxUint32
	}
	h := C.int64_t(-1)
	if hint >= 0 {
		h = C.int64_t(hint / time.Millisecond)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.r == nil {
		return 0, false
	}
	var ms C.uint64_t
	rc := C.rl_retry_delay(r.r, C.uint32_t(retry), C.int(o), h, &ms)
	return msDuration(uint64(ms)), rc == C.RL_ALLOW
}

// RetryBudget is the budget's state (rl_retry_budget).
type RetryBudget struct {
	Requests, Accepts uint64
	RejectProbability float64
}

// Budget reports the retry budget now.
func (r *Retry) Budget() RetryBudget {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.r == nil {
		return RetryBudget{}
	}
	var req, acc C.uint64_t
	var ppm C.uint32_t
	C.rl_retry_budget(r.r, r.nowMs(), &req, &acc, &ppm)
	return RetryBudget{uint64(req), uint64(acc), float64(ppm) / 1e6}
}

// RetryHint reads the server's hint from a response's Retry-After and
// RateLimit headers (rl_retry_hint): ok false when neither says when, or
// a value is malformed (a hint is advice: a bad one is no hint).
func RetryHint(h http.Header) (time.Duration, bool) {
	var ra, rl *C.char
	if v := h.Values("Retry-After"); len(v) > 0 {
		ra = C.CString(v[0])
		defer C.free(unsafe.Pointer(ra))
	}
	if v := h.Values("RateLimit"); len(v) > 0 {
		rl = C.CString(joinValues(v))
		defer C.free(unsafe.Pointer(rl))
	}
	var ms C.int64_t
	if C.rl_retry_hint(ra, rl, C.uint64_t(time.Now().UnixMilli()), &ms) != 1 {
		return -1, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

func joinValues(v []string) string {
	out := v[0]
	for _, s := range v[1:] {
		out += ", " + s
	}
	return out
}

// ThrottledResponse is a *ThrottledError for a 429, or a 503 that carries
// a hint, with the hint of its headers; nil for any other response.
func ThrottledResponse(resp *http.Response) error {
	hint, ok := RetryHint(resp.Header)
	if resp.StatusCode == http.StatusTooManyRequests ||
		(resp.StatusCode == http.StatusServiceUnavailable && ok) {
		if !ok {
			hint = -1
		}
		return &ThrottledError{Hint: hint, Err: errors.New(resp.Status)}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Do runs fn until it succeeds, the helper gives up, or ctx ends. fn
// returns nil (done), a *ThrottledError (refused for load: retried after
// its hint), an error wrapped by Permanent (not retried; counted as
// accepted), or any other error (a failure: retried). Before each attempt
// the budget may reject it: Do then returns an error wrapping
// ErrRetryBudget. On giving up it returns fn's last error.
func (r *Retry) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	sleep := r.sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	var last error
	for retry := 0; ; retry++ {
		if !r.Admit() {
			if last == nil {
				return ErrRetryBudget
			}
			return fmt.Errorf("%w (last error: %v)", ErrRetryBudget, last)
		}
		err := fn(ctx)
		var p permanent
		if err == nil || errors.As(err, &p) {
			r.Record(RetryOK)
			if err != nil {
				return p.err
			}
			return nil
		}
		o, hint := RetryFailed, time.Duration(-1)
		var te *ThrottledError
		if errors.As(err, &te) {
			o, hint = RetryThrottled, te.Hint
		}
		r.Record(o)
		d, ok := r.Delay(retry, o, hint)
		if !ok {
			return err
		}
		last = err
		if serr := sleep(ctx, d); serr != nil {
			return err
		}
	}
}
