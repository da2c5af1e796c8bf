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
