package block

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestStatsRoundTrip writes the stats of random columns (counters near and
// past 2^53 in their sum, two-decimal gauges, negative values, NaN, -0,
// infinities) and reads them back bit for bit, as colStats computes them;
// the relative forms (integer and decimal), the last-is-max form and the
// plain form must each occur.
func TestStatsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	var relInts, relDec, lastIsMax, plain int
	for round := range 3000 {
		n := 1 + rng.IntN(300)
		vals := make([]float64, n)
		x := float64(rng.IntN(1 << 20))
		switch round % 6 {
		case 0: // counter of integers
			for i := range vals {
				x += float64(rng.IntN(5000))
				vals[i] = x
			}
		case 1: // counter near 2^53: the sum leaves int64's reach of first × count
			x = 1<<53 - float64(rng.IntN(1<<20)) - 1
			for i := range vals {
				vals[i] = x
				x = math.Min(x+float64(rng.IntN(3)), 1<<53-1)
			}
		case 2: // two-decimal gauge, maybe negative
			for i := range vals {
				vals[i] = float64(rng.IntN(200000)-100000) / 100
			}
		case 3: // integer gauge around a level
			for i := range vals {
				vals[i] = float64(-5000 + rng.IntN(10000))
			}
		case 4: // specials among decimals
			sp := []float64{math.NaN(), math.Copysign(0, -1), math.Inf(1), math.Inf(-1), 0.1 + 0.2}
			for i := range vals {
				vals[i] = float64(rng.IntN(1000)) / 10
				if rng.IntN(10) == 0 {
					vals[i] = sp[rng.IntN(len(sp))]
				}
			}
		default: // arbitrary floats
			for i := range vals {
				vals[i] = rng.NormFloat64() * 1e6
			}
		}
		enc := appendStats(nil, vals)
		d := decbuf{b: enc}
		var v colView
		v.count = n
		if err := d.readStats(0, &v); err != nil || d.err != nil || len(d.b) != 0 {
			t.Fatalf("round %d: %v, %v, %d bytes left", round, err, d.err, len(d.b))
		}
		mn, mx, sum := colStats(vals)
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"first", v.first, vals[0]}, {"last", v.last, vals[n-1]}, {"min", v.min, mn}, {"max", v.max, mx}, {"sum", v.sum, sum}} {
			if math.Float64bits(c.got) != math.Float64bits(c.want) {
				t.Fatalf("round %d (mask %#x): %s %v, want %v; values %v", round, enc[0], c.name, c.got, c.want, vals)
			}
		}
		mask := enc[0]
		switch {
		case mask&statRelative != 0 && mask&statInts != 0:
			relInts++
		case mask&statRelative != 0:
			relDec++
		default:
			plain++
		}
		if mask&statLastIsMax != 0 {
			lastIsMax++
		}
	}
	if relInts == 0 || relDec == 0 || lastIsMax == 0 || plain == 0 {
		t.Fatalf("relative integer %d, relative decimal %d, last is max %d, plain %d: a form is missing", relInts, relDec, lastIsMax, plain)
	}
	t.Logf("relative integer %d, relative decimal %d, last is max %d, plain %d", relInts, relDec, lastIsMax, plain)
}
