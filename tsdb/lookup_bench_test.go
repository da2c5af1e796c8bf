package tsdb

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	promtsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/workload"
)

// BenchmarkSeriesLookup is /api/v1/series of one target's metric in a head
// of many series (issue 20's point lookup at 1M active series), and the same
// in a block holding them, on tandem's DB and on Prometheus's TSDB in the
// same run. Each case selects node_cpu_seconds_total{instance="<target>"}
// (target), that with mode!="idle" (target-mode), and {instance="<target>"}
// (target-all). LOOKUP_TARGETS sets the targets (default 200; 2000 is about
// 1M series, ~1 min to load each DB).
func BenchmarkSeriesLookup(b *testing.B) {
	targets := 200
	if v, err := strconv.Atoi(os.Getenv("LOOKUP_TARGETS")); err == nil && v > 0 {
		targets = v
	}
	start := time.UnixMilli(1_790_006_400_000)
	scrapes, err := workload.Generate(workload.Options{Targets: targets, Scrapes: 2, Interval: 15 * time.Second, Start: start, Seed: 3})
	if err != nil {
		b.Fatal(err)
	}
	instance := scrapes[0].Instance
	for _, sc := range scrapes {
		if sc.Target == targets/2 {
			instance = sc.Instance
		}
	}
	target := []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_cpu_seconds_total"),
		labels.MustNewMatcher(labels.MatchEqual, "instance", instance),
	}
	cases := []struct {
		name string
		ms   []*labels.Matcher
	}{
		{"target", target},
		{"target-mode", append(target[:2:2], labels.MustNewMatcher(labels.MatchNotEqual, "mode", "idle"))},
		{"target-all", target[1:2]}, // every series of the target, as the side-by-side harness asks
	}
	hints := &storage.SelectHints{Start: math.MinInt64, End: math.MaxInt64, Func: "series"}
	lookup := func(b *testing.B, q storage.Queryable) {
		for _, c := range cases {
			b.Run(c.name, func(b *testing.B) {
				want := -1
				b.ReportAllocs()
				for b.Loop() {
					qr, err := q.Querier(math.MinInt64, math.MaxInt64)
					if err != nil {
						b.Fatal(err)
					}
					ss := qr.Select(context.Background(), true, hints, c.ms...)
					n := 0
					for ss.Next() {
						_ = ss.At().Labels()
						n++
					}
					if err := ss.Err(); err != nil {
						b.Fatal(err)
					}
					qr.Close()
					if want >= 0 && n != want || n == 0 {
						b.Fatalf("%d series, want %d", n, want)
					}
					want = n
				}
			})
		}
		// A dashboard variable: label_values(node_load1{job="node"}, instance).
		b.Run("label-values", func(b *testing.B) {
			ms := []*labels.Matcher{
				labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_load1"),
				labels.MustNewMatcher(labels.MatchEqual, "job", "node"),
			}
			b.ReportAllocs()
			for b.Loop() {
				qr, err := q.Querier(math.MinInt64, math.MaxInt64)
				if err != nil {
					b.Fatal(err)
				}
				vals, _, err := qr.LabelValues(context.Background(), "instance", nil, ms...)
				if err != nil || len(vals) != targets {
					b.Fatalf("%d values, want %d: %v", len(vals), targets, err)
				}
				qr.Close()
			}
		})
	}

	tandem := func(b *testing.B, flush bool) {
		now := int64(1 << 50)
		db, err := OpenDB(b.TempDir(), DBOptions{Head: head.Options{WALSyncInterval: time.Hour, Now: func() int64 { return now }}})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		for _, sc := range scrapes {
			if _, err := db.AppendBatch(context.Background(), toBatch(sc)); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("%d series", db.GroupStats(1).Series)
		if flush {
			// A day later the targets are idle: their groups leave the head once flushed.
			now += 24 * time.Hour.Milliseconds()
			if err := db.Flush(true); err != nil {
				b.Fatal(err)
			}
			if len(db.Blocks()) != 1 || db.GroupStats(1).Series != 0 {
				b.Fatalf("%d blocks, %d series left in the head", len(db.Blocks()), db.GroupStats(1).Series)
			}
		}
		lookup(b, db)
	}
	prometheus := func(b *testing.B, compact bool) {
		db, err := promtsdb.Open(b.TempDir(), nil, nil, promtsdb.DefaultOptions(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		for _, sc := range scrapes {
			app := db.Appender(context.Background())
			for _, s := range sc.Samples {
				if _, err := app.Append(0, s.Labels, sc.T, s.V); err != nil {
					b.Fatal(fmt.Errorf("append: %w", err))
				}
			}
			if err := app.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if compact {
			h := db.Head()
			if err := db.CompactHead(promtsdb.NewRangeHead(h, h.MinTime(), h.MaxTime())); err != nil {
				b.Fatal(err)
			}
			if len(db.Blocks()) != 1 || h.NumSeries() != 0 {
				b.Fatalf("%d blocks, %d series left in the head", len(db.Blocks()), h.NumSeries())
			}
		}
		lookup(b, db)
	}
	b.Run("tandem", func(b *testing.B) { tandem(b, false) })
	b.Run("prometheus", func(b *testing.B) { prometheus(b, false) })
	b.Run("tandem-block", func(b *testing.B) { tandem(b, true) })
	b.Run("prometheus-block", func(b *testing.B) { prometheus(b, true) })
}
