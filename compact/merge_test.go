package compact

import (
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tandem-tsdb/tandem/tsdb/block"
)

const staleNaN = 0x7ff0000000000002

type sample struct {
	t int64
	v float64
}

// valueGen produces one member's values over time.
type valueGen struct {
	kind int
	c    float64
}

var specials = []float64{math.Float64frombits(staleNaN), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, math.NaN(),
	math.Float64frombits(0x7ff8dead00000001), math.MaxFloat64, math.SmallestNonzeroFloat64, 1.5}

func (g *valueGen) next(rng *rand.Rand) float64 {
	switch g.kind {
	case 0: // integer counter
		g.c += float64(rng.IntN(2000))
		return g.c
	case 1: // 2-decimal gauge
		return float64(rng.IntN(200000)-100000) / 100
	case 2: // special floats
		return specials[rng.IntN(len(specials))]
	case 3: // random bits
		return math.Float64frombits(rng.Uint64())
	case 4: // constant
		return 42
	default: // float counter with staleness markers
		g.c += rng.Float64()
		if rng.IntN(15) == 0 {
			return math.Float64frombits(staleNaN)
		}
		return g.c
	}
}

// genSources builds the groups of n adjacent blocks of width span starting at 0: members join and
// leave, move between the shared table and tables of their own (within and across blocks), group
// "g00" exists only in the middle block, and values include staleness markers, ±Inf, -0 and NaNs.
// want holds every series' samples in time order.
func genSources(rng *rand.Rand, n int, span int64, ngroups int) (srcs [][]block.Group, want map[string][]sample) {
	want = map[string][]sample{}
	srcs = make([][]block.Group, n)
	const step = 15000
	for gi := 0; gi < ngroups; gi++ {
		key := fmt.Sprintf("g%02d", gi)
		nm := 2 + rng.IntN(7)
		var members []labels.Labels
		for m := 0; m < nm; m++ {
			b := labels.NewBuilder(labels.EmptyLabels())
			b.Set("__name__", fmt.Sprintf("metric_%d", rng.IntN(3)))
			b.Set("group", key)
			b.Set("idx", fmt.Sprint(m))
			if rng.IntN(2) == 0 {
				b.Set("mode", []string{"idle", "user", "system"}[rng.IntN(3)])
			}
			members = append(members, b.Labels())
		}
		jitter := rng.IntN(3) == 0
		total := int(int64(n) * span / step)
		join := make([]int, nm)
		leave := make([]int, nm)
		gens := make([]valueGen, nm)
		for m := range members {
			join[m], leave[m] = 0, total
			if rng.IntN(2) == 0 {
				join[m] = rng.IntN(total)
			}
			if rng.IntN(2) == 0 {
				leave[m] = join[m] + rng.IntN(total-join[m]+1)
			}
			gens[m] = valueGen{kind: rng.IntN(6), c: float64(rng.IntN(1000))}
		}
		for bi := 0; bi < n; bi++ {
			if gi == 0 && bi != n/2 {
				continue
			}
			g := block.Group{Key: key}
			shared := block.Table{}
			var extra []block.Table
			// mode per member in this block: 0 aligned, 1 unaligned, 2 aligned then unaligned, 3 unaligned then aligned.
			modes := make([]int, nm)
			for m := range modes {
				modes[m] = []int{0, 0, 1, 2, 3}[rng.IntN(5)]
			}
			cols := make([]block.Column, nm)
			own := make([]block.Table, nm)
			present := make([]bool, nm)
			rows0 := int(span / step)
			for k := 0; k < rows0; k++ {
				gk := bi*rows0 + k
				t := int64(bi)*span + int64(k)*step
				if jitter && k > 0 && k < rows0-1 {
					t += int64(rng.IntN(1000)) - 500
				}
				row := int32(len(shared.Timestamps))
				shared.Timestamps = append(shared.Timestamps, t)
				for m := range members {
					if gk < join[m] || gk >= leave[m] || rng.IntN(40) == 0 {
						continue
					}
					present[m] = true
					v := gens[m].next(rng)
					aligned := modes[m] == 0 || (modes[m] == 2 && k < rows0/2) || (modes[m] == 3 && k >= rows0/3)
					if aligned {
						cols[m].Rows = append(cols[m].Rows, row)
						cols[m].Values = append(cols[m].Values, v)
						want[members[m].String()] = append(want[members[m].String()], sample{t, v})
					} else {
						own[m].Timestamps = append(own[m].Timestamps, t+7)
						if len(own[m].Columns) == 0 {
							own[m].Columns = []block.Column{{}}
						}
						c := &own[m].Columns[0]
						c.Rows = append(c.Rows, int32(len(own[m].Timestamps)-1))
						c.Values = append(c.Values, v)
						want[members[m].String()] = append(want[members[m].String()], sample{t + 7, v})
					}
				}
			}
			// members of the group in this block: the present ones, plus sometimes an idle one, in random order.
			perm := rng.Perm(nm)
			idx := make([]int, nm)
			for _, m := range perm {
				if present[m] || rng.IntN(4) == 0 {
					idx[m] = len(g.Members)
					g.Members = append(g.Members, members[m])
				} else {
					idx[m] = -1
				}
			}
			for m := range members {
				if idx[m] < 0 {
					continue
				}
				if len(cols[m].Rows) > 0 {
					cols[m].Member = idx[m]
					shared.Columns = append(shared.Columns, cols[m])
				}
				if len(own[m].Timestamps) > 0 {
					own[m].Columns[0].Member = idx[m]
					extra = append(extra, own[m])
				}
			}
			g.Tables = append([]block.Table{shared}, extra...)
			srcs[bi] = append(srcs[bi], g)
		}
	}
	for bi := range srcs {
		rng.Shuffle(len(srcs[bi]), func(i, j int) { srcs[bi][i], srcs[bi][j] = srcs[bi][j], srcs[bi][i] })
	}
	return srcs, want
}

