package tsdb

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
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

// TestHintLastSampleBlocks: over blocks (and a head holding the newest hour),
// the newest sample read with the push-down's hint, through the iterator and
// through AppendFloats, is the one a full read finds, for windows ending
// inside chunks, between them, after series stopped, at stale markers and
// where members are missing from some rows.
func TestHintLastSampleBlocks(t *testing.T) {
	const hour = int64(3600000)
	for _, all := range []bool{false, true} {
		db := openDB(t, t.TempDir(), func(o *DBOptions) {
			o.Head.BlockRange = time.Hour
			o.Head.Now = func() int64 { return 4 * hour }
		})
		stale := math.Float64frombits(value.StaleNaN)
		for ts := int64(0); ts < 3*hour; ts += 15000 {
			var b head.Batch
			for m := range 6 {
				v := float64(ts/15000*7 + int64(m))
				switch {
				case m == 1 && ts > hour+hour/3:
					continue // stops in the second hour
				case m == 2 && ts%(4*15000) == 0:
					continue // missing from every fourth row
				case m == 3 && ts == 2*hour-15000:
					v = stale // a marker at the end of a block
				case m == 4 && ts%hour < 10*60000:
					continue // joins late in every hour
				case m == 5:
					v = 1.5 // a constant column
				}
				b.Series = append(b.Series, head.BatchSeries{
					Labels:  series("hl", "job", "j", "instance", "i", "m", fmt.Sprint(m)),
					Samples: []head.Sample{{T: ts, V: v}},
				})
			}
			if res, err := db.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
				t.Fatal(err, res.Err())
			}
		}
		if err := db.Flush(all); err != nil {
			t.Fatal(err)
		}
		newest := func(start, end int64, fn string, appendFloats bool) map[string][2]float64 {
			q, err := db.Querier(start, end)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			ss := q.Select(context.Background(), false, &storage.SelectHints{Start: start, End: end, Func: fn},
				labels.MustNewMatcher(labels.MatchEqual, "__name__", "hl"))
			out := map[string][2]float64{}
			for ss.Next() {
				s := ss.At()
				var ts []int64
				var vs []float64
				if fa, ok := s.(fastread.FloatAppender); ok && appendFloats {
					if ts, vs, err = fa.AppendFloats(nil, nil, start+1, end); err != nil {
						t.Fatal(err)
					}
				} else {
					it := s.Iterator(nil)
					for vt := it.Seek(start + 1); vt == chunkenc.ValFloat; vt = it.Next() {
						t, v := it.At()
						ts, vs = append(ts, t), append(vs, v)
					}
				}
				if n := len(ts); n > 0 {
					out[s.Labels().Get("m")] = [2]float64{float64(ts[n-1]), vs[n-1]}
				}
			}
			if err := ss.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		}
		for end := int64(0); end < 3*hour+10*60000; end += 7 * 60000 {
			start := end - 5*60000
			want := newest(start, end, "", false)
			for _, af := range []bool{false, true} {
				got := newest(start, end, fastread.HintLastSample, af)
				if len(got) != len(want) {
					t.Fatalf("all=%v (%d, %d] appendFloats=%v: %d series with the hint, %d without", all, start, end, af, len(got), len(want))
				}
				for k, w := range want {
					if g := got[k]; g[0] != w[0] || math.Float64bits(g[1]) != math.Float64bits(w[1]) {
						t.Errorf("all=%v (%d, %d] appendFloats=%v m=%s: newest %v with the hint, %v without", all, start, end, af, k, g, w)
					}
				}
			}
		}
		db.Close()
	}
}
