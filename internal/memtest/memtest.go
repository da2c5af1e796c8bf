// Package memtest measures the memory a piece of code takes, for tests and
// benchmarks that bound it.
package memtest

import (
	"runtime"
	"sync"
	"time"
)

// PeakHeap runs f and returns the highest HeapInuse seen while it ran
// (sampled every millisecond) above the figure before it, after a collection.
func PeakHeap(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	peak := base
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	runtime.ReadMemStats(&ms)
	return max(peak, ms.HeapInuse) - base
}