func writeBlock(t testing.TB, dir string, mint, maxt int64, gs []block.Group) *block.Block {
	t.Helper()
	meta, err := block.Write(dir, mint, maxt, block.Groups(gs), block.WriteOptions{})
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

func mergeBlocks(t testing.TB, srcs []*block.Block) *block.Block {
	t.Helper()
	dir := t.TempDir()
	meta, err := Merge(dir, srcs, block.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := block.Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	return b
}

func collect(t testing.TB, b *block.Block, id uint32, it chunkenc.Iterator) ([]sample, chunkenc.Iterator) {
	t.Helper()
	it = b.Iterator(id, math.MinInt64, math.MaxInt64, it)
	var out []sample
	for it.Next() == chunkenc.ValFloat {
		ts, v := it.At()
		out = append(out, sample{ts, v})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out, it
}

func equalSamples(t testing.TB, what string, got, want []sample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d samples, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].t != want[i].t || math.Float64bits(got[i].v) != math.Float64bits(want[i].v) {
			t.Fatalf("%s: sample %d: (%d, %#x), want (%d, %#x)", what, i, got[i].t, math.Float64bits(got[i].v), want[i].t, math.Float64bits(want[i].v))
		}
	}
}

// seriesOf returns every series of b by labels string.
func seriesOf(t testing.TB, b *block.Block) map[string]uint32 {
	t.Helper()
	out := map[string]uint32{}
	for id := 0; id < b.NumSeries(); id++ {
		l, err := b.Labels(uint32(id))
		if err != nil {
			t.Fatal(err)
		}
		out[l.String()] = uint32(id)
	}
	return out
}

func dirSize(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		n += fi.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMergeAdjacent(t *testing.T) {
	const span = 2 * hour
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			statsChecked = 0
			gss, want := genSources(rng, 3, span, 6)
			var srcs []*block.Block
			var srcBytes int64
			var srcSamples uint64
			var srcChunks uint64
			dir := t.TempDir()
			for i, gs := range gss {
				b := writeBlock(t, dir, int64(i)*span, int64(i+1)*span, gs)
				srcs = append(srcs, b)
				srcBytes += dirSize(t, b.Dir())
				srcSamples += b.Meta().Stats.NumSamples
				srcChunks += b.Meta().Stats.NumChunks
			}
			// List the sources out of time order: Merge must not depend on it.
			listed := []*block.Block{srcs[2], srcs[0], srcs[1]}
			mb := mergeBlocks(t, listed)
			meta := mb.Meta()
			if meta.MinTime != 0 || meta.MaxTime != 3*span || meta.Compaction.Level != 2 {
				t.Fatalf("meta %+v", meta)
			}
			wantSources := []string{srcs[0].Meta().ULID, srcs[1].Meta().ULID, srcs[2].Meta().ULID}
			slices.Sort(wantSources)
			if !slices.Equal(meta.Compaction.Sources, wantSources) {
				t.Fatalf("sources %v, want %v", meta.Compaction.Sources, wantSources)
			}
			if meta.Stats.NumSamples != srcSamples || meta.Stats.NumGroups != 6 {
				t.Fatalf("stats %+v, sources hold %d samples", meta.Stats, srcSamples)
			}
			if meta.Stats.NumChunks > srcChunks {
				t.Fatalf("merged block has %d chunks, sources %d", meta.Stats.NumChunks, srcChunks)
			}

			// Series: the union of the sources', with the concatenation of their samples.
			merged := seriesOf(t, mb)
			union := map[string]bool{}
			var it chunkenc.Iterator
			var all []string
			for _, b := range srcs {
				for l := range seriesOf(t, b) {
					if !union[l] {
						all = append(all, l)
					}
					union[l] = true
				}
			}
			if len(merged) != len(union) || uint64(len(union)) != meta.Stats.NumSeries {
				t.Fatalf("merged block has %d series, sources %d", len(merged), len(union))
			}
			for _, l := range all {
				id, ok := merged[l]
				if !ok {
					t.Fatalf("series %s missing from the merged block", l)
				}
				var cat []sample
				for _, b := range srcs { // time order
					if sid, ok := seriesOf(t, b)[l]; ok {
						var s []sample
						s, it = collect(t, b, sid, it)
						cat = append(cat, s...)
					}
				}
				var got []sample
				got, it = collect(t, mb, id, it)
				equalSamples(t, l, got, cat)
				equalSamples(t, l+" (generated)", got, want[l])
				checkStats(t, mb, id, got, l)
			}

			// Postings and label queries: the same series as the union of the sources'.
			matchers := [][]*labels.Matcher{
				{labels.MustNewMatcher(labels.MatchEqual, "__name__", "metric_1")},
				{labels.MustNewMatcher(labels.MatchEqual, "group", "g00")},
				{labels.MustNewMatcher(labels.MatchRegexp, "mode", "idle|user")},
				{labels.MustNewMatcher(labels.MatchNotEqual, "mode", ""), labels.MustNewMatcher(labels.MatchRegexp, "idx", "[0-3]")},
				{labels.MustNewMatcher(labels.MatchNotRegexp, "group", "g0[12]")},
			}
			for _, ms := range matchers {
				want := map[string]bool{}
				for _, b := range srcs {
					for _, l := range postingsLabels(t, b, ms) {
						want[l] = true
					}
				}
				got := postingsLabels(t, mb, ms)
				if len(got) != len(want) {
					t.Fatalf("Postings(%v): %d series, sources %d", ms, len(got), len(want))
				}
				for _, l := range got {
					if !want[l] {
						t.Fatalf("Postings(%v): %s not in the sources", ms, l)
					}
				}
			}
			for _, name := range []string{"__name__", "group", "mode", "idx"} {
				want := map[string]bool{}
				for _, b := range srcs {
					vs, err := b.LabelValues(name)
					if err != nil {
						t.Fatal(err)
					}
					for _, v := range vs {
						want[v] = true
					}
				}
				got, err := mb.LabelValues(name)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("LabelValues(%s) = %v, sources %v", name, got, want)
				}
			}

			// A member's own tables of successive sources are concatenated: fewer tables than the sources hold.
			srcTables, mergedTables := 0, countTables(t, mb)
			for _, b := range srcs {
				srcTables += countTables(t, b)
			}
			if mergedTables >= srcTables {
				t.Fatalf("merged block has %d tables, the sources %d", mergedTables, srcTables)
			}

			if statsChecked < len(all) {
				t.Fatalf("only %d chunk statistics of %d series checked", statsChecked, len(all))
			}

			mergedBytes := dirSize(t, mb.Dir())
			srcBPS := float64(srcBytes) / float64(srcSamples)
			mergedBPS := float64(mergedBytes) / float64(srcSamples)
			t.Logf("%d samples, %d series: sources %.3f bytes/sample (%d chunks), merged %.3f bytes/sample (%d chunks)",
				srcSamples, len(union), srcBPS, srcChunks, mergedBPS, meta.Stats.NumChunks)
			if mergedBPS > srcBPS {
				t.Fatalf("merged block %.3f bytes/sample, worse than the sources' %.3f", mergedBPS, srcBPS)
			}
		})
	}
}

