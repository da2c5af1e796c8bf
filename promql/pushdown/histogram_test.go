package pushdown

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/teststorage"

	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// loadHistograms writes 20 series of metric "lat" for 2 hours at 30 s:
// native histograms in most of them, floats in some, and some that switch
// from floats to histograms half way (the selectors' mixed case).
func loadHistograms(t *testing.T, st storage.Appendable) {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	type state struct{ h *histogram.Histogram }
	states := make([]state, 20)
	for i := range states {
		states[i].h = &histogram.Histogram{Schema: 1, ZeroThreshold: 0.001, PositiveSpans: []histogram.Span{{Offset: -2, Length: 6}}, PositiveBuckets: make([]int64, 6)}
	}
	ctx := context.Background()
	for k := 0; k < 240; k++ {
		ts := int64(k) * 30000
		app := st.Appender(ctx)
		for i := range states {
			ls := labels.FromStrings("__name__", "lat", "job", fmt.Sprint("j", i%3), "instance", fmt.Sprint(i))
			mode := i % 5
			if mode == 0 || mode == 1 && k < 120 {
				if _, err := app.Append(0, ls, ts, float64(k*i)+rng.Float64()); err != nil {
					t.Fatal(err)
				}
				continue
			}
			h := states[i].h
			// Add observations; a reset now and then.
			abs := make([]int64, 6)
			var prev int64
			for b, d := range h.PositiveBuckets {
				prev += d
				abs[b] = prev
			}
			if rng.Intn(60) == 0 {
				clear(abs)
				h.Count, h.Sum, h.ZeroCount = 0, 0, 0
			}
			for n := rng.Intn(20); n > 0; n-- {
				b := rng.Intn(6)
				abs[b]++
				h.Count++
				h.Sum += float64(b) * 0.37
			}
			prev = 0
			for b := range abs {
				h.PositiveBuckets[b] = abs[b] - prev
				prev = abs[b]
			}
			if _, err := app.AppendHistogram(0, ls, ts, h.Copy(), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDifferentialHistograms: over series holding native histograms (and
// floats, and both), tandem's engine with push-down on tandem's head and
// blocks answers exactly as Prometheus's engine on Prometheus's storage,
// warnings included: the push-down hands histogram data back to the engine.
func TestDifferentialHistograms(t *testing.T) {
	prom := teststorage.New(t)
	loadHistograms(t, prom)
	hopts := head.DefaultOptions()
	hopts.WALSyncInterval = 0
	hopts.Now = func() int64 { return 3 * time.Hour.Milliseconds() }
	hopts.BlockRange = time.Hour // a flush writes the first hour, the head keeps the second
	var dbs []*tsdb.DB
	for _, flush := range []bool{false, true} {
		db, err := tsdb.OpenDB(t.TempDir(), tsdb.DBOptions{Head: hopts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		loadHistograms(t, db)
		if flush {
			if err := db.Flush(false); err != nil || len(db.Blocks()) == 0 {
				t.Fatalf("flush: %v, %d blocks", err, len(db.Blocks()))
			}
		}
		dbs = append(dbs, db)
	}
	opts := diffEngineOpts()
	plain := newPlainEngine(t, opts)
	push := newPushdownEngine(t, opts, 3)
	queries := []string{
		`lat`,
		`sum(lat)`,
		`sum by (job) (lat)`,
		`count(lat)`,
		`avg(lat)`,
		`sum(rate(lat[5m]))`,
		`sum by (job) (rate(lat[5m]))`,
		`rate(lat[5m])`,
		`increase(lat[10m])`,
		`histogram_quantile(0.9, sum by (job) (rate(lat[5m])))`,
		`histogram_count(rate(lat[5m]))`,
		`histogram_sum(sum(increase(lat[5m])))`,
		`histogram_fraction(0, 1, sum(rate(lat[5m])))`,
		`histogram_avg(rate(lat[5m]))`,
		`histogram_stddev(lat)`,
		`max_over_time(lat[10m])`,
		`sum_over_time(lat[10m])`,
		`count_over_time(lat[10m])`,
		`resets(lat[30m])`,
		`lat[3m]`,
	}
	ctx := context.Background()
	start, end := time.UnixMilli(0), time.UnixMilli(2*time.Hour.Milliseconds())
	for _, qs := range queries {
		for _, instant := range []bool{true, false} {
			exec := func(e promql.QueryEngine, st storage.Queryable) string {
				var q promql.Query
				var err error
				if instant || qs == `lat[3m]` {
					q, err = e.NewInstantQuery(ctx, st, nil, qs, time.UnixMilli(75*60000+5000))
				} else {
					q, err = e.NewRangeQuery(ctx, st, nil, qs, start, end, 90*time.Second)
				}
				if err != nil {
					t.Fatalf("%s: %v", qs, err)
				}
				defer q.Close()
				res := q.Exec(ctx)
				switch v := res.Value.(type) {
				case promql.Vector:
					slices.SortFunc(v, func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) })
				case promql.Matrix:
					slices.SortFunc(v, func(a, b promql.Series) int { return labels.Compare(a.Metric, b.Metric) })
				}
				warns, _ := res.Warnings.AsStrings(qs, 0, 0)
				slices.Sort(warns)
				return fmt.Sprintf("%v\n%v\nwarnings %v", res.Err, res.Value, warns)
			}
			want := exec(plain, prom)
			for i, db := range dbs {
				if got := exec(push, db); got != want {
					t.Errorf("%s (instant %v, flushed %v):\n got %.600s\nwant %.600s", qs, instant, i == 1, got, want)
				}
			}
		}
	}
	evaluated, fallbacks := push.Counts()
	if fallbacks == 0 {
		t.Errorf("no subexpression was handed back to the engine (%d evaluated): the histograms did not reach the push-down", evaluated)
	}
}
