package pushdown

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/value"
)

// TestDropStale: the scan removes exactly the stale markers, with their
// timestamps, and keeps every other value (NaNs that are not markers,
// infinities of both signs, which also make a block's sum NaN) in order,
// for every length up to 40 and markers at every position.
func TestDropStale(t *testing.T) {
	stale := math.Float64frombits(value.StaleNaN)
	specials := []float64{stale, math.NaN(), math.Inf(1), math.Inf(-1), 0, -1.5}
	r := rand.New(rand.NewSource(1))
	for n := 0; n <= 40; n++ {
		for trial := 0; trial < 50; trial++ {
			ts, vs := make([]int64, n), make([]float64, n)
			for i := range vs {
				ts[i], vs[i] = int64(i), r.Float64()*100
				if r.Intn(6) == 0 {
					vs[i] = specials[r.Intn(len(specials))]
				}
			}
			var wantT []int64
			var wantV []uint64
			for i, v := range vs {
				if math.Float64bits(v) != value.StaleNaN {
					wantT, wantV = append(wantT, ts[i]), append(wantV, math.Float64bits(v))
				}
			}
			w := &worker{ts: slices.Clone(ts), vs: slices.Clone(vs)}
			w.dropStale()
			gotV := make([]uint64, len(w.vs))
			for i, v := range w.vs {
				gotV[i] = math.Float64bits(v)
			}
			if !slices.Equal(w.ts, wantT) || !slices.Equal(gotV, wantV) {
				t.Fatalf("n=%d: %v %v → %v %v, want %v (bits %x)", n, ts, vs, w.ts, w.vs, wantT, wantV)
			}
		}
	}
}

// TestAppendResets: the counter resets found four values at a time are the
// indexes where a value is below the one before, for every length up to 40
// and values with drops, NaNs, infinities and signed zeros anywhere.
func TestAppendResets(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 1}
	for n := 0; n <= 40; n++ {
		for trial := 0; trial < 50; trial++ {
			vs := make([]float64, n)
			v := 0.0
			for i := range vs {
				switch r := rng.Float64(); {
				case r < 0.1:
					vs[i] = special[rng.Intn(len(special))]
					continue
				case r < 0.2:
					v = rng.Float64() * 5 // a reset, mostly
				default:
					v += rng.Float64() * 3
				}
				vs[i] = v
			}
			var want []int
			for i := 1; i < len(vs); i++ {
				if vs[i] < vs[i-1] {
					want = append(want, i)
				}
			}
			if got := appendResets(nil, vs); !slices.Equal(got, want) {
				t.Fatalf("resets of %v: got %v, want %v", vs, got, want)
			}
		}
	}
}
