package block

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// histBlock is a block's input groups with native histogram columns and the expected samples per series.
type histBlock struct {
	groups     []Group
	expected   map[string][]hsample
	mint, maxt int64
}

// genColumn returns a column of member with rows and samples of kind k.
func genColumn(rng *rand.Rand, member int, rows []int32, k Kind) Column {
	c := Column{Member: member, Rows: rows}
	switch k {
	case KindHistogram:
		c.Histograms = genHistograms(rng, len(rows))
	case KindFloatHistogram:
		c.FloatHistograms = genFloatHistograms(rng, len(rows))
	default:
		c.Values = genValues(rng, len(rows))
	}
	return c
}

func randomKind(rng *rand.Rand) Kind {
	return []Kind{KindFloat, KindFloat, KindHistogram, KindFloatHistogram}[rng.IntN(4)]
}

// genHistBlock generates groups whose members hold floats, integer or float
// histograms in the shared table, and some of them samples of another kind
// in a table of their own, 7 ms after shared rows where they are absent.
func genHistBlock(rng *rand.Rand, ngroups int) *histBlock {
	hb := &histBlock{expected: map[string][]hsample{}, mint: 1_700_000_000_000}
	hb.maxt = hb.mint + 1<<40
	for g := range ngroups {
		grp := Group{Key: fmt.Sprintf(`instance="h%d"`, g)}
		nm := 1 + rng.IntN(6)
		for m := range nm {
			grp.Members = append(grp.Members, labels.FromStrings("__name__", fmt.Sprintf("m%d", m), "instance", fmt.Sprintf("h%d", g)))
		}
		n := 1 + rng.IntN(500)
		ts := make([]int64, n)
		t := hb.mint + int64(rng.IntN(100000))
		regular := rng.IntN(2) == 0
		for i := range ts {
			ts[i] = t
			if regular {
				t += 15000
			} else {
				t += 1000 + int64(rng.IntN(30000))
			}
		}
		shared := Table{Timestamps: ts}
		var extra []Table
		for m := range nm {
			key := grp.Members[m].String()
			rows := genRows(rng, n)
			if len(rows) > 0 && rng.IntN(6) != 0 {
				c := genColumn(rng, m, rows, randomKind(rng))
				shared.Columns = append(shared.Columns, c)
				hb.expected[key] = append(hb.expected[key], columnSamples(&shared, &c)...)
			} else {
				rows = nil
			}
			if rng.IntN(3) == 0 && len(rows) < n {
				present := map[int32]bool{}
				for _, r := range rows {
					present[r] = true
				}
				var uts []int64
				var ur []int32
				for i := range n {
					if !present[int32(i)] && rng.IntN(2) == 0 {
						ur = append(ur, int32(len(uts)))
						uts = append(uts, ts[i]+7)
					}
				}
				if len(uts) > 0 {
					tab := Table{Timestamps: uts, Columns: []Column{genColumn(rng, m, ur, randomKind(rng))}}
					extra = append(extra, tab)
					hb.expected[key] = append(hb.expected[key], columnSamples(&tab, &tab.Columns[0])...)
				}
			}
		}
		grp.Tables = append([]Table{shared}, extra...)
		hb.groups = append(hb.groups, grp)
	}
	for k, s := range hb.expected {
		slices.SortFunc(s, func(a, b hsample) int { return int(a.t - b.t) })
		hb.expected[k] = s
	}
	return hb
}

