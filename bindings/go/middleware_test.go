// SPDX-License-Identifier: MIT

package ratelimit

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMiddleware(t *testing.T) {
	l := newLocal(t)
	api, _ := l.AddLimit("name=api rate=1/h burst=3")
	var served int
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		_, _ = io.WriteString(w, "ok")
	})
	srv := httptest.NewServer(l.Handler(api, next))
	defer srv.Close()
	get := func(key string) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var codes []int
	var last *http.Response
	for i := 0; i < 4; i++ {
		last = get("k1")
		codes = append(codes, last.StatusCode)
		if i < 3 {
			last.Body.Close()
		}
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 200 || codes[3] != 429 || served != 3 {
		t.Fatalf("codes %v, served %d", codes, served)
	}
	h := last.Header
	if h.Get("Retry-After") != "3600" || h.Get("RateLimit-Policy") != `"api";q=1;w=3600` ||
		h.Get("X-RateLimit-Remaining") != "0" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("429 headers: %v", h)
	}
	var body struct {
		Error        string `json:"error"`
		Limit        string `json:"limit"`
		RetryAfterMs int64  `json:"retry_after_ms"`
	}
	if err := json.NewDecoder(last.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	last.Body.Close()
	if body.Error != "rate limited" || body.Limit != "api" || body.RetryAfterMs <= 3500000 {
		t.Fatalf("429 body: %+v", body)
	}
	ok := get("k2") // another key, its own bucket; headers on an admitted response too
	ok.Body.Close()
	if ok.StatusCode != 200 || ok.Header.Get("X-RateLimit-Remaining") != "2" || ok.Header.Get("Retry-After") != "" {
		t.Fatalf("k2: %d %v", ok.StatusCode, ok.Header)
	}
	// Without a key: the client address. Long keys: their SHA-256.
	for i, want := range []int{200, 200, 200, 429} {
		r := get("")
		r.Body.Close()
		if r.StatusCode != want {
			t.Fatalf("by address, request %d: %d", i, r.StatusCode)
		}
	}
	long := strings.Repeat("a", 5000)
	if r := get(long); r.StatusCode != 200 {
		t.Fatalf("long key: %d", r.StatusCode)
	}
}

func TestMiddlewareOnError(t *testing.T) {
	l, _ := New(Config{})
	api, _ := l.AddLimit("name=api rate=1/s")
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	m := l.Handler(api, next)
	l.Close() // every check now fails with ErrClosed
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 204 {
		t.Fatalf("fail-open: %d", rec.Code)
	}
	var seen error
	m.OnError = func(w http.ResponseWriter, r *http.Request, err error) {
		seen = err
		w.WriteHeader(503)
	}
	rec = httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 503 || seen != ErrClosed {
		t.Fatalf("OnError: %d %v", rec.Code, seen)
	}
}
