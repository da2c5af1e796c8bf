package encoding

import (
	"math"
	"math/rand/v2"
)

// chunkRows is a realistic head chunk size used by benchmarks and tests.
const chunkRows = 240

// newRand returns a deterministic generator for the given seed.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// scrapeTimestamps returns n millisecond timestamps 15 s apart where about one
// in jitterEvery scrapes is late or early by up to maxJitter ms (0 disables jitter).
func scrapeTimestamps(rng *rand.Rand, n, jitterEvery int, maxJitter int64) []int64 {
	ts := make([]int64, n)
	t := int64(1_700_000_000_000)
	for i := range ts {
		j := int64(0)
		if jitterEvery > 0 && rng.IntN(jitterEvery) == 0 {
			j = rng.Int64N(2*maxJitter+1) - maxJitter
		}
		ts[i] = t + j
		t += 15_000
	}
	return ts
}

// counterValues returns a monotonically increasing counter with a noisy rate,
// as for http_requests_total scraped every 15 s.
func counterValues(rng *rand.Rand, n int) []float64 {
	vs := make([]float64, n)
	v := float64(rng.IntN(1_000_000))
	rate := 20.0
	for i := range vs {
		rate = math.Max(0, rate+rng.NormFloat64())
		v += math.Round(rate * 15 * (0.8 + 0.4*rng.Float64()))
		vs[i] = v
	}
	return vs
}

// gaugeValues returns a random walk rounded to two decimals, as for a
// temperature or load gauge.
func gaugeValues(rng *rand.Rand, n int) []float64 {
	vs := make([]float64, n)
	v := 50.0
	for i := range vs {
		v += rng.NormFloat64()
		vs[i] = math.Round(v*100) / 100
	}
	return vs
}

// randomInt64s returns arbitrary int64 values, mixing extremes, small deltas and full-range noise.
func randomInt64s(rng *rand.Rand, n int) []int64 {
	extremes := []int64{math.MinInt64, math.MaxInt64, 0, -1, 1, math.MinInt64 + 1, math.MaxInt64 - 1}
	ts := make([]int64, n)
	var t int64
	for i := range ts {
		switch rng.IntN(6) {
		case 0:
			t = extremes[rng.IntN(len(extremes))]
		case 1:
			t = int64(rng.Uint64())
		case 2:
			t += rng.Int64N(1<<20) - 1<<19 // around the 20-bit bucket edges
		case 3:
			t += 1 << rng.IntN(63) // any power of two, wrapping
		case 4:
			t -= rng.Int64N(1 << 15)
		default:
			// repeat
		}
		ts[i] = t
	}
	return ts
}

// specialFloats are bit patterns that must survive a round trip.
var specialFloats = []float64{
	math.Float64frombits(0x7ff0000000000002), // Prometheus staleness marker
	math.NaN(),
	math.Float64frombits(0x7ff8000000000001),
	math.Float64frombits(0xfff8000000000000), // negative quiet NaN
	math.Float64frombits(0x7ff0000000000001), // signalling NaN
	math.Copysign(0, -1),
	0,
	math.Inf(1),
	math.Inf(-1),
	math.MaxFloat64,
	-math.MaxFloat64,
	math.SmallestNonzeroFloat64,
	-math.SmallestNonzeroFloat64,
	1, -1, 0.1, 1e308, 1e-308,
}

// randomFloats returns a mix of special floats, arbitrary bit patterns and small changes.
func randomFloats(rng *rand.Rand, n int) []float64 {
	vs := make([]float64, n)
	var v float64
	for i := range vs {
		switch rng.IntN(5) {
		case 0:
			v = specialFloats[rng.IntN(len(specialFloats))]
		case 1:
			v = math.Float64frombits(rng.Uint64())
		case 2:
			v = math.Float64frombits(math.Float64bits(v) ^ 1<<rng.IntN(64))
		case 3:
			v += float64(rng.IntN(100))
		default:
			// repeat
		}
		vs[i] = v
	}
	return vs
}
