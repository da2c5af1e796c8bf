package pushdown

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// BenchmarkRanged measures the step loop of a range function alone over one
// series already loaded: 3 h of a counter at 15 s with jittered timestamps
// and a reset, 5 m windows, step 60 s (the shape of a full-span dashboard
// panel), summed into one group; rate-regular has exact 15 s timestamps.
func BenchmarkRanged(b *testing.B) {
	const n = 720
	r := rand.New(rand.NewSource(1))
	ts, vs := make([]int64, n), make([]float64, n)
	v := 0.0
	for i := range ts {
		ts[i] = int64(i)*15_000 + r.Int63n(50)
		v += r.Float64() * 10
		if i == n/2 {
			v = 1
		}
		vs[i] = v
	}
	// The same samples at exact 15 s, as Prometheus's scrapes land once it
	// has adjusted their timestamps.
	regular := make([]int64, n)
	for i := range regular {
		regular[i] = int64(i) * 15_000
	}
	// The same again but one sample a millisecond later: a series of
	// another group, whose windows are planned again.
	other := slices.Clone(regular)
	other[n/2]++
	g := grid{start: 300_000, end: ts[n-1], step: 60_000, lookback: 300_000}
	for _, fn := range []string{"rate", "increase", "delta", "max_over_time", "avg_over_time", "rate-regular", "rate-regular-unshared"} {
		b.Run(fn, func(b *testing.B) {
			ts, alt := ts, ts
			switch fn {
			case "rate-regular":
				fn, ts, alt = "rate", regular, regular
			case "rate-regular-unshared":
				fn, ts, alt = "rate", regular, other
			}
			w := &worker{n: &node{op: parser.SUM, fn: fn, rng: 300_000}, g: g, steps: g.steps(), vs: vs}
			acc := make([]acc, w.steps)
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				// Series of one group share their sample times (the plan of
				// their windows); rate-regular-unshared alternates two groups.
				if w.ts = ts; k%2 == 1 {
					w.ts = alt
				}
				k++
				w.ranged(acc)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*w.steps), "ns/window")
		})
	}
}

// BenchmarkDropStale measures the stale-marker scan of one loaded series
// (3 h at 15 s) that has none, as nearly every series has.
func BenchmarkDropStale(b *testing.B) {
	const n = 720
	ts, vs := make([]int64, n), make([]float64, n)
	for i := range ts {
		ts[i], vs[i] = int64(i)*15_000, float64(i)*1.5
	}
	w := &worker{}
	for b.Loop() {
		w.ts, w.vs = ts, vs
		w.dropStale()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
}
