package head

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// stPoint is a sample's time and start timestamp as read back.
type stPoint struct{ t, st int64 }

// readStarts reads the start timestamp of every sample of every series.
func readStarts(t *testing.T, h *Head) map[string][]stPoint {
	t.Helper()
	q, err := h.Querier(0, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	out := map[string][]stPoint{}
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+"))
	var it chunkenc.Iterator
	for ss.Next() {
		it = ss.At().Iterator(it)
		var pts []stPoint
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			pts = append(pts, stPoint{it.AtT(), it.AtST()})
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		out[ss.At().Labels().String()] = pts
	}
	return out
}

// TestStartTimestamps writes floats and histograms with start timestamps
// (constant, deltas, resets, none, one out of order) in two groups, and reads
// every sample's start timestamp back live, after a WAL replay and after a
// checkpoint.
func TestStartTimestamps(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, func(o *Options) { o.OutOfOrderWindow = time.Hour })
	want := map[string][]stPoint{}
	cum := labels.FromStrings("__name__", "cum", "job", "a")
	delta := labels.FromStrings("__name__", "delta", "job", "a")
	plain := labels.FromStrings("__name__", "plain", "job", "a")
	hist := labels.FromStrings("__name__", "hist", "job", "b")
	hs := tsdbutil.GenerateTestHistograms(40)
	for i := int64(0); i < 40; i++ {
		ts := 1000 + i*15000
		cumST := int64(500)
		if i >= 20 {
			cumST = ts - 7 // a reset
		}
		if i == 30 {
			cumST = 0 // a sample without one among them
		}
		histST := int64(0)
		if i%2 == 0 {
			histST = ts - 15000
		}
		b := &Batch{Series: []BatchSeries{
			{Labels: cum, Samples: []Sample{{T: ts, V: float64(i)}}, Starts: []int64{cumST}},
			{Labels: delta, Samples: []Sample{{T: ts, V: 1}}, Starts: []int64{ts - 15000}},
			{Labels: plain, Samples: []Sample{{T: ts, V: 2}}},
			{Labels: hist, Histograms: []HistogramSample{{T: ts, H: hs[i], ST: histST}}},
		}}
		if i == 39 {
			// One sample of cum out of order, between two others, with its own start.
			b.Series = append(b.Series, BatchSeries{Labels: cum, Samples: []Sample{{T: ts - 20000, V: 0.5}}, Starts: []int64{42}})
		}
		res, err := h.AppendBatch(context.Background(), b)
		if err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
		want[cum.String()] = append(want[cum.String()], stPoint{ts, cumST})
		want[delta.String()] = append(want[delta.String()], stPoint{ts, ts - 15000})
		want[plain.String()] = append(want[plain.String()], stPoint{ts, 0})
		want[hist.String()] = append(want[hist.String()], stPoint{ts, histST})
	}
	c := want[cum.String()]
	c = append(c[:38:38], stPoint{1000 + 39*15000 - 20000, 42}, c[38], c[39])
	want[cum.String()] = c
	check := func(when string) {
		t.Helper()
		got := readStarts(t, h)
		for k, w := range want {
			g := got[k]
			if len(g) != len(w) {
				t.Fatalf("%s: %s: %d samples, want %d", when, k, len(g), len(w))
			}
			for i := range w {
				if g[i] != w[i] {
					t.Fatalf("%s: %s: sample %d is %+v, want %+v", when, k, i, g[i], w[i])
				}
			}
		}
	}
	check("live")
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h = openHead(t, dir, func(o *Options) { o.OutOfOrderWindow = time.Hour })
	check("after replay")
	if err := h.Checkpoint(0); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h = openHead(t, dir, func(o *Options) { o.OutOfOrderWindow = time.Hour })
	defer h.Close()
	check("after checkpoint")
}

// TestStartTimestampLastSample: an instant selector's one-sample read
// (fastread.HintLastSample) keeps the sample's start timestamp.
func TestStartTimestampLastSample(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	ls := labels.FromStrings("__name__", "c", "job", "a")
	for i, st := range []int64{0, 77, 77} {
		b := &Batch{Series: []BatchSeries{{Labels: ls, Samples: []Sample{{T: int64(1000 * (i + 1)), V: 1}}, Starts: []int64{st}}}}
		if _, err := h.AppendBatch(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	q, err := h.Querier(0, 5000)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), false, &storage.SelectHints{Start: 0, End: 5000, Func: fastread.HintLastSample},
		labels.MustNewMatcher(labels.MatchEqual, "job", "a"))
	if !ss.Next() {
		t.Fatal("no series")
	}
	s := ss.At()
	if st, ok := s.(fastread.StartTimestamper); !ok || !st.HasStartTimestamps() {
		t.Error("the one-sample series does not report its start timestamp")
	}
	it := s.Iterator(nil)
	if it.Next() != chunkenc.ValFloat || it.AtT() != 3000 || it.AtST() != 77 {
		t.Fatalf("last sample (t, st) = (%d, %d), want (3000, 77)", it.AtT(), it.AtST())
	}
	if it.Next() != chunkenc.ValNone {
		t.Fatal("more than the last sample")
	}
}
