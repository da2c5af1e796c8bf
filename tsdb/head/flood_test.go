package head

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// floodBatch returns one series' n samples at t0+2i, newest first, valued i.
func floodBatch(l labels.Labels, t0 int64, n int) Batch {
	bs := BatchSeries{Labels: l, Samples: make([]Sample, 0, n)}
	for i := n - 1; i >= 0; i-- {
		bs.Samples = append(bs.Samples, Sample{T: t0 + 2*int64(i), V: float64(i)})
	}
	return Batch{Series: []BatchSeries{bs}}
}

// TestHeadOutOfOrderFlood: 100,000 samples of one series newest first in one
// request, over a second of history already in the head (some of it sealed,
// some in open rows), cost O(n log n) work, not O(n²): the late list's moves
// are bounded and no row is opened per sample. Every sample reads back in
// order, in the head and after WAL replay; re-sent identical samples are
// accepted, differing ones refused as duplicates.
func TestHeadOutOfOrderFlood(t *testing.T) {
	const n = 100000
	dir := t.TempDir()
	h := openHead(t, dir, nil)
	now := h.opts.Now()
	t0 := now - 30*60*1000 // 100,000 samples 2 ms apart: 200 s from t0
	l := series("flood", "job", "j", "instance", "i")
	other := series("flood_peer", "job", "j", "instance", "i")
	want := model{}
	// History: the series and a peer every second over the flood's range
	// and a minute beyond, so some of its rows are sealed and some open.
	for k := int64(0); k <= 260; k++ {
		ts := t0 + 1000*k
		b := Batch{Series: []BatchSeries{
			{Labels: l, Samples: []Sample{{T: ts, V: float64(ts - t0)}}},
			{Labels: other, Samples: []Sample{{T: ts, V: 1}}},
		}}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
		want.Add(l, ts, float64(ts-t0))
		want.Add(other, ts, 1)
	}
	b := floodBatch(l, t0, n)
	// Where the flood meets the history (every 500th sample), half repeat the
	// history's value, half differ; and a few samples appear twice in the
	// flood itself, once with the same value and once with another.
	dupSame, dupDiff := 0, 0
	wantL := want[l.String()]
	for i := range b.Series[0].Samples {
		s := &b.Series[0].Samples[i]
		off := s.T - t0
		if off%1000 != 0 {
			wantL[s.T] = math.Float64bits(s.V)
			continue
		}
		if off%2000 == 0 {
			s.V = float64(off)
			dupSame++
		} else {
			dupDiff++
		}
	}
	for _, i := range []int{1, 999, 54321} {
		smp := b.Series[0].Samples[n-1-i]
		b.Series[0].Samples = append(b.Series[0].Samples, smp, Sample{T: smp.T, V: smp.V + 1})
		dupSame++
		dupDiff++
	}
	moved := lateMoved.Load()
	res, err := h.AppendBatch(context.Background(), &b)
	if err != nil {
		t.Fatal(err)
	}
	moved = lateMoved.Load() - moved
	if got := res.Rejected[ErrDuplicateSample]; got != dupDiff || res.RejectedTotal() != dupDiff {
		t.Errorf("rejected %v, want %d duplicates", res.Rejected, dupDiff)
	}
	if res.SamplesWritten != len(b.Series[0].Samples)-dupDiff {
		t.Errorf("%d samples written, want %d (%d identical re-sent)", res.SamplesWritten, len(b.Series[0].Samples)-dupDiff, dupSame)
	}
	t.Logf("late list: %d samples moved for %d out of order", moved, n)
	// Binary-counter merging moves each sample about log2(n) times.
	if limit := int64(2 * n * bits.Len(n)); moved > limit {
		t.Errorf("late list moved %d samples for %d, want at most %d (n log n)", moved, n, limit)
	}
	g := h.seriesByRef(1).g
	g.mu.Lock()
	open := len(g.aligned.open)
	g.mu.Unlock()
	if open > 100 {
		t.Errorf("%d open rows after the flood, want about a minute's worth (60)", open)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	// Part of the request again (a retry): identical, accepted, not logged.
	retry := Batch{Series: []BatchSeries{{Labels: l}}}
	for _, smp := range b.Series[0].Samples[n/2 : n/2+5000] {
		if (smp.T-t0)%1000 != 0 {
			retry.Series[0].Samples = append(retry.Series[0].Samples, smp)
		}
	}
	before := h.counters.appended.Load()
	res, err = h.AppendBatch(context.Background(), &retry)
	if err != nil || res.Err() != nil || res.SamplesWritten != len(retry.Series[0].Samples) || h.counters.appended.Load() != before {
		t.Fatalf("retry: %v %v, %d written, %d logged", err, res.Err(), res.SamplesWritten, h.counters.appended.Load()-before)
	}
	h.Close()
	h2 := openHead(t, dir, nil)
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}

// TestHeadOutOfOrderFloodOpenWindow: a flood newest first within the open
// window of a fresh group (nothing sealed yet) opens no row per sample (a
// row is as wide as the group); the samples read back in order.
func TestHeadOutOfOrderFloodOpenWindow(t *testing.T) {
	const n = 30000
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	t0 := h.opts.Now() - 10*60*1000
	l := series("flood", "job", "j", "instance", "i")
	peer := series("flood_peer", "job", "j", "instance", "i")
	want := model{}
	newest := t0 + 2*n
	b := Batch{Series: []BatchSeries{{Labels: peer, Samples: []Sample{{T: newest, V: 1}}}}}
	want.Add(peer, newest, 1)
	fb := floodBatch(l, t0, n)
	b.Series = append(b.Series, fb.Series[0])
	for _, s := range fb.Series[0].Samples {
		want.Add(l, s.T, s.V)
	}
	if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	g := h.seriesByRef(1).g
	g.mu.Lock()
	open := len(g.aligned.open)
	g.mu.Unlock()
	if open > 2 {
		t.Errorf("%d open rows after %d samples out of order, want 2", open, n)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
}

// TestLateListRandomOrder checks the late list against a map, samples
// inserted in random order with lookups and reads in between.
func TestLateListRandomOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	x := &seriesExtra{}
	ref := map[int64]float64{}
	for i := 0; i < 20000; i++ {
		ts := rng.Int63n(30000)
		v, found := x.findLate(ts)
		rv, rfound := ref[ts]
		if found != rfound || found && v != rv {
			t.Fatalf("findLate(%d) = %v %v, want %v %v", ts, v, found, rv, rfound)
		}
		if !found {
			x.insertLate(ts, float64(i))
			ref[ts] = float64(i)
		}
		if len(x.lateRuns) > bits.Len(uint(len(ref)))+1 {
			t.Fatalf("%d runs for %d samples", len(x.lateRuns), len(ref))
		}
		if i%5000 == 4999 {
			checkLate(t, x.sortedLate(), ref)
		}
	}
	checkLate(t, x.sortedLate(), ref)
	if got := lateIn(x.late, 100, 200); len(got) > 0 && (got[0].T < 100 || got[len(got)-1].T > 200) {
		t.Fatalf("lateIn(100, 200) returned %d..%d", got[0].T, got[len(got)-1].T)
	}
}

func checkLate(t *testing.T, late []Sample, ref map[int64]float64) {
	t.Helper()
	if len(late) != len(ref) {
		t.Fatalf("%d late samples, want %d", len(late), len(ref))
	}
	if !slices.IsSortedFunc(late, func(a, b Sample) int { return int(a.T - b.T) }) {
		t.Fatal("late samples not sorted")
	}
	for _, s := range late {
		if ref[s.T] != s.V {
			t.Fatalf("late sample at %d is %v, want %v", s.T, s.V, ref[s.T])
		}
	}
}

// TestHeadLateFloodReplayedOutOfOrder: samples older than the head's range
// (late, for out-of-order blocks) flood in newest first and are replayed
// from the WAL, where replay meets them in log order again.
func TestHeadLateFloodReplayedOutOfOrder(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.MinValidTime = o.Now() - time.Hour.Milliseconds() }
	h := openHead(t, dir, mod)
	l := series("lateflood", "job", "j", "instance", "i")
	t0 := h.opts.Now() - 3*time.Hour.Milliseconds()
	b := floodBatch(l, t0, 30000)
	if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	want := model{}
	for _, s := range b.Series[0].Samples {
		want.Add(l, s.T, s.V)
	}
	// One differing duplicate of a late sample is refused.
	dup := Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: t0 + 20, V: -1}, {T: t0 + 40, V: 20}}}}}
	res, err := h.AppendBatch(context.Background(), &dup)
	if err != nil || res.Rejected[ErrDuplicateSample] != 1 || res.SamplesWritten != 1 {
		t.Fatalf("duplicates: %v, written %d, rejected %v", err, res.SamplesWritten, res.Rejected)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	h.Close()
	h2 := openHead(t, dir, mod)
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}

