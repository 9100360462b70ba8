// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <ratelimit.h>
*/
import "C"

import "time"

// Health states (Stats.Health; RL_HEALTH_*).
const (
	HealthHealthy    = int(C.RL_HEALTH_HEALTHY)
	HealthDegraded   = int(C.RL_HEALTH_DEGRADED)
	HealthRecovering = int(C.RL_HEALTH_RECOVERING)
)

// Stats are an instance's counters: every field of rl_stats_t, in its
// order, milliseconds and microseconds as time.Duration
// (include/ratelimit.h documents each).
type Stats struct {
	Admitted, Denied, ShadowDenied, NoSlot, Degraded uint64
	KeysLive, KeysCapacity, Reclaimed                uint64
	TableSlots, TableBytes                           uint64
	Limits                                           int

	// The global tier and its health (Health* constants; healthy when local-only).
	Health                                      int
	HealthSince                                 time.Duration // how long in the current state
	TimeHealthy, TimeDegraded, TimeRecovering   time.Duration
	HealthTransitions                           uint64
	DegradedOpen, DegradedClosed, DegradedLocal uint64 // degraded decisions by on_failure
	SyncRounds, SyncRoundsFailed                uint64
	SyncReports, SyncErrors                     uint64
	SyncConnected                               bool
	HealthSinceRound                            uint64
	SyncErrConnect, SyncErrTimeout              uint64 // sync errors by class
	SyncErrNoScript, SyncErrReadOnly            uint64
	SyncErrLoading, SyncErrBusy, SyncErrOOM     uint64
	SyncErrAuth, SyncErrOther                   uint64
	SyncRoundsCompleted                         uint64
	SyncRoundSum, SyncRoundLast, SyncRoundMax   time.Duration // completed rounds' latency
	SyncReportsLastRound                        uint64

	// The fleet as the node registry shows it, and the default log.
	FleetNodes, FleetSplitRounds, FleetSplitFingerprints uint64
	LogDropped                                           uint64

	// The quota ledger (rl_quota_charge).
	QuotaCharges, QuotaDuplicates, QuotaDegraded uint64
	QuotaJournaled, QuotaReplayed, QuotaLost     uint64
	QuotaJournalLen                              uint64
}

// LimitStats are one limit's counters: every field of rl_limit_stats_t.
// The sync window's figures (SyncKeys .. NodesMax) are 0 for a local limit.
type LimitStats struct {
	Admitted, Denied, ShadowDenied, NoSlot, Degraded uint64
	KeysLive                                         uint64
	SyncKeys, OvershootKeys                          uint64
	UsageMaxPpm, ShareSkewMaxPpm                     uint32 // ppm of the rate / of an even split
	NodesMax                                         uint32
	DegradedSpells                                   uint64 // runs of degraded answers, each logged
	// In-flight limits (0 for a rate limit): permits held now (all keys),
	// the limit now (adaptive: as it moved), permits reclaimed past
	// max_hold, and late releases of reclaimed permits.
	Inflight, InflightLimit, InflightReclaimed, InflightLate uint64
}

func msDur(v C.uint64_t) time.Duration { return msDuration(uint64(v)) }

