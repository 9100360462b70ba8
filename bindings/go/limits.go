// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <stdlib.h>
#include <ratelimit.h>

// The key as a Go string, as rlgo_check takes it.
static int rlgo_refund(uintptr_t h, int limit, _GoString_ key, uint32_t cost)
{
	return rl_refund((rl_t *)h, limit, _GoStringPtr(key), _GoStringLen(key), cost);
}
*/
import "C"

import (
	"time"
	"unsafe"
)

// Refund gives n tokens back to (limit, key): the request was not served
// after all (rl_refund). Lock-free, like AllowN.
func (l *Limiter) Refund(limit Limit, key string, n uint32) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return ErrClosed
	}
	if rc := C.rlgo_refund(C.uintptr_t(uintptr(unsafe.Pointer(l.rl))), limit.id, key,
		C.uint32_t(n)); rc < 0 {
		return &Error{Code: Code(rc), Op: "rl_refund", Detail: limit.name}
	}
	return nil
}

// UpdateLimit replaces a limit's parameters from a spec with the same name
// (rl_limit_update); its keys keep their tokens.
func (l *Limiter) UpdateLimit(limit Limit, spec string) error {
	var lim C.rl_limit_t
	C.rl_limit_init_sized(&lim, C.sizeof_rl_limit_t)
	cspec := C.CString(spec)
	defer C.free(unsafe.Pointer(cspec))
	var msg [256]C.char
	if rc := C.rl_limit_parse(&lim, cspec, &msg[0], C.size_t(len(msg))); rc < 0 {
		return &Error{Code: Code(rc), Op: "rl_limit_parse", Detail: C.GoString(&msg[0])}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return ErrClosed
	}
	if rc := C.rl_limit_update(l.rl, limit.id, &lim); rc < 0 {
		return &Error{Code: Code(rc), Op: "rl_limit_update", Detail: spec}
	}
	return nil
}

// RemoveLimit removes a limit (rl_limit_remove); its id answers
// ErrNotFound from then on.
func (l *Limiter) RemoveLimit(limit Limit) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return ErrClosed
	}
	if rc := C.rl_limit_remove(l.rl, limit.id); rc < 0 {
		return &Error{Code: Code(rc), Op: "rl_limit_remove", Detail: limit.name}
	}
	return nil
}

// LimitInfo is a limit's current parameters (rl_limit_get).
type LimitInfo struct {
	Name           string
	Rate           uint64        // tokens per Window
	Window         time.Duration // the rate's period
	Burst          uint64
	Mode           int // 0 global, 1 local, 2 exact, 3 tiered (RL_MODE_*)
	OnFailure      int // -1 the mode's default, 0 local, 1 open, 2 closed (RL_FAIL_*)
	Shadow         bool
	MaxKeys        uint32
	HotPpm         uint32
	DegradedRate   uint64 // 0 with DegradedWindow 0: the library's default
	DegradedWindow time.Duration
}

// GetLimit reads a limit's current parameters (rl_limit_get).
func (l *Limiter) GetLimit(limit Limit) (LimitInfo, error) {
	var lim C.rl_limit_t
	C.rl_limit_init_sized(&lim, C.sizeof_rl_limit_t)
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return LimitInfo{}, ErrClosed
	}
	if rc := C.rl_limit_get(l.rl, limit.id, &lim); rc < 0 {
		return LimitInfo{}, &Error{Code: Code(rc), Op: "rl_limit_get", Detail: limit.name}
	}
	return LimitInfo{
		Name: C.GoString(&lim.name[0]), Rate: uint64(lim.rate.count),
		Window: msDuration(uint64(lim.rate.period_ms)), Burst: uint64(lim.burst),
		Mode: int(lim.mode), OnFailure: int(lim.on_failure), Shadow: lim.shadow != 0,
		MaxKeys: uint32(lim.max_keys), HotPpm: uint32(lim.hot_ppm),
		DegradedRate:   uint64(lim.degraded_rate.count),
		DegradedWindow: msDuration(uint64(lim.degraded_rate.period_ms)),
	}, nil
}
