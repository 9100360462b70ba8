// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <stdlib.h>
#include <ratelimit.h>

// A calloc'ed array of n initialised rl_hotkey_t, so Go indexes C memory
// only through rlgo_hotkey_at.
static rl_hotkey_t *rlgo_hotkeys_new(size_t n)
{
	rl_hotkey_t *a = calloc(n, sizeof *a);
	for (size_t i = 0; a != NULL && i < n; i++)
		rl_hotkey_init(&a[i]);
	return a;
}

static rl_hotkey_t *rlgo_hotkey_at(rl_hotkey_t *a, size_t i) { return &a[i]; }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// FlagHot marks a decision on a key marked hot (RL_FLAG_HOT; a limit's hot=).
const FlagHot = uint32(C.RL_FLAG_HOT)

// HotKey is one of the busiest keys, as HotKeys reports it (rl_hotkey_t).
type HotKey struct {
	Limit Limit // the limit whose key it is
	Hot   bool  // marked hot by the limit's hot= threshold
	// Key holds the key's first bytes (at most 64); "" until the library
	// has kept them (KeyLen 0). Truncated: the key is longer than Key.
	Key        string
	KeyLen     uint64
	Truncated  bool
	DemandPerS float64 // offered on this node (admitted + denied) per second
	SharePerS  float64 // this node's share of the rate (0 for a local limit)
	FleetPerS  float64 // what hot= is compared with
	Count      uint64  // the sketch's decayed count: the ranking
	CountErr   uint64  // how much of Count may be another key's
}

// HotKeys reports the busiest keys of one limit, highest demand first, at
// most n (rl_hotkeys). A scrape, not a per-request call: for local limits
// it walks the key table.
func (l *Limiter) HotKeys(limit Limit, n int) ([]HotKey, error) {
	return l.hotKeys(limit.id, n)
}

// AllHotKeys reports the busiest keys of every limit, at most n.
func (l *Limiter) AllHotKeys(n int) ([]HotKey, error) {
	return l.hotKeys(-1, n)
}

func (l *Limiter) hotKeys(id C.int, n int) ([]HotKey, error) {
	if n <= 0 || n > 65536 {
		return nil, &Error{Code: ErrRange, Op: "rl_hotkeys", Detail: fmt.Sprintf("n=%d: 1..65536", n)}
	}
	arr := C.rlgo_hotkeys_new(C.size_t(n))
	if arr == nil {
		return nil, &Error{Code: ErrNoMemory, Op: "rl_hotkeys"}
	}
	defer C.free(unsafe.Pointer(arr))
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.rl == nil {
		return nil, ErrClosed
	}
	got := C.rl_hotkeys(l.rl, id, arr, C.size_t(n))
	if got < 0 {
		return nil, &Error{Code: Code(got), Op: "rl_hotkeys"}
	}
	names := map[C.int]string{}
	out := make([]HotKey, 0, int(got))
	for i := 0; i < int(got); i++ {
		hk := C.rlgo_hotkey_at(arr, C.size_t(i))
		name, ok := names[hk.limit]
		if !ok {
			var lim C.rl_limit_t
			C.rl_limit_init_sized(&lim, C.sizeof_rl_limit_t)
			if C.rl_limit_get(l.rl, hk.limit, &lim) == 0 {
				name = C.GoString(&lim.name[0])
			}
			names[hk.limit] = name
		}
		key := C.GoBytes(unsafe.Pointer(&hk.key[0]), C.int(hk.key_kept))
		out = append(out, HotKey{
			Limit: Limit{id: hk.limit, name: name}, Hot: hk.hot != 0,
			Key: string(key), KeyLen: uint64(hk.key_len),
			Truncated:  uint64(hk.key_kept) < uint64(hk.key_len),
			DemandPerS: float64(hk.demand_per_s), SharePerS: float64(hk.share_per_s),
			FleetPerS: float64(hk.fleet_per_s), Count: uint64(hk.count),
			CountErr: uint64(hk.count_err),
		})
	}
	return out, nil
}
