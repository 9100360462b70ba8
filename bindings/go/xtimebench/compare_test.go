// SPDX-License-Identifier: MIT

package xtimebench

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/time/rate"

	ratelimit "libratelimit/go"
)

// Benchmarks beside golang.org/x/time/rate, the usual in-process Go limiter:
// one key, 1000 keys (x/time needs a map of limiters under a mutex, the
// usual pattern), and all cores on 1000 keys. Limits are high enough that
// nearly every call is admitted: this measures the call, not the refusals.
// TestCompareWithXTimeRate runs each pair in one process and prints ns/op
// and the ratio (RL_GO_BENCH=1; bench/README.md has a run). Timing is
// printed, never asserted.

const benchKeys = 1000

var keyNames = func() []string {
	k := make([]string, benchKeys)
	for i := range k {
		k[i] = "user-" + strconv.Itoa(i)
	}
	return k
}()

func benchLimiter(b *testing.B) (*ratelimit.Limiter, ratelimit.Limit) {
	l, err := ratelimit.New(ratelimit.Config{MaxKeys: 4 * benchKeys})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	lim, err := l.AddLimit("name=bench rate=100000000/s burst=1000000000")
	if err != nil {
		b.Fatal(err)
	}
	return l, lim
}

type keyedRate struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func (k *keyedRate) allow(key string) bool {
	k.mu.Lock()
	l, ok := k.m[key]
	if !ok {
		l = rate.NewLimiter(rate.Limit(1e8), 1e9)
		k.m[key] = l
	}
	k.mu.Unlock()
	return l.Allow()
}

func benchOurs(keys int, parallel bool) func(*testing.B) {
	return func(b *testing.B) {
		l, lim := benchLimiter(b)
		b.ReportAllocs()
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := l.Allow(lim, keyNames[i%keys]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
			return
		}
		for i := 0; i < b.N; i++ {
			if _, err := l.Allow(lim, keyNames[i%keys]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchXTime(keys int, parallel bool) func(*testing.B) {
	return func(b *testing.B) {
		if keys == 1 && !parallel {
			l := rate.NewLimiter(rate.Limit(1e8), 1e9)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.Allow()
			}
			return
		}
		k := &keyedRate{m: make(map[string]*rate.Limiter)}
		b.ReportAllocs()
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					k.allow(keyNames[i%keys])
					i++
				}
			})
			return
		}
		for i := 0; i < b.N; i++ {
			k.allow(keyNames[i%keys])
		}
	}
}

var benchCases = []struct {
	name     string
	keys     int
	parallel bool
}{
	{"single_key", 1, false},
	{"1k_keys", benchKeys, false},
	{"parallel_1k_keys", benchKeys, true},
}

func BenchmarkAllow(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name+"/libratelimit", benchOurs(c.keys, c.parallel))
		b.Run(c.name+"/x_time_rate", benchXTime(c.keys, c.parallel))
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func nsPerOp(r testing.BenchmarkResult) float64 {
	return float64(r.T.Nanoseconds()) / float64(r.N)
}

func TestCompareWithXTimeRate(t *testing.T) {
	if os.Getenv("RL_GO_BENCH") != "1" {
		t.Skip("set RL_GO_BENCH=1 to run the comparison (about 10 s)")
	}
	// Rounds of the two side by side, so load on a shared machine hits
	// both alike; medians of each and of the per-round ratios.
	const rounds = 5
	if f := flag.Lookup("test.benchtime"); f != nil {
		old := f.Value.String()
		_ = f.Value.Set("300ms")
		defer func() { _ = f.Value.Set(old) }()
	}
	fmt.Printf("libratelimit (cgo) vs golang.org/x/time/rate, %s %s/%s, GOMAXPROCS=%d, library %s\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), ratelimit.Version())
	fmt.Printf("%d rounds of each pair, medians\n", rounds)
	fmt.Printf("%-18s %14s %14s %8s\n", "case", "libratelimit", "x/time/rate", "ratio")
	for _, c := range benchCases {
		var ours, theirs, ratios []float64
		for r := 0; r < rounds; r++ {
			o := nsPerOp(testing.Benchmark(benchOurs(c.keys, c.parallel)))
			x := nsPerOp(testing.Benchmark(benchXTime(c.keys, c.parallel)))
			ours, theirs, ratios = append(ours, o), append(theirs, x), append(ratios, o/x)
		}
		fmt.Printf("%-18s %11.1f ns %11.1f ns %7.2fx\n", c.name, median(ours), median(theirs),
			median(ratios))
	}
	fmt.Println("ratio: libratelimit's ns/op over x/time/rate's (below 1: libratelimit is faster)")
}
