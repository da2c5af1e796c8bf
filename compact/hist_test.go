package compact

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// hsample is a sample of any kind.
type hsample struct {
	t  int64
	v  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

func (s hsample) String() string {
	switch {
	case s.h != nil:
		return fmt.Sprintf("(%d, %v)", s.t, s.h)
	case s.fh != nil:
		return fmt.Sprintf("(%d, %v)", s.t, s.fh)
	}
	return fmt.Sprintf("(%d, %#x)", s.t, math.Float64bits(s.v))
}

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// sameSample compares two samples bit for bit, every histogram field included.
func sameSample(a, b hsample) bool {
	fs := func(x, y []float64) bool { return slices.EqualFunc(x, y, sameBits) }
	switch {
	case a.t != b.t || (a.h == nil) != (b.h == nil) || (a.fh == nil) != (b.fh == nil):
		return false
	case a.h != nil:
		x, y := a.h, b.h
		return x.CounterResetHint == y.CounterResetHint && x.Schema == y.Schema && sameBits(x.ZeroThreshold, y.ZeroThreshold) &&
			x.ZeroCount == y.ZeroCount && x.Count == y.Count && sameBits(x.Sum, y.Sum) &&
			slices.Equal(x.PositiveSpans, y.PositiveSpans) && slices.Equal(x.NegativeSpans, y.NegativeSpans) &&
			slices.Equal(x.PositiveBuckets, y.PositiveBuckets) && slices.Equal(x.NegativeBuckets, y.NegativeBuckets) &&
			fs(x.CustomValues, y.CustomValues)
	case a.fh != nil:
		x, y := a.fh, b.fh
		return x.CounterResetHint == y.CounterResetHint && x.Schema == y.Schema && sameBits(x.ZeroThreshold, y.ZeroThreshold) &&
			sameBits(x.ZeroCount, y.ZeroCount) && sameBits(x.Count, y.Count) && sameBits(x.Sum, y.Sum) &&
			slices.Equal(x.PositiveSpans, y.PositiveSpans) && slices.Equal(x.NegativeSpans, y.NegativeSpans) &&
			fs(x.PositiveBuckets, y.PositiveBuckets) && fs(x.NegativeBuckets, y.NegativeBuckets) &&
			fs(x.CustomValues, y.CustomValues)
	}
	return sameBits(a.v, b.v)
}

// collectAll reads every sample of series id of b, copying histograms.
func collectAll(t testing.TB, b *block.Block, id uint32) []hsample {
	t.Helper()
	it := b.Iterator(id, math.MinInt64, math.MaxInt64, nil)
	var out []hsample
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		s := hsample{t: it.AtT()}
		switch vt {
		case chunkenc.ValFloat:
			_, s.v = it.At()
		case chunkenc.ValHistogram:
			_, s.h = it.AtHistogram(nil)
		case chunkenc.ValFloatHistogram:
			_, s.fh = it.AtFloatHistogram(nil)
		}
		out = append(out, s)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// hmodel applies the sources' samples in order, later ones replacing earlier
// ones at the same timestamp, without those del names, and returns every
// series' samples in time order (series left without samples are absent).
func hmodel(del map[string][][2]int64, srcs ...[]block.Group) map[string][]hsample {
	byT := map[string]map[int64]hsample{}
	for _, gs := range srcs {
		for _, g := range gs {
			for ti := range g.Tables {
				tab := &g.Tables[ti]
				for _, c := range tab.Columns {
					l := g.Members[c.Member].String()
					if byT[l] == nil {
						byT[l] = map[int64]hsample{}
					}
					for i, r := range c.Rows {
						s := hsample{t: tab.Timestamps[r]}
						switch c.Kind() {
						case block.KindHistogram:
							s.h = c.Histograms[i]
						case block.KindFloatHistogram:
							s.fh = c.FloatHistograms[i]
						default:
							s.v = c.Values[i]
						}
						byT[l][s.t] = s
					}
				}
			}
		}
	}
	out := map[string][]hsample{}
	for l, m := range byT {
		var s []hsample
		for t, x := range m {
			if !deadAt(del[l], t) {
				s = append(s, x)
			}
		}
		if len(s) == 0 {
			continue
		}
		slices.SortFunc(s, func(a, b hsample) int { return int(a.t - b.t) })
		out[l] = s
	}
	return out
}

// checkHModel compares every series of b with want, bit for bit, and the chunk statistics' counts by kind.
func checkHModel(t *testing.T, b *block.Block, want map[string][]hsample) {
	t.Helper()
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	got := seriesOf(t, b)
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}
	n := 0
	for l, w := range want {
		id, ok := got[l]
		if !ok {
			t.Fatalf("series %s missing", l)
		}
		s := collectAll(t, b, id)
		if len(s) != len(w) {
			t.Fatalf("%s: %d samples, want %d", l, len(s), len(w))
		}
		counts := map[block.Kind]int{}
		for i := range s {
			if !sameSample(s[i], w[i]) {
				t.Fatalf("%s: sample %d: %v, want %v", l, i, s[i], w[i])
			}
			switch {
			case w[i].h != nil:
				counts[block.KindHistogram]++
			case w[i].fh != nil:
				counts[block.KindFloatHistogram]++
			default:
				counts[block.KindFloat]++
			}
		}
		st, err := b.ChunkStats(id, math.MinInt64, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range st {
			counts[c.Kind] -= c.Count
		}
		for k, c := range counts {
			if c != 0 {
				t.Fatalf("%s: chunk stats miscount %d %s samples", l, c, k)
			}
		}
		n += len(w)
	}
	if b.Meta().Stats.NumSamples != uint64(n) {
		t.Fatalf("meta counts %d samples, want %d", b.Meta().Stats.NumSamples, n)
	}
}

// histAt returns the integer histogram of a counter at step i (seed varies the series).
func histAt(i, seed int) *histogram.Histogram {
	c := int64(i + seed)
	h := &histogram.Histogram{Schema: int32(seed % 3), ZeroThreshold: 0.001, ZeroCount: uint64(c),
		PositiveSpans:   []histogram.Span{{Offset: int32(seed), Length: 2}, {Offset: 1, Length: 1}},
		PositiveBuckets: []int64{c, 1, int64(i % 7)},
		Sum:             float64(c) * 1.25}
	if i%40 == 39 { // a layout change
		h.PositiveSpans = append(h.PositiveSpans, histogram.Span{Offset: 0, Length: 1})
		h.PositiveBuckets = append(h.PositiveBuckets, -3)
	}
	abs := int64(0)
	for _, d := range h.PositiveBuckets {
		abs += d
		h.Count += uint64(abs)
	}
	h.Count += h.ZeroCount
	if i%53 == 0 {
		h.Sum = math.Float64frombits(staleNaN)
	}
	return h
}

// floatHistAt returns a float histogram of a gauge at step i.
func floatHistAt(i, seed int) *histogram.FloatHistogram {
	fh := histAt(i, seed).ToFloat(nil)
	fh.CounterResetHint = histogram.GaugeType
	fh.PositiveBuckets[0] /= 3
	return fh
}

// histSources builds, for blocks [0, span), [span, 2*span) and (overlapping)
// [span/2, span*3/2), the groups of a merge with native histograms: floats
// throughout; integer histograms in the shared tables; float histograms
// aligned in the first block and in a table of their own in the second; a
// series whose floats turn into histograms at the first block's end (so an
// output chunk holds both kinds of it); a series whose own tables hold
// histograms, then floats; and in the overlapping block, replacements of
// samples of each kind by another kind.
func histSources(span int64, rows0, rows1 int) (a, b, o []block.Group) {
	const step = 15000
	members := []labels.Labels{
		labels.FromStrings("__name__", "floats"), labels.FromStrings("__name__", "hists"),
		labels.FromStrings("__name__", "fhists"), labels.FromStrings("__name__", "switch"),
		labels.FromStrings("__name__", "own"),
	}
	mk := func(t0 int64, rows int, first int, lateFloat bool) []block.Group {
		ts := make([]int64, rows)
		all := make([]int32, rows)
		for i := range ts {
			ts[i], all[i] = t0+int64(i)*step, int32(i)
		}
		f := block.Column{Member: 0, Rows: all}
		h := block.Column{Member: 1, Rows: all}
		fh := block.Column{Member: 2, Rows: all}
		sw := block.Column{Member: 3, Rows: all}
		own := block.Table{}
		oc := block.Column{Member: 4}
		for i := range rows {
			k := first + i
			f.Values = append(f.Values, float64(k)*0.5)
			h.Histograms = append(h.Histograms, histAt(k, 1))
			fh.FloatHistograms = append(fh.FloatHistograms, floatHistAt(k, 2))
			if lateFloat {
				sw.Histograms = append(sw.Histograms, histAt(k, 3))
			} else {
				sw.Values = append(sw.Values, float64(k))
			}
			if i%3 == 0 {
				oc.Rows = append(oc.Rows, int32(len(own.Timestamps)))
				own.Timestamps = append(own.Timestamps, ts[i]+7)
				if lateFloat {
					oc.Values = append(oc.Values, -float64(k))
				} else {
					oc.Histograms = append(oc.Histograms, histAt(k, 4))
				}
			}
		}
		own.Columns = []block.Column{oc}
		shared := block.Table{Timestamps: ts, Columns: []block.Column{f, h, sw}}
		tables := []block.Table{shared, own}
		if lateFloat { // fhists in a table of its own, 3 ms after the shared rows
			fts := make([]int64, rows)
			for i := range fts {
				fts[i] = ts[i] + 3
			}
			tables = append(tables, block.Table{Timestamps: fts, Columns: []block.Column{fh}})
		} else {
			tables[0].Columns = append(tables[0].Columns, fh)
			slices.SortFunc(tables[0].Columns, func(x, y block.Column) int { return x.Member - y.Member })
		}
		return []block.Group{{Key: "g", Members: members, Tables: tables}}
	}
	a = mk(0, rows0, 0, false)
	b = mk(span, rows1, rows0, true)
	// Overlapping: at a's and b's timestamps around span, other kinds than theirs.
	var ots []int64
	var oall []int32
	for i := -20; i < 20; i++ {
		ots, oall = append(ots, span+int64(i)*step), append(oall, int32(i+20))
	}
	ov := block.Group{Key: "g", Members: members[:4], Tables: []block.Table{{Timestamps: ots, Columns: []block.Column{
		{Member: 0, Rows: oall[:10], Histograms: []*histogram.Histogram{histAt(0, 5), histAt(1, 5), histAt(2, 5), histAt(3, 5), histAt(4, 5),
			histAt(5, 5), histAt(6, 5), histAt(7, 5), histAt(8, 5), histAt(9, 5)}},
		{Member: 1, Rows: oall[15:25], Values: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{Member: 3, Rows: oall[18:22], FloatHistograms: []*histogram.FloatHistogram{floatHistAt(0, 6), floatHistAt(1, 6), floatHistAt(2, 6), floatHistAt(3, 6)}},
	}}}}
	return a, b, []block.Group{ov}
}

// TestMergeHistograms merges adjacent and overlapping blocks with native
// histogram members in aligned and unaligned tables, and rewrites one
// without deleted samples: every series reads back bit for bit.
func TestMergeHistograms(t *testing.T) {
	const span = 2 * hour
	ga, gb, gov := histSources(span, 140, 160)
	dir := t.TempDir()
	ba := writeBlock(t, dir, 0, span, ga)
	bb := writeBlock(t, dir, span, 2*span, gb)
	bo := writeBlock(t, dir, span/2, span*3/2, gov)
	merge := func(srcs []*block.Block, chunkRows int) *block.Block {
		out := t.TempDir()
		meta, err := Merge(out, srcs, block.WriteOptions{ChunkRows: chunkRows})
		if err != nil {
			t.Fatal(err)
		}
		b, err := block.Open(filepath.Join(out, meta.ULID))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	for _, chunkRows := range []int{100, 7, 720} {
		t.Run(fmt.Sprint("adjacent/", chunkRows), func(t *testing.T) {
			m := merge([]*block.Block{ba, bb}, chunkRows)
			checkHModel(t, m, hmodel(nil, ga, gb))
			if chunkRows == 100 {
				// Rows 100..199 of the shared table hold 40 floats and 60 histograms of "switch":
				// the histograms stay, the floats go to a table of their own.
				var gc block.GroupChunks
				if ok, err := m.ReadGroupChunks("g", &gc); !ok || err != nil {
					t.Fatal(ok, err)
				}
				var rd block.ChunkReader
				if err := rd.Reset(m, gc.Tables[0][1]); err != nil {
					t.Fatal(err)
				}
				if k := rd.Kind(rd.Find(3)); k != block.KindHistogram {
					t.Fatalf("switch's column in the second chunk: %s", k)
				}
				if len(gc.Tables) < 4 {
					t.Fatalf("%d tables: no table for the floats of the mixed chunk", len(gc.Tables))
				}
			}
		})
		t.Run(fmt.Sprint("overlapping/", chunkRows), func(t *testing.T) {
			checkHModel(t, merge([]*block.Block{ba, bb, bo}, chunkRows), hmodel(nil, ga, gb, gov))
			checkHModel(t, merge([]*block.Block{bo, ba, bb}, chunkRows), hmodel(nil, gov, ga, gb))
		})
	}
	t.Run("merged again", func(t *testing.T) {
		m := merge([]*block.Block{ba, bb, bo}, 100)
		checkHModel(t, merge([]*block.Block{m}, 64), hmodel(nil, ga, gb, gov))
	})
	t.Run("rewrite", func(t *testing.T) {
		m := merge([]*block.Block{ba, bb, bo}, 100)
		del := map[string][][2]int64{
			`{__name__="hists"}`:  {{10 * 15000, 50 * 15000}, {span + 10*15000, span + 12*15000}},
			`{__name__="switch"}`: {{span - 30*15000, span + 30*15000}},
			`{__name__="own"}`:    {{0, 2 * span}},
			`{__name__="fhists"}`: {{span + 3, span + 3 + 9*15000}},
		}
		out := t.TempDir()
		meta, err := Rewrite(out, m, deletedBy(del), block.WriteOptions{ChunkRows: 50})
		if err != nil {
			t.Fatal(err)
		}
		r, err := block.Open(filepath.Join(out, meta.ULID))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		checkHModel(t, r, hmodel(del, ga, gb, gov))
	})
}

// TestMergeHistogramsRandom merges random splits of histogram series across blocks.
func TestMergeHistogramsRandom(t *testing.T) {
	const span = hour
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			members := []labels.Labels{labels.FromStrings("__name__", "a"), labels.FromStrings("__name__", "b"), labels.FromStrings("__name__", "c")}
			var srcs [][]block.Group
			var blocks []*block.Block
			dir := t.TempDir()
			for bi := range 3 {
				t0 := int64(bi) * span / 2 // overlapping halves
				n := 1 + rng.IntN(200)
				ts := make([]int64, n)
				for i := range ts {
					ts[i] = t0 + int64(i)*15000 + int64(rng.IntN(2))*5
				}
				g := block.Group{Key: "g", Members: members, Tables: []block.Table{{Timestamps: ts}}}
				for m := range members {
					c := block.Column{Member: m}
					kind := rng.IntN(3)
					for i := range ts {
						if rng.IntN(4) == 0 {
							continue
						}
						c.Rows = append(c.Rows, int32(i))
						switch kind {
						case 0:
							c.Values = append(c.Values, rng.Float64())
						case 1:
							c.Histograms = append(c.Histograms, histAt(i+rng.IntN(3), m))
						default:
							c.FloatHistograms = append(c.FloatHistograms, floatHistAt(i, m))
						}
					}
					if len(c.Rows) > 0 {
						g.Tables[0].Columns = append(g.Tables[0].Columns, c)
					}
				}
				srcs = append(srcs, []block.Group{g})
				blocks = append(blocks, writeBlock(t, dir, t0, t0+span, srcs[bi]))
			}
			out := t.TempDir()
			meta, err := Merge(out, blocks, block.WriteOptions{ChunkRows: 1 + rng.IntN(60)})
			if err != nil {
				t.Fatal(err)
			}
			b, err := block.Open(filepath.Join(out, meta.ULID))
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			checkHModel(t, b, hmodel(nil, srcs...))
		})
	}
}

// TestKeepSamples: kept samples stay in order, and the histograms dropped
// stay in the slice's spare capacity, each once, for ReadColumn to reuse.
func TestKeepSamples(t *testing.T) {
	var hs []*histogram.Histogram
	var fhs []*histogram.FloatHistogram
	rows := []int32{0, 1, 2, 3, 4, 5}
	for i := range rows {
		hs, fhs = append(hs, histAt(i, 0)), append(fhs, floatHistAt(i, 0))
	}
	odd := func(r int32) bool { return r%2 == 1 }
	c := block.Column{Rows: slices.Clone(rows), Histograms: slices.Clone(hs)}
	keepSamples(&c, odd)
	if !slices.Equal(c.Rows, []int32{1, 3, 5}) || !slices.Equal(c.Histograms, []*histogram.Histogram{hs[1], hs[3], hs[5]}) {
		t.Fatalf("kept %v %v", c.Rows, c.Histograms)
	}
	all := c.Histograms[:cap(c.Histograms)]
	for _, h := range hs {
		if n := slices.Index(all, h); n < 0 || slices.Index(all[n+1:], h) >= 0 {
			t.Fatalf("histogram %p not held exactly once: %v", h, all)
		}
	}
	fc := block.Column{Rows: slices.Clone(rows), FloatHistograms: slices.Clone(fhs)}
	keepSamples(&fc, odd)
	if !slices.Equal(fc.FloatHistograms, []*histogram.FloatHistogram{fhs[1], fhs[3], fhs[5]}) || len(fc.Rows) != 3 {
		t.Fatalf("kept %v %v", fc.Rows, fc.FloatHistograms)
	}
	vc := block.Column{Rows: slices.Clone(rows), Values: []float64{0, 1, 2, 3, 4, 5}}
	keepSamples(&vc, odd)
	if !slices.Equal(vc.Values, []float64{1, 3, 5}) || !slices.Equal(vc.Rows, []int32{1, 3, 5}) || vc.Kind() != block.KindFloat {
		t.Fatalf("kept %v %v", vc.Rows, vc.Values)
	}
}
