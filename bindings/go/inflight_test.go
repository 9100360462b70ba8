// SPDX-License-Identifier: MIT

package ratelimit

import (
	"errors"
	"sync"
	"testing"
	"time"
)

func held(t *testing.T, l *Limiter, lim Limit) uint64 {
	t.Helper()
	s, err := l.LimitStats(lim)
	if err != nil {
		t.Fatal(err)
	}
	return s.Inflight
}

// serve is the defer-style use: acquire, run, release with the outcome.
func serve(l *Limiter, lim Limit, key string, work func() error) (*Permit, error) {
	p, err := l.Acquire(lim, key)
	if err != nil || !p.Allowed() {
		return p, err
	}
	outcome := InflightSuccess
	defer func() { p.Release(outcome, 0) }()
	if err := work(); err != nil {
		outcome = InflightDropped
		return p, err
	}
	return p, nil
}

func TestAcquireDeferRelease(t *testing.T) {
	l := newLocal(t)
	db, err := l.AddLimit("name=db kind=inflight max=2")
	if err != nil {
		t.Fatal(err)
	}
	var third *Permit
	_, err = serve(l, db, "k", func() error {
		_, err := serve(l, db, "k", func() error {
			if n := held(t, l, db); n != 2 {
				t.Fatalf("held %d, want 2", n)
			}
			var err error
			third, err = serve(l, db, "k", func() error {
				t.Fatal("a third permit was handed out")
				return nil
			})
			return err
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	d := third.Decision
	if third.Allowed() || d.Inflight != 2 || d.Limit != 2 || d.RetryAfter <= 0 ||
		d.Flags&FlagInflight == 0 {
		t.Fatalf("the refusal: %+v", d)
	}
	if got, want := d.Headers(), cHeaders(d); got != want {
		t.Fatalf("Go headers\n%q\nC rl_headers\n%q", got, want)
	}
	if err := third.Release(InflightSuccess, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("releasing a refused permit: %v", err)
	}
	if n := held(t, l, db); n != 0 {
		t.Fatalf("held %d after the deferred releases", n)
	}
	fail := errors.New("the work failed")
	p, err := serve(l, db, "k", func() error { return fail })
	if err != fail || !p.released {
		t.Fatalf("a failed request: %v, released %v", err, p.released)
	}
	if err := p.Release(InflightSuccess, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a second release: %v", err)
	}
	q, _ := l.Acquire(db, "k")
	if err := q.Release(InflightOutcome(7), 0); !errors.Is(err, ErrRange) {
		t.Fatalf("unknown outcome: %v", err)
	}
	if err := q.Release(InflightIgnored, time.Millisecond); err != nil || q.Reclaimed {
		t.Fatalf("release after ErrRange: %v", err)
	}
	rate, _ := l.AddLimit("name=r rate=1/s")
	if _, err := l.Acquire(rate, "k"); !errors.Is(err, ErrMode) {
		t.Fatalf("Acquire on a rate limit: %v", err)
	}
}

func TestAcquireClasses(t *testing.T) {
	l := newLocal(t)
	pool, err := l.AddLimit("name=pool kind=inflight max=4 partitions=live:0.5,batch:0.5")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := l.InflightClass(pool, "batch")
	if err != nil || batch != 1 {
		t.Fatalf("class batch: %d %v", batch, err)
	}
	if _, err := l.InflightClass(pool, "nosuch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown class: %v", err)
	}
	p, err := l.AcquireClass(pool, "k", batch)
	if err != nil || !p.Allowed() {
		t.Fatalf("acquire in batch: %+v %v", p, err)
	}
	p.Release(InflightSuccess, 0)
	if _, err := l.AcquireClass(pool, "k", 3); !errors.Is(err, ErrRange) {
		t.Fatalf("class 3 of 2: %v", err)
	}
}

// Racing goroutines never hold more than max at once (the count the
// permits say they were granted under).
func TestAcquireRacing(t *testing.T) {
	l := newLocal(t)
	db, _ := l.AddLimit("name=db kind=inflight max=3")
	var mu sync.Mutex
	holding, most := 0, 0
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				p, err := l.Acquire(db, "k")
				if err != nil {
					t.Error(err)
					return
				}
				if !p.Allowed() {
					continue
				}
				mu.Lock()
				holding++
				if holding > most {
					most = holding
				}
				mu.Unlock()
				mu.Lock()
				holding--
				mu.Unlock()
				if err := p.Release(InflightSuccess, 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if most > 3 || held(t, l, db) != 0 {
		t.Fatalf("most held %d (max 3), left %d", most, held(t, l, db))
	}
}
