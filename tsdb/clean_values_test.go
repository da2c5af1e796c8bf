package tsdb

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// TestCleanTombstonesKeepsOtherSeries: cleaning tombstones rewrites a block
// whose first group loses a middle member's column and whose second group
// loses its last; every other series must keep its own values. Found by the
// crash campaign (TestCrashCampaign): the rewrite compacted the first group's
// columns in place, the block reader reused the aliased column buffers for
// the second group, and one series of it showed another's values.
func TestCleanTombstonesKeepsOtherSeries(t *testing.T) {
	base := int64(1 << 40) // 1776 ms after a 2 s boundary
	db := openDB(t, t.TempDir(), func(o *DBOptions) {
		o.Head.BlockRange = 2 * time.Second
		o.Head.Now = func() int64 { return base + 3600_000 }
	})
	defer db.Close()
	value := func(inst, j int, ts int64) float64 { return float64(inst*100+j*10) + float64(ts-base)/1e5 }
	for ts := base; ts < base+5000; ts += 25 {
		for inst := range 2 {
			b := &head.Batch{}
			for j := range 3 {
				var smp []head.Sample
				for k := range int64(5) {
					smp = append(smp, head.Sample{T: ts + k*5, V: value(inst, j, ts+k*5)})
				}
				b.Series = append(b.Series, head.BatchSeries{Labels: series("m", "job", "j", "instance", fmt.Sprint(inst), "series", fmt.Sprint(j)), Samples: smp})
			}
			if _, err := db.AppendBatch(context.Background(), b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if len(db.Blocks()) == 0 {
		t.Fatal("no block")
	}
	// The first block, [base-1776, base+224), loses instance 0's series 1
	// and instance 1's series 2.
	for _, d := range []struct{ inst, j int }{{0, 1}, {1, 2}} {
		ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "instance", fmt.Sprint(d.inst)), labels.MustNewMatcher(labels.MatchEqual, "series", fmt.Sprint(d.j))}
		if err := db.Delete(context.Background(), base, base+500, ms...); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CleanTombstones(); err != nil {
		t.Fatal(err)
	}
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	bad, n := 0, 0
	for ss.Next() {
		s := ss.At()
		var inst, j int
		fmt.Sscan(s.Labels().Get("instance"), &inst)
		fmt.Sscan(s.Labels().Get("series"), &j)
		it := s.Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			n++
			deleted := (inst == 0 && j == 1 || inst == 1 && j == 2) && ts <= base+500
			if want := value(inst, j, ts); v != want || deleted {
				if bad++; bad <= 3 {
					t.Errorf("instance %d series %d at %d: %v, want %v (deleted: %v)", inst, j, ts-base, v, want, deleted)
				}
			}
		}
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	if bad > 0 || n != 6*1000-2*101 {
		t.Fatalf("%d wrong samples, %d samples, want %d", bad, n, 6*1000-2*101)
	}
}
