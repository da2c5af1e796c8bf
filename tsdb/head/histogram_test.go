package head

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// histPoint is one sample read back: a float or a histogram.
type histPoint struct {
	t  int64
	f  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

func (p histPoint) String() string {
	switch {
	case p.h != nil:
		return fmt.Sprintf("%d:h%s/hint%d", p.t, p.h, p.h.CounterResetHint)
	case p.fh != nil:
		return fmt.Sprintf("%d:fh%s/hint%d", p.t, p.fh, p.fh.CounterResetHint)
	}
	return fmt.Sprintf("%d:%v", p.t, p.f)
}

func (p histPoint) same(q histPoint) bool {
	return p.t == q.t && sampleValue{v: p.f, h: p.h, fh: p.fh}.same(sampleValue{v: q.f, h: q.h, fh: q.fh})
}

// readPoints reads every sample of the series matching ms through the head's querier.
func readPoints(t *testing.T, h *Head, mint, maxt int64, ms ...*labels.Matcher) map[string][]histPoint {
	t.Helper()
	q, err := h.Querier(mint, maxt)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	return collectPoints(t, q.Select(context.Background(), true, nil, ms...))
}

func collectPoints(t *testing.T, ss storage.SeriesSet) map[string][]histPoint {
	t.Helper()
	out := map[string][]histPoint{}
	var it chunkenc.Iterator
	for ss.Next() {
		s := ss.At()
		it = s.Iterator(it)
		var pts []histPoint
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			switch vt {
			case chunkenc.ValFloat:
				ts, v := it.At()
				pts = append(pts, histPoint{t: ts, f: v})
			case chunkenc.ValHistogram:
				ts, hh := it.AtHistogram(nil)
				pts = append(pts, histPoint{t: ts, h: hh})
			case chunkenc.ValFloatHistogram:
				ts, fh := it.AtFloatHistogram(nil)
				pts = append(pts, histPoint{t: ts, fh: fh})
			}
		}
		if err := it.Err(); err != nil {
			t.Fatalf("%s: %v", s.Labels(), err)
		}
		out[s.Labels().String()] = pts
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func comparePoints(t *testing.T, what string, got, want []histPoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d samples, want %d (first %v, want %v)", what, len(got), len(want), got[:min(3, len(got))], want[:min(3, len(want))])
	}
	for i := range want {
		if !got[i].same(want[i]) {
			t.Fatalf("%s: sample %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// histTarget writes n scrapes of a target with two float members and one
// member of each histogram kind (integer, float, custom buckets) and returns
// what it wrote by series.
func histTarget(t *testing.T, h *Head, n int, from int64) map[string][]histPoint {
	t.Helper()
	ls := []labels.Labels{
		series("up", "job", "j", "instance", "i"),
		series("cpu", "job", "j", "instance", "i"),
		series("lat_int", "job", "j", "instance", "i"),
		series("lat_float", "job", "j", "instance", "i"),
		series("lat_nhcb", "job", "j", "instance", "i"),
	}
	want := map[string][]histPoint{}
	hi := tsdbutil.GenerateTestHistograms(n)
	fh := tsdbutil.GenerateTestFloatHistograms(n)
	cb := tsdbutil.GenerateTestCustomBucketsHistograms(n)
	for i := 0; i < n; i++ {
		ts := from + int64(i)*15000
		b := &Batch{Series: []BatchSeries{
			{Labels: ls[0], Samples: []Sample{{T: ts, V: 1}}},
			{Labels: ls[1], Samples: []Sample{{T: ts, V: float64(i) * 0.25}}},
			{Labels: ls[2], Histograms: []HistogramSample{{T: ts, H: hi[i]}}},
			{Labels: ls[3], Histograms: []HistogramSample{{T: ts, FH: fh[i]}}},
			{Labels: ls[4], Histograms: []HistogramSample{{T: ts, H: cb[i]}}},
		}}
		res, err := h.AppendBatch(context.Background(), b)
		if err != nil || res.Err() != nil || res.SamplesWritten != 2 || res.HistogramsWritten != 3 {
			t.Fatalf("scrape %d: %v %v, %d samples and %d histograms written", i, err, res.Err(), res.SamplesWritten, res.HistogramsWritten)
		}
		want[ls[0].String()] = append(want[ls[0].String()], histPoint{t: ts, f: 1})
		want[ls[1].String()] = append(want[ls[1].String()], histPoint{t: ts, f: float64(i) * 0.25})
		want[ls[2].String()] = append(want[ls[2].String()], histPoint{t: ts, h: hi[i]})
		want[ls[3].String()] = append(want[ls[3].String()], histPoint{t: ts, fh: fh[i]})
		want[ls[4].String()] = append(want[ls[4].String()], histPoint{t: ts, h: cb[i]})
	}
	return want
}

func compareAll(t *testing.T, got, want map[string][]histPoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}
	for k, w := range want {
		comparePoints(t, k, got[k], w)
	}
}

// TestHeadHistograms: integer, float and custom-bucket histograms written
// beside float members read back bit for bit, across chunks (the head's
// chunks of 120 rows), and a histogram series refuses the float fast path.
func TestHeadHistograms(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	want := histTarget(t, h, 300, 0)
	compareAll(t, readPoints(t, h, math.MinInt64, math.MaxInt64, labels.MustNewMatcher(labels.MatchEqual, "job", "j")), want)
	// A range in the middle of a chunk.
	got := readPoints(t, h, 100*15000, 200*15000, labels.MustNewMatcher(labels.MatchEqual, "__name__", "lat_int"))
	k := series("lat_int", "job", "j", "instance", "i").String()
	comparePoints(t, "range", got[k], want[k][100:201])

	q, _ := h.Querier(math.MinInt64, math.MaxInt64)
	defer q.Close()
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "lat_float"))
	if !ss.Next() {
		t.Fatal("no series")
	}
	fa, ok := ss.At().(fastread.FloatAppender)
	if !ok {
		t.Fatal("head series is not a FloatAppender")
	}
	if _, _, err := fa.AppendFloats(nil, nil, 0, math.MaxInt64); !errors.Is(err, fastread.ErrHistogram) {
		t.Fatalf("AppendFloats of a histogram series: %v, want ErrHistogram", err)
	}
	// The float members stay aligned in the group's shared table.
	if n := h.counters.unaligned.Load(); n != 3 {
		t.Fatalf("%d unaligned members, want the 3 histogram ones", n)
	}
}

// TestHeadHistogramDuplicates: a resent histogram is accepted again, another
// one at a stored time is a duplicate, an older one out of order is refused
// without the out-of-order window, and an invalid one is refused by reason.
func TestHeadHistogramDuplicates(t *testing.T) {
	h := openHead(t, t.TempDir(), func(o *Options) { o.OutOfOrderWindow = 0 })
	defer h.Close()
	l := series("lat", "job", "j", "instance", "i")
	app := func(hs ...HistogramSample) AppendResult {
		res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Histograms: hs}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var in []HistogramSample
	for i, hh := range tsdbutil.GenerateTestHistograms(200) {
		in = append(in, HistogramSample{T: int64(i) * 1000, H: hh})
	}
	if res := app(in...); res.Err() != nil || res.HistogramsWritten != 200 {
		t.Fatalf("first write: %v, %d written", res.Err(), res.HistogramsWritten)
	}
	if res := app(in...); res.Err() != nil || res.HistogramsWritten != 200 {
		t.Fatalf("resend: %v, %d written", res.Err(), res.HistogramsWritten)
	}
	other := tsdbutil.GenerateTestHistogram(1000)
	for _, ts := range []int64{199000, 5000} {
		if res := app(HistogramSample{T: ts, H: other}); !errors.Is(res.Err(), ErrDuplicateSample) {
			t.Fatalf("another histogram at %d: %v", ts, res.Err())
		}
	}
	if res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: 199000, V: 1}}}}}); err != nil || !errors.Is(res.Err(), ErrDuplicateSample) {
		t.Fatalf("a float at a histogram's time: %v %v", err, res.Err())
	}
	if res := app(HistogramSample{T: 5500, H: other}); !errors.Is(res.Err(), ErrOutOfOrderSample) {
		t.Fatalf("out of order: %v", res.Err())
	}
	bad := other.Copy()
	bad.PositiveBuckets = bad.PositiveBuckets[1:]
	if res := app(HistogramSample{T: 300000, H: bad}); !errors.Is(res.Err(), ErrInvalidHistogram) || res.HistogramsWritten != 0 {
		t.Fatalf("spans that do not match the buckets: %v, %d written", res.Err(), res.HistogramsWritten)
	}
	if res := app(HistogramSample{T: 300000}); !errors.Is(res.Err(), ErrInvalidHistogram) {
		t.Fatalf("no histogram: %v", res.Err())
	}
	var want []histPoint
	for _, hs := range in {
		want = append(want, histPoint{t: hs.T, h: hs.H})
	}
	comparePoints(t, "lat", readPoints(t, h, math.MinInt64, math.MaxInt64)[l.String()], want)
}

