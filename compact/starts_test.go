package compact

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// stPattern returns a start timestamp for each of the time-ordered ts, of a
// random pattern: none, a cumulative counter restarting now and then, deltas
// (the previous sample's time), or a mixture with unset stretches.
func stPattern(rng *rand.Rand, ts []int64) []int64 {
	sts := make([]int64, len(ts))
	kind := rng.IntN(4)
	var start int64
	for i, t := range ts {
		switch kind {
		case 1:
			if i == 0 || rng.IntN(40) == 0 {
				start = t - 1 - int64(rng.IntN(5000))
			}
			sts[i] = start
		case 2:
			sts[i] = t - 15000
			if i > 0 {
				sts[i] = ts[i-1]
			}
		case 3:
			switch rng.IntN(6) {
			case 0:
				sts[i] = 0
			case 1:
				start = t - int64(1+rng.IntN(100))
				sts[i] = start
			case 2:
				sts[i] = t - 1000
			default:
				sts[i] = start
			}
		}
	}
	return sts
}

// seriesTimes returns the time-ordered sample timestamps of every series of gs, and its labels.
func seriesTimes(gs []block.Group) (map[string][]int64, map[string]labels.Labels) {
	ts, ls := map[string][]int64{}, map[string]labels.Labels{}
	for _, g := range gs {
		for _, tab := range g.Tables {
			for _, c := range tab.Columns {
				l := g.Members[c.Member]
				ls[l.String()] = l
				for _, r := range c.Rows {
					ts[l.String()] = append(ts[l.String()], tab.Timestamps[r])
				}
			}
		}
	}
	for _, s := range ts {
		slices.Sort(s)
	}
	return ts, ls
}

// startsFor builds the runs of gs's series from st (series, t → start timestamp), in label order.
func startsFor(gs []block.Group, st func(l string, t int64) int64) []block.SeriesStarts {
	ts, ls := seriesTimes(gs)
	var out []block.SeriesStarts
	for l, s := range ts {
		var rs starts.Runs
		prev := int64(math.MinInt64)
		for _, t := range s {
			rs.Append(prev, t, st(l, t))
			prev = t
		}
		if rs.HasST() {
			out = append(out, block.SeriesStarts{Labels: ls[l], Runs: rs})
		}
	}
	slices.SortFunc(out, func(a, b block.SeriesStarts) int { return labels.Compare(a.Labels, b.Labels) })
	return out
}

// randomSTs gives the series of gs random start timestamps: series → t → st.
func randomSTs(rng *rand.Rand, gs []block.Group) map[string]map[int64]int64 {
	ts, _ := seriesTimes(gs)
	keys := make([]string, 0, len(ts))
	for l := range ts {
		keys = append(keys, l)
	}
	slices.Sort(keys) // deterministic
	out := map[string]map[int64]int64{}
	for _, l := range keys {
		sts := stPattern(rng, ts[l])
		out[l] = map[int64]int64{}
		for i, t := range ts[l] {
			out[l][t] = sts[i]
		}
	}
	return out
}

func lookupST(m map[string]map[int64]int64) func(string, int64) int64 {
	return func(l string, t int64) int64 { return m[l][t] }
}