func postingsLabels(t testing.TB, b *block.Block, ms []*labels.Matcher) []string {
	t.Helper()
	ids, err := b.Postings(ms...)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, id := range ids {
		l, err := b.Labels(id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l.String())
	}
	return out
}

// checkStats checks the merged block's chunk statistics against the series' samples: counts add up,
// and each chunk that no other chunk of the series overlaps in time summarises exactly its window.
// statsChecked counts the chunk statistics checkStats compared with samples.
var statsChecked int

func checkStats(t testing.TB, b *block.Block, id uint32, ss []sample, what string) {
	t.Helper()
	st, err := b.ChunkStats(id, math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	checked := 0
	for i, c := range st {
		n += c.Count
		overlapped := false
		for j, o := range st {
			overlapped = overlapped || (j != i && o.MinT <= c.MaxT && o.MaxT >= c.MinT)
		}
		if overlapped {
			continue
		}
		checked++
		lo, _ := slices.BinarySearchFunc(ss, c.MinT, func(s sample, t int64) int { return int(s.t - t) })
		hi, _ := slices.BinarySearchFunc(ss, c.MaxT+1, func(s sample, t int64) int { return int(s.t - t) })
		w := ss[lo:hi]
		if len(w) != c.Count || math.Float64bits(w[0].v) != math.Float64bits(c.First) || math.Float64bits(w[len(w)-1].v) != math.Float64bits(c.Last) {
			t.Fatalf("%s: chunk stat %+v disagrees with its %d samples", what, c, len(w))
		}
		mn, mx, sum := math.NaN(), math.NaN(), math.NaN()
		seen := false
		for _, s := range w {
			if math.IsNaN(s.v) {
				continue
			}
			if !seen {
				mn, mx, sum, seen = s.v, s.v, s.v, true
				continue
			}
			mn, mx, sum = min(mn, s.v), max(mx, s.v), sum+s.v
		}
		eq := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
		if !eq(mn, c.Min) || !eq(mx, c.Max) || !eq(sum, c.Sum) {
			t.Fatalf("%s: chunk stat %+v: min %v max %v sum %v", what, c, mn, mx, sum)
		}
	}
	statsChecked += checked
	if n != len(ss) {
		t.Fatalf("%s: chunk stats count %d samples, the series has %d", what, n, len(ss))
	}
}

// countTables returns the number of non-empty tables of b's groups.
func countTables(t testing.TB, b *block.Block) int {
	t.Helper()
	ins, err := b.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range ins.Groups {
		for _, tab := range g.Tables {
			if tab.Chunks > 0 {
				n++
			}
		}
	}
	return n
}
