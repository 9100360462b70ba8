// SPDX-License-Identifier: MIT

package ratelimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRetry is a Retry on a fake clock whose sleeps only advance it.
func fakeRetry(t *testing.T, cfg RetryConfig) (*Retry, *[]time.Duration) {
	t.Helper()
	r, err := NewRetry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	var now time.Duration = time.Second
	slept := &[]time.Duration{}
	r.now = func() time.Duration { return now }
	r.sleep = func(_ context.Context, d time.Duration) error {
		*slept = append(*slept, d)
		now += d
		return nil
	}
	return r, slept
}

func TestRetryDelays(t *testing.T) {
	a, _ := fakeRetry(t, RetryConfig{Seed: 11, MaxRetries: 50})
	b, _ := fakeRetry(t, RetryConfig{Seed: 11, MaxRetries: 50})
	for retry := 0; retry < 12; retry++ {
		ceiling := time.Second << retry
		if ceiling > 20*time.Second {
			ceiling = 20 * time.Second
		}
		da, ok := a.Delay(retry, RetryThrottled, 3*time.Second)
		db, _ := b.Delay(retry, RetryThrottled, 3*time.Second)
		if !ok || da != db || da < 3*time.Second || da > 3*time.Second+ceiling {
			t.Fatalf("retry %d: %v %v %v", retry, da, db, ok)
		}
		dn, _ := a.Delay(retry, RetryFailed, -1)
		b.Delay(retry, RetryFailed, -1)
		if c := 100 * time.Millisecond << retry; dn > c && dn > 20*time.Second {
			t.Fatalf("retry %d without a hint: %v", retry, dn)
		}
	}
	if _, ok := a.Delay(50, RetryFailed, -1); ok {
		t.Fatal("retried past MaxRetries")
	}
	if d, ok := a.Delay(0, RetryThrottled, 61*time.Second); ok || d != 61*time.Second {
		t.Fatalf("a hint past HintCap: %v %v", d, ok)
	}
	if _, err := NewRetry(RetryConfig{Base: 2 * time.Minute}); !errors.Is(err, ErrRange) {
		t.Fatalf("Base of 2 min: %v", err)
	}
	if _, err := NewRetry(RetryConfig{BudgetK: 0.5}); !errors.Is(err, ErrRange) {
		t.Fatalf("BudgetK 0.5: %v", err)
	}
}

func TestRetryDo(t *testing.T) {
	r, slept := fakeRetry(t, RetryConfig{Seed: 3})
	calls := 0
	err := r.Do(context.Background(), func(context.Context) error {
		calls++
		if calls < 3 {
			return &ThrottledError{Hint: time.Second}
		}
		return nil
	})
	if err != nil || calls != 3 || len(*slept) != 2 {
		t.Fatalf("Do: %v after %d calls, slept %v", err, calls, *slept)
	}
	if s := (*slept)[0]; s < time.Second || s > 2*time.Second {
		t.Fatalf("the first wait %v is not in [1 s, 2 s]", s)
	}
	if b := r.Budget(); b.Requests != 3 || b.Accepts != 1 {
		t.Fatalf("budget %+v", b)
	}
	calls = 0
	boom := errors.New("404")
	if err = r.Do(context.Background(), func(context.Context) error {
		calls++
		return Permanent(boom)
	}); err != boom || calls != 1 {
		t.Fatalf("a permanent error: %v after %d calls", err, calls)
	}
	g, _ := fakeRetry(t, RetryConfig{Seed: 4, MaxRetries: 3, BudgetK: -1})
	calls = 0
	down := errors.New("connection reset")
	if err = g.Do(context.Background(), func(context.Context) error {
		calls++
		return down
	}); err != down || calls != 4 {
		t.Fatalf("giving up: %v after %d calls", err, calls)
	}
}

func TestRetryBudget(t *testing.T) {
	r, _ := fakeRetry(t, RetryConfig{Seed: 6, MaxRetries: -1})
	sent, rejected := 0, 0
	for i := 0; i < 200; i++ {
		err := r.Do(context.Background(), func(context.Context) error {
			sent++
			return &ThrottledError{Hint: -1}
		})
		if errors.Is(err, ErrRetryBudget) {
			rejected++
		}
	}
	b := r.Budget()
	if b.Requests != 200 || sent+rejected != 200 || rejected < 150 {
		t.Fatalf("sent %d, rejected %d, budget %+v", sent, rejected, b)
	}
	if p := 200.0 / 201; b.RejectProbability < p-1e-5 || b.RejectProbability > p+1e-5 {
		t.Fatalf("p %v, want %v", b.RejectProbability, p)
	}
}

// Against an httptest server answering 429 with Retry-After: 1 once.
func TestRetryHTTP(t *testing.T) {
	var n int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if atomic.AddInt32(&n, 1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("RateLimit", `"api";r=0;t=1`)
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	r, slept := fakeRetry(t, RetryConfig{Seed: 8})
	err := r.Do(context.Background(), func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return ThrottledResponse(resp)
	})
	if err != nil || n != 2 || len(*slept) != 1 || (*slept)[0] < time.Second || (*slept)[0] > 2*time.Second {
		t.Fatalf("%v after %d requests, slept %v", err, n, *slept)
	}
	h := http.Header{}
	if _, ok := RetryHint(h); ok {
		t.Fatal("a hint from no headers")
	}
	h.Set("Retry-After", "soon")
	if _, ok := RetryHint(h); ok {
		t.Fatal("a hint from a malformed Retry-After")
	}
	h.Set("Retry-After", "120")
	if d, ok := RetryHint(h); !ok || d != 2*time.Minute {
		t.Fatalf("Retry-After 120: %v %v", d, ok)
	}
	if ThrottledResponse(&http.Response{StatusCode: 503, Header: http.Header{}}) != nil {
		t.Fatal("a 503 without a hint is a failure, not a throttle")
	}
}
