package tsdb

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	promtsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"

	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/workload"
)

// benchScrapes is two hours of node_exporter-like data (10 targets, 15 s),
// starting at a block boundary.
func benchScrapes(tb testing.TB, targets int) ([]workload.Scrape, int64) {
	tb.Helper()
	start := time.UnixMilli(1_790_006_400_000) // a multiple of 2h
	scrapes, err := workload.Generate(workload.Options{Targets: targets, Scrapes: 480, Interval: 15 * time.Second, Start: start, Seed: 3, Histogram: true})
	if err != nil {
		tb.Fatal(err)
	}
	n := int64(0)
	for _, s := range scrapes {
		n += int64(len(s.Samples))
	}
	return scrapes, n
}

func toBatch(sc workload.Scrape) *head.Batch {
	b := &head.Batch{Series: make([]head.BatchSeries, len(sc.Samples))}
	for i, s := range sc.Samples {
		b.Series[i] = head.BatchSeries{Labels: s.Labels, Samples: []head.Sample{{T: sc.T, V: s.V}}}
	}
	return b
}

func blocksBytes(tb testing.TB, dir string, skip ...string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		for _, s := range skip {
			if d.IsDir() && d.Name() == s {
				return filepath.SkipDir
			}
		}
		if !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// BenchmarkBlockSize writes the same two hours of samples through tandem's
// DB (flushed to a 2h block) and through Prometheus's TSDB (head compacted
// into a 2h block) and reports bytes per sample on disk for each.
func BenchmarkBlockSize(b *testing.B) {
	scrapes, samples := benchScrapes(b, 10)
	mint := scrapes[0].T
	maxt := mint + 2*time.Hour.Milliseconds()
	b.Run("tandem", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			dir := b.TempDir()
			db, err := OpenDB(dir, DBOptions{Head: head.Options{WALSyncInterval: time.Hour, Now: func() int64 { return maxt }}})
			if err != nil {
				b.Fatal(err)
			}
			for _, sc := range scrapes {
				if res, err := db.AppendBatch(context.Background(), toBatch(sc)); err != nil || res.Err() != nil {
					b.Fatal(err, res.Err())
				}
			}
			if err := db.Flush(true); err != nil {
				b.Fatal(err)
			}
			size := blocksBytes(b, dir, "wal", "chunks_head") // the head's files, as on the Prometheus side
			db.Close()
			b.ReportMetric(float64(size)/float64(samples), "bytes/sample")
		}
	})
	b.Run("prometheus", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			dir := b.TempDir()
			opts := promtsdb.DefaultOptions()
			db, err := promtsdb.Open(dir, nil, nil, opts, nil)
			if err != nil {
				b.Fatal(err)
			}
			for _, sc := range scrapes {
				app := db.Appender(context.Background())
				for _, s := range sc.Samples {
					if _, err := app.Append(0, s.Labels, sc.T, s.V); err != nil {
						b.Fatal(err)
					}
				}
				if err := app.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.CompactHead(promtsdb.NewRangeHead(db.Head(), mint, maxt-1)); err != nil {
				b.Fatal(err)
			}
			size := blocksBytes(b, dir, "wal", "chunks_head", "wbl")
			db.Close()
			b.ReportMetric(float64(size)/float64(samples), "bytes/sample")
		}
	})
}

