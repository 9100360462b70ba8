// SPDX-License-Identifier: MIT

package ratelimit

import (
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newLocal(t *testing.T) *Limiter {
	t.Helper()
	l, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestLimitEnforced(t *testing.T) {
	l := newLocal(t)
	api, err := l.AddLimit("name=api rate=1/m burst=3")
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for i := 0; i < 5; i++ {
		d, err := l.Allow(api, "user-1")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Allowed)
	}
	if want := []bool{true, true, true, false, false}; !equalBools(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	d, err := l.Allow(api, "user-2") // its own bucket
	if err != nil || !d.Allowed || d.Remaining != 2 || d.Policy != "api" || d.Burst != 3 ||
		d.Limit != 1 || d.Window != time.Minute {
		t.Fatalf("user-2: %+v %v", d, err)
	}
	d, _ = l.Allow(api, "user-1")
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
		t.Fatalf("denied decision: %+v", d)
	}
	d, err = l.AllowN(api, "user-3", 3)
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("AllowN 3: %+v %v", d, err)
	}
	for i := 0; i < 2; i++ { // a peek (n = 0) charges nothing
		if d, err = l.AllowN(api, "user-4", 0); err != nil || d.Remaining != 3 {
			t.Fatalf("peek %d: %+v %v", i, d, err)
		}
	}
	found, err := l.FindLimit("api")
	if err != nil || found.ID() != api.ID() || found.Name() != "api" {
		t.Fatalf("FindLimit: %+v %v", found, err)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestErrors(t *testing.T) {
	l := newLocal(t)
	_, err := l.AddLimit("name=x rate=10/parsec")
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrSpec) || e.Op != "rl_limit_parse" ||
		!strings.Contains(e.Detail, "parsec") || !strings.Contains(err.Error(), "RL_ESPEC") {
		t.Fatalf("bad spec: %v", err)
	}
	api, _ := l.AddLimit("name=api rate=10/s burst=5")
	if _, err := l.AddLimit("name=api rate=1/s"); !errors.Is(err, ErrExist) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := l.Allow(api, ""); !errors.Is(err, ErrKeyLen) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := l.Allow(api, strings.Repeat("k", MaxKeyLen+1)); !errors.Is(err, ErrKeyLen) {
		t.Fatalf("long key: %v", err)
	}
	if _, err := l.Allow(api, strings.Repeat("k", MaxKeyLen)); err != nil {
		t.Fatalf("longest key: %v", err)
	}
	if _, err := l.AllowN(api, "k", 6); !errors.Is(err, ErrCost) {
		t.Fatalf("cost above burst: %v", err)
	}
	if _, err := l.FindLimit("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindLimit: %v", err)
	}
	if _, err := New(Config{RedisURL: "redis://127.0.0.1:1"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a RedisURL without a KeySecret: %v", err)
	}
	if _, err := New(Config{MaxKeys: -1}); !errors.Is(err, ErrRange) {
		t.Fatalf("MaxKeys -1: %v", err)
	}
	if _, err := New(Config{RedisURL: "http://x"}); err == nil {
		t.Fatal("a malformed RedisURL was accepted")
	}
	l.Close()
	if _, err := l.Allow(api, "k"); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// The Go constants name the library's codes, by its own rl_err_name.
func TestCodesMatchTheLibrary(t *testing.T) {
	want := map[Code]string{
		ErrInvalid: "RL_EINVAL", ErrNoMemory: "RL_ENOMEM", ErrNotFound: "RL_ENOTFOUND",
		ErrRange: "RL_ERANGE", ErrSize: "RL_ESIZE", ErrKeyLen: "RL_EKEYLEN", ErrSpec: "RL_ESPEC",
		ErrExist: "RL_EEXIST", ErrLimits: "RL_ELIMITS", ErrCost: "RL_ECOST",
		ErrForked: "RL_EFORKED", ErrNotSupported: "RL_ENOTSUP", ErrName: "RL_ENAME",
		ErrMode: "RL_EMODE", ErrAuth: "RL_EAUTH", ErrFull: "RL_EFULL", ErrExpired: "RL_EEXPIRED",
		ErrUnavailable: "RL_EUNAVAIL",
	}
	for c, name := range want {
		if c.Name() != name || c.Error() == "" {
			t.Errorf("code %d: %q %q, want %s", int(c), c.Name(), c.Error(), name)
		}
	}
}

// The headers rendered in Go are rl_headers' own, byte for byte.
func TestHeadersMatchC(t *testing.T) {
	cases := []Decision{
		{Allowed: true, Limit: 100, Remaining: 99, Burst: 20, Policy: "api", resetMs: 10, windowMs: 1000},
		{Allowed: false, Limit: 1, Remaining: 0, Policy: "slow", resetMs: 3600000, retryMs: 3599001, windowMs: 3600000},
		{Allowed: false, Limit: 5, Policy: "zero", retryMs: 0, windowMs: 0},
		{Allowed: true, Limit: 1 << 62, Remaining: 1 << 61, Policy: "", resetMs: 1<<64 - 1, windowMs: 1<<64 - 1},
		{Allowed: true, Limit: 3, Remaining: 1, Policy: "a.b:c-d_e", resetMs: 1999, windowMs: 2500},
	}
	for _, d := range cases {
		if got, want := d.Headers(), cHeaders(d); got != want {
			t.Errorf("decision %+v:\nGo:\n%s\nC:\n%s", d, got, want)
		}
	}
	// And a real decision, as Allow returns it.
	l := newLocal(t)
	api, _ := l.AddLimit("name=api rate=2/s burst=2")
	for i := 0; i < 3; i++ {
		d, _ := l.Allow(api, "k")
		if got, want := d.Headers(), cHeaders(d); got != want {
			t.Errorf("check %d:\nGo:\n%s\nC:\n%s", i, got, want)
		}
	}
}

// Many goroutines on one key: the bucket admits exactly its burst (the
// rate is 1/h, so nothing refills during the test).
func TestConcurrentExact(t *testing.T) {
	l := newLocal(t)
	api, _ := l.AddLimit("name=api rate=1/h burst=1000")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				d, err := l.Allow(api, "shared")
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 1000 {
		t.Fatalf("admitted %d of 4000, want exactly the burst, 1000", admitted.Load())
	}
}

// Close waits for checks in progress and later calls fail cleanly.
func TestCloseRacesChecks(t *testing.T) {
	l, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	api, _ := l.AddLimit("name=api rate=100/s")
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				if _, err := l.Allow(api, "k"); err != nil {
					if err != ErrClosed {
						t.Error(err)
					}
					return
				}
			}
		}()
	}
	close(start)
	l.Close()
	wg.Wait()
}

func TestVersion(t *testing.T) {
	if v := Version(); !strings.HasPrefix(v, "0.") {
		t.Fatalf("Version() = %q", v)
	}
}

// The module carries the project's license as a real file (module zips
// drop symlinks), identical to the top-level one.
func TestLicense(t *testing.T) {
	ours, err1 := os.ReadFile("LICENSE")
	top, err2 := os.ReadFile("../../LICENSE")
	if err1 != nil || err2 != nil || string(ours) != string(top) ||
		!strings.HasPrefix(string(ours), "MIT License") {
		t.Fatalf("bindings/go/LICENSE differs from LICENSE (%v, %v)", err1, err2)
	}
}
