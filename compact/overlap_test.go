package compact

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// model applies the sources' samples in order, later ones replacing earlier ones at the same timestamp,
// and returns every series' samples in time order.
func model(srcs ...[]block.Group) map[string][]sample {
	byT := map[string]map[int64]float64{}
	for _, gs := range srcs {
		for _, g := range gs {
			for _, tab := range g.Tables {
				for _, c := range tab.Columns {
					l := g.Members[c.Member].String()
					if byT[l] == nil {
						byT[l] = map[int64]float64{}
					}
					for i, r := range c.Rows {
						byT[l][tab.Timestamps[r]] = c.Values[i]
					}
				}
			}
			for _, l := range g.Members {
				if byT[l.String()] == nil {
					byT[l.String()] = map[int64]float64{}
				}
			}
		}
	}
	out := map[string][]sample{}
	for l, m := range byT {
		s := []sample{}
		for t, v := range m {
			s = append(s, sample{t, v})
		}
		slices.SortFunc(s, func(a, b sample) int { return int(a.t - b.t) })
		out[l] = s
	}
	return out
}

// checkModel compares every series of b with want.
func checkModel(t *testing.T, b *block.Block, want map[string][]sample) {
	t.Helper()
	got := seriesOf(t, b)
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}
	var it chunkenc.Iterator
	n := 0
	for l, w := range want {
		id, ok := got[l]
		if !ok {
			t.Fatalf("series %s missing", l)
		}
		var s []sample
		s, it = collect(t, b, id, it)
		equalSamples(t, l, s, w)
		checkStats(t, b, id, s, l)
		n += len(w)
	}
	if b.Meta().Stats.NumSamples != uint64(n) {
		t.Fatalf("meta counts %d samples, want %d", b.Meta().Stats.NumSamples, n)
	}
}

func TestMergeOverlapping(t *testing.T) {
	x, y, z := labels.FromStrings("__name__", "x"), labels.FromStrings("__name__", "y"), labels.FromStrings("__name__", "z")
	h := labels.FromStrings("__name__", "h")
	rows := func(n int) []int32 {
		r := make([]int32, n)
		for i := range r {
			r[i] = int32(i)
		}
		return r
	}
	seq := func(from, step int64, n int) []int64 {
		ts := make([]int64, n)
		for i := range ts {
			ts[i] = from + int64(i)*step
		}
		return ts
	}
	vals := func(n int, f func(i int) float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = f(i)
		}
		return v
	}
	stale := math.Float64frombits(staleNaN)
	// A: x, y aligned at 0..90; y also on its own at 105 and 110.
	a := []block.Group{
		{Key: "g", Members: []labels.Labels{x, y}, Tables: []block.Table{
			{Timestamps: seq(0, 10, 10), Columns: []block.Column{
				{Member: 0, Rows: rows(10), Values: vals(10, func(i int) float64 { return float64(i) })},
				{Member: 1, Rows: rows(10), Values: vals(10, func(i int) float64 { return 100 + float64(i) })},
			}},
			{Timestamps: []int64{105, 110}, Columns: []block.Column{{Member: 1, Rows: rows(2), Values: []float64{1, 1}}}},
		}},
		{Key: "h", Members: []labels.Labels{h}, Tables: []block.Table{
			{Timestamps: seq(0, 10, 3), Columns: []block.Column{{Member: 0, Rows: rows(3), Values: []float64{1, 2, 3}}}},
		}},
	}
	// B: y, x, z aligned at 50..140: y identical to A where both have samples, x different;
	// x on its own at 20 (A has 2 there) and 35 (new); y aligned at 110 (A has it on its own).
	b := []block.Group{
		{Key: "g", Members: []labels.Labels{y, x, z}, Tables: []block.Table{
			{Timestamps: seq(50, 10, 10), Columns: []block.Column{
				{Member: 0, Rows: rows(10), Values: vals(10, func(i int) float64 { return 105 + float64(i) })},
				{Member: 1, Rows: rows(10), Values: vals(10, func(i int) float64 { return -float64(i) })},
				{Member: 2, Rows: []int32{0, 9}, Values: []float64{stale, math.Inf(-1)}},
			}},
			{Timestamps: []int64{20, 35}, Columns: []block.Column{{Member: 1, Rows: rows(2), Values: []float64{99, math.Copysign(0, -1)}}}},
		}},
	}
	dir := t.TempDir()
	ba := writeBlock(t, dir, 0, 1000, a)
	bb := writeBlock(t, dir, 0, 1100, b)

	mab := mergeBlocks(t, []*block.Block{ba, bb})
	want := model(a, b)
	checkModel(t, mab, want)
	// Spot checks of the model itself.
	if ys := want[y.String()]; len(ys) != 10+5+2-1 || ys[5].v != 105 {
		t.Fatalf("model of y: %v", ys)
	}
	if xs := want[x.String()]; xs[2] != (sample{20, 99}) {
		t.Fatalf("model of x: %v", xs)
	}
	if m := mab.Meta(); m.MinTime != 0 || m.MaxTime != 1100 || m.Stats.NumGroups != 2 {
		t.Fatalf("meta %+v", m)
	}

	mba := mergeBlocks(t, []*block.Block{bb, ba})
	checkModel(t, mba, model(b, a))
	// x at 50 is A's 5 when A is listed last, B's -0 when B is.
	for _, c := range []struct {
		b *block.Block
		v float64
	}{{mab, 0}, {mba, 5}} {
		id := seriesOf(t, c.b)[x.String()]
		s, _ := collect(t, c.b, id, nil)
		i := slices.IndexFunc(s, func(s sample) bool { return s.t == 50 })
		if i < 0 || s[i].v != c.v {
			t.Fatalf("x at 50: %v, want %v", s, c.v)
		}
	}
}

