package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

const gcHour = int64(3600000)

// gcDB is a DB with 1 h block ranges whose clock follows the samples
// appended, and the model of what it must hold.
type gcDB struct {
	t    *testing.T
	dir  string
	now  int64
	db   *DB
	reg  *prometheus.Registry
	want model
}

func newGCDB(t *testing.T) *gcDB {
	f := &gcDB{t: t, dir: t.TempDir(), want: model{}}
	f.open()
	t.Cleanup(func() { f.db.Close() })
	return f
}

func (f *gcDB) open() {
	f.reg = prometheus.NewRegistry()
	f.db = openDB(f.t, f.dir, func(o *DBOptions) {
		o.Head.Registerer = f.reg
		o.Head.BlockRange = time.Hour
		o.Head.Now = func() int64 { return f.now }
	})
}

// metric returns the value of the head's gauge or counter name.
func (f *gcDB) metric(name string) int64 {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return int64(m.GetGauge().GetValue())
			}
			return int64(m.GetCounter().GetValue())
		}
	}
	f.t.Fatalf("metric %s not registered", name)
	return 0
}

// restart closes and reopens the DB.
func (f *gcDB) restart() {
	f.t.Helper()
	if err := f.db.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.open()
}

// appendAt writes one sample at ts to each series (value ts + its position)
// and advances the clock to ts.
func (f *gcDB) appendAt(ts int64, ls ...labels.Labels) {
	f.t.Helper()
	f.now = ts
	var b head.Batch
	for i, l := range ls {
		v := float64(ts) + float64(i)
		b.Series = append(b.Series, head.BatchSeries{Labels: l, Samples: []head.Sample{{T: ts, V: v}}})
		f.want.Add(l, ts, v)
	}
	if res, err := f.db.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
		f.t.Fatal(err, res.Err())
	}
}

func (f *gcDB) flush(all bool) {
	f.t.Helper()
	if err := f.db.Flush(all); err != nil {
		f.t.Fatal(err)
	}
}

// check compares everything the DB returns with what was written.
func (f *gcDB) check() {
	f.t.Helper()
	compareModels(f.t, f.want, dbAll(f.t, f.db))
}

// TestDBGCRemovesIdleGroups: a target stops sending; once its data is in
// blocks and it has been idle a block range, a flush removes its group and
// series from the head (series churn does not grow the head), its data stays
// queryable from blocks, a restart does not bring the series back, and the
// target may return with new series.
func TestDBGCRemovesIdleGroups(t *testing.T) {
	f := newGCDB(t)
	gone := []labels.Labels{series("m", "job", "j", "instance", "gone", "k", "a"), series("m", "job", "j", "instance", "gone", "k", "b")}
	stays := series("m", "job", "j", "instance", "stays")
	for ts := int64(0); ts < 2*gcHour; ts += 15000 {
		f.appendAt(ts, append([]labels.Labels{stays}, gone...)...)
	}
	for ts := 2 * gcHour; ts < 5*gcHour; ts += 15000 {
		f.appendAt(ts, stays)
	}
	f.flush(false)
	if got := f.metric("tandem_head_series"); got != 1 {
		t.Fatalf("%d series in the head after the flush, want 1 (the idle target's 2 removed)", got)
	}
	if got := f.metric("tandem_head_groups"); got != 1 {
		t.Fatalf("%d groups in the head, want 1", got)
	}
	if st, _ := f.db.Stats("", 0); st.NumSeries != 1 {
		t.Fatalf("head index holds %d series, want 1", st.NumSeries)
	}
	if n := f.metric("tandem_head_series_removed_total"); n != 2 {
		t.Fatalf("tandem_head_series_removed_total = %d, want 2", n)
	}
	f.check()

	// A restart does not bring the removed series back.
	f.restart()
	if got := f.metric("tandem_head_series"); got != 1 {
		t.Fatalf("%d series in the head after a restart, want 1", got)
	}
	f.check()

	// The target returns: new series, old data from blocks, new from the head.
	for ts := 5 * gcHour; ts < 5*gcHour+10*15000; ts += 15000 {
		f.appendAt(ts, append([]labels.Labels{stays}, gone...)...)
	}
	if got := f.metric("tandem_head_series"); got != 3 {
		t.Fatalf("%d series after the target returned, want 3", got)
	}
	f.check()
	f.restart()
	f.check()
}

