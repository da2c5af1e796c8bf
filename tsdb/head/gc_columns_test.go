package head

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// TestGCFreedColumnReused: a member removed by GC is marked removed (no
// successor for ResolveNext), and a new member of its group takes its column.
func TestGCFreedColumnReused(t *testing.T) {
	const hour = int64(3600000)
	now := int64(0)
	h := openHead(t, t.TempDir(), func(o *Options) {
		o.BlockRange = time.Hour
		o.Now = func() int64 { return now }
	})
	defer h.Close()
	a := series("m", "job", "j", "instance", "i", "k", "a")
	b := series("m", "job", "j", "instance", "i", "k", "b")
	c := series("m", "job", "j", "instance", "i", "k", "c")
	app := func(ts int64, ls ...labels.Labels) {
		t.Helper()
		now = ts
		var bt Batch
		for _, l := range ls {
			bt.Series = append(bt.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: float64(ts)}}})
		}
		if res, err := h.AppendBatch(context.Background(), &bt); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	for ts := int64(0); ts < hour; ts += 15000 {
		app(ts, a, b)
	}
	for ts := hour; ts < 4*hour; ts += 15000 {
		app(ts, a)
	}
	sb, err := h.getOrCreate(b, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// What DB.Flush does, without writing the blocks.
	for {
		mint, maxt, ok := h.NextFlushRange(false)
		if !ok {
			break
		}
		r := h.ExportRange(mint, maxt)
		if err := r.Groups(func(*block.Group) error { return nil }); err != nil {
			t.Fatal(err)
		}
		r.Drop()
	}
	h.GC(now - hour)
	if got := h.counters.series.Load(); got != 1 {
		t.Fatalf("%d series in the head, want 1 (b removed)", got)
	}
	if !sb.removed() || sb.rawNext.Load() != nil {
		t.Fatal("a removed series is not marked removed for ResolveNext")
	}
	for ts := 4 * hour; ts < 4*hour+20*15000; ts += 15000 {
		app(ts, a, c)
	}
	var g *group
	h.forEachGroup(func(x *group) { g = x })
	g.mu.Lock()
	cols, free := len(g.members), len(g.free)
	g.mu.Unlock()
	if cols != 2 || free != 0 {
		t.Errorf("group has %d columns (%d free), want 2 (c reused b's)", cols, free)
	}
}
