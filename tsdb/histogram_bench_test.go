package tsdb

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	promtsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// hwBatches returns the workload as tandem write batches, one per scrape of
// one target in scrape order, with fresh copies of the histograms (the head
// keeps the pointers it is given).
func hwBatches(w *histWorkload) []*head.Batch {
	var out []*head.Batch
	for i := range hwScrapes {
		for tg, ss := range w.targets {
			t := w.t(tg, i)
			b := &head.Batch{Series: make([]head.BatchSeries, len(ss))}
			for k, s := range ss {
				b.Series[k].Labels = s.lset
				if s.hs != nil {
					b.Series[k].Histograms = []head.HistogramSample{{T: t, H: s.hs[i].Copy()}}
				} else {
					b.Series[k].Samples = []head.Sample{{T: t, V: s.fs[i]}}
				}
			}
			out = append(out, b)
		}
	}
	return out
}

// hwCopies returns fresh copies of every histogram of the workload (Prometheus's
// appender may rewrite the spans of the histograms it is given).
func hwCopies(w *histWorkload) [][][]*histogram.Histogram {
	out := make([][][]*histogram.Histogram, len(w.targets))
	for tg, ss := range w.targets {
		out[tg] = make([][]*histogram.Histogram, len(ss))
		for k, s := range ss {
			for _, h := range s.hs {
				out[tg][k] = append(out[tg][k], h.Copy())
			}
		}
	}
	return out
}

