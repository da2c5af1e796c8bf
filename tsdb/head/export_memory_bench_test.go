package head

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/workload"
)

// BenchmarkHeadExportMemory writes the whole head as a block (what a
// snapshot does, and a flush for its range) after the workload of
// BenchmarkHeadMemory (-head-memory-targets, -head-memory-scrapes), and
// reports what the write costs in memory beyond the head's own: the peak of
// the heap's objects (sampled every millisecond) and the bytes allocated,
// per series. (The memory the runtime holds from the OS is no measure here:
// generating the workload left more of it than the write needs.)
func BenchmarkHeadExportMemory(b *testing.B) {
	start := time.UnixMilli(1_790_006_400_000)
	scrapes, err := workload.Generate(workload.Options{Targets: *headMemTargets, Scrapes: *headMemScrapes, Seed: 1, Start: start, Histogram: true})
	if err != nil {
		b.Fatal(err)
	}
	now := scrapes[len(scrapes)-1].T
	h, err := Open(b.TempDir(), func() Options {
		o := DefaultOptions()
		o.WALSyncInterval = 1 << 40
		o.Now = func() int64 { return now }
		return o
	}())
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	appendScrapes(b, h, scrapes)
	series := float64(h.counters.series.Load())
	scrapes = nil
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base := heapAfterGC()
		var ms0 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		peak := samplePeakHeap()
		e, ok := h.ExportAll()
		if !ok {
			b.Fatal("empty head")
		}
		mint, maxt := e.Range()
		if _, err := block.Write(b.TempDir(), mint, maxt, e.Groups, block.WriteOptions{KeepLabels: true}); err != nil {
			b.Fatal(err)
		}
		objects := peak()
		var ms1 runtime.MemStats
		runtime.ReadMemStats(&ms1)
		b.ReportMetric(float64(int64(objects)-int64(base.live))/series, "peak-heap-bytes/series")
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/series, "alloc-bytes/series")
	}
}

// samplePeakHeap samples the bytes of the heap's objects (live or not yet
// collected) every millisecond until the returned function is called,
// which returns their peak.
func samplePeakHeap() func() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	read := func() {
		metrics.Read(s)
		peak = max(peak, s[0].Value.Uint64())
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		wg.Wait()
		read()
		return peak
	}
}
