// Package gctune keeps the Go garbage collector from running every few
// requests while the live heap is small.
//
// With a fixed GOGC the heap may grow by GOGC percent of the live heap
// before the next collection. tandem runs with GOGC 50 to keep the heap of a
// large head close to its live size, but a small head (10k series, some
// 16 MiB live) then collects after every 8 MiB allocated: a few range
// queries, and each collection marks the whole head. Tuner raises the
// percentage after every collection so that the heap may always grow by at
// least a floor (MinHeadroom), and lowers it back to the base once the live
// heap is large enough for the base alone to give that much:
//
//	percent = max(base, 100 × MinHeadroom / live)
//
// The floor costs at most MinHeadroom of memory over what the base allows,
// and nothing once the live heap exceeds MinHeadroom × 100 / base.
package gctune

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the percentage the tuner sets (a live heap of a few
// kilobytes would otherwise ask for millions).
const maxPercent = 10_000

// Percent returns the GOGC percentage that lets a heap of live bytes grow by
// at least minHeadroom before the next collection, and never less than base.
func Percent(base int, live, minHeadroom uint64) int {
	if live == 0 || minHeadroom == 0 {
		return base
	}
	p := math.Ceil(100 * float64(minHeadroom) / float64(live))
	if p >= maxPercent {
		return max(base, maxPercent)
	}
	return max(base, int(p))
}

// Tuner sets the collector's percentage after every collection; see the
// package doc.
type Tuner struct {
	base        int
	minHeadroom uint64

	mu      sync.Mutex
	stopped bool
	current int
	tunes   int // collections seen, for tests
	sample  []metrics.Sample
}

// Start sets the percentage to base and then, after every collection, to
// Percent(base, live heap, minHeadroom). A base of -1 (collector off) or a
// minHeadroom of 0 only sets base. Stop ends it.
func Start(base int, minHeadroom uint64) *Tuner {
	t := &Tuner{base: base, minHeadroom: minHeadroom, current: base,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	debug.SetGCPercent(base)
	if base < 0 || minHeadroom == 0 {
		t.stopped = true
		return t
	}
	t.tune()
	t.arm()
	return t
}

// Stop leaves the percentage at base and stops tuning.
func (t *Tuner) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(t.base)
	}
}

// Current returns the percentage set last.
func (t *Tuner) Current() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.current
}

// sentinel is garbage whose finalizer runs once per collection.
type sentinel struct{ _ [16]byte }

// arm makes the next collection call tune, which arms the one after it.
func (t *Tuner) arm() {
	s := &sentinel{}
	runtime.SetFinalizer(s, func(*sentinel) {
		if t.tune() {
			t.arm()
		}
	})
}

// tune sets the percentage for the live heap measured by the last
// collection; false once stopped.
func (t *Tuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.tunes++
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return false // the runtime does not report it: stay at base
	}
	p := Percent(t.base, t.sample[0].Value.Uint64(), t.minHeadroom)
	// Small changes are not worth a call into the runtime.
	if p != t.current && (p == t.base || math.Abs(float64(p-t.current)) > float64(t.current)/10) {
		debug.SetGCPercent(p)
		t.current = p
	}
	return true
}
