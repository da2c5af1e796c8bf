package head

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/model/value"
)

// TestFreezeEncodings freezes columns of every shape (constant, decimal,
// arbitrary floats, NaN and staleness markers, -0, gaps) and checks that the
// frozen chunk, whatever encoding it picked per column, yields exactly the
// appended values at the appended rows, and that frozen chunks are smaller
// than the XOR-only encoding for constant and decimal columns.
func TestFreezeEncodings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows = 120
	gens := []func(i int) (float64, bool){
		func(int) (float64, bool) { return 1, true },                                   // constant
		func(i int) (float64, bool) { return float64(1000 + 7*i), true },               // integer counter
		func(int) (float64, bool) { return math.Round(rng.Float64()*1e4) / 100, true }, // two-decimal gauge
		func(int) (float64, bool) { return rng.NormFloat64(), true },                   // arbitrary floats
		func(i int) (float64, bool) { return math.Float64frombits(value.StaleNaN), i%3 == 0 },
		func(i int) (float64, bool) { return math.Copysign(0, -1), i%2 == 0 }, // -0 with gaps
		func(i int) (float64, bool) { return float64(i), i > 10 && i < 50 },   // a run
		func(i int) (float64, bool) { return 5, i%7 != 0 },                    // constant with gaps
		func(i int) (float64, bool) { return math.NaN(), true },               // plain NaN
	}
	b := newChunkBuilder(len(gens))
	want := make([][]struct {
		row int
		v   float64
	}, len(gens))
	for i := 0; i < rows; i++ {
		r := &row{t: int64(i) * 15000, vals: make([]float64, len(gens)), present: make([]uint64, 1)}
		for c, g := range gens {
			if v, ok := g(i); ok {
				r.vals[c] = v
				r.present[0] |= 1 << uint(c)
				want[c] = append(want[c], struct {
					row int
					v   float64
				}{i, v})
			}
		}
		b.appendRow(r)
	}
	xorBytes := 0
	for i := range b.cols {
		cb := &b.cols[i]
		xorBytes += len(cb.vals.Bytes(b.stream(cb))) // a constant column's stream as XOR would write it
	}
	ch := b.freeze(nil)
	if len(ch.data) >= xorBytes {
		t.Errorf("frozen data %d bytes, XOR alone %d", len(ch.data), xorBytes)
	}
	kinds := map[colKind]int{}
	for c := range gens {
		cd := ch.col(c)
		if cd == nil {
			t.Fatalf("column %d missing", c)
		}
		kinds[cd.kind]++
		var d valDecoder
		d.reset(ch, cd)
		bm := ch.presence(cd)
		r := int(cd.first)
		for i, w := range want[c] {
			if r = nextPresent(bm, r); r != w.row {
				t.Fatalf("column %d value %d: row %d, want %d", c, i, r, w.row)
			}
			if !d.next() {
				t.Fatalf("column %d: %d values, want %d (err %v)", c, i, len(want[c]), d.error())
			}
			if got := d.at(); math.Float64bits(got) != math.Float64bits(w.v) {
				t.Fatalf("column %d row %d: %x, want %x", c, r, math.Float64bits(got), math.Float64bits(w.v))
			}
			r++
		}
		if d.next() {
			t.Fatalf("column %d: more values than appended", c)
		}
	}
	if kinds[colConst] < 3 || kinds[colDecimal] < 2 || kinds[colXOR] < 1 {
		t.Errorf("encodings chosen %v, want constants, decimals and XOR", kinds)
	}
}
