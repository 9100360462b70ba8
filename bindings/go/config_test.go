// SPDX-License-Identifier: MIT

package ratelimit

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Every Config field reaches its rl_config_t field: a value out of the
// library's range is refused by rl_open with a message naming that C
// field, and values inside it open.
func TestConfigFieldsReachTheLibrary(t *testing.T) {
	cases := []struct {
		field string
		cfg   Config
	}{
		{"key_ttl_ms", Config{KeyTTL: 10 * time.Millisecond}},
		{"demand_alpha_pct", Config{DemandAlphaPct: 101}},
		{"degrade_after_failures", Config{DegradeAfterFailures: 101}},
		{"recover_after_rounds", Config{RecoverAfterRounds: 101}},
		{"reconnect_max_ms", Config{ReconnectMax: 61 * time.Second}},
		{"degrade_ramp_ms", Config{DegradeRamp: 2 * time.Hour}},
		{"exact_timeout_ms", Config{ExactTimeout: 61 * time.Second}},
		{"exact_pool_size", Config{ExactPoolSize: 65}},
		{"quota_timeout_ms", Config{QuotaTimeout: 61 * time.Second}},
		{"quota_journal_max", Config{QuotaJournalMax: 1000001}},
		{"hotkeys_k", Config{HotkeysK: 1025}},
		{"max_limits", Config{MaxLimits: 5000}},
		{"expected_nodes", Config{ExpectedNodes: 100001}},
		{"max_reservations", Config{MaxReservations: 1048577}},
	}
	for _, c := range cases {
		l, err := New(c.cfg)
		if err == nil {
			l.Close()
			t.Errorf("%s: an out-of-range value opened", c.field)
			continue
		}
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrRange) || !strings.HasPrefix(e.Detail, c.field+":") {
			t.Errorf("%s: got %v, want ErrRange naming %s", c.field, err, c.field)
		}
	}
	l, err := New(Config{KeyTTL: 5 * time.Second, DemandAlphaPct: 50, DegradeAfterFailures: 3,
		RecoverAfterRounds: 4, ReconnectMax: 2 * time.Second, DegradeRamp: 500 * time.Millisecond,
		ExactTimeout: 250 * time.Millisecond, ExactPoolSize: 2, QuotaTimeout: time.Second,
		QuotaJournalMax: -1, HotkeysK: 8, LogQuiet: true})
	if err != nil {
		t.Fatalf("in-range values: %v", err)
	}
	l.Close()
	if _, err := New(Config{ExactPoolSize: -1}); !errors.Is(err, ErrRange) {
		t.Fatalf("a negative ExactPoolSize: %v, want ErrRange", err)
	}
}
