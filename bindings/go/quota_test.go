// SPDX-License-Identifier: MIT

package ratelimit

import (
	"errors"
	"testing"
	"time"
)

func quotaNode(t *testing.T, url string) *Limiter {
	t.Helper()
	l, err := New(Config{RedisURL: url, KeySecret: []byte("go-quota-secret-0123456789"),
		NodeID: "quota-node", KeyPrefix: "goq", LogQuiet: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A charge is counted once per request id: a retry gets the first answer,
// flagged a duplicate, on the node that made it and on another node; the
// usage is Redis's, and a charge past the amount is denied.
func TestQuotaOncePerRequestID(t *testing.T) {
	url := redisServer(t)
	a, b := quotaNode(t, url), quotaNode(t, url)
	qa, err := a.AddQuota("name=plan amount=5 period=day dedup=1h")
	if err != nil {
		t.Fatal(err)
	}
	qb, err := b.AddQuota("name=plan amount=5 period=day dedup=1h")
	if err != nil {
		t.Fatal(err)
	}
	if qa.Name() != "plan" {
		t.Fatalf("name %q", qa.Name())
	}
	r, err := a.ChargeQuota(qa, "tenant", "req-1", 2)
	if err != nil || !r.Allowed || r.Used != 2 || r.Remaining != 3 || r.Amount != 5 || r.Duplicate || r.Degraded {
		t.Fatalf("first charge: %+v, %v", r, err)
	}
	if !r.Reset.After(time.Now()) || r.Reset.After(time.Now().Add(25*time.Hour)) {
		t.Fatalf("the period ends at %v", r.Reset)
	}
	for _, l := range []*Limiter{a, b} { // retries, on either node
		q := qa
		if l == b {
			q = qb
		}
		r, err = l.ChargeQuota(q, "tenant", "req-1", 2)
		if err != nil || !r.Allowed || !r.Duplicate || r.Flags&FlagDuplicate == 0 || r.Used != 2 {
			t.Fatalf("a retry: %+v, %v", r, err)
		}
	}
	if r, err = b.ChargeQuota(qb, "tenant", "req-2", 3); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("filling it: %+v, %v", r, err)
	}
	if r, err = a.ChargeQuota(qa, "tenant", "req-3", 1); err != nil || r.Allowed || r.Used != 5 {
		t.Fatalf("past the amount: %+v, %v", r, err)
	}
	if r, err = a.GetQuota(qa, "tenant"); err != nil || r.Allowed || r.Used != 5 || r.Remaining != 0 {
		t.Fatalf("GetQuota: %+v, %v", r, err)
	}
	if r, err = a.GetQuota(qa, "other"); err != nil || !r.Allowed || r.Used != 0 {
		t.Fatalf("another key: %+v, %v", r, err)
	}
	s, err := a.Stats()
	if err != nil || s.QuotaCharges != 3 || s.QuotaDuplicates != 1 {
		t.Fatalf("stats: %+v, %v", s, err)
	}
	if _, err = a.ChargeQuota(qa, "tenant", "req-4", 6); !errors.Is(err, ErrCost) {
		t.Fatalf("cost above the amount: %v", err)
	}
	if _, err = a.ChargeQuota(qa, "tenant", "", 1); !errors.Is(err, ErrRange) {
		t.Fatalf("an empty request id: %v", err)
	}
	if _, err = a.ChargeQuota(qa, "", "req-5", 1); !errors.Is(err, ErrKeyLen) {
		t.Fatalf("an empty key: %v", err)
	}
	if _, err = a.AddQuota("name=plan amount=9"); !errors.Is(err, ErrExist) {
		t.Fatalf("a second quota named plan: %v", err)
	}
	if err = a.RemoveQuota(qa); err != nil {
		t.Fatal(err)
	}
	if _, err = a.ChargeQuota(qa, "tenant", "req-6", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a removed quota: %v", err)
	}
	if err = a.RemoveQuota(qa); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removed twice: %v", err)
	}
}

func TestQuotaRefusals(t *testing.T) {
	l := newLocal(t)
	_, err := l.AddQuota("name=p amount=10 period=fortnight")
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrSpec || e.Op != "rl_quota_parse" {
		t.Fatalf("a bad period: %v", err)
	}
	if _, err = l.AddQuota("name=p amount=10 on_failure=local"); !errors.Is(err, ErrMode) {
		t.Fatalf("on_failure=local: %v", err)
	}
	if _, err = l.AddQuota("name=p amount=10"); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("a quota on a local-only Limiter: %v", err)
	}
	l.Close()
	if _, err = l.AddQuota("name=p amount=10"); err != ErrClosed {
		t.Fatalf("after Close: %v", err)
	}
}
