package tsdb

import (
	"context"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/workload"
)

// TestMergedBlocksInTimeOrder checks that a series found in several blocks
// is read block after block: Prometheus's merge hands a series' sources over
// in the order of a heap, and mergedSeries.AppendFloats, finding them out of
// time order, fell back to the chained merge (twice the cost of a range query
// over 3 h of blocks). Whatever the order given, mergeSeries sorts them, and
// AppendFloats agrees with the chained iterator.
func TestMergedBlocksInTimeOrder(t *testing.T) {
	const scrapes = 5 * 240 // 5 h at 15 s: at least three 2 h block ranges
	first := time.Now().Add(-scrapes * 15 * time.Second).Truncate(time.Second)
	gen, err := workload.NewGenerator(workload.Options{Targets: 2, Scrapes: scrapes, Start: first, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	hopts := head.DefaultOptions()
	hopts.WALSyncInterval = 0
	db, err := OpenDB(t.TempDir(), DBOptions{Head: hopts})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var last int64
	for round := gen.Next(); round != nil; round = gen.Next() {
		for _, sc := range round {
			if _, err := db.AppendBatch(context.Background(), toBatch(sc)); err != nil {
				t.Fatal(err)
			}
			last = max(last, sc.T)
		}
	}
	if err := db.Flush(true); err != nil {
		t.Fatal(err)
	}
	if n := len(db.Blocks()); n < 3 {
		t.Fatalf("%d blocks, want at least 3", n)
	}
	mint, maxt := first.UnixMilli(), last
	q, err := db.Querier(mint, maxt)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), false, &storage.SelectHints{Start: mint, End: maxt},
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_load1"))
	rng := rand.New(rand.NewSource(1))
	n := 0
	for ss.Next() {
		ms, ok := ss.At().(*mergedSeries)
		if !ok || len(ms.parts) < 3 {
			t.Fatalf("series %s: %T, want a merged series of at least 3 blocks", ss.At().Labels(), ss.At())
		}
		// Sources handed over in any order come out in time order.
		for k := 0; k < 5; k++ {
			parts := slices.Clone(ms.parts)
			rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
			m := mergeSeries(parts...).(*mergedSeries)
			for i := 1; i < len(m.parts); i++ {
				if sourceStart(m.parts[i]) < sourceStart(m.parts[i-1]) {
					t.Fatalf("sources not in time order: %d before %d", sourceStart(m.parts[i-1]), sourceStart(m.parts[i]))
				}
			}
			ts, vs, err := m.AppendFloats(nil, nil, mint, maxt)
			if err != nil {
				t.Fatal(err)
			}
			var wt []int64
			var wv []float64
			it := ms.Iterator(nil)
			for it.Next() == chunkenc.ValFloat {
				tt, v := it.At()
				wt, wv = append(wt, tt), append(wv, v)
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ts, wt) || !slices.Equal(vs, wv) {
				t.Fatalf("AppendFloats gave %d samples, the chained iterator %d (or different values)", len(ts), len(wt))
			}
			if len(ts) < scrapes*9/10 {
				t.Fatalf("%d samples of %d scrapes", len(ts), scrapes)
			}
		}
		n++
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d series of node_load1, want 2", n)
	}
}
