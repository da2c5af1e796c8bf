package tsdb

import (
	"context"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	promtsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/tandem-tsdb/tandem/promql/pushdown"
	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/workload"
)

// envInt returns the integer in the environment variable name, or def.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// startCPUProfile writes a CPU profile of what follows to file (the queries
// alone, without the ingest that builds their data); the returned func stops it.
func startCPUProfile(b *testing.B, file string) func() {
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// writeHeapProfile writes the heap profile, its allocations since the
// process started included, to file.
func writeHeapProfile(b *testing.B, file string) {
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// shapeQueries are query shapes a node_exporter dashboard and its rules
// issue at small scale, beyond the side-by-side benchmark's set: raw reads
// of one series, per-series functions the push-down leaves to the engine,
// binary operations and topk; $I stands for one target's instance.
var shapeQueries = []struct {
	name, q string
	instant bool
}{
	{"raw_one_series", `node_load1{instance="$I"}`, false},
	{"irate_one_target", `irate(node_cpu_seconds_total{instance="$I"}[5m])`, false},
	{"rate_per_series", `rate(node_network_receive_bytes_total[5m])`, false},
	{"cpu_busy", `1 - avg by(instance)(rate(node_cpu_seconds_total{mode="idle"}[5m]))`, false},
	{"sum_rate_by_instance", `sum by(instance)(rate(node_cpu_seconds_total[5m]))`, false},
	{"sum_rate_by_mode", `sum by(mode)(rate(node_cpu_seconds_total[5m]))`, false},
	{"avg_gauge_by_instance", `avg by(instance)(node_memory_MemAvailable_bytes)`, false},
	{"mem_ratio", `node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes`, false},
	{"topk_rate", `topk(5, rate(node_cpu_seconds_total[5m]))`, false},
	{"quantile_by_handler", `histogram_quantile(0.99, sum by(le, handler)(rate(promhttp_metric_handler_request_duration_seconds_bucket[5m])))`, false},
	{"instant_gauge_all", `node_load1`, true},
	{"instant_one_target", `node_memory_MemAvailable_bytes{instance="$I"}`, true},
	{"max_over_time_span", `max_over_time(node_load1{instance="$I"}[3h])`, true},
	{"count_by_job_regex", `count by(job)({__name__=~"node_.*"})`, true},
}

// BenchmarkQueryShapes runs shapeQueries on tandem's DB (block + head, as
// after an ingest; tandem's engine with push-down) and on Prometheus's TSDB
// (its engine), the same 20 targets × 3 h of the workload generator; with
// SHAPES_ALL_IN_BLOCKS set, tandem's head is flushed whole (every sample in
// blocks), with SHAPES_ALL_IN_HEAD set nothing is flushed (every sample in
// the head); SHAPES_CPUPROFILE=file profiles the queries alone,
// SHAPES_MEMPROFILE=file writes file.before and file.after (compare them
// with pprof -base to see the queries' allocations alone), and
// SHAPES_TARGETS and SHAPES_SCRAPES change the data's size,
// SHAPES_HEAD_CHUNK_ROWS the head's rows per chunk.
func BenchmarkQueryShapes(b *testing.B) {
	targets, scrapes := envInt(b, "SHAPES_TARGETS", 20), envInt(b, "SHAPES_SCRAPES", 725)
	first := time.Now().Add(-time.Duration(scrapes) * 15 * time.Second).Truncate(time.Second)
	gen, err := workload.NewGenerator(workload.Options{Targets: targets, Scrapes: scrapes, Start: first, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	hopts := head.DefaultOptions()
	hopts.WALSyncInterval = 0
	hopts.ChunkRows = envInt(b, "SHAPES_HEAD_CHUNK_ROWS", hopts.ChunkRows)
	tdb, err := OpenDB(b.TempDir(), DBOptions{Head: hopts})
	if err != nil {
		b.Fatal(err)
	}
	defer tdb.Close()
	pdb, err := promtsdb.Open(b.TempDir(), nil, nil, promtsdb.DefaultOptions(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer pdb.Close()
	var last int64
	instance := ""
	for round := gen.Next(); round != nil; round = gen.Next() {
		app := pdb.Appender(context.Background())
		for _, sc := range round {
			if _, err := tdb.AppendBatch(context.Background(), toBatch(sc)); err != nil {
				b.Fatal(err)
			}
			for _, s := range sc.Samples {
				if _, err := app.Append(0, s.Labels, sc.T, s.V); err != nil {
					b.Fatal(err)
				}
			}
			last = max(last, sc.T)
			if sc.Target == targets/2 {
				instance = sc.Instance
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if os.Getenv("SHAPES_ALL_IN_HEAD") == "" {
		if err := tdb.Flush(os.Getenv("SHAPES_ALL_IN_BLOCKS") != ""); err != nil {
			b.Fatal(err)
		}
	}
	start, end := first, time.UnixMilli(last)
	opts := promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute}
	systems := []struct {
		name string
		eng  promql.QueryEngine
		q    storage.Queryable
	}{
		{"prometheus", promql.NewEngine(opts), pdb},
		{"tandem", pushdown.NewEngine(opts, pushdown.Options{Workers: 2}), tdb},
	}
	if f := os.Getenv("SHAPES_CPUPROFILE"); f != "" {
		stop := startCPUProfile(b, f)
		defer stop()
	}
	if f := os.Getenv("SHAPES_MEMPROFILE"); f != "" {
		writeHeapProfile(b, f+".before")
		defer writeHeapProfile(b, f+".after")
	}
	for _, sq := range shapeQueries {
		q := strings.ReplaceAll(sq.q, "$I", instance)
		for _, s := range systems {
			b.Run(sq.name+"/"+s.name, func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					var (
						qry promql.Query
						err error
					)
					if sq.instant {
						qry, err = s.eng.NewInstantQuery(ctx, s.q, nil, q, end)
					} else {
						qry, err = s.eng.NewRangeQuery(ctx, s.q, nil, q, start, end, time.Minute)
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