// TestHeadHistogramTypeChanges: a series that switches between floats,
// integer and float histograms keeps every sample in order, and histograms
// accepted out of order (within the window) are merged into reads.
func TestHeadHistogramTypeChanges(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	l := series("x", "job", "j", "instance", "i")
	peer := series("y", "job", "j", "instance", "i")
	hi := tsdbutil.GenerateTestHistograms(400)
	fh := tsdbutil.GenerateTestFloatHistograms(400)
	var want []histPoint
	for i := 0; i < 400; i++ {
		ts := int64(i) * 15000
		bs := BatchSeries{Labels: l}
		switch {
		case i%2 == 1 && i > 300:
			continue // written out of order below
		case i < 100 || i >= 250 && i < 260:
			bs.Samples = []Sample{{T: ts, V: float64(i)}}
			want = append(want, histPoint{t: ts, f: float64(i)})
		case i < 200:
			bs.Histograms = []HistogramSample{{T: ts, H: hi[i]}}
			want = append(want, histPoint{t: ts, h: hi[i]})
		default:
			bs.Histograms = []HistogramSample{{T: ts, FH: fh[i]}}
			want = append(want, histPoint{t: ts, fh: fh[i]})
		}
		res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{bs, {Labels: peer, Samples: []Sample{{T: ts, V: 2}}}}})
		if err != nil || res.Err() != nil {
			t.Fatalf("scrape %d: %v %v", i, err, res.Err())
		}
	}
	for i := 301; i < 400; i += 2 {
		ts := int64(i) * 15000
		res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Histograms: []HistogramSample{{T: ts, FH: fh[i]}}}}})
		if err != nil || res.Err() != nil || res.HistogramsWritten != 1 {
			t.Fatalf("late %d: %v %v", i, err, res.Err())
		}
	}
	for i := 300; i < 400; i++ {
		if i%2 == 1 {
			want = append(want, histPoint{})
			copy(want[i+1:], want[i:])
			want[i] = histPoint{t: int64(i) * 15000, fh: fh[i]}
		}
	}
	comparePoints(t, "x", readPoints(t, h, math.MinInt64, math.MaxInt64)[l.String()], want)
}