func writeHistBlock(t testing.TB, hb *histBlock, opts WriteOptions) *Block {
	t.Helper()
	dir := t.TempDir()
	meta, err := Write(dir, hb.mint, hb.maxt, Groups(hb.groups), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func hwindow(s []hsample, mint, maxt int64) []hsample {
	var out []hsample
	for _, x := range s {
		if x.t >= mint && x.t <= maxt {
			out = append(out, x)
		}
	}
	return out
}

func valueType(s hsample) chunkenc.ValueType {
	switch {
	case s.h != nil:
		return chunkenc.ValHistogram
	case s.fh != nil:
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

// TestHistogramRoundTrip writes groups with float and histogram columns and
// reads every series back bit for bit: whole, in windows, with Seek, through
// AppendFloats, ChunkStats, ReadGroup and a block rewritten from Groups.
func TestHistogramRoundTrip(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 77))
			hb := genHistBlock(rng, 1+rng.IntN(5))
			chunkRows := []int{1, 7, 50, 720}[rng.IntN(4)]
			b := writeHistBlock(t, hb, WriteOptions{ChunkRows: chunkRows})
			if err := b.Verify(); err != nil {
				t.Fatal(err)
			}
			if v := b.Meta().Version; v != FormatVersion {
				t.Fatalf("version %d", v)
			}
			var it chunkenc.Iterator
			for id := range uint32(b.NumSeries()) {
				l, err := b.Labels(id)
				if err != nil {
					t.Fatal(err)
				}
				exp := hb.expected[l.String()]
				it = b.Iterator(id, math.MinInt64, math.MaxInt64, it)
				got, err := collectAll(it)
				if err != nil {
					t.Fatal(err)
				}
				equalHSamples(t, l.String(), got, exp)
				if len(exp) == 0 {
					continue
				}
				lo := exp[rng.IntN(len(exp))].t - int64(rng.IntN(2))
				hi := lo + int64(rng.IntN(3_000_000))
				it = b.Iterator(id, lo, hi, it)
				if got, err = collectAll(it); err != nil {
					t.Fatal(err)
				}
				equalHSamples(t, fmt.Sprintf("%s [%d, %d]", l, lo, hi), got, hwindow(exp, lo, hi))
				checkHistSeek(t, b, rng, id, exp)
				checkAppendFloats(t, b, id, exp, lo, hi)
				checkHistStats(t, b, id, l, hb)
			}
			for _, g := range hb.groups {
				var got Group
				if ok, err := b.ReadGroup(g.Key, &got); !ok || err != nil {
					t.Fatalf("ReadGroup(%q) = %v, %v", g.Key, ok, err)
				}
				for m := range g.Members {
					equalHSamples(t, fmt.Sprintf("group %q member %d", g.Key, m), groupAllSamples(&got, m), groupAllSamples(&g, m))
				}
			}
			dir := t.TempDir()
			meta, err := Write(dir, hb.mint, hb.maxt, b.Groups(), WriteOptions{ChunkRows: []int{3, 240}[rng.IntN(2)]})
			if err != nil {
				t.Fatal(err)
			}
			b2, err := Open(filepath.Join(dir, meta.ULID))
			if err != nil {
				t.Fatal(err)
			}
			defer b2.Close()
			if meta.Stats.NumSamples != b.Meta().Stats.NumSamples {
				t.Fatalf("rewritten block has %d samples, want %d", meta.Stats.NumSamples, b.Meta().Stats.NumSamples)
			}
			for id := range uint32(b2.NumSeries()) {
				l, _ := b2.Labels(id)
				got, err := collectAll(b2.Iterator(id, math.MinInt64, math.MaxInt64, nil))
				if err != nil {
					t.Fatal(err)
				}
				equalHSamples(t, l.String()+" (rewritten)", got, hb.expected[l.String()])
			}
		})
	}
}