// BenchmarkOpenDB measures start-up with many blocks on disk (no WAL to
// replay): tandem's DB next to Prometheus's TSDB holding the same samples in
// the same number of blocks.
func BenchmarkOpenDB(b *testing.B) {
	scrapes, _ := benchScrapes(b, 4)
	dir := b.TempDir()
	db, err := OpenDB(dir, DBOptions{Head: head.Options{BlockRange: time.Minute, WALSyncInterval: time.Hour, Now: func() int64 { return 1 << 50 }}})
	if err != nil {
		b.Fatal(err)
	}
	for _, sc := range scrapes {
		if _, err := db.AppendBatch(context.Background(), toBatch(sc)); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(true); err != nil {
		b.Fatal(err)
	}
	metas := db.Blocks()
	db.Close()

	// The same samples as Prometheus blocks, one per tandem block range.
	pdir := b.TempDir()
	for _, m := range metas {
		bySeries := map[string]*promSeries{}
		var order []string
		for _, sc := range scrapes {
			if sc.T < m.MinTime || sc.T >= m.MaxTime {
				continue
			}
			for _, smp := range sc.Samples {
				k := smp.Labels.String()
				ps := bySeries[k]
				if ps == nil {
					ps = &promSeries{lset: smp.Labels}
					bySeries[k] = ps
					order = append(order, k)
				}
				ps.samples = append(ps.samples, sample{t: sc.T, f: smp.V})
			}
		}
		var list []storage.Series
		for _, k := range order {
			list = append(list, storage.NewListSeries(bySeries[k].lset, bySeries[k].samples.chunks()))
		}
		if _, err := promtsdb.CreateBlock(list, pdir, time.Minute.Milliseconds(), slog.New(slog.DiscardHandler)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("tandem", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			db, err := OpenDB(dir, DBOptions{Head: head.Options{BlockRange: time.Minute, WALSyncInterval: time.Hour}})
			if err != nil {
				b.Fatal(err)
			}
			if len(db.Blocks()) != len(metas) {
				b.Fatalf("%d blocks, want %d", len(db.Blocks()), len(metas))
			}
			db.Close()
		}
		b.ReportMetric(float64(len(metas)), "blocks")
	})
	b.Run("prometheus", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			opts := promtsdb.DefaultOptions()
			opts.RetentionDuration = 0
			pdb, err := promtsdb.Open(pdir, nil, nil, opts, nil)
			if err != nil {
				b.Fatal(err)
			}
			if n := len(pdb.Blocks()); n != len(metas) {
				b.Fatalf("%d Prometheus blocks, want %d", n, len(metas))
			}
			pdb.Close()
		}
		b.ReportMetric(float64(len(metas)), "blocks")
	})
}

type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                      { return s.t }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return nil }
func (s sample) ST() int64                     { return 0 }
func (s sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample           { return s }

type samples []sample

func (ss samples) chunks() []chunks.Sample {
	out := make([]chunks.Sample, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

type promSeries struct {
	lset    labels.Labels
	samples samples
}

// TestFlushReleasesMemory shows that flushing the head to blocks frees its memory.
func TestFlushReleasesMemory(t *testing.T) {
	scrapes, samples := benchScrapes(t, 10)
	dir := t.TempDir()
	db, err := OpenDB(dir, DBOptions{Head: head.Options{WALSyncInterval: time.Hour, Now: func() int64 { return 1 << 50 }}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, sc := range scrapes {
		if _, err := db.AppendBatch(context.Background(), toBatch(sc)); err != nil {
			t.Fatal(err)
		}
	}
	// The head's memory: its Go heap and its chunks in mapped files, which
	// go once the collector ran the cleanups of unreachable chunks.
	mem := func() uint64 {
		// Cleanups run in their own goroutine after a collection: wait until
		// the mapped bytes stop falling (a busy machine delays them).
		mapped := int64(-1)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			runtime.GC()
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
			cur := db.head.MappedChunkBytes()
			if cur == mapped {
				break
			}
			mapped = cur
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc + uint64(mapped)
	}
	before := mem()
	if err := db.Flush(true); err != nil {
		t.Fatal(err)
	}
	after := mem()
	t.Logf("head memory (heap and mapped chunks) with %d samples: %.1f MiB; after flushing them to a block: %.1f MiB", samples, float64(before)/(1<<20), float64(after)/(1<<20))
	if after > before*2/3 {
		t.Fatalf("flush freed too little: %d → %d bytes", before, after)
	}
	// The data is still there, now from the block.
	q, _ := db.Querier(0, 1<<62)
	got := readQuerier(t, q, labels.MustNewMatcher(labels.MatchEqual, "instance", "host-0:9100"))
	if len(got) == 0 {
		t.Fatal("no series of host-0 after the flush")
	}
	n := 0
	for _, s := range got {
		n += len(s)
	}
	if want := int(samples) / 10; n != want {
		t.Fatalf("host-0 has %d samples after the flush, want %d", n, want)
	}
}
