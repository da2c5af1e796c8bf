package pushdown_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/tandem-tsdb/tandem/promql/pushdown"
	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/workload"
)

// benchQueries are the engine queries of the side-by-side benchmark
// (bench.QuerySet): range queries over the whole span at a 60 s step, an
// instant query at its end.
var benchQueries = []struct {
	name, q string
	instant bool
}{
	{"sum_by_instance_rate", `sum by(instance)(rate(node_cpu_seconds_total[5m]))`, false},
	{"sum_by_mode_rate", `sum by(mode)(rate(node_cpu_seconds_total[5m]))`, false},
	{"histogram_quantile", `histogram_quantile(0.9, sum by(le)(rate(promhttp_metric_handler_request_duration_seconds_bucket[5m])))`, false},
	{"count_by_job_regex", `count by(job)({__name__=~"node_.*"})`, true},
	{"avg_by_instance_gauge", `avg by(instance)(node_memory_MemAvailable_bytes)`, false},
}

// BenchmarkQueries runs the benchmark's query set through Prometheus's engine
// and through tandem's push-down engine, on the same tandem storage: 20
// node_exporter-like targets scraped every 15 s for 3 h, the first block
// range flushed to a block and the rest in the head, as after an ingest.
func BenchmarkQueries(b *testing.B) {
	db, start, end := loadWorkload(b, 20, 725)
	opts := promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute}
	engines := []struct {
		name string
		eng  promql.QueryEngine
	}{
		{"prometheus", promql.NewEngine(opts)},
		{"pushdown", pushdown.NewEngine(opts, pushdown.Options{Workers: 2})},
		{"pushdown1", pushdown.NewEngine(opts, pushdown.Options{Workers: 1})},
	}
	for _, q := range benchQueries {
		for _, e := range engines {
			b.Run(q.name+"/"+e.name, func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					var (
						qry promql.Query
						err error
					)
					if q.instant {
						qry, err = e.eng.NewInstantQuery(ctx, db, nil, q.q, end)
					} else {
						qry, err = e.eng.NewRangeQuery(ctx, db, nil, q.q, start, end, time.Minute)
					}
					if err != nil {
						b.Fatal(err)
					}
					if res := qry.Exec(ctx); res.Err != nil {
						b.Fatal(res.Err)
					}
					qry.Close()
				}
			})
		}
	}
}

// loadWorkload fills a tandem DB with targets × scrapes of the workload
// generator and flushes what a running tandem would have flushed.
func loadWorkload(b *testing.B, targets, scrapes int) (*tsdb.DB, time.Time, time.Time) {
	b.Helper()
	opts := tsdb.DBOptions{Head: head.DefaultOptions()}
	opts.Head.WALSyncInterval = 0
	db, err := tsdb.OpenDB(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	first := time.Now().Add(-time.Duration(scrapes) * 15 * time.Second).Truncate(time.Second)
	gen, err := workload.NewGenerator(workload.Options{Targets: targets, Scrapes: scrapes, Start: first, Seed: 1, Histogram: true})
	if err != nil {
		b.Fatal(err)
	}
	var last int64
	for round := gen.Next(); round != nil; round = gen.Next() {
		var batch head.Batch
		for _, sc := range round {
			for _, s := range sc.Samples {
				batch.Series = append(batch.Series, head.BatchSeries{Labels: s.Labels, Samples: []head.Sample{{T: sc.T, V: s.V}}})
			}
			last = max(last, sc.T)
		}
		if _, err := db.AppendBatch(context.Background(), &batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(false); err != nil {
		b.Fatal(err)
	}
	if len(db.Blocks()) == 0 {
		b.Fatal("no block range flushed: the data must span more than 1.5 block ranges")
	}
	return db, first, time.UnixMilli(last)
}
