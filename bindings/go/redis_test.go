// SPDX-License-Identifier: MIT

package ratelimit

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// redisServer starts a private redis-server on a free loopback port and
// stops it by PID when the test ends.
func redisServer(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("RL_SKIP_REDIS") == "1" {
			t.Skip("redis-server not installed")
		}
		t.Fatal("redis-server not installed (scripts/deps.sh installs it)")
	}
	for attempt := 0; attempt < 5; attempt++ { // another process may take the port first
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", t.TempDir())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		addr := "127.0.0.1:" + strconv.Itoa(port)
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Now() // it died: the port was taken, try another
				continue
			default:
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Cleanup(func() {
					_ = cmd.Process.Kill()
					<-exited
				})
				return "redis://" + addr
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Fatal("redis-server did not start")
	return ""
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two nodes share one limit through Redis. rate=1/h, so nothing refills:
// the fleet's burst of 10 is all there is. With ExpectedNodes 2 each node
// starts with 5; node a, which wants far more than node b, gets b's unused
// share after a few sync rounds, so it admits more than its own 5: what an
// unsynced node never does. The fleet stays within the tolerance band
// (burst + E = 10 + 10 here).
func TestTwoNodesShareALimit(t *testing.T) {
	url := redisServer(t)
	node := func(id string) (*Limiter, Limit) {
		l, err := New(Config{RedisURL: url, KeySecret: []byte("go-fleet-secret-0123456789"),
			NodeID: id, KeyPrefix: "gotest", ExpectedNodes: 2, SyncInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		lim, err := l.AddLimit("name=g rate=1/h burst=10")
		if err != nil {
			t.Fatal(err)
		}
		return l, lim
	}
	a, ga := node("a")
	b, gb := node("b")
	waitFor(t, "sync connection", func() bool {
		sa, _ := a.Stats()
		sb, _ := b.Stats()
		return sa.SyncConnected && sb.SyncConnected
	})
	admitted := map[string]int{}
	try := func(l *Limiter, lim Limit, name string) {
		d, err := l.Allow(lim, "tenant")
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted[name]++
		}
	}
	try(b, gb, "b") // b has a little demand, then stops
	waitFor(t, "node a admitting past its pre-sync share of 5", func() bool {
		try(a, ga, "a")
		return admitted["a"] > 5
	})
	sa, _ := a.Stats()
	if sa.SyncReports == 0 || sa.SyncRoundsCompleted == 0 {
		t.Fatalf("node a synced nothing: %+v", sa)
	}
	for i := 0; i < 50; i++ { // both keep asking: the fleet stays in its band
		try(a, ga, "a")
		try(b, gb, "b")
	}
	if total := admitted["a"] + admitted["b"]; total > 20 {
		t.Fatalf("the fleet admitted %v: more than burst + E = 20", admitted)
	}
}
