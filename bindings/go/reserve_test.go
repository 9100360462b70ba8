// SPDX-License-Identifier: MIT

package ratelimit

import (
	"errors"
	"testing"
	"time"
)

// Rates per hour where a count must be exact: nothing refills meanwhile.
func peek(t *testing.T, l *Limiter, lim Limit, key string) uint64 {
	t.Helper()
	d, err := l.AllowN(lim, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

func TestReserveSettleAndDebt(t *testing.T) {
	l := newLocal(t)
	tpm, err := l.AddLimit("name=tpm rate=10/h burst=10 mode=local")
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Reserve(tpm, "k", 4, time.Minute)
	if err != nil || !r.Allowed() || r.Estimate != 4 || r.ReadyIn != 0 || r.Decision.Remaining != 6 {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	if err := r.Settle(12); err != nil { // 12 used of 10: the key owes 2
		t.Fatal(err)
	}
	if d, _ := l.Allow(tpm, "k"); d.Allowed {
		t.Fatal("a key in debt was admitted")
	}
	if r2, err := l.Reserve(tpm, "k", 1, time.Minute); err != nil || r2.Allowed() {
		t.Fatalf("a reservation on a key in debt: %+v %v", r2, err)
	} else if err := r2.Release(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("releasing a refused reservation: %v", err)
	}
	if err := r.Settle(1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a second settle: %v, want ErrInvalid", err)
	}
	// smaller actual: refunded; release: all back
	a, _ := l.Reserve(tpm, "a", 6, time.Minute)
	if err := a.Settle(2); err != nil || peek(t, l, tpm, "a") != 8 {
		t.Fatalf("settle down: %v, remaining %d", err, peek(t, l, tpm, "a"))
	}
	b, _ := l.Reserve(tpm, "b", 7, time.Minute)
	if err := b.Release(); err != nil || peek(t, l, tpm, "b") != 10 {
		t.Fatalf("release: %v, remaining %d", err, peek(t, l, tpm, "b"))
	}
	if _, err := l.Reserve(tpm, "c", 11, time.Minute); !errors.Is(err, ErrCost) {
		t.Fatalf("estimate above the burst: %v", err)
	}
	if _, err := l.Reserve(tpm, "c", 1, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ttl 0: %v", err)
	}
	c, _ := l.Reserve(tpm, "c", 1, time.Minute)
	if err := c.Settle(MaxSettle + 1); !errors.Is(err, ErrRange) {
		t.Fatalf("actual too large: %v", err)
	}
	if err := c.Settle(1); err != nil { // ErrRange left it in flight
		t.Fatalf("settle after ErrRange: %v", err)
	}
	s, err := l.ReserveStats()
	if err != nil {
		t.Fatal(err)
	}
	want := ReserveStats{Reserved: 4, Denied: 1, SettledUp: 1, SettledDown: 1, SettledEven: 1,
		Released: 1, DebtTokens: 8, RefundTokens: 11, Capacity: s.Capacity}
	if s != want {
		t.Fatalf("stats %+v, want %+v", s, want)
	}
}

func TestReserveWaitAndCancel(t *testing.T) {
	l := newLocal(t)
	pace, _ := l.AddLimit("name=pace rate=1/s burst=1 mode=local")
	first, err := l.ReserveWait(pace, "w", 1, 0, time.Minute)
	if err != nil || !first.Allowed() || first.ReadyIn != 0 {
		t.Fatalf("first: %+v %v", first, err)
	}
	second, err := l.ReserveWait(pace, "w", 1, 5*time.Second, time.Minute)
	if err != nil || !second.Allowed() || second.ReadyIn <= 0 || second.ReadyIn > time.Second {
		t.Fatalf("second: %+v %v", second, err)
	}
	third, err := l.ReserveWait(pace, "w", 1, 100*time.Millisecond, time.Minute) // needs ~2 s
	if err != nil || third.Allowed() || third.Decision.RetryAfter <= 100*time.Millisecond {
		t.Fatalf("third: %+v %v", third, err)
	}
	if err := second.Release(); err != nil { // the cancel: exactly its token back
		t.Fatal(err)
	}
	again, err := l.ReserveWait(pace, "w", 1, 5*time.Second, time.Minute)
	if err != nil || !again.Allowed() || again.ReadyIn > second.ReadyIn {
		t.Fatalf("after the cancel: %+v %v (cancelled one was ready in %v)", again, err, second.ReadyIn)
	}
	again.Release()
	first.Settle(1)
}

func TestWaitRefusesAtOnce(t *testing.T) {
	l := newLocal(t)
	slow, _ := l.AddLimit("name=slow rate=1/h burst=1 mode=local")
	if d, err := l.Wait(slow, "x", 1, 10*time.Millisecond); err != nil || !d.Allowed {
		t.Fatalf("first wait: %+v %v", d, err)
	}
	t0 := time.Now()
	d, err := l.Wait(slow, "x", 1, 10*time.Millisecond)
	if err != nil || d.Allowed || d.RetryAfter <= 10*time.Millisecond {
		t.Fatalf("second wait: %+v %v", d, err)
	}
	if time.Since(t0) > 5*time.Second {
		t.Fatal("a wait that could not succeed slept")
	}
	s, _ := l.ReserveStats()
	if s.Waits != 1 || s.WaitsRefused != 1 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := l.Wait(slow, "x", 1, -time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative max wait: %v", err)
	}
}

func TestReserveOnAClosedLimiter(t *testing.T) {
	l, _ := New(Config{MaxReservations: 1})
	lim, _ := l.AddLimit("name=a rate=10/h mode=local")
	r, err := l.Reserve(lim, "k", 1, time.Minute)
	if err != nil || !r.Allowed() {
		t.Fatal(err)
	}
	if _, err := l.Reserve(lim, "k", 1, time.Minute); !errors.Is(err, ErrFull) {
		t.Fatalf("a second reservation with MaxReservations 1: %v, want ErrFull", err)
	}
	l.Close()
	if err := r.Settle(1); err != ErrClosed {
		t.Fatalf("settle after Close: %v", err)
	}
	if _, err := l.Reserve(lim, "k", 1, time.Minute); err != ErrClosed {
		t.Fatalf("reserve after Close: %v", err)
	}
}