func hwOpenTandem(tb testing.TB, w *histWorkload, dir string) *DB {
	tb.Helper()
	opts := DBOptions{Head: head.DefaultOptions()}
	opts.Head.Now = func() int64 { return w.maxt() + time.Minute.Milliseconds() }
	db, err := OpenDB(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

func hwAppendTandem(tb testing.TB, db *DB, batches []*head.Batch) {
	tb.Helper()
	for _, b := range batches {
		if res, err := db.AppendBatch(context.Background(), b); err != nil || res.Err() != nil {
			tb.Fatal(err, res.Err())
		}
	}
}

func hwOpenProm(tb testing.TB, dir string) *promtsdb.DB {
	tb.Helper()
	db, err := promtsdb.Open(dir, nil, nil, promtsdb.DefaultOptions(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	db.DisableCompactions() // compaction only when the benchmark asks
	return db
}

// hwAppendProm appends the workload as Prometheus's remote-write receiver
// does: one appender per scrape of a target, no cached references.
func hwAppendProm(tb testing.TB, db *promtsdb.DB, w *histWorkload, hs [][][]*histogram.Histogram) {
	tb.Helper()
	ctx := context.Background()
	for i := range hwScrapes {
		for tg, ss := range w.targets {
			t := w.t(tg, i)
			app := db.Appender(ctx)
			for k, s := range ss {
				var err error
				if s.hs != nil {
					_, err = app.AppendHistogram(0, s.lset, t, hs[tg][k][i], nil)
				} else {
					_, err = app.Append(0, s.lset, t, s.fs[i])
				}
				if err != nil {
					tb.Fatal(err)
				}
			}
			if err := app.Commit(); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// hwCompactTandem flushes the head into 2 h blocks and compacts them.
func hwCompactTandem(tb testing.TB, db *DB) {
	tb.Helper()
	if err := db.Flush(true); err != nil {
		tb.Fatal(err)
	}
	if err := db.Compact(); err != nil {
		tb.Fatal(err)
	}
}

// hwCompactProm writes the head as 2 h blocks and compacts them.
func hwCompactProm(tb testing.TB, db *promtsdb.DB, w *histWorkload) {
	tb.Helper()
	rng := 2 * time.Hour.Milliseconds()
	for mint := w.mint(); mint < w.maxt(); mint += rng {
		if err := db.CompactHead(promtsdb.NewRangeHead(db.Head(), mint, mint+rng-1)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := db.Compact(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkHistogramBytes writes the workload into tandem and into
// Prometheus's TSDB, compacts both into blocks and reports chunk bytes per
// histogram sample and per sample.
func BenchmarkHistogramBytes(b *testing.B) {
	w := histBenchWorkload()
	all := float64(w.histSamples + w.floatSamples)
	for range b.N {
		tdir := b.TempDir()
		db := hwOpenTandem(b, w, tdir)
		hwAppendTandem(b, db, hwBatches(w))
		hwCompactTandem(b, db)
		col, ts, total, nblocks := tandemHistBytes(b, db)
		db.Close()

		pdir := b.TempDir()
		pdb := hwOpenProm(b, pdir)
		hwAppendProm(b, pdb, w, hwCopies(w))
		hwCompactProm(b, pdb, w)
		phist, pblocks := promHistBytes(b, pdb, w)
		pdb.Close()
		pfiles := chunkFileBytes(b, pdir)

		hs := float64(w.histSamples)
		b.ReportMetric(col/hs, "tandem_col_B/hist_sample")
		b.ReportMetric((col+ts)/hs, "tandem_B/hist_sample")
		b.ReportMetric(phist/hs, "prom_B/hist_sample")
		b.ReportMetric((col+ts)/phist, "ratio_hist_tandem/prom")
		b.ReportMetric(total/all, "tandem_chunks_B/sample")
		b.ReportMetric(float64(pfiles)/all, "prom_chunks_B/sample")
		b.ReportMetric(total/float64(pfiles), "ratio_all_tandem/prom")
		b.ReportMetric(float64(nblocks), "tandem_blocks")
		b.ReportMetric(float64(pblocks), "prom_blocks")
	}
}

// tandemHistBytes sums the histogram columns of db's blocks, their share of
// the timestamp columns (a table's timestamp bytes split by samples), and all
// tables' chunk bytes.
func tandemHistBytes(tb testing.TB, db *DB) (col, ts, total float64, blocks int) {
	tb.Helper()
	bs, done := db.blocks.Acquire(math.MinInt64, math.MaxInt64)
	defer done()
	for _, blk := range bs {
		ins, err := blk.Inspect()
		blk.Release()
		if err != nil {
			tb.Fatal(err)
		}
		for _, g := range ins.Groups {
			for _, t := range g.Tables {
				total += float64(t.Bytes)
				samples, hist := 0, 0
				for _, c := range t.Columns {
					samples += c.Samples
					if c.Encodings["histogram"]+c.Encodings["floathistogram"] > 0 {
						col += float64(c.Bytes)
						hist += c.Samples
					}
				}
				if samples > 0 {
					ts += float64(t.TimestampBytes) * float64(hist) / float64(samples)
				}
			}
		}
	}
	return col, ts, total, len(bs)
}

// promHistBytes sums the histogram chunks of db's blocks as the chunks files
// store them (length, encoding and CRC framing included), checking that every
// histogram sample is in a block.
func promHistBytes(tb testing.TB, db *promtsdb.DB, w *histWorkload) (hist float64, blocks int) {
	tb.Helper()
	q, err := db.ChunkQuerier(math.MinInt64, math.MaxInt64)
	if err != nil {
		tb.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	n := 0
	for ss.Next() {
		it := ss.At().Iterator(nil)
		for it.Next() {
			c := it.At().Chunk
			size := float64(len(c.Bytes()) + binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(len(c.Bytes()))) + 1 + 4)
			if e := c.Encoding(); e == chunkenc.EncHistogram || e == chunkenc.EncFloatHistogram {
				hist += size
				n += c.NumSamples()
			}
		}
		if err := it.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := ss.Err(); err != nil {
		tb.Fatal(err)
	}
	if n != w.histSamples {
		tb.Fatalf("Prometheus blocks hold %d histogram samples, want %d", n, w.histSamples)
	}
	return hist, len(db.Blocks())
}

// chunkFileBytes is the size of the chunks files of the blocks in dir.
func chunkFileBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "chunks", "*"))
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			tb.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// BenchmarkHistogramIngest appends the workload into a fresh tandem DB
// (AppendBatch per scrape of a target) and a fresh Prometheus TSDB (one
// appender per scrape of a target), WAL on both, and reports ns and
// allocations per histogram sample (float samples are in the data too, one
// per five histogram samples). Copying the input is outside the timings.
func BenchmarkHistogramIngest(b *testing.B) {
	w := histBenchWorkload()
	hs := float64(w.histSamples)
	var tNs, pNs, tAllocs, pAllocs, tBytes, pBytes float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		batches := hwBatches(w)
		db := hwOpenTandem(b, w, b.TempDir())
		m0 := hwMemStats()
		b.StartTimer()
		start := time.Now()
		hwAppendTandem(b, db, batches)
		tNs += float64(time.Since(start).Nanoseconds())
		b.StopTimer()
		m1 := hwMemStats()
		tAllocs += float64(m1.Mallocs - m0.Mallocs)
		tBytes += float64(m1.TotalAlloc - m0.TotalAlloc)
		db.Close()
		batches = nil

		copies := hwCopies(w)
		pdb := hwOpenProm(b, b.TempDir())
		m0 = hwMemStats()
		b.StartTimer()
		start = time.Now()
		hwAppendProm(b, pdb, w, copies)
		pNs += float64(time.Since(start).Nanoseconds())
		b.StopTimer()
		m1 = hwMemStats()
		pAllocs += float64(m1.Mallocs - m0.Mallocs)
		pBytes += float64(m1.TotalAlloc - m0.TotalAlloc)
		pdb.Close()
		b.StartTimer()
	}
	n := float64(b.N) * hs
	b.ReportMetric(tNs/n, "tandem_ns/hist_sample")
	b.ReportMetric(pNs/n, "prom_ns/hist_sample")
	b.ReportMetric(tNs/pNs, "ratio_ns_tandem/prom")
	b.ReportMetric(tAllocs/n, "tandem_allocs/hist_sample")
	b.ReportMetric(pAllocs/n, "prom_allocs/hist_sample")
	b.ReportMetric(tBytes/n, "tandem_B_alloc/hist_sample")
	b.ReportMetric(pBytes/n, "prom_B_alloc/hist_sample")
}

func hwMemStats() runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// hwQueries are the histogram_quantile range queries of
// BenchmarkHistogramQuantileQuery.
var hwQueries = []struct{ name, q string }{
	{"sum", `histogram_quantile(0.9, sum(rate(rpc_duration_seconds[5m])))`},
	{"by_instance", `histogram_quantile(0.9, sum by (instance) (rate(rpc_duration_seconds[5m])))`},
	{"nhcb_by_instance", `histogram_quantile(0.9, sum by (instance) (rate(http_request_duration_seconds[5m])))`},
	{"gauge_by_queue", `histogram_quantile(0.5, sum by (queue) (queue_wait_seconds))`},
}

// BenchmarkHistogramQuantileQuery runs histogram_quantile range queries over
// the six hours (step 60 s) with Prometheus's engine, over tandem and over
// Prometheus's TSDB holding the same data, first in their heads, then in
// blocks, and fails if the answers differ.
func BenchmarkHistogramQuantileQuery(b *testing.B) {
	w := histBenchWorkload()
	db := hwOpenTandem(b, w, b.TempDir())
	defer db.Close()
	hwAppendTandem(b, db, hwBatches(w))
	pdb := hwOpenProm(b, b.TempDir())
	defer pdb.Close()
	hwAppendProm(b, pdb, w, hwCopies(w))
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: 5 * time.Minute})
	start, end := time.UnixMilli(w.mint()), time.UnixMilli(w.maxt())
	run := func(state string) {
		for _, qq := range hwQueries {
			b.Run(state+"/"+qq.name, func(b *testing.B) {
				var tDur, pDur time.Duration
				for range b.N {
					tRes, d := hwRangeQuery(b, eng, db, qq.q, start, end)
					tDur += d
					pRes, d := hwRangeQuery(b, eng, pdb, qq.q, start, end)
					pDur += d
					if err := hwSameMatrix(tRes, pRes); err != nil {
						b.Fatalf("%s (%s): tandem and Prometheus differ: %v", qq.q, state, err)
					}
				}
				tms := float64(tDur.Microseconds()) / 1000 / float64(b.N)
				pms := float64(pDur.Microseconds()) / 1000 / float64(b.N)
				b.ReportMetric(tms, "tandem_ms/query")
				b.ReportMetric(pms, "prom_ms/query")
				b.ReportMetric(tms/pms, "ratio_tandem/prom")
			})
		}
	}
	run("head")
	hwCompactTandem(b, db)
	hwCompactProm(b, pdb, w)
	run("blocks")
}

func hwRangeQuery(tb testing.TB, eng *promql.Engine, q storage.Queryable, qs string, start, end time.Time) (promql.Matrix, time.Duration) {
	tb.Helper()
	t0 := time.Now()
	qry, err := eng.NewRangeQuery(context.Background(), q, nil, qs, start, end, time.Minute)
	if err != nil {
		tb.Fatal(err)
	}
	res := qry.Exec(context.Background())
	d := time.Since(t0)
	if res.Err != nil {
		tb.Fatal(res.Err)
	}
	pm, err := res.Matrix()
	if err != nil {
		tb.Fatal(err)
	}
	// Close hands the answer's points back to the engine's pools: keep a copy.
	m := make(promql.Matrix, len(pm))
	for i, s := range pm {
		m[i] = promql.Series{Metric: s.Metric, Floats: slices.Clone(s.Floats), Histograms: slices.Clone(s.Histograms)}
	}
	qry.Close()
	if len(m) == 0 {
		tb.Fatalf("%s: empty answer", qs)
	}
	return m, d
}

// hwSameMatrix reports the first difference between two range query
// answers (bit-exact floats, NaN equal to NaN; histograms with Equals).
func hwSameMatrix(a, b promql.Matrix) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d series vs %d", len(a), len(b))
	}
	for i := range a {
		if !a[i].Metric.IsEmpty() || !b[i].Metric.IsEmpty() {
			if a[i].Metric.String() != b[i].Metric.String() {
				return fmt.Errorf("series %d: %s vs %s", i, a[i].Metric, b[i].Metric)
			}
		}
		if len(a[i].Floats) != len(b[i].Floats) || len(a[i].Histograms) != len(b[i].Histograms) {
			return fmt.Errorf("%s: %d floats, %d histograms vs %d, %d", a[i].Metric, len(a[i].Floats), len(a[i].Histograms), len(b[i].Floats), len(b[i].Histograms))
		}
		for j, p := range a[i].Floats {
			q := b[i].Floats[j]
			if p.T != q.T || (math.Float64bits(p.F) != math.Float64bits(q.F) && !(math.IsNaN(p.F) && math.IsNaN(q.F))) {
				return fmt.Errorf("%s at %d: %v (tandem) vs %v at %d (Prometheus)", a[i].Metric, p.T, p.F, q.F, q.T)
			}
		}
		for j, p := range a[i].Histograms {
			q := b[i].Histograms[j]
			if p.T != q.T || !p.H.Equals(q.H) {
				return fmt.Errorf("%s at %d: %v (tandem) vs %v at %d (Prometheus)", a[i].Metric, p.T, p.H, q.H, q.T)
			}
		}
	}
	return nil
}
