package head

import (
	"context"
	"flag"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/workload"
)

var (
	headMemProfile = flag.String("head-memprofile", "", "BenchmarkHeadMemory: write a heap profile of tandem's full head here (with -memprofilerate 1 for every object)")
	headMemTargets = flag.Int("head-memory-targets", 20, "BenchmarkHeadMemory: scrape targets of about 500 series each (2000 for the 1M-series shape)")
	headMemScrapes = flag.Int("head-memory-scrapes", 240, "BenchmarkHeadMemory: scrapes of every target, 15 s apart (41 for the 1M-series shape's 10 minutes)")
)

// writeHeadProfile writes the heap profile -head-memprofile asks for.
func writeHeadProfile(b *testing.B) {
	if *headMemProfile == "" {
		return
	}
	f, err := os.Create(*headMemProfile)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// heapAfterGC returns the live heap and the heap spans in use after two
// full collections.
func heapAfterGC() heapStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return heapStats{live: ms.HeapAlloc, inUse: ms.HeapInuse}
}

type heapStats struct{ live, inUse uint64 }

// BenchmarkHeadMemory appends one hour of a node_exporter-like workload (20
// targets, about 10k series, 240 scrapes at 15 s; -head-memory-targets and
// -head-memory-scrapes set another shape) to tandem's head and to
// Prometheus's head (both with a WAL, as in BenchmarkHeadAppend) and reports
// the live heap each holds afterwards, per series and per sample.
//
// The workload is generated before the baseline is taken, so it is not
// counted. Each series' labels are passed as a fresh copy the first time it is
// appended (later appends pass the workload's labels, which neither head
// keeps), so the label memory a head retains is counted.
//
// Prometheus's head writes full chunks (120 samples) to memory-mapped files
// on disk and keeps only the open chunk of each series on the Go heap: that is
// its design, so the heap is the fair comparison; the mapped chunk files are
// page cache, not heap, and are not counted here. Tandem's head does the same
// with its frozen chunks (chunkStore); their bytes are reported beside the
// heap as mapped-bytes/series.
func BenchmarkHeadMemory(b *testing.B) {
	start := time.UnixMilli(1_790_006_400_000) // a multiple of 2h
	scrapes, err := workload.Generate(workload.Options{Targets: *headMemTargets, Scrapes: *headMemScrapes, Seed: 1, Start: start, Histogram: true})
	if err != nil {
		b.Fatal(err)
	}
	now := scrapes[len(scrapes)-1].T
	dense := map[uint64]int{} // series Ref → index into seen
	samples, maxPerScrape := 0, 0
	for _, sc := range scrapes {
		for _, s := range sc.Samples {
			if _, ok := dense[s.Ref]; !ok {
				dense[s.Ref] = len(dense)
			}
		}
		samples += len(sc.Samples)
		maxPerScrape = max(maxPerScrape, len(sc.Samples))
	}
	series := len(dense)
	// Allocated before the baseline and reused: the batch is not counted.
	seen := make([]bool, series)
	batch := Batch{Series: make([]BatchSeries, 0, maxPerScrape)}
	smps := make([]Sample, maxPerScrape)
	lsetFor := func(s *workload.Sample) labels.Labels {
		if i := dense[s.Ref]; !seen[i] {
			seen[i] = true
			return s.Labels.Copy()
		}
		return s.Labels
	}
	report := func(b *testing.B, before, after heapStats) {
		heap := float64(int64(after.live) - int64(before.live))
		b.ReportMetric(float64(int64(after.inUse)-int64(before.inUse))/float64(series), "inuse-bytes/series")
		b.ReportMetric(heap/float64(series), "heap-bytes/series")
		b.ReportMetric(heap/float64(samples), "heap-bytes/sample")
		b.ReportMetric(float64(series), "series")
	}

	b.Run("tandem", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			clear(seen)
			dir := b.TempDir()
			before := heapAfterGC()
			opts := DefaultOptions()
			opts.WALSyncInterval = 1 << 40 // group commit; no fsync per batch
			opts.Now = func() int64 { return now }
			h, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			for _, sc := range scrapes {
				batch.Series = batch.Series[:0]
				for j := range sc.Samples {
					s := &sc.Samples[j]
					smps[j] = Sample{T: sc.T, V: s.V}
					batch.Series = append(batch.Series, BatchSeries{Labels: lsetFor(s), Samples: smps[j : j+1]})
				}
				if res, err := h.AppendBatch(context.Background(), &batch); err != nil || res.Err() != nil {
					b.Fatal(err, res.Err())
				}
			}
			after := heapAfterGC()
			writeHeadProfile(b)
			b.ReportMetric(float64(h.chunks.liveBytes.Load())/float64(series), "mapped-bytes/series")
			if got := h.counters.appended.Load(); got != int64(samples) {
				b.Fatalf("%d samples appended, want %d", got, samples)
			}
			h.Close()
			report(b, before, after)
		}
	})

	b.Run("prometheus", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			clear(seen)
			dir := b.TempDir()
			before := heapAfterGC()
			h := newPromHead(b, dir)
			for _, sc := range scrapes {
				app := h.Appender(context.Background())
				for j := range sc.Samples {
					s := &sc.Samples[j]
					if _, err := app.Append(0, lsetFor(s), sc.T, s.V); err != nil {
						b.Fatal(err)
					}
				}
				if err := app.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			after := heapAfterGC()
			if got := h.NumSeries(); got != uint64(series) {
				b.Fatalf("%d series in the head, want %d", got, series)
			}
			h.Close()
			report(b, before, after)
		}
	})
}
