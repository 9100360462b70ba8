// SPDX-License-Identifier: MIT

package ratelimit

import (
	"errors"
	"testing"
	"time"
)

func TestRefundUpdateRemove(t *testing.T) {
	l := newLocal(t)
	api, err := l.AddLimit("name=api rate=1/h burst=2")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if d, _ := l.Allow(api, "k"); !d.Allowed {
			t.Fatalf("check %d denied", i)
		}
	}
	if d, _ := l.Allow(api, "k"); d.Allowed {
		t.Fatal("past the burst")
	}
	if err = l.Refund(api, "k", 1); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Allow(api, "k"); !d.Allowed {
		t.Fatal("the refunded token is not there")
	}
	if err = l.UpdateLimit(api, "name=api rate=1/h burst=5"); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Allow(api, "fresh"); !d.Allowed || d.Burst != 5 {
		t.Fatalf("after the update: %+v", d)
	}
	if err = l.UpdateLimit(api, "name=api rate=fast"); !errors.Is(err, ErrSpec) {
		t.Fatalf("a bad spec: %v", err)
	}
	if err = l.Refund(api, "", 1); !errors.Is(err, ErrKeyLen) {
		t.Fatalf("an empty key: %v", err)
	}
	if err = l.RemoveLimit(api); err != nil {
		t.Fatal(err)
	}
	if _, err = l.Allow(api, "k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a removed limit: %v", err)
	}
	if err = l.RemoveLimit(api); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed twice: %v", err)
	}
}

func TestGetLimit(t *testing.T) {
	l := newLocal(t)
	api, _ := l.AddLimit("name=api rate=5/10s burst=7 mode=local shadow=1 max_keys=100")
	got, err := l.GetLimit(api)
	if err != nil || got.Name != "api" || got.Rate != 5 || got.Window != 10*time.Second ||
		got.Burst != 7 || got.Mode != 1 || !got.Shadow || got.MaxKeys != 100 {
		t.Fatalf("GetLimit: %+v, %v", got, err)
	}
	if _, err = l.GetLimit(Limit{id: 4242}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown limit: %v", err)
	}
}

func TestCheckMulti(t *testing.T) {
	l := newLocal(t)
	a, _ := l.AddLimit("name=a rate=1/h burst=2")
	b, _ := l.AddLimit("name=b rate=1/h burst=1")
	m, err := l.CheckMulti([]Request{{a, "k", 1}, {b, "k", 1}})
	if err != nil || !m.Allowed || m.DeniedIndex != 2 || len(m.Decisions) != 2 ||
		!m.Decisions[0].Allowed || m.Decisions[1].Policy != "b" {
		t.Fatalf("first: %+v, %v", m, err)
	}
	m, err = l.CheckMulti([]Request{{a, "k", 1}, {b, "k", 1}}) // b is spent: nothing charged
	if err != nil || m.Allowed || m.DeniedIndex != 1 || m.Decisions[1].Allowed {
		t.Fatalf("second: %+v, %v", m, err)
	}
	if d, _ := l.Allow(a, "k"); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("a's second token was charged by a denied batch: %+v", d)
	}
	if _, err = l.CheckMulti([]Request{{a, "k", 1}, {a, "", 1}}); !errors.Is(err, ErrKeyLen) {
		t.Fatalf("an empty key: %v", err)
	}
	if _, err = l.CheckMulti(nil); !errors.Is(err, ErrRange) {
		t.Fatalf("no requests: %v", err)
	}
}
