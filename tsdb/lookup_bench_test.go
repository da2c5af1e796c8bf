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
// of many series (issue 20's point lookup at 1M active series), on tandem's
// DB and on Prometheus's TSDB in the same run. LOOKUP_TARGETS sets the
// targets (default 200; 2000 is about 1M series, ~1 min to load each).
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
	ms := []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_cpu_seconds_total"),
		labels.MustNewMatcher(labels.MatchEqual, "instance", instance),
	}
	hints := &storage.SelectHints{Start: math.MinInt64, End: math.MaxInt64, Func: "series"}
	lookup := func(b *testing.B, q storage.Queryable) {
		want := -1
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			qr, err := q.Querier(math.MinInt64, math.MaxInt64)
			if err != nil {
				b.Fatal(err)
			}
			ss := qr.Select(context.Background(), true, hints, ms...)
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
	}

	b.Run("tandem", func(b *testing.B) {
		db, err := OpenDB(b.TempDir(), DBOptions{Head: head.Options{WALSyncInterval: time.Hour, Now: func() int64 { return 1 << 50 }}})
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
		lookup(b, db)
	})
	b.Run("prometheus", func(b *testing.B) {
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
		lookup(b, db)
	})
}