// TestHeadHistogramStaleness: a staleness marker in a histogram's sum reads
// back as written, and a float staleness marker after histograms becomes a
// histogram one (as in Prometheus's head).
func TestHeadHistogramStaleness(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	l := series("lat", "job", "j", "instance", "i")
	stale := &histogram.Histogram{Sum: math.Float64frombits(value.StaleNaN)}
	hs := []HistogramSample{{T: 1000, H: tsdbutil.GenerateTestHistogram(1)}, {T: 2000, H: stale}}
	if res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Histograms: hs}}}); err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	if res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: 3000, V: math.Float64frombits(value.StaleNaN)}}}}}); err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	got := readPoints(t, h, math.MinInt64, math.MaxInt64)[l.String()]
	if len(got) != 3 || got[1].h == nil || !value.IsStaleNaN(got[1].h.Sum) || got[2].h == nil || !value.IsStaleNaN(got[2].h.Sum) {
		t.Fatalf("read %v", got)
	}
}

// TestHeadHistogramReplay: histograms (in order and late) survive a restart
// from the WAL, and one from a checkpoint plus the WAL after it.
func TestHeadHistogramReplay(t *testing.T) {
	for _, checkpoint := range []bool{false, true} {
		t.Run(fmt.Sprintf("checkpoint=%v", checkpoint), func(t *testing.T) {
			dir := t.TempDir()
			h := openHead(t, dir, nil)
			want := histTarget(t, h, 150, 0)
			if checkpoint {
				if err := h.Checkpoint(math.MinInt64); err != nil {
					t.Fatal(err)
				}
			}
			// More after the checkpoint, and a late one.
			more := histTarget(t, h, 20, 150*15000)
			for k, v := range more {
				want[k] = append(want[k], v...)
			}
			l := series("lat_int", "job", "j", "instance", "i")
			late := tsdbutil.GenerateTestHistogram(7)
			res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Histograms: []HistogramSample{{T: 150*15000 - 7000, H: late}}}}})
			if err != nil || res.Err() != nil || res.HistogramsWritten != 1 {
				t.Fatalf("late: %v %v", err, res.Err())
			}
			k := l.String()
			want[k] = append(want[k][:150], append([]histPoint{{t: 150*15000 - 7000, h: late}}, want[k][150:]...)...)
			before := readPoints(t, h, math.MinInt64, math.MaxInt64)
			compareAll(t, before, want)
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			h = openHead(t, dir, nil)
			defer h.Close()
			after := readPoints(t, h, math.MinInt64, math.MaxInt64)
			compareAll(t, after, want)
			// The hints read after the restart are the ones read before it.
			for k := range before {
				for i := range before[k] {
					b, a := before[k][i], after[k][i]
					if b.h != nil && b.h.CounterResetHint != a.h.CounterResetHint || b.fh != nil && b.fh.CounterResetHint != a.fh.CounterResetHint {
						t.Fatalf("%s sample %d: hint %v before the restart, %v after", k, i, b, a)
					}
				}
			}
		})
	}
}

// TestHeadHistogramMembersDoNotHoldRows: histogram members of a group do not
// keep its float members' complete rows open (they never land on them).
func TestHeadHistogramMembersDoNotHoldRows(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	histTarget(t, h, 40, 0)
	h.forEachGroup(func(g *group) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if n := len(g.aligned.open); n > 1 {
			t.Errorf("%d open rows after 40 complete scrapes, want at most 1", n)
		}
		if g.nHist != 3 || g.nUnaligned != 3 {
			t.Errorf("%d histogram members of %d unaligned, want 3 of 3", g.nHist, g.nUnaligned)
		}
	})
}