func usDur(v C.uint64_t) time.Duration {
	const max = uint64(1<<63-1) / uint64(time.Microsecond)
	if uint64(v) > max {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(v) * time.Microsecond
}

// Stats reads the instance's counters (rl_stats): for monitoring, not per
// request (it walks the key table).
func (l *Limiter) Stats() (Stats, error) {
	var s C.rl_stats_t
	C.rl_stats_init_sized(&s, C.sizeof_rl_stats_t)
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return Stats{}, ErrClosed
	}
	if rc := C.rl_stats(l.rl, &s); rc < 0 {
		return Stats{}, &Error{Code: Code(rc), Op: "rl_stats"}
	}
	u := func(v C.uint64_t) uint64 { return uint64(v) }
	return Stats{
		Admitted: u(s.admitted), Denied: u(s.denied), ShadowDenied: u(s.shadow_denied),
		NoSlot: u(s.noslot), Degraded: u(s.degraded), KeysLive: u(s.keys_live),
		KeysCapacity: u(s.keys_capacity), Reclaimed: u(s.reclaimed),
		TableSlots: u(s.table_slots), TableBytes: u(s.table_bytes), Limits: int(s.limits),

		Health: int(s.health), HealthSince: msDur(s.health_since_ms),
		TimeHealthy: msDur(s.ms_healthy), TimeDegraded: msDur(s.ms_degraded),
		TimeRecovering: msDur(s.ms_recovering), HealthTransitions: u(s.health_transitions),
		DegradedOpen: u(s.degraded_open), DegradedClosed: u(s.degraded_closed),
		DegradedLocal: u(s.degraded_local),
		SyncRounds:    u(s.sync_rounds), SyncRoundsFailed: u(s.sync_rounds_failed),
		SyncReports: u(s.sync_reports), SyncErrors: u(s.sync_errors),
		SyncConnected: s.sync_connected != 0, HealthSinceRound: u(s.health_since_round),
		SyncErrConnect: u(s.sync_err_connect), SyncErrTimeout: u(s.sync_err_timeout),
		SyncErrNoScript: u(s.sync_err_noscript), SyncErrReadOnly: u(s.sync_err_readonly),
		SyncErrLoading: u(s.sync_err_loading), SyncErrBusy: u(s.sync_err_busy),
		SyncErrOOM: u(s.sync_err_oom), SyncErrAuth: u(s.sync_err_auth),
		SyncErrOther: u(s.sync_err_other), SyncRoundsCompleted: u(s.sync_rounds_completed),
		SyncRoundSum: usDur(s.sync_round_us_sum), SyncRoundLast: usDur(s.sync_round_us_last),
		SyncRoundMax:         usDur(s.sync_round_us_max),
		SyncReportsLastRound: u(s.sync_reports_last_round),

		FleetNodes: u(s.fleet_nodes), FleetSplitRounds: u(s.fleet_split_rounds),
		FleetSplitFingerprints: u(s.fleet_split_fingerprints), LogDropped: u(s.log_dropped),

		QuotaCharges: u(s.quota_charges), QuotaDuplicates: u(s.quota_duplicates),
		QuotaDegraded: u(s.quota_degraded), QuotaJournaled: u(s.quota_journaled),
		QuotaReplayed: u(s.quota_replayed), QuotaLost: u(s.quota_lost),
		QuotaJournalLen: u(s.quota_journal_len),
	}, nil
}

// LimitStats reads one limit's counters (rl_limit_stats; a key-table walk).
func (l *Limiter) LimitStats(limit Limit) (LimitStats, error) {
	var s C.rl_limit_stats_t
	C.rl_limit_stats_init_sized(&s, C.sizeof_rl_limit_stats_t)
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return LimitStats{}, ErrClosed
	}
	if rc := C.rl_limit_stats(l.rl, limit.id, &s); rc < 0 {
		return LimitStats{}, &Error{Code: Code(rc), Op: "rl_limit_stats", Detail: limit.name}
	}
	return LimitStats{
		Admitted: uint64(s.admitted), Denied: uint64(s.denied),
		ShadowDenied: uint64(s.shadow_denied), NoSlot: uint64(s.noslot),
		Degraded: uint64(s.degraded), KeysLive: uint64(s.keys_live),
		SyncKeys: uint64(s.sync_keys), OvershootKeys: uint64(s.overshoot_keys),
		UsageMaxPpm: uint32(s.usage_max_ppm), ShareSkewMaxPpm: uint32(s.share_skew_max_ppm),
		NodesMax: uint32(s.nodes_max), DegradedSpells: uint64(s.degraded_spells),
		Inflight: uint64(s.inflight), InflightLimit: uint64(s.inflight_limit),
		InflightReclaimed: uint64(s.inflight_reclaimed), InflightLate: uint64(s.inflight_late),
	}, nil
}
