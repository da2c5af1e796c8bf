package pushdown

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// refExtrapolated is Prometheus's extrapolatedRate for floats over the
// samples in (rangeStart, right], window by window with nothing carried
// over: the reference rateSteps' memoized durations are checked against.
func refExtrapolated(ts []int64, vs []float64, rangeStart, right int64, rngSeconds float64, counter, isRate bool) (float64, bool) {
	lo, hi := 0, 0
	for lo < len(ts) && ts[lo] <= rangeStart {
		lo++
	}
	for hi = lo; hi < len(ts) && ts[hi] <= right; hi++ {
	}
	if hi-lo < 2 {
		return 0, false
	}
	last := hi - 1
	firstT, lastT, firstV := ts[lo], ts[last], vs[lo]
	result := vs[last] - firstV
	if counter {
		for i := lo + 1; i < hi; i++ {
			if vs[i] < vs[i-1] {
				result += vs[i-1]
			}
		}
	}
	durationToStart := float64(firstT-rangeStart) / 1000
	durationToEnd := float64(right-lastT) / 1000
	sampledInterval := float64(lastT-firstT) / 1000
	averageDurationBetweenSamples := sampledInterval / float64(last-lo)
	extrapolationThreshold := averageDurationBetweenSamples * 1.1
	if durationToStart >= extrapolationThreshold {
		durationToStart = averageDurationBetweenSamples / 2
	}
	if counter {
		durationToZero := durationToStart
		if result > 0 && firstV >= 0 {
			durationToZero = sampledInterval * (firstV / result)
		}
		if durationToZero < durationToStart {
			durationToStart = durationToZero
		}
	}
	if durationToEnd >= extrapolationThreshold {
		durationToEnd = averageDurationBetweenSamples / 2
	}
	factor := 1.0
	if sampledInterval != 0 {
		factor = (sampledInterval + durationToStart + durationToEnd) / sampledInterval
	}
	if isRate {
		factor /= rngSeconds
	}
	return result * factor, true
}

// TestRateStepsMatchesReference: rate, increase and delta, with the window
// durations computed once per distinct window shape and the counter's zero
// clamp decided by a bound where it cannot change the answer, give the bits
// of the window-by-window reference on regular and jittered timestamps,
// counters that start at or near zero (values right at the bound),
// resets, subnormal, huge, NaN and infinite values.
func TestRateStepsMatchesReference(t *testing.T) {
	r := rand.New(rand.NewSource(20))
	values := []func(i int, prev float64) float64{
		func(i int, prev float64) float64 { return prev + math.Round(r.Float64()*1000)/100 }, // a counter from zero
		func(i int, prev float64) float64 { return 1e6 + float64(i)*r.Float64() },            // far from zero
		func(i int, prev float64) float64 { return prev + 5e-324*float64(r.Intn(4)) },        // subnormal
		func(i int, prev float64) float64 { return r.NormFloat64() * 1e300 },                 // huge, with resets
		func(i int, prev float64) float64 { // small increments on a small start: the clamp's bound
			if i == 0 {
				return r.Float64() * 1e-3
			}
			return prev + r.Float64()
		},
		func(i int, prev float64) float64 { // NaN and infinities now and then
			switch r.Intn(20) {
			case 0:
				return math.NaN()
			case 1:
				return math.Inf(1)
			case 2:
				return math.Inf(-1)
			}
			return prev + r.Float64()
		},
		func(i int, prev float64) float64 { // resets
			if r.Intn(10) == 0 {
				return r.Float64()
			}
			return prev + r.Float64()*10
		},
	}
	windows := 0
	shared := &worker{}
	for trial := 0; trial < 3000; trial++ {
		n := 2 + r.Intn(200)
		interval := []int64{15_000, 10_000, 60_000, 1_000}[r.Intn(4)]
		jitter := []int64{0, 0, 3, interval / 2}[r.Intn(4)] // below the interval: times increase
		ts, vs := make([]int64, n), make([]float64, n)
		gen := values[r.Intn(len(values))]
		v := 0.0
		for i := range ts {
			ts[i] = int64(i) * interval
			if jitter > 0 {
				ts[i] += r.Int63n(jitter)
			}
			v = gen(i, v)
			vs[i] = v
		}
		// Windows whose bound is hit exactly: a counter whose first value
		// is the smallest that skips the clamp's division, or just below.
		if trial%5 == 0 && n > 4 {
			vs[0] = 0x1p-3 * vs[n-1]
		}
		rng := []int64{60_000, 300_000, 17_000, 3_600_000}[r.Intn(4)]
		g := grid{start: r.Int63n(rng + 1), end: ts[n-1] + rng, step: []int64{15_000, 60_000, 7_000}[r.Intn(3)]}
		// A second member of the same group: the same sample times, other
		// values, read by the same worker with the plan of the first.
		vs2 := make([]float64, n)
		v = 0
		for i := range vs2 {
			v = gen(i, v)
			vs2[i] = v
		}
		// And a series of another group, read next: the same range and
		// grid, its sample times a little off (the plan is made again).
		ts3 := slices.Clone(ts)
		for i := range ts3 {
			ts3[i] += int64(i % 2)
		}
		for _, e := range []struct {
			fn string
			ts []int64
			vs []float64
		}{{"rate", ts, vs}, {"rate", ts, vs2}, {"rate", ts3, vs}, {"increase", ts3, vs}, {"delta", ts, vs2}, {"increase", ts, vs2}, {"increase", ts3, vs2}} {
			fn, ts, vs := e.fn, e.ts, e.vs
			// One worker for the whole test, as a pooled worker reads series
			// after series: its plan serves the next series only when its
			// sample times, range and grid are the same.
			shared.n, shared.g, shared.steps, shared.ts, shared.vs = &node{op: parser.SUM, fn: fn, rng: rng}, g, g.steps(), ts, vs
			w := shared
			acc := make([]acc, w.steps)
			w.ranged(acc)
			counter, isRate := fn != "delta", fn == "rate"
			for k := range acc {
				right := g.start + int64(k)*g.step
				want, ok := refExtrapolated(ts, vs, right-rng, right, float64(rng)/1000, counter, isRate)
				if ok != acc[k].seen {
					t.Fatalf("trial %d %s step %d: produced %v, want %v", trial, fn, k, acc[k].seen, ok)
				}
				if ok && math.Float64bits(acc[k].v) != math.Float64bits(want) && !(math.IsNaN(want) && math.IsNaN(acc[k].v)) {
					t.Fatalf("trial %d %s step %d: %v, want %v (ts %v, vs %v)", trial, fn, k, acc[k].v, want, ts, vs)
				}
				if ok {
					windows++
				}
			}
		}
	}
	if windows < 100_000 {
		t.Fatalf("only %d windows compared", windows)
	}
	t.Logf("%d windows compared", windows)
}