// TestMergeOverlappingRandom merges a block with a perturbed copy of itself and a block shifted by half
// its range: identical samples appear once, conflicting ones come from the source listed last.
func TestMergeOverlappingRandom(t *testing.T) {
	const span = 2 * hour
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			a, _ := genSources(rand.New(rand.NewPCG(seed, 1)), 1, span, 5)
			b, _ := genSources(rand.New(rand.NewPCG(seed, 1)), 1, span, 5)
			rng := rand.New(rand.NewPCG(seed, 2))
			for _, g := range b[0] {
				for _, tab := range g.Tables {
					for ci := range tab.Columns {
						c := &tab.Columns[ci]
						for i := range c.Values {
							if rng.IntN(10) == 0 {
								c.Values[i] = float64(rng.IntN(1000))
							}
						}
						if rng.IntN(3) == 0 { // B lacks the member's later samples
							n := rng.IntN(len(c.Rows) + 1)
							c.Rows, c.Values = c.Rows[:n], c.Values[:n]
						}
					}
				}
			}
			c, _ := genSources(rand.New(rand.NewPCG(seed, 3)), 1, span, 5)
			for _, g := range c[0] {
				for _, tab := range g.Tables {
					for i := range tab.Timestamps {
						tab.Timestamps[i] += span / 2
					}
				}
			}
			dir := t.TempDir()
			ba := writeBlock(t, dir, 0, span, a[0])
			bb := writeBlock(t, dir, 0, span, b[0])
			bc := writeBlock(t, dir, span/2, span+span/2, c[0])
			m := mergeBlocks(t, []*block.Block{ba, bb, bc})
			checkModel(t, m, model(a[0], b[0], c[0]))
			m2 := mergeBlocks(t, []*block.Block{bc, bb, ba})
			checkModel(t, m2, model(c[0], b[0], a[0]))
			// Identical sources: the merge holds each sample once.
			m3 := mergeBlocks(t, []*block.Block{ba, ba})
			if m3.Meta().Stats.NumSamples != ba.Meta().Stats.NumSamples || m3.Meta().Stats.NumSeries != ba.Meta().Stats.NumSeries {
				t.Fatalf("merging a block with itself: %+v, source %+v", m3.Meta().Stats, ba.Meta().Stats)
			}
			checkModel(t, m3, model(a[0]))
		})
	}
}

func TestMergeErrors(t *testing.T) {
	if _, err := Merge(t.TempDir(), nil, block.WriteOptions{}); err == nil {
		t.Fatal("Merge of no blocks succeeded")
	}
}
