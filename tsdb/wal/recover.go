package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tandem-tsdb/tandem/internal/fsutil"
)

// Healthy returns nil while the WAL takes records, else the error of the last
// failed write or fsync; it is cleared by the next write that succeeds (with
// SyncInterval 0: the next fsync), which after a failed fsync first moves on
// to a new segment.
func (w *WAL) Healthy() error {
	if !w.failing.Load() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failErr
}

// failLocked records a failed write, fsync or segment creation. sticky marks
// the current segment as not to be written again: the next write recovers.
func (w *WAL) failLocked(err error, sticky bool) {
	w.metrics.writeFailures.Inc()
	if sticky && w.err == nil {
		w.err = err
	}
	if w.failErr == nil {
		w.failSince = time.Now()
		w.failing.Store(true)
		w.metrics.failing.Set(1)
	}
	w.failErr = err
}

// healLocked ends a failure once a write (or recovery) succeeded, logging it
// once; extra attributes describe the recovery.
func (w *WAL) healLocked(attrs ...any) {
	if w.failErr == nil || w.err != nil {
		return
	}
	w.logger.Info("WAL writable again", append([]any{"failing_for", time.Since(w.failSince).Round(time.Millisecond),
		"last_err", w.failErr}, attrs...)...)
	w.failErr = nil
	w.failing.Store(false)
	w.metrics.failing.Set(0)
}

// recoverLocked moves on from a segment that cannot be trusted (w.err): it
// writes the bytes not yet synced (w.pending) to a new file, fsyncs it and
// renames it into place as the next segment, which becomes the current one.
// Until that succeeds nothing is left behind: no segment is created, and the
// old segment stays the last one. Afterwards the old segment is cut back to
// what its last successful fsync covered, so its unsynced tail (which a
// power loss could leave damaged) is not replayed, or is replayed as
// identical duplicates if the cut fails. w.mu must be held.
func (w *WAL) recoverLocked() error {
	old := w.seg
	if old == nil {
		w.err = nil
		return nil
	}
	if f := w.fresh; f != nil {
		// An empty segment made for a rotation: it keeps its number.
		f.f.Close()
		w.fresh = nil
	}
	n := w.nextSeg
	tmp := filepath.Join(w.dir, recoveryFile)
	f, err := w.openFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o666)
	if err != nil {
		err = fmt.Errorf("wal: recover from failed segment %d: create %s: %w", old.num, recoveryFile, err)
		w.failLocked(err, false)
		return err
	}
	s := &segment{f: f, num: n, base: w.written - int64(len(w.pending)), size: int64(len(w.pending))}
	s.synced = s.size
	abandon := func(step string, err error, placed bool) error {
		f.Close()
		os.Remove(tmp)
		if placed {
			os.Remove(filepath.Join(w.dir, segmentName(n)))
		}
		err = fmt.Errorf("wal: recover from failed segment %d: %s: %w (still failing: %w)", old.num, step, err, w.err)
		w.failLocked(err, false)
		return err
	}
	if len(w.pending) > 0 {
		if _, err := f.Write(w.pending); err != nil {
			return abandon("re-write unsynced records", err, false)
		}
	}
	if err := s.sync(w.metrics); err != nil {
		return abandon("sync", err, false)
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, segmentName(n))); err != nil {
		return abandon("rename", err, false)
	}
	if err := fsutil.SyncDir(w.dir); err != nil {
		return abandon("sync dir", err, true)
	}
	w.nextSeg = n + 1

	// The old segment keeps what its last good fsync covered; the rest is in s.
	if err := old.f.Truncate(old.synced); err != nil {
		w.logger.Warn("could not cut the failed WAL segment back to its synced size; its unsynced tail is also in the next segment",
			"segment", old.num, "size", old.synced, "err", err)
	} else if err := old.f.Sync(); err != nil { // not old.sync: that only repeats the failure
		w.logger.Warn("could not sync the cut of the failed WAL segment", "segment", old.num, "err", err)
	}
	if err := old.f.Close(); err != nil {
		w.logger.Debug("closing the failed WAL segment", "segment", old.num, "err", err)
	}
	old.covered = true
	rewritten := len(w.pending)
	w.seg = s
	w.resetPendingLocked()
	w.setSynced(w.written)
	w.err = nil
	w.metrics.recoveries.Inc()
	w.metrics.segmentCurrent.Set(float64(n))
	w.healLocked("failed_segment", old.num, "new_segment", n, "rewritten_bytes", rewritten)
	return nil
}
