package head

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/tandem-tsdb/tandem/workload"
)

// BenchmarkHeadGC reports what a collection costs with a full head alive and
// nothing else (the workload that filled it is gone): the shortest of seven
// forced collections, less the same before the head was opened, per series.
// At a million series the collector marks the head on every cycle, and small
// queries' allocations set cycles off, so this is a cost every query shares.
// The shape is BenchmarkHeadMemory's (-head-memory-targets, -head-memory-scrapes).
func BenchmarkHeadGC(b *testing.B) {
	fill := map[string]func(b *testing.B, scrapes []workload.Scrape) func(){
		"tandem": func(b *testing.B, scrapes []workload.Scrape) func() {
			opts := DefaultOptions()
			opts.WALSyncInterval = 1 << 40
			now := scrapes[len(scrapes)-1].T // not scrapes: the head keeps Now
			opts.Now = func() int64 { return now }
			h, err := Open(b.TempDir(), opts)
			if err != nil {
				b.Fatal(err)
			}
			appendScrapes(b, h, scrapes)
			return func() { h.Close() }
		},
		"prometheus": func(b *testing.B, scrapes []workload.Scrape) func() {
			h := newPromHead(b, b.TempDir())
			for _, sc := range scrapes {
				app := h.Appender(context.Background())
				for j := range sc.Samples {
					s := &sc.Samples[j]
					// A copy, as a receiver's decoded labels would be: the
					// workload's are dropped before the collections.
					if _, err := app.Append(0, s.Labels.Copy(), sc.T, s.V); err != nil {
						b.Fatal(err)
					}
				}
				if err := app.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			return func() { h.Close() }
		},
	}
	for _, name := range []string{"tandem", "prometheus"} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				base := gcTime()
				closeHead, series := fillFromWorkload(b, fill[name])
				took := gcTime()
				closeHead()
				b.ReportMetric((took-base)/float64(series), "gc-ns/series")
				b.ReportMetric(float64(series), "series")
			}
		})
	}
}

// fillFromWorkload generates BenchmarkHeadMemory's workload and fills a head
// with it; the workload is garbage once it returns.
func fillFromWorkload(b *testing.B, fill func(*testing.B, []workload.Scrape) func()) (func(), int) {
	start := time.UnixMilli(1_790_006_400_000)
	scrapes, err := workload.Generate(workload.Options{Targets: *headMemTargets, Scrapes: *headMemScrapes, Seed: 1, Start: start, Histogram: true})
	if err != nil {
		b.Fatal(err)
	}
	seen := map[uint64]struct{}{}
	for _, sc := range scrapes {
		for _, s := range sc.Samples {
			seen[s.Ref] = struct{}{}
		}
	}
	return fill(b, scrapes), len(seen)
}

// appendScrapes appends each scrape to h as one batch.
func appendScrapes(b *testing.B, h *Head, scrapes []workload.Scrape) {
	var batch Batch
	var smps []Sample
	for _, sc := range scrapes {
		batch.Series, smps = batch.Series[:0], smps[:0]
		for j := range sc.Samples {
			smps = append(smps, Sample{T: sc.T, V: sc.Samples[j].V})
		}
		for j := range sc.Samples {
			batch.Series = append(batch.Series, BatchSeries{Labels: sc.Samples[j].Labels, Samples: smps[j : j+1]})
		}
		if res, err := h.AppendBatch(context.Background(), &batch); err != nil || res.Err() != nil {
			b.Fatal(err, res.Err())
		}
	}
}

// gcTime returns the shortest of seven forced collections, in nanoseconds:
// what marking the live heap costs (and sweeping it, the lesser part).
func gcTime() float64 {
	best := math.Inf(1)
	for range 7 {
		start := time.Now()
		runtime.GC()
		best = min(best, float64(time.Since(start).Nanoseconds()))
	}
	return best
}
