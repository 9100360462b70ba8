// SPDX-License-Identifier: MIT

package ratelimit

/*
#include <stdlib.h>
#include <ratelimit.h>
*/
import "C"

import (
	"net/http"
	"strconv"
	"strings"
	"unsafe"
)

// The same header lines as rl_headers (src/text/headers.c), rendered in Go so a
// request costs no second cgo call; TestHeadersMatchC compares the two.
// RateLimit-Policy and RateLimit follow draft-ietf-httpapi-ratelimit-headers;
// X-RateLimit-Reset is delta seconds; Retry-After only on a refusal.

const sfIntMax = 999999999999999 // RFC 9651: at most 15 digits

func sfInt(v uint64) uint64 {
	if v > sfIntMax {
		return sfIntMax
	}
	return v
}

func msToSecondsUp(ms uint64) uint64 { return ms/1000 + boolU64(ms%1000 != 0) }

func boolU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func sfString(name string) string {
	if name == "" {
		name = "default"
	}
	if len(name) > C.RL_NAME_MAX-1 {
		name = name[:C.RL_NAME_MAX-1]
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
		case c < 0x20 || c > 0x7e:
			c = '_'
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

// HeaderField is one response header.
type HeaderField struct{ Name, Value string }

// HeaderFields are the rate-limit response headers for this decision.
func (d Decision) HeaderFields() []HeaderField {
	name := sfString(d.Policy)
	reset := msToSecondsUp(d.resetMs)
	window := msToSecondsUp(d.windowMs)
	if window == 0 {
		window = 1
	}
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	// On a refusal RateLimit's t is the Retry-After value, as rl_headers
	// renders it: the draft's Retry-After SHOULD NOT end before t.
	retry := msToSecondsUp(d.retryMs)
	if retry == 0 {
		retry = 1
	}
	t := reset
	if !d.Allowed {
		t = retry
	}
	if d.Flags&FlagInflight != 0 {
		// An in-flight decision has no window and no reset (a permit comes
		// back when a request ends): q without w, t only on a refusal.
		rate := name + ";r=" + u(sfInt(d.Remaining))
		if !d.Allowed {
			rate += ";t=" + u(sfInt(retry))
		}
		f := []HeaderField{
			{"RateLimit-Policy", name + ";q=" + u(sfInt(d.Limit))},
			{"RateLimit", rate},
			{"X-RateLimit-Limit", u(d.Limit)},
			{"X-RateLimit-Remaining", u(d.Remaining)},
		}
		if !d.Allowed {
			f = append(f, HeaderField{"Retry-After", u(retry)})
		}
		return f
	}
	f := []HeaderField{
		{"RateLimit-Policy", name + ";q=" + u(sfInt(d.Limit)) + ";w=" + u(sfInt(window))},
		{"RateLimit", name + ";r=" + u(sfInt(d.Remaining)) + ";t=" + u(sfInt(t))},
		{"X-RateLimit-Limit", u(d.Limit)},
		{"X-RateLimit-Remaining", u(d.Remaining)},
		{"X-RateLimit-Reset", u(reset)},
	}
	if !d.Allowed {
		f = append(f, HeaderField{"Retry-After", u(retry)})
	}
	return f
}

// SetHeaders sets the rate-limit headers on h.
func (d Decision) SetHeaders(h http.Header) {
	for _, f := range d.HeaderFields() {
		h[f.Name] = []string{f.Value}
	}
}

// Headers is the header block as rl_headers writes it: "Name: value\r\n" lines.
func (d Decision) Headers() string {
	var b strings.Builder
	for _, f := range d.HeaderFields() {
		b.WriteString(f.Name + ": " + f.Value + "\r\n")
	}
	return b.String()
}

// cHeaders renders d with the C library's rl_headers, for the tests.
func cHeaders(d Decision) string {
	var cd C.rl_decision_t
	C.rl_decision_init_sized(&cd, C.sizeof_rl_decision_t)
	if d.Allowed {
		cd.allowed = C.RL_ALLOW
	}
	cd.limit = C.uint64_t(d.Limit)
	cd.remaining = C.uint64_t(d.Remaining)
	cd.reset_ms = C.uint64_t(d.resetMs)
	cd.retry_after_ms = C.uint64_t(d.retryMs)
	cd.window_ms = C.uint64_t(d.windowMs)
	cd.burst = C.uint64_t(d.Burst)
	cd.flags = C.uint32_t(d.Flags)
	cd.inflight = C.uint64_t(d.Inflight)
	if d.Policy != "" {
		cd.policy = C.CString(d.Policy)
		defer C.free(unsafe.Pointer(cd.policy))
	}
	var buf [1024]C.char
	n := C.rl_headers(&cd, &buf[0], C.size_t(len(buf)))
	if n < 0 {
		return "error " + Code(n).Name()
	}
	return C.GoStringN(&buf[0], n)
}
