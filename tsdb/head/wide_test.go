package head

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// wideGroup appends one sample at t0 for each of n members of one group and
// returns their labels.
func wideGroup(t *testing.T, h *Head, n int, t0 int64, want model) []labels.Labels {
	t.Helper()
	ls := make([]labels.Labels, n)
	var b Batch
	for m := range ls {
		ls[m] = series("wide", "job", "j", "instance", "i", "m", fmt.Sprint(m))
		b.Series = append(b.Series, BatchSeries{Labels: ls[m], Samples: []Sample{{T: t0, V: float64(m)}}})
		want.Add(ls[m], t0, float64(m))
	}
	if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	return ls
}

// heapGrowthPerSample runs app and returns the live heap it added (after
// two collections) per sample.
func heapGrowthPerSample(app func(), samples int) float64 {
	before := heapAfterGC()
	app()
	after := heapAfterGC()
	return (float64(after.live) - float64(before.live)) / float64(samples)
}

// TestHeadOneMemberManyTimestamps: in a group of 5,000 members, one member
// sending 20,000 distinct millisecond timestamps in one request must not
// open a 5,000-wide row for each (40 KB a sample): it goes to its own table
// after a few rows, and everything reads back.
func TestHeadOneMemberManyTimestamps(t *testing.T) {
	const members, samples = 5000, 20000
	dir := t.TempDir()
	h := openHead(t, dir, nil)
	t0 := h.opts.Now() - 10*60*1000
	want := model{}
	ls := wideGroup(t, h, members, t0, want)
	b := Batch{Series: []BatchSeries{{Labels: ls[7]}}}
	for i := 1; i <= samples; i++ {
		b.Series[0].Samples = append(b.Series[0].Samples, Sample{T: t0 + int64(i), V: float64(i) / 4})
		want.Add(ls[7], t0+int64(i), float64(i)/4)
	}
	perSample := heapGrowthPerSample(func() {
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}, samples)
	t.Logf("heap growth: %.1f bytes/sample", perSample)
	if perSample > 100 {
		t.Errorf("heap grew by %.0f bytes per sample of one member, want < 100", perSample)
	}
	g := h.seriesByRef(1).g
	g.mu.Lock()
	open, unaligned := len(g.aligned.open), g.nUnaligned
	g.mu.Unlock()
	if open > soloOpenLimit(members)+2 || unaligned != 1 {
		t.Errorf("%d open rows, %d unaligned members; want at most %d rows and the member unaligned", open, unaligned, soloOpenLimit(members)+2)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))

	// The group's members go on at one timestamp: they stay aligned.
	var next Batch
	for m, l := range ls {
		if m != 7 {
			next.Series = append(next.Series, BatchSeries{Labels: l, Samples: []Sample{{T: t0 + 15000, V: 1}}})
			want.Add(l, t0+15000, 1)
		}
	}
	if res, err := h.AppendBatch(context.Background(), &next); err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	if n := h.counters.unaligned.Load(); n != 1 {
		t.Errorf("%d unaligned members, want 1", n)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	// Replayed from the WAL, and from a checkpoint: the same samples.
	h.Close()
	h = openHead(t, dir, nil)
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	if err := h.Checkpoint(t0); err != nil {
		t.Fatal(err)
	}
	h.Close()
	h = openHead(t, dir, nil)
	defer h.Close()
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
}

// TestHeadOpenRowsBounded: two members of a 5,000-member group share
// thousands of timestamps no other member has (rows of two, which the solo
// rule does not catch): the group's open rows stay bounded, and everything
// reads back.
func TestHeadOpenRowsBounded(t *testing.T) {
	const members, samples = 5000, 5000
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	t0 := h.opts.Now() - 10*60*1000
	want := model{}
	ls := wideGroup(t, h, members, t0, want)
	var b Batch
	for _, l := range ls[3:5] {
		bs := BatchSeries{Labels: l}
		for i := 1; i <= samples; i++ {
			bs.Samples = append(bs.Samples, Sample{T: t0 + int64(i), V: float64(i)})
			want.Add(l, t0+int64(i), float64(i))
		}
		b.Series = append(b.Series, bs)
	}
	if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	g := h.seriesByRef(1).g
	g.mu.Lock()
	open := len(g.aligned.open)
	g.mu.Unlock()
	if limit := openRowLimit(members); open > limit {
		t.Errorf("%d open rows, want at most %d", open, limit)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
}

// TestSoloOpenLimit: the rows one member may hold alone shrink with the
// group's width, within bounds.
func TestSoloOpenLimit(t *testing.T) {
	for _, c := range []struct{ ncols, want int }{{1, maxSoloOpenRows}, {64, maxSoloOpenRows}, {5000, 13}, {1 << 20, soloRowsToUnalign}} {
		if got := soloOpenLimit(c.ncols); got != c.want {
			t.Errorf("soloOpenLimit(%d) = %d, want %d", c.ncols, got, c.want)
		}
	}
}
