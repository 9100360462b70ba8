// SPDX-License-Identifier: MIT

package ratelimit

import (
	"errors"
	"testing"
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
