// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <stdlib.h>
#include <ratelimit.h>
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// FlagDuplicate marks a quota answer repeated for a request id seen before
// (RL_FLAG_DUPLICATE): nothing was charged.
const FlagDuplicate = uint32(C.RL_FLAG_DUPLICATE)

// QuotaAmountMax is the largest quota amount and charge (2^53 - 1).
const QuotaAmountMax = uint64(C.RL_QUOTA_AMOUNT_MAX)

// Quota names one quota of a Limiter, as AddQuota returns it.
type Quota struct {
	id   C.int
	name string
}

// Name is the quota's name, as its spec gave it.
func (q Quota) Name() string { return q.name }

// ID is the library's id of the quota (never reused while the Limiter lives).
func (q Quota) ID() int { return int(q.id) }

// QuotaResult is the answer to a quota charge or read (rl_quota_result_t).
type QuotaResult struct {
	Allowed   bool
	Amount    uint64    // the quota's amount per period
	Used      uint64    // charged in the period, after this charge (0 when Degraded)
	Remaining uint64    // Amount - Used
	Reset     time.Time // the period's end (Redis's clock; the node's when Degraded)
	Flags     uint32    // FlagDuplicate, FlagDegraded
	Duplicate bool      // a request id seen before: its first answer, nothing charged
	Degraded  bool      // Redis did not answer in QuotaTimeout: on_failure decided
}

// AddQuota adds a quota from a spec ("name=plan amount=1000000
// period=month dedup=24h on_failure=open"; rl_quota_parse, rl_quota_add).
// A quota's usage lives in Redis: a local-only Limiter refuses it
// (ErrNotSupported).
func (l *Limiter) AddQuota(spec string) (Quota, error) {
	var q C.rl_quota_t
	cspec := C.CString(spec)
	defer C.free(unsafe.Pointer(cspec))
	var msg [256]C.char
	if rc := C.rl_quota_parse(&q, cspec, &msg[0], C.size_t(len(msg))); rc < 0 {
		return Quota{}, &Error{Code: Code(rc), Op: "rl_quota_parse", Detail: C.GoString(&msg[0])}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return Quota{}, ErrClosed
	}
	id := C.rl_quota_add(l.rl, &q)
	if id < 0 {
		return Quota{}, &Error{Code: Code(id), Op: "rl_quota_add", Detail: spec}
	}
	return Quota{id: id, name: C.GoString(&q.name[0])}, nil
}

// RemoveQuota removes a quota (rl_quota_remove). Its usage stays in Redis
// until it expires; its journaled charges not yet replayed are lost.
func (l *Limiter) RemoveQuota(q Quota) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return ErrClosed
	}
	if rc := C.rl_quota_remove(l.rl, q.id); rc < 0 {
		return &Error{Code: Code(rc), Op: "rl_quota_remove", Detail: q.name}
	}
	return nil
}

// ChargeQuota charges cost units of q to key, once per requestID
// (rl_quota_charge): the same id again within the quota's dedup window (a
// retry, from any node of the fleet) gets the first answer with Duplicate
// set and charges nothing. It blocks at most Config.QuotaTimeout; when
// Redis does not answer, the quota's on_failure decides (Degraded). A
// timeout does not mean "not charged": retry with the same requestID.
func (l *Limiter) ChargeQuota(q Quota, key, requestID string, cost uint64) (QuotaResult, error) {
	return l.quotaCall(q, key, requestID, cost, true)
}

// GetQuota reads key's usage of q in the current period, charging nothing
// (rl_quota_get); Allowed while Remaining > 0. It blocks like ChargeQuota.
func (l *Limiter) GetQuota(q Quota, key string) (QuotaResult, error) {
	return l.quotaCall(q, key, "", 0, false)
}

func (l *Limiter) quotaCall(q Quota, key, rid string, cost uint64, charge bool) (QuotaResult, error) {
	var r C.rl_quota_result_t
	C.rl_quota_result_init_sized(&r, C.sizeof_rl_quota_result_t)
	// C copies: the call blocks on the network while Go may move nothing
	// it was handed, and an empty string still needs a valid pointer.
	ckey := C.CBytes([]byte(key + "\x00"))
	defer C.free(ckey)
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return QuotaResult{}, ErrClosed
	}
	var rc C.int
	op := "rl_quota_get"
	if charge {
		op = "rl_quota_charge"
		cid := C.CBytes([]byte(rid + "\x00"))
		defer C.free(cid)
		rc = C.rl_quota_charge(l.rl, q.id, ckey, C.size_t(len(key)), C.uint64_t(cost), cid,
			C.size_t(len(rid)), &r)
	} else {
		rc = C.rl_quota_get(l.rl, q.id, ckey, C.size_t(len(key)), &r)
	}
	if rc < 0 {
		return QuotaResult{}, &Error{Code: Code(rc), Op: op,
			Detail: fmt.Sprintf("quota %s, key of %d bytes", q.name, len(key))}
	}
	flags := uint32(r.flags)
	return QuotaResult{
		Allowed: rc == C.RL_ALLOW, Amount: uint64(r.amount), Used: uint64(r.used),
		Remaining: uint64(r.remaining), Reset: time.UnixMilli(int64(r.reset_unix_ms)),
		Flags: flags, Duplicate: flags&FlagDuplicate != 0, Degraded: flags&FlagDegraded != 0,
	}, nil
}