func writeSTBlock(t testing.TB, dir string, mint, maxt int64, gs []block.Group, ss []block.SeriesStarts) *block.Block {
	t.Helper()
	meta, err := block.Write(dir, mint, maxt, block.Groups(gs), block.WriteOptions{Starts: func(yield func(*block.SeriesStarts) error) error {
		for i := range ss {
			if err := yield(&ss[i]); err != nil {
				return err
			}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := block.Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// checkSTs compares the start timestamp of every sample of b with want and
// returns how many samples have one.
func checkSTs(t *testing.T, b *block.Block, want func(l string, t int64) int64) int {
	t.Helper()
	var it chunkenc.Iterator
	n := 0
	for id := range uint32(b.NumSeries()) {
		l, err := b.Labels(id)
		if err != nil {
			t.Fatal(err)
		}
		it = b.Iterator(id, math.MinInt64, math.MaxInt64, it)
		for it.Next() != chunkenc.ValNone {
			if got, w := it.AtST(), want(l.String(), it.AtT()); got != w {
				t.Fatalf("%s sample at %d: st %d, want %d", l, it.AtT(), got, w)
			}
			if it.AtST() != 0 {
				n++
			}
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	return n
}

// TestMergeStartsAdjacent merges adjacent blocks: every sample keeps its
// start timestamp, and a series' runs are its sources' one after the other.
func TestMergeStartsAdjacent(t *testing.T) {
	const span = 2 * hour
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 31))
			srcs, _ := genSources(rng, 3, span, 6)
			var all []block.Group
			for _, gs := range srcs {
				all = append(all, gs...)
			}
			st := randomSTs(rng, all) // over the whole series: counters run across blocks
			dir := t.TempDir()
			var bs []*block.Block
			for i, gs := range srcs {
				bs = append(bs, writeSTBlock(t, dir, int64(i)*span, int64(i+1)*span, gs, startsFor(gs, lookupST(st))))
			}
			m := mergeBlocks(t, []*block.Block{bs[2], bs[0], bs[1]}) // listed order does not matter
			if n := checkSTs(t, m, lookupST(st)); n < 500 {
				t.Fatalf("only %d samples with a start timestamp", n)
			}
			for id := range uint32(m.NumSeries()) {
				l, _ := m.Labels(id)
				var want starts.Runs
				for _, b := range bs {
					want = append(want, b.Starts(l)...)
				}
				if got := m.Starts(l); !slices.Equal(got, want) {
					t.Fatalf("%s: runs %v, want the sources' %v", l, got, want)
				}
			}
			// Blocks without start timestamps merge into a block without.
			plain := mergeBlocks(t, []*block.Block{writeBlock(t, dir, 0, span, srcs[0]), writeBlock(t, dir, span, 2*span, srcs[1])})
			if plain.NumStartSeries() != 0 || plain.Meta().Stats.NumStartSeries != 0 {
				t.Fatal("start timestamps out of nowhere")
			}
		})
	}
}

// TestMergeStartsOverlapping merges a block, a perturbed copy of it with
// other start timestamps, and a block shifted by half its range: each sample
// has the start timestamp of the source listed last that holds it.
func TestMergeStartsOverlapping(t *testing.T) {
	const span = 2 * hour
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			a, _ := genSources(rand.New(rand.NewPCG(seed, 1)), 1, span, 5)
			b, _ := genSources(rand.New(rand.NewPCG(seed, 1)), 1, span, 5)
			rng := rand.New(rand.NewPCG(seed, 2))
			for _, g := range b[0] {
				for _, tab := range g.Tables {
					for ci := range tab.Columns {
						if c := &tab.Columns[ci]; rng.IntN(3) == 0 { // B lacks the member's later samples
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
			gs := [][]block.Group{a[0], b[0], c[0]}
			sts := make([]map[string]map[int64]int64, 3)
			dir := t.TempDir()
			bs := make([]*block.Block, 3)
			for i := range gs {
				sts[i] = randomSTs(rng, gs[i])
				bs[i] = writeSTBlock(t, dir, int64(i/2)*span/2, int64(i/2)*span/2+span, gs[i], startsFor(gs[i], lookupST(sts[i])))
			}
			// want: the start timestamp the source listed last with a sample at t gives it.
			want := func(order []int) func(string, int64) int64 {
				return func(l string, t int64) int64 {
					for k := len(order) - 1; k >= 0; k-- {
						if st, ok := sts[order[k]][l][t]; ok {
							return st
						}
					}
					panic(fmt.Sprintf("%s: no source has a sample at %d", l, t))
				}
			}
			differ := 0 // samples whose start timestamp differs between sources
			for l, byT := range sts[0] {
				for t, st := range byT {
					if o, ok := sts[1][l][t]; ok && o != st {
						differ++
					}
				}
			}
			if differ < 100 {
				t.Fatalf("only %d samples with conflicting start timestamps", differ)
			}
			for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}} {
				srcs := []*block.Block{bs[order[0]], bs[order[1]], bs[order[2]]}
				m := mergeBlocks(t, srcs)
				checkModel(t, m, model(gs[order[0]], gs[order[1]], gs[order[2]]))
				if n := checkSTs(t, m, want(order)); n < 500 {
					t.Fatalf("order %v: only %d samples with a start timestamp", order, n)
				}
			}
			// A block merged with itself keeps its runs.
			m := mergeBlocks(t, []*block.Block{bs[0], bs[0]})
			checkSTs(t, m, lookupST(sts[0]))
			for id := range uint32(m.NumSeries()) {
				l, _ := m.Labels(id)
				if got, w := m.Starts(l), bs[0].Starts(l); !slices.Equal(got, w) {
					t.Fatalf("%s: runs %v, want %v", l, got, w)
				}
			}
		})
	}
}

// TestRewriteKeepsStarts: after a tombstone rewrite every sample left has its start timestamp.
func TestRewriteKeepsStarts(t *testing.T) {
	const span = 2 * hour
	rng := rand.New(rand.NewPCG(7, 33))
	gss, want := genSources(rng, 1, span, 7)
	gs := gss[0]
	st := randomSTs(rng, gs)
	dir := t.TempDir()
	src := writeSTBlock(t, dir, 0, span, gs, startsFor(gs, lookupST(st)))
	del := randomDeletions(rng, gs, span, "g01", "g02", span/4, span/2)
	out := t.TempDir()
	rm, err := Rewrite(out, src, deletedBy(del), block.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := block.Open(filepath.Join(out, rm.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	checkModel(t, b, withoutDeleted(want, del, gs))
	if n := checkSTs(t, b, lookupST(st)); n < 500 {
		t.Fatalf("only %d samples with a start timestamp", n)
	}
	if b.NumStartSeries() != src.NumStartSeries() {
		t.Fatalf("%d start series, source %d", b.NumStartSeries(), src.NumStartSeries())
	}
}