// checkHistSeek interleaves Seek and Next and checks the value type and sample of each.
func checkHistSeek(t *testing.T, b *Block, rng *rand.Rand, id uint32, exp []hsample) {
	t.Helper()
	it := b.Iterator(id, math.MinInt64, math.MaxInt64, nil)
	pos, target := -1, exp[0].t-10
	for step := 0; step < 30; step++ {
		var vt chunkenc.ValueType
		if rng.IntN(3) == 0 {
			vt = it.Next()
			pos++
		} else {
			target += rng.Int64N(400_000) - 50_000
			vt = it.Seek(target)
			pos = max(pos, 0)
			for pos < len(exp) && exp[pos].t < target {
				pos++
			}
		}
		if pos >= len(exp) {
			if vt != chunkenc.ValNone {
				t.Fatalf("step %d past the end: %v", step, vt)
			}
			break
		}
		if vt != valueType(exp[pos]) {
			t.Fatalf("step %d: value type %v, want %v (err %v)", step, vt, valueType(exp[pos]), it.Err())
		}
		s := hsample{t: it.AtT()}
		switch vt {
		case chunkenc.ValFloat:
			_, s.v = it.At()
		case chunkenc.ValHistogram:
			_, s.h = it.AtHistogram(nil)
			// AtFloatHistogram converts an integer histogram.
			if _, fh := it.AtFloatHistogram(nil); !sameFloatHistogram(fh, s.h.ToFloat(nil)) {
				t.Fatalf("step %d: AtFloatHistogram of an integer histogram %v, want %v", step, fh, s.h.ToFloat(nil))
			}
		case chunkenc.ValFloatHistogram:
			_, s.fh = it.AtFloatHistogram(nil)
			if _, h := it.AtHistogram(nil); h != nil {
				t.Fatalf("step %d: AtHistogram of a float histogram: %v", step, h)
			}
		}
		if !sameSample(s, exp[pos]) {
			t.Fatalf("step %d: %v, want %v", step, s, exp[pos])
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
}

// checkAppendFloats: AppendFloats returns the floats of [lo, hi], or ErrHistogram when a histogram is there.
func checkAppendFloats(t *testing.T, b *Block, id uint32, exp []hsample, lo, hi int64) {
	t.Helper()
	win := hwindow(exp, lo, hi)
	it := b.Iterator(id, lo, hi, nil).(*Iterator)
	ts, vs, err := it.AppendFloats(nil, nil)
	hist := slices.IndexFunc(win, func(s hsample) bool { return s.h != nil || s.fh != nil })
	if hist >= 0 {
		if !errors.Is(err, fastread.ErrHistogram) {
			t.Fatalf("AppendFloats over a histogram at %d: %v", win[hist].t, err)
		}
		win = win[:hist] // the floats before it
		if len(ts) > len(win) {
			t.Fatalf("AppendFloats appended %d samples before the histogram at %d, there are %d", len(ts), win[hist].t, len(win))
		}
		win = win[:len(ts)]
	} else if err != nil {
		t.Fatal(err)
	}
	if len(ts) != len(win) {
		t.Fatalf("AppendFloats: %d samples, want %d", len(ts), len(win))
	}
	for i := range ts {
		if ts[i] != win[i].t || !sameBits(vs[i], win[i].v) {
			t.Fatalf("AppendFloats sample %d: (%d, %v), want %v", i, ts[i], vs[i], win[i])
		}
	}
}

// checkHistStats checks the chunk statistics of the series l against its
// samples: Write realigns, which changes the chunking, so what is compared
// is what does not depend on it: the samples of each kind counted, and the
// statistics against the samples at each chunk's first and last timestamps.
func checkHistStats(t *testing.T, b *Block, id uint32, l labels.Labels, hb *histBlock) {
	t.Helper()
	got, err := b.ChunkStats(id, math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	exp := hb.expected[l.String()]
	at := map[int64]hsample{}
	counts := map[Kind]int{}
	for _, s := range exp {
		at[s.t] = s
		counts[kindOf(s)]++
	}
	for _, st := range got {
		counts[st.Kind] -= st.Count
		f, ok1 := at[st.MinT]
		la, ok2 := at[st.MaxT]
		if !ok1 || !ok2 || kindOf(f) != st.Kind || kindOf(la) != st.Kind {
			t.Fatalf("%s: chunk stat %+v: no samples of its kind at its first and last timestamps", l, st)
		}
		if st.Kind == KindFloat {
			if !sameBits(st.First, f.v) || !sameBits(st.Last, la.v) {
				t.Fatalf("%s: float chunk stat %+v, first %v last %v", l, st, f, la)
			}
			continue
		}
		if !math.IsNaN(st.Min) || !math.IsNaN(st.Max) || !math.IsNaN(st.Sum) || !math.IsNaN(st.First) || !math.IsNaN(st.Last) {
			t.Fatalf("%s: histogram chunk stat with float statistics: %+v", l, st)
		}
		wf, wl := histStat(f), histStat(la)
		if !sameBits(st.HistFirst.Count, wf.Count) || !sameBits(st.HistFirst.Sum, wf.Sum) ||
			!sameBits(st.HistLast.Count, wl.Count) || !sameBits(st.HistLast.Sum, wl.Sum) {
			t.Fatalf("%s: histogram chunk stat %+v, want first %+v last %+v", l, st, wf, wl)
		}
	}
	for k, n := range counts {
		if n != 0 {
			t.Fatalf("%s: chunk stats count %d %s samples too few", l, n, k)
		}
	}
}

func kindOf(s hsample) Kind {
	switch {
	case s.h != nil:
		return KindHistogram
	case s.fh != nil:
		return KindFloatHistogram
	}
	return KindFloat
}

func histStat(s hsample) HistStat {
	if s.h != nil {
		return HistStat{float64(s.h.Count), s.h.Sum}
	}
	return HistStat{s.fh.Count, s.fh.Sum}
}

// TestKindChangesBetweenChunks streams a table in which a member's column is
// floats in one chunk, histograms in the next and float histograms in the
// third: the iterator yields them in order, and ReadGroup returns the
// samples of other kinds than the first chunk's in extra tables that write
// back to the same series.
func TestKindChangesBetweenChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	members := []labels.Labels{labels.FromStrings("__name__", "a"), labels.FromStrings("__name__", "b")}
	hs := genHistograms(rng, 8)
	fhs := genFloatHistograms(rng, 8)
	var want [2][]hsample
	dir := t.TempDir()
	meta, err := WriteStream(dir, 0, 1_000_000, func(gw *GroupWriter) error {
		if err := gw.BeginGroup("g", members); err != nil {
			return err
		}
		if err := gw.BeginTable(); err != nil {
			return err
		}
		for c := range 4 {
			ts := make([]int64, 4)
			for i := range ts {
				ts[i] = int64(c*4+i) * 1000
			}
			if err := gw.BeginChunk(ts); err != nil {
				return err
			}
			rows := []int32{0, 1, 2, 3}
			switch c {
			case 0, 3:
				vs := []float64{1, 2, 3, float64(c)}
				if err := gw.AddColumn(0, rows, vs); err != nil {
					return err
				}
				for i := range rows {
					want[0] = append(want[0], hsample{t: ts[i], v: vs[i]})
				}
			case 1:
				if err := gw.AddHistogramColumn(0, rows, hs[:4]); err != nil {
					return err
				}
				for i := range rows {
					want[0] = append(want[0], hsample{t: ts[i], h: hs[i]})
				}
			case 2:
				if err := gw.AddFloatHistogramColumn(0, rows[1:], fhs[:3]); err != nil {
					return err
				}
				for i := range 3 {
					want[0] = append(want[0], hsample{t: ts[i+1], fh: fhs[i]})
				}
			}
			if err := gw.AddHistogramColumn(1, rows[:2], hs[4+c%2:6+c%2]); err != nil {
				return err
			}
			for i := range 2 {
				want[1] = append(want[1], hsample{t: ts[i], h: hs[4+c%2+i]})
			}
			if err := gw.EndChunk(); err != nil {
				return err
			}
		}
		return gw.EndGroup()
	}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	for id := range uint32(2) {
		got, err := collectAll(b.Iterator(id, math.MinInt64, math.MaxInt64, nil))
		if err != nil {
			t.Fatal(err)
		}
		equalHSamples(t, fmt.Sprint("series ", id), got, want[id])
	}
	g, ok, err := b.Group("g")
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if len(g.Tables) != 3 || len(g.Tables[1].Columns) != 1 || len(g.Tables[2].Columns) != 1 ||
		g.Tables[1].Columns[0].Kind() != KindHistogram || g.Tables[2].Columns[0].Kind() != KindFloatHistogram {
		t.Fatalf("ReadGroup: %d tables, want the shared one and two extra ones", len(g.Tables))
	}
	if len(g.Tables[0].Timestamps) != 12 { // the rows only member 0's histograms used are gone
		t.Fatalf("shared table has %d rows, want 12", len(g.Tables[0].Timestamps))
	}
	for m := range 2 {
		equalHSamples(t, fmt.Sprint("ReadGroup member ", m), groupAllSamples(g, m), want[m])
	}
	// The group writes back as it is.
	dir2 := t.TempDir()
	meta2, err := Write(dir2, 0, 1_000_000, Groups([]Group{*g}), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := Open(filepath.Join(dir2, meta2.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	for id := range uint32(2) {
		got, err := collectAll(b2.Iterator(id, math.MinInt64, math.MaxInt64, nil))
		if err != nil {
			t.Fatal(err)
		}
		equalHSamples(t, fmt.Sprint("rewritten series ", id), got, want[id])
	}
	// ChunkReader: kinds per chunk, rows without samples, and samples of any kind.
	var gc GroupChunks
	if ok, err := b.ReadGroupChunks("g", &gc); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var rd ChunkReader
	for ci, ref := range gc.Tables[0] {
		if err := rd.Reset(b, ref); err != nil {
			t.Fatal(err)
		}
		k := rd.Find(0)
		wantKind := []Kind{KindFloat, KindHistogram, KindFloatHistogram, KindFloat}[ci]
		if rd.Kind(k) != wantKind || rd.Kind(rd.Find(1)) != KindHistogram {
			t.Fatalf("chunk %d: kinds %v and %v", ci, rd.Kind(k), rd.Kind(rd.Find(1)))
		}
		rows, err := rd.AppendRows(k, nil)
		if err != nil || len(rows) != []int{4, 4, 3, 4}[ci] {
			t.Fatalf("chunk %d: rows %v, %v", ci, rows, err)
		}
		var c Column
		if err := rd.ReadColumn(k, &c); err != nil || c.Kind() != wantKind || !slices.Equal(c.Rows, rows) {
			t.Fatalf("chunk %d: ReadColumn %+v, %v", ci, c, err)
		}
		// Read again into the same column emptied: its histograms are reused.
		first := columnSamples(&Table{Timestamps: rd.Timestamps()}, &c)
		for i := range first {
			switch {
			case first[i].h != nil:
				first[i].h = first[i].h.Copy()
			case first[i].fh != nil:
				first[i].fh = first[i].fh.Copy()
			}
		}
		hs0, fhs0 := slices.Clone(c.Histograms), slices.Clone(c.FloatHistograms)
		c.Rows, c.Histograms, c.FloatHistograms, c.Values = c.Rows[:0], c.Histograms[:0], c.FloatHistograms[:0], c.Values[:0]
		if err := rd.ReadColumn(k, &c); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Histograms, hs0) || !slices.Equal(c.FloatHistograms, fhs0) {
			t.Fatalf("chunk %d: ReadColumn did not reuse the column's histograms", ci)
		}
		equalHSamples(t, fmt.Sprint("chunk ", ci, " read again"), columnSamples(&Table{Timestamps: rd.Timestamps()}, &c), first)
		if _, _, err := rd.AppendColumn(k, nil, nil); (err != nil) != (wantKind != KindFloat) {
			t.Fatalf("chunk %d: AppendColumn of a %s column: %v", ci, wantKind, err)
		}
		other := Column{Rows: []int32{0}, Values: []float64{1}}
		if wantKind == KindFloat {
			other = Column{Rows: []int32{0}, Histograms: hs[:1]}
		}
		if err := rd.ReadColumn(k, &other); err == nil {
			t.Fatalf("chunk %d: ReadColumn appended %s samples to a column of another kind", ci, wantKind)
		}
	}
	ins, err := b.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	enc := ins.Groups[0].Tables[0].Columns[0].Encodings
	if enc["histogram"] != 1 || enc["floathistogram"] != 1 || len(enc) != 3 {
		t.Fatalf("Inspect encodings %v", enc)
	}
}

// TestHistogramWriteRejects: columns holding several kinds, nil histograms
// and spans that do not describe their buckets fail Write.
func TestHistogramWriteRejects(t *testing.T) {
	m := []labels.Labels{labels.FromStrings("a", "1")}
	h := &histogram.Histogram{Count: 1, PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{1, 0}}
	bad := &histogram.Histogram{Count: 1, PositiveSpans: []histogram.Span{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{1}}
	fh := h.ToFloat(nil)
	one := func(c Column) []Group {
		return []Group{{Key: "g", Members: m, Tables: []Table{{Timestamps: []int64{1, 2}, Columns: []Column{c}}}}}
	}
	cases := map[string][]Group{
		"values and histograms": one(Column{Rows: []int32{0, 1}, Values: []float64{1, 2}, Histograms: []*histogram.Histogram{h, h}}),
		"histograms and float":  one(Column{Rows: []int32{0}, Histograms: []*histogram.Histogram{h}, FloatHistograms: []*histogram.FloatHistogram{fh}}),
		"too few histograms":    one(Column{Rows: []int32{0, 1}, Histograms: []*histogram.Histogram{h}}),
		"nil histogram":         one(Column{Rows: []int32{0, 1}, Histograms: []*histogram.Histogram{h, nil}}),
		"nil float histogram":   one(Column{Rows: []int32{0}, FloatHistograms: []*histogram.FloatHistogram{nil}}),
		"bad spans":             one(Column{Rows: []int32{0, 1}, Histograms: []*histogram.Histogram{h, bad}}),
		"bad float spans":       one(Column{Rows: []int32{1}, FloatHistograms: []*histogram.FloatHistogram{bad.ToFloat(nil)}}),
	}
	for name, gs := range cases {
		if _, err := Write(t.TempDir(), 0, 100, Groups(gs), WriteOptions{}); err == nil {
			t.Errorf("%s: Write succeeded", name)
		}
	}
	_, err := WriteStream(t.TempDir(), 0, 100, func(gw *GroupWriter) error {
		if err := gw.BeginGroup("g", m); err != nil {
			return err
		}
		if err := gw.BeginTable(); err != nil {
			return err
		}
		if err := gw.BeginChunk([]int64{1, 2}); err != nil {
			return err
		}
		for name, err := range map[string]error{
			"nil":       gw.AddHistogramColumn(0, []int32{0}, []*histogram.Histogram{nil}),
			"count":     gw.AddFloatHistogramColumn(0, []int32{0, 1}, []*histogram.FloatHistogram{fh}),
			"bad spans": gw.AddHistogramColumn(0, []int32{0}, []*histogram.Histogram{bad}),
		} {
			if err == nil {
				return fmt.Errorf("%s: column added", name)
			}
		}
		// The chunk is still usable after the refusals.
		if err := gw.AddHistogramColumn(0, []int32{0, 1}, []*histogram.Histogram{h, h}); err != nil {
			return err
		}
		if err := gw.EndChunk(); err != nil {
			return err
		}
		return gw.EndGroup()
	}, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRealignKinds: a histogram table at the group's instants folds into the
// shared table when its member has no column of another kind there, and
// stays apart when the member's shared column holds floats.
func TestRealignKinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	ts := make([]int64, 60)
	all := make([]int32, 60)
	for i := range ts {
		ts[i], all[i] = int64(i)*15000, int32(i)
	}
	g := Group{
		Key:     "g",
		Members: []labels.Labels{labels.FromStrings("__name__", "a"), labels.FromStrings("__name__", "b"), labels.FromStrings("__name__", "c")},
		Tables: []Table{
			{Timestamps: ts, Columns: []Column{genColumn(rng, 0, all[:30], KindFloat), genColumn(rng, 2, all[:20], KindFloatHistogram)}},
			// a switches to histograms: not folded onto its float column.
			{Timestamps: ts[30:], Columns: []Column{genColumn(rng, 0, all[:30], KindHistogram)}},
			// b, histograms only: folded.
			{Timestamps: ts, Columns: []Column{genColumn(rng, 1, all, KindHistogram)}},
			// c's later float histograms: folded onto its float histogram column.
			{Timestamps: ts[20:], Columns: []Column{genColumn(rng, 2, all[:40], KindFloatHistogram)}},
		},
	}
	r := realign(&g)
	if len(r.Tables) != 2 || len(r.Tables[0].Columns) != 3 || r.Tables[1].Columns[0].Member != 0 || r.Tables[1].Columns[0].Kind() != KindHistogram {
		t.Fatalf("realigned into %d tables", len(r.Tables))
	}
	for m := range g.Members {
		equalHSamples(t, fmt.Sprint("realigned member ", m), groupAllSamples(r, m), groupAllSamples(&g, m))
	}
	b := writeHistBlock(t, &histBlock{groups: []Group{g}, mint: 0, maxt: 1 << 30}, WriteOptions{ChunkRows: 16})
	for id := range uint32(3) {
		got, err := collectAll(b.Iterator(id, math.MinInt64, math.MaxInt64, nil))
		if err != nil {
			t.Fatal(err)
		}
		equalHSamples(t, fmt.Sprint("series ", id), got, groupAllSamples(&g, int(id)))
	}
}