// BenchmarkAppendOutOfOrderFlood appends one series' samples newest first in
// one request (n of them, 2 ms apart): ns/sample should not grow with n.
func BenchmarkAppendOutOfOrderFlood(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			l := series("flood", "job", "j", "instance", "i")
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				h := openBenchHead(b)
				batch := floodBatch(l, h.opts.Now()-30*60*1000, n)
				b.StartTimer()
				if res, err := h.AppendBatch(context.Background(), &batch); err != nil || res.Err() != nil {
					b.Fatal(err, res.Err())
				}
				b.StopTimer()
				h.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
		})
	}
}

// TestLateDuplicates: a sample re-sent at the time of a late one (in a run
// not merged yet, or in the merged list) is an identical duplicate when its
// value bits are equal and a duplicate error otherwise, in the out-of-order
// window and older than the head.
func TestLateDuplicates(t *testing.T) {
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	s, err := h.getOrCreate(series("dup", "job", "j", "instance", "i"), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, ao, now := s.g, h.appendOpts(), h.opts.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.append(s, now, 1, ao, &h.counters); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 100; i++ { // newest first: runs of the late list
		if err := g.append(s, now-i*1000, float64(i), ao, &h.counters); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.x.lateRuns) == 0 {
		t.Fatal("no unmerged run: the test does not cover runs")
	}
	check := func(what string) {
		t.Helper()
		for _, i := range []int64{1, 37, 100} {
			if err := g.append(s, now-i*1000, float64(i), ao, &h.counters); err != errDupSame {
				t.Errorf("%s: identical at -%ds: %v, want errDupSame", what, i, err)
			}
			if err := g.append(s, now-i*1000, math.Float64frombits(math.Float64bits(float64(i))^1), ao, &h.counters); !errors.Is(err, ErrDuplicateSample) {
				t.Errorf("%s: different at -%ds: %v, want ErrDuplicateSample", what, i, err)
			}
			if err := g.appendLate(s, now-i*1000, float64(i), &h.counters); err != errDupSame {
				t.Errorf("%s: appendLate identical at -%ds: %v, want errDupSame", what, i, err)
			}
			if err := g.appendLate(s, now-i*1000, -1, &h.counters); !errors.Is(err, ErrDuplicateSample) {
				t.Errorf("%s: appendLate different at -%ds: %v, want ErrDuplicateSample", what, i, err)
			}
		}
	}
	check("runs")
	if n := len(s.late()); n != 100 || len(s.x.lateRuns) != 0 {
		t.Fatalf("%d late samples in %d runs after a read, want 100 in 0", n, len(s.x.lateRuns))
	}
	check("merged")
}
