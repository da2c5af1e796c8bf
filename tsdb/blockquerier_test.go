package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// TestBlockQuerierManySeries: a block querier over more series than
// parallelSelectMin returns them in label order, only those with samples in
// the range, and a limit truncates with a warning.
func TestBlockQuerierManySeries(t *testing.T) {
	const hour = int64(3600000)
	db := openDB(t, t.TempDir(), func(o *DBOptions) {
		o.Head.BlockRange = time.Hour
		o.Head.Now = func() int64 { return 4 * hour }
	})
	defer db.Close()
	const targets, perTarget = 60, 100 // 6000 series
	for ts := int64(0); ts < 3*hour; ts += 60000 {
		var b head.Batch
		for i := range targets {
			for m := range perTarget {
				if m%2 == 1 && ts >= hour/2 {
					continue // odd members stop half way through the first hour
				}
				b.Series = append(b.Series, head.BatchSeries{
					Labels:  series("many", "job", "j", "instance", fmt.Sprintf("i%02d", i), "m", fmt.Sprintf("%03d", m)),
					Samples: []head.Sample{{T: ts, V: float64(m)}},
				})
			}
		}
		if res, err := db.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	if err := db.Flush(true); err != nil {
		t.Fatal(err)
	}
	sel := func(mint, maxt int64, limit int) ([]labels.Labels, storage.SeriesSet) {
		q := &blockQuerier{mint: mint, maxt: maxt}
		bs, done := db.blocks.Acquire(0, hour-1)
		defer done()
		if len(bs) != 1 {
			t.Fatalf("%d blocks in the first hour", len(bs))
		}
		q.b = bs[0]
		defer q.Close()
		ss := q.Select(context.Background(), true, &storage.SelectHints{Start: mint, End: maxt, Limit: limit},
			labels.MustNewMatcher(labels.MatchEqual, "__name__", "many"))
		var out []labels.Labels
		for ss.Next() {
			out = append(out, ss.At().Labels())
		}
		if err := ss.Err(); err != nil {
			t.Fatal(err)
		}
		return out, ss
	}
	check := func(name string, got []labels.Labels, want int, odd bool) {
		t.Helper()
		if len(got) != want {
			t.Fatalf("%s: %d series, want %d", name, len(got), want)
		}
		for i, l := range got {
			if i > 0 && labels.Compare(got[i-1], l) >= 0 {
				t.Fatalf("%s: %s after %s", name, l, got[i-1])
			}
			var m int
			fmt.Sscanf(l.Get("m"), "%d", &m)
			if !odd && m%2 == 1 {
				t.Fatalf("%s: %s has no samples in the range", name, l)
			}
		}
	}
	all, _ := sel(0, hour-1, 0)
	check("whole block", all, targets*perTarget, true)
	late, _ := sel(hour/2, hour-1, 0)
	check("second half", late, targets*perTarget/2, false)
	lim, ss := sel(0, hour-1, 10)
	check("limit", lim, 10, true)
	if len(ss.Warnings()) == 0 {
		t.Fatalf("no warning for a truncated result")
	}
	for i := range lim {
		if !labels.Equal(lim[i], all[i]) {
			t.Fatalf("limited result %d: %s, want %s", i, lim[i], all[i])
		}
	}
}
