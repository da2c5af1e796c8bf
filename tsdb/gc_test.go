package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// TestDBGCRemovesIdleGroups: a target stops sending; once its data is in
// blocks and it has been idle a block range, a flush removes its group and
// series from the head (series churn does not grow the head), its data stays
// queryable from blocks, a restart does not bring the series back, and the
// target may return with new series.
func TestDBGCRemovesIdleGroups(t *testing.T) {
	const hour = int64(3600000)
	var now int64
	dir := t.TempDir()
	open := func() *DB {
		return openDB(t, dir, func(o *DBOptions) {
			o.Head.BlockRange = time.Hour
			o.Head.Now = func() int64 { return now }
		})
	}
	db := open()
	want := model{}
	gone := []labels.Labels{series("m", "job", "j", "instance", "gone", "k", "a"), series("m", "job", "j", "instance", "gone", "k", "b")}
	stays := series("m", "job", "j", "instance", "stays")
	appendAt := func(ts int64, ls ...labels.Labels) {
		t.Helper()
		now = ts
		var b Batch
		for _, l := range ls {
			b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: float64(ts)}}})
			want.add(l, ts, float64(ts))
		}
		if res, err := db.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	for ts := int64(0); ts < 2*hour; ts += 15000 {
		appendAt(ts, append([]labels.Labels{stays}, gone...)...)
	}
	for ts := 2 * hour; ts < 5*hour; ts += 15000 {
		appendAt(ts, stays)
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	h := db.Head()
	if got := h.counters.series.Load(); got != 1 {
		t.Fatalf("%d series in the head after the flush, want 1 (the idle target's 2 removed)", got)
	}
	if got := h.counters.groups.Load(); got != 1 {
		t.Fatalf("%d groups in the head, want 1", got)
	}
	if n := h.index.numSeries(); n != 1 {
		t.Fatalf("head index holds %d series, want 1", n)
	}
	if n := h.counters.gcSeries.Load(); n != 2 {
		t.Fatalf("tandem_head_series_removed_total = %d, want 2", n)
	}
	compareModels(t, want, dbAll(t, db))

	// A restart does not bring the removed series back.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	h = db.Head()
	if got := h.counters.series.Load(); got != 1 {
		t.Fatalf("%d series in the head after a restart, want 1", got)
	}
	compareModels(t, want, dbAll(t, db))

	// The target returns: new series, old data from blocks, new from the head.
	for ts := 5 * hour; ts < 5*hour+10*15000; ts += 15000 {
		appendAt(ts, append([]labels.Labels{stays}, gone...)...)
	}
	if got := h.counters.series.Load(); got != 3 {
		t.Fatalf("%d series after the target returned, want 3", got)
	}
	compareModels(t, want, dbAll(t, db))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	defer db.Close()
	compareModels(t, want, dbAll(t, db))
}

