// SPDX-License-Identifier: MIT

package ratelimit

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A local-only instance's busiest key is reported first, with its bytes
// and its limit, and marked hot once its demand passes the limit's hot=.
func TestHotKeys(t *testing.T) {
	l, err := New(Config{HotkeysK: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hot, _ := l.AddLimit("name=h rate=100/s burst=100 mode=local hot=0.5")
	calm, _ := l.AddLimit("name=c rate=100/s burst=100 mode=local")
	if ks, err := l.HotKeys(hot, 8); err != nil || len(ks) != 0 {
		t.Fatalf("before any check: %v, %v", ks, err)
	}
	var ks []HotKey
	for round := 0; round < 4; round++ { // a hot mark needs evaluations in a row
		for i := 0; i < 2000; i++ {
			_, _ = l.Allow(hot, "busy")
		}
		for i := 0; i < 20; i++ {
			_, _ = l.Allow(hot, fmt.Sprintf("quiet-%d", i))
		}
		for i := 0; i < 500; i++ {
			_, _ = l.Allow(calm, "c-key")
		}
		time.Sleep(10 * time.Millisecond)
		if ks, err = l.HotKeys(hot, 8); err != nil {
			t.Fatal(err)
		}
	}
	if len(ks) == 0 {
		t.Fatal("no hot keys reported")
	}
	top := ks[0]
	if top.Key != "busy" || top.KeyLen != 4 || top.Truncated || !top.Hot || top.Limit.Name() != "h" ||
		top.Limit.ID() != hot.ID() || top.DemandPerS <= 0 || top.Count < top.CountErr {
		t.Fatalf("the top key: %+v", top)
	}
	for _, k := range ks {
		if k.Limit.ID() != hot.ID() {
			t.Fatalf("a key of another limit: %+v", k)
		}
	}
	if d, _ := l.Allow(hot, "busy"); d.Flags&FlagHot == 0 {
		t.Fatalf("a hot key's decision is not flagged: %+v", d)
	}
	all, err := l.AllHotKeys(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, k := range all {
		seen[k.Limit.Name()] = true
	}
	if !seen["h"] || !seen["c"] {
		t.Fatalf("AllHotKeys: limits %v", seen)
	}
	if _, err = l.HotKeys(Limit{id: 12345}, 4); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown limit: %v", err)
	}
	if _, err = l.HotKeys(hot, 0); !errors.Is(err, ErrRange) {
		t.Fatalf("n = 0: %v", err)
	}
}

// LimitStats carries rl_limit_stats_t's counters; Stats rl_stats_t's.
func TestStatsFields(t *testing.T) {
	l := newLocal(t)
	api, _ := l.AddLimit("name=api rate=1/m burst=2")
	for i := 0; i < 5; i++ {
		_, _ = l.Allow(api, "k")
	}
	ls, err := l.LimitStats(api)
	if err != nil || ls.Admitted != 2 || ls.Denied != 3 || ls.KeysLive != 1 || ls.SyncKeys != 0 {
		t.Fatalf("LimitStats: %+v, %v", ls, err)
	}
	s, err := l.Stats()
	if err != nil || s.Admitted != 2 || s.Denied != 3 || s.Limits != 1 || s.KeysCapacity != 65536 ||
		s.TableBytes == 0 || s.Health != HealthHealthy {
		t.Fatalf("Stats: %+v, %v", s, err)
	}
	if _, err = l.LimitStats(Limit{id: 999}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown limit: %v", err)
	}
}

// Config.Log gets the library's lines, on its own threads: an unreachable
// Redis is logged as a warning naming the address.
func TestLogHook(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	l, err := New(Config{RedisURL: "redis://127.0.0.1:1", KeySecret: []byte("go-log-secret-0123456789"),
		NodeID: "log-test", SyncInterval: 50 * time.Millisecond, ReconnectMax: 100 * time.Millisecond,
		Log: func(level int, msg string) {
			mu.Lock()
			defer mu.Unlock()
			if level <= LogWarn {
				lines = append(lines, msg)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a warning through Config.Log", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range lines {
			if strings.Contains(m, "127.0.0.1:1") {
				return true
			}
		}
		return false
	})
	l.Close()
	mu.Lock()
	n := len(lines)
	mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != n {
		t.Fatalf("logged after Close: %q", lines[n:])
	}
}
