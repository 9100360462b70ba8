// SPDX-License-Identifier: MIT

package ratelimit

import (
	"crypto/sha256"
	"net"
	"net/http"
	"strconv"
)

// Middleware limits every request before Next sees it: a request is charged
// to Key(r) (DefaultKey when nil); a denied one gets 429 Too Many Requests
// with the rate-limit headers and a small JSON body, an admitted one reaches
// Next with the same headers set. When the check itself fails (a closed
// Limiter), OnError decides; nil serves the request (fail open).
type Middleware struct {
	Limiter *Limiter
	Limit   Limit
	Next    http.Handler
	Key     func(*http.Request) string
	OnError func(w http.ResponseWriter, r *http.Request, err error)
}

// Handler wraps next with a Middleware for one limit.
func (l *Limiter) Handler(limit Limit, next http.Handler) *Middleware {
	return &Middleware{Limiter: l, Limit: limit, Next: next}
}

// DefaultKey is the request's X-API-Key, else its client address (the
// connection's: behind a proxy, use a Key that reads your proxy's header).
func DefaultKey(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Keys are untrusted: an empty or over-long one is charged as its SHA-256,
// so it can neither fail the check nor share a bucket with another key.
func boundedKey(k string) string {
	if len(k) == 0 || len(k) > MaxKeyLen {
		sum := sha256.Sum256([]byte(k))
		return "sha256:" + string(sum[:])
	}
	return k
}

func (m *Middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	keyf := m.Key
	if keyf == nil {
		keyf = DefaultKey
	}
	d, err := m.Limiter.Allow(m.Limit, boundedKey(keyf(r)))
	if err != nil {
		if m.OnError != nil {
			m.OnError(w, r, err)
			return
		}
		m.Next.ServeHTTP(w, r)
		return
	}
	d.SetHeaders(w.Header())
	if !d.Allowed {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":"rate limited","limit":` + strconv.Quote(d.Policy) +
			`,"retry_after_ms":` + strconv.FormatInt(d.RetryAfter.Milliseconds(), 10) + "}\n"))
		return
	}
	m.Next.ServeHTTP(w, r)
}