// TestDBGCKeepsActiveGroups: a group with data in the head, or written
// recently, stays.
func TestDBGCKeepsActiveGroups(t *testing.T) {
	const hour = int64(3600000)
	var now int64
	db := openDB(t, t.TempDir(), func(o *DBOptions) {
		o.Head.BlockRange = time.Hour
		o.Head.Now = func() int64 { return now }
	})
	defer db.Close()
	a := series("m", "instance", "a")
	for ts := int64(0); ts < 3*hour; ts += 15000 {
		now = ts
		if _, err := db.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: a, Samples: []Sample{{T: ts, V: 1}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if g, s := db.Head().GC(now - hour); g != 0 || s != 0 {
		t.Fatalf("GC removed %d groups, %d series with data in the head", g, s)
	}
	if err := db.Flush(true); err != nil { // everything to blocks: the head is empty
		t.Fatal(err)
	}
	if got := db.Head().counters.series.Load(); got != 1 {
		t.Fatalf("a group written a moment ago was removed (%d series left)", got)
	}
	if g, s := db.Head().GC(now + 1); g != 1 || s != 1 {
		t.Fatalf("GC of an empty, idle group removed %d groups, %d series; want 1, 1", g, s)
	}
}

// TestDBGCRemovesIdleMembers: a series disappears from a target that goes
// on sending; once its samples are in blocks and the group went on without
// it for a block range, it leaves the head; a new series of the target
// takes its column; every series reads back exactly, before and after a
// restart.
func TestDBGCRemovesIdleMembers(t *testing.T) {
	const hour = int64(3600000)
	var now int64
	dir := t.TempDir()
	open := func() *DB {
		return openDB(t, dir, func(o *DBOptions) {
			o.Head.BlockRange = time.Hour
			o.Head.Now = func() int64 { return now }
		})
	}
	db := open()
	want := model{}
	a := series("m", "job", "j", "instance", "i", "k", "a")
	b := series("m", "job", "j", "instance", "i", "k", "b")
	c := series("m", "job", "j", "instance", "i", "k", "c")
	appendAt := func(ts int64, ls ...labels.Labels) {
		t.Helper()
		now = ts
		var bt Batch
		for i, l := range ls {
			v := float64(ts) + float64(i)
			bt.Series = append(bt.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: v}}})
			want.add(l, ts, v)
		}
		if res, err := db.AppendBatch(context.Background(), &bt); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	for ts := int64(0); ts < hour; ts += 15000 {
		appendAt(ts, a, b)
	}
	for ts := hour; ts < 4*hour; ts += 15000 {
		appendAt(ts, a)
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	h := db.Head()
	if got := h.counters.series.Load(); got != 1 {
		t.Fatalf("%d series in the head, want 1 (b removed)", got)
	}
	if got := h.counters.groups.Load(); got != 1 {
		t.Fatalf("%d groups, want 1", got)
	}
	compareModels(t, want, dbAll(t, db))
	// c joins and takes b's column; a goes on.
	for ts := 4 * hour; ts < 4*hour+20*15000; ts += 15000 {
		appendAt(ts, a, c)
	}
	var g *group
	h.forEachGroup(func(x *group) { g = x })
	g.mu.Lock()
	cols, free := len(g.members), len(g.free)
	g.mu.Unlock()
	if cols != 2 || free != 0 {
		t.Errorf("group has %d columns (%d free), want 2 (c reused b's)", cols, free)
	}
	compareModels(t, want, dbAll(t, db))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	defer db.Close()
	compareModels(t, want, dbAll(t, db))
	if got := db.Head().counters.series.Load(); got != 2 {
		t.Errorf("%d series after a restart, want 2", got)
	}
}

// TestDBGCSeriesWithExemplars: a series whose exemplars went to a block with
// its samples is collected like any other, and its exemplars stay queryable.
func TestDBGCSeriesWithExemplars(t *testing.T) {
	const hour = int64(3600000)
	var now int64
	db := openDB(t, t.TempDir(), func(o *DBOptions) {
		o.Head.BlockRange = time.Hour
		o.Head.Now = func() int64 { return now }
	})
	defer db.Close()
	gone := series("m_bucket", "instance", "gone", "le", "1")
	stays := series("m_bucket", "instance", "stays", "le", "1")
	ex := Exemplar{Labels: labels.FromStrings("trace_id", "abc"), T: 60000, V: 0.5}
	for ts := int64(0); ts < 5*hour; ts += 15000 {
		now = ts
		b := Batch{Series: []BatchSeries{{Labels: stays, Samples: []Sample{{T: ts, V: 1}}}}}
		if ts < hour {
			bs := BatchSeries{Labels: gone, Samples: []Sample{{T: ts, V: 1}}}
			if ts == ex.T {
				bs.Exemplars = []Exemplar{ex}
			}
			b.Series = append(b.Series, bs)
		}
		if res, err := db.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if got := db.Head().counters.series.Load(); got != 1 {
		t.Fatalf("%d series in the head, want 1: the series with a flushed exemplar was kept", got)
	}
	eq, err := db.ExemplarQuerier(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := eq.Select(0, 5*hour, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "instance", "gone")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || len(res[0].Exemplars) != 1 || res[0].Exemplars[0].Ts != ex.T || !labels.Equal(res[0].Exemplars[0].Labels, ex.Labels) {
		t.Fatalf("exemplars of the collected series: %+v", res)
	}
}
