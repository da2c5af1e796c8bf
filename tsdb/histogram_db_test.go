package tsdb

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// hpoint is one sample read back: a float or a histogram.
type hpoint struct {
	t  int64
	f  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

func (p hpoint) String() string {
	switch {
	case p.h != nil:
		return fmt.Sprintf("%d:%s", p.t, p.h)
	case p.fh != nil:
		return fmt.Sprintf("%d:%s", p.t, p.fh)
	}
	return fmt.Sprintf("%d:%v", p.t, p.f)
}

// same compares the data bit for bit (sums included), not the counter reset hint.
func (p hpoint) same(q hpoint) bool {
	switch {
	case p.t != q.t:
		return false
	case p.h != nil || q.h != nil:
		return p.h != nil && q.h != nil && p.h.Equals(q.h)
	case p.fh != nil || q.fh != nil:
		return p.fh != nil && q.fh != nil && p.fh.Equals(q.fh)
	}
	return math.Float64bits(p.f) == math.Float64bits(q.f)
}

type hmodel map[string][]hpoint

// readIterator appends what it yields to pts.
func readIterator(t *testing.T, it chunkenc.Iterator, pts []hpoint) []hpoint {
	t.Helper()
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		switch vt {
		case chunkenc.ValFloat:
			ts, v := it.At()
			pts = append(pts, hpoint{t: ts, f: v})
		case chunkenc.ValHistogram:
			ts, h := it.AtHistogram(nil)
			pts = append(pts, hpoint{t: ts, h: h})
		case chunkenc.ValFloatHistogram:
			ts, fh := it.AtFloatHistogram(nil)
			pts = append(pts, hpoint{t: ts, fh: fh})
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return pts
}

// readHModel reads every series of db through its querier and, chunk by
// chunk, through its chunk querier (remote read's streamed chunks); both must agree.
func readHModel(t *testing.T, db *DB) hmodel {
	t.Helper()
	all := labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	out := hmodel{}
	ss := q.Select(context.Background(), true, nil, all)
	for ss.Next() {
		out[ss.At().Labels().String()] = readIterator(t, ss.At().Iterator(nil), nil)
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	cq, err := db.ChunkQuerier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	cs := cq.Select(context.Background(), true, nil, all)
	chunks := hmodel{}
	for cs.Next() {
		var pts []hpoint
		ci := cs.At().Iterator(nil)
		for ci.Next() {
			pts = readIterator(t, ci.At().Chunk.Iterator(nil), pts)
		}
		if err := ci.Err(); err != nil {
			t.Fatal(err)
		}
		chunks[cs.At().Labels().String()] = pts
	}
	if err := cs.Err(); err != nil {
		t.Fatal(err)
	}
	compareHModels(t, "chunk querier vs querier", chunks, out)
	return out
}

func compareHModels(t *testing.T, what string, got, want hmodel) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d series, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		g := got[k]
		if len(g) != len(w) {
			t.Fatalf("%s: %s: %d samples, want %d", what, k, len(g), len(w))
		}
		for i := range w {
			if !g[i].same(w[i]) {
				t.Fatalf("%s: %s sample %d: %v, want %v", what, k, i, g[i], w[i])
			}
		}
	}
}

// TestDBHistogramsThroughBlocks: histogram members of several targets,
// beside float members, go through flushes, an out-of-order block, a
// snapshot, compaction, a tombstone rewrite and a restart, and read back bit for bit through the
// querier and the chunk querier.
func TestDBHistogramsThroughBlocks(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *DBOptions) {
		o.Head.BlockRange = time.Hour
		o.Head.ChunkRows = 60
		o.Head.Now = func() int64 { return 6 * time.Hour.Milliseconds() }
	}
	db := openDB(t, dir, mod)
	want := hmodel{}
	const targets, scrapes = 3, 5 * 240 // 5 h at 15 s
	write := func(i int) {
		ts := int64(i) * 15000
		var b head.Batch
		for tg := 0; tg < targets; tg++ {
			inst := fmt.Sprint(tg)
			up := labels.FromStrings("__name__", "up", "instance", inst, "job", "j")
			hi := labels.FromStrings("__name__", "lat", "instance", inst, "job", "j")
			fh := labels.FromStrings("__name__", "lat_float", "instance", inst, "job", "j")
			cb := labels.FromStrings("__name__", "lat_nhcb", "instance", inst, "job", "j")
			h, f, c := tsdbutil.GenerateTestHistogram(int64(i+tg)), tsdbutil.GenerateTestFloatHistogram(int64(i)), tsdbutil.GenerateTestCustomBucketsHistogram(int64(i/3))
			b.Series = append(b.Series,
				head.BatchSeries{Labels: up, Samples: []head.Sample{{T: ts, V: float64(i % 7)}}},
				head.BatchSeries{Labels: hi, Histograms: []head.HistogramSample{{T: ts, H: h}}},
				head.BatchSeries{Labels: fh, Histograms: []head.HistogramSample{{T: ts, FH: f}}},
				head.BatchSeries{Labels: cb, Histograms: []head.HistogramSample{{T: ts, H: c}}},
			)
			want[up.String()] = append(want[up.String()], hpoint{t: ts, f: float64(i % 7)})
			want[hi.String()] = append(want[hi.String()], hpoint{t: ts, h: h})
			want[fh.String()] = append(want[fh.String()], hpoint{t: ts, fh: f})
			want[cb.String()] = append(want[cb.String()], hpoint{t: ts, h: c})
		}
		res, err := db.AppendBatch(context.Background(), &b)
		if err != nil || res.Err() != nil || res.HistogramsWritten != 3*targets {
			t.Fatalf("scrape %d: %v %v, %d histograms written", i, err, res.Err(), res.HistogramsWritten)
		}
	}
	for i := 0; i < scrapes; i++ {
		if i%240 == 0 && i > 0 {
			if err := db.Flush(false); err != nil {
				t.Fatal(err)
			}
		}
		if i == 700 {
			// A histogram for a range already in a block: an out-of-order block.
			l := labels.FromStrings("__name__", "lat", "instance", "0", "job", "j")
			late := hpoint{t: 100*15000 + 7000, h: tsdbutil.GenerateTestHistogram(99)}
			res, err := db.AppendBatch(context.Background(), &head.Batch{Series: []head.BatchSeries{{Labels: l, Histograms: []head.HistogramSample{{T: late.t, H: late.h}}}}})
			if err != nil || res.Err() != nil || res.HistogramsWritten != 1 {
				t.Fatalf("late: %v %v", err, res.Err())
			}
			k := l.String()
			want[k] = append(want[k][:101], append([]hpoint{late}, want[k][101:]...)...)
		}
		write(i)
	}
	compareHModels(t, "head and blocks", readHModel(t, db), want)
	// A snapshot with the head holds them too.
	snap := t.TempDir()
	if err := db.Snapshot(snap, true); err != nil {
		t.Fatal(err)
	}
	sdb := openDB(t, snap, mod)
	compareHModels(t, "snapshot", readHModel(t, sdb), want)
	if err := sdb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(true); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	compareHModels(t, "after compaction", readHModel(t, db), want)

	// Delete an hour of one histogram series; the rewrite drops its samples.
	del := labels.MustNewMatcher(labels.MatchEqual, "__name__", "lat_float")
	if err := db.Delete(context.Background(), 3600000, 7200000-1, del); err != nil {
		t.Fatal(err)
	}
	for k, pts := range want {
		if !strings.HasPrefix(k, `{__name__="lat_float"`) {
			continue
		}
		var keep []hpoint
		for _, p := range pts {
			if p.t < 3600000 || p.t > 7200000-1 {
				keep = append(keep, p)
			}
		}
		want[k] = keep
	}
	compareHModels(t, "after a delete", readHModel(t, db), want)
	if err := db.CleanTombstones(); err != nil {
		t.Fatal(err)
	}
	compareHModels(t, "after the tombstone rewrite", readHModel(t, db), want)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir, mod)
	defer db.Close()
	compareHModels(t, "after a restart", readHModel(t, db), want)
	if len(db.Blocks()) == 0 {
		t.Fatal("no blocks")
	}
}

var _ storage.Storage = (*DB)(nil)