// TestDBGCKeepsActiveGroups: a group with data in the head, or written
// recently, stays.
func TestDBGCKeepsActiveGroups(t *testing.T) {
	f := newGCDB(t)
	for ts := int64(0); ts < 3*gcHour; ts += 15000 {
		f.appendAt(ts, series("m", "instance", "a"))
	}
	f.flush(false)
	if g, s := f.db.head.GC(f.now - gcHour); g != 0 || s != 0 {
		t.Fatalf("GC removed %d groups, %d series with data in the head", g, s)
	}
	f.flush(true) // everything to blocks: the head is empty
	if got := f.metric("tandem_head_series"); got != 1 {
		t.Fatalf("a group written a moment ago was removed (%d series left)", got)
	}
	if g, s := f.db.head.GC(f.now + 1); g != 1 || s != 1 {
		t.Fatalf("GC of an empty, idle group removed %d groups, %d series; want 1, 1", g, s)
	}
	f.check()
}

// TestDBGCRemovesIdleMembers: a series disappears from a target that goes
// on sending; once its samples are in blocks and the group went on without
// it for a block range, it leaves the head; a new series of the target
// takes its column; every series reads back exactly, before and after a
// restart.
func TestDBGCRemovesIdleMembers(t *testing.T) {
	f := newGCDB(t)
	a := series("m", "job", "j", "instance", "i", "k", "a")
	b := series("m", "job", "j", "instance", "i", "k", "b")
	c := series("m", "job", "j", "instance", "i", "k", "c")
	for ts := int64(0); ts < gcHour; ts += 15000 {
		f.appendAt(ts, a, b)
	}
	for ts := gcHour; ts < 4*gcHour; ts += 15000 {
		f.appendAt(ts, a)
	}
	every := func(labels.Labels) bool { return true }
	refA, _ := f.db.ResolveHash(head.SeriesRef{}, a.Hash(), every)
	refB, ok := f.db.ResolveHash(refA, b.Hash(), every)
	if !ok {
		t.Fatal("b not in the head before the flush")
	}
	f.flush(false)
	if got := f.metric("tandem_head_series"); got != 1 {
		t.Fatalf("%d series in the head, want 1 (b removed)", got)
	}
	if _, ok := f.db.ResolveHash(head.SeriesRef{}, b.Hash(), every); ok {
		t.Fatal("a removed series is still resolved by its hash")
	}
	if _, ok := f.db.ResolveNext(refB, every); ok {
		t.Fatal("a removed series still resolves a successor for ResolveNext")
	}
	if got := f.metric("tandem_head_groups"); got != 1 {
		t.Fatalf("%d groups, want 1", got)
	}
	f.check()
	// c joins and takes b's column; a goes on.
	for ts := 4 * gcHour; ts < 4*gcHour+20*15000; ts += 15000 {
		f.appendAt(ts, a, c)
	}
	if gs := f.db.GroupStats(1); gs.Groups != 1 || gs.Series != 2 {
		t.Errorf("%d groups, %d series; want 1 and 2 (column reuse: TestGCFreedColumnReused in tsdb/head)", gs.Groups, gs.Series)
	}
	f.check()
	f.restart()
	f.check()
	if got := f.metric("tandem_head_series"); got != 2 {
		t.Errorf("%d series after a restart, want 2", got)
	}
}

// TestDBGCSeriesWithExemplars: a series whose exemplars went to a block with
// its samples is collected like any other, and its exemplars stay queryable.
func TestDBGCSeriesWithExemplars(t *testing.T) {
	f := newGCDB(t)
	gone := series("m_bucket", "instance", "gone", "le", "1")
	stays := series("m_bucket", "instance", "stays", "le", "1")
	ex := head.Exemplar{Labels: labels.FromStrings("trace_id", "abc"), T: 60000, V: 0.5}
	for ts := int64(0); ts < 5*gcHour; ts += 15000 {
		if ts < gcHour {
			f.appendAt(ts, stays, gone)
		} else {
			f.appendAt(ts, stays)
		}
		if ts == ex.T {
			b := head.Batch{Series: []head.BatchSeries{{Labels: gone, Exemplars: []head.Exemplar{ex}}}}
			if res, err := f.db.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
				t.Fatal(err, res.Err())
			}
		}
	}
	f.flush(false)
	if got := f.metric("tandem_head_series"); got != 1 {
		t.Fatalf("%d series in the head, want 1: the series with a flushed exemplar was kept", got)
	}
	eq, err := f.db.ExemplarQuerier(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := eq.Select(0, 5*gcHour, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "instance", "gone")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || len(res[0].Exemplars) != 1 || res[0].Exemplars[0].Ts != ex.T || !labels.Equal(res[0].Exemplars[0].Labels, ex.Labels) {
		t.Fatalf("exemplars of the collected series: %+v", res)
	}
}
