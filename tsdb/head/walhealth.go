package head

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandem-tsdb/tandem/tsdb/record"
)

// WAL health. A record the WAL cannot write (full disk, I/O error) fails its
// batch with ErrUnavailable; from then on the head refuses batches up front
// (nothing is placed in memory) until a probe record is written again, so
// writes resume by themselves once space returns. Probes run with the
// refused requests (at most every probeMinInterval) and every probeInterval
// from a background goroutine, so /-/ready recovers without traffic.

const (
	probeInterval    = time.Second
	probeMinInterval = 100 * time.Millisecond
)

// probeRecord is an empty commit: replay reads it and does nothing.
var probeRecord = (&record.Commit{}).Encode(nil)

// walHealth is the head's view of its WAL.
type walHealth struct {
	failing atomic.Bool

	mu        sync.Mutex
	err       error // the last failure while failing
	since     time.Time
	lastProbe time.Time

	stop chan struct{}
	done chan struct{}
}

// logRecord writes rec to the WAL; its error wraps ErrUnavailable.
func (h *Head) logRecord(rec []byte) error {
	err := h.wal.Log(rec)
	h.noteWAL(err)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// noteWAL records the outcome of a WAL write and logs state changes.
func (h *Head) noteWAL(err error) {
	hl := &h.health
	if err == nil {
		if hl.failing.Load() && hl.failing.CompareAndSwap(true, false) {
			hl.mu.Lock()
			since := hl.since
			hl.err = nil
			hl.mu.Unlock()
			h.logger.Info("WAL is writable again: accepting writes", "refused_for", time.Since(since).Round(time.Millisecond))
		}
		return
	}
	hl.mu.Lock()
	hl.err = err
	hl.mu.Unlock()
	if hl.failing.CompareAndSwap(false, true) {
		hl.mu.Lock()
		hl.since = time.Now()
		hl.mu.Unlock()
		h.logger.Error("WAL cannot be written: refusing writes with 503 until it can (queries go on)", "err", err)
	}
}

// Writable returns nil while the WAL takes records, else an error wrapping
// ErrUnavailable; while it does not, the call may probe it.
func (h *Head) Writable() error {
	if h == nil || !h.health.failing.Load() {
		return nil
	}
	hl := &h.health
	hl.mu.Lock()
	if time.Since(hl.lastProbe) < probeMinInterval {
		err := hl.err
		hl.mu.Unlock()
		if err == nil {
			return nil
		}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	hl.lastProbe = time.Now()
	hl.mu.Unlock()
	return h.logRecord(probeRecord)
}

// startProber probes a failing WAL every probeInterval until Close.
func (h *Head) startProber() {
	hl := &h.health
	hl.stop, hl.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(hl.done)
		t := time.NewTicker(probeInterval)
		defer t.Stop()
		for {
			select {
			case <-hl.stop:
				return
			case <-t.C:
				_ = h.Writable()
			}
		}
	}()
}

// stopProber ends the goroutine of startProber.
func (h *Head) stopProber() {
	if hl := &h.health; hl.stop != nil {
		close(hl.stop)
		<-hl.done
		hl.stop = nil
	}
}
