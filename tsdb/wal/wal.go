package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-tsdb/tandem/internal/fsutil"
)

const (
	// DefaultSegmentSize is the segment size used when Options.SegmentSize is zero.
	DefaultSegmentSize = 128 << 20

	headerSize = 8
	// maxPooledBuf bounds the frame buffers kept for reuse, so one huge record
	// does not pin its buffer forever.
	maxPooledBuf = 1 << 20
	readBufSize  = 1 << 20
	// maxPending bounds the copy of not yet fsynced bytes the WAL keeps to
	// re-write after a failed fsync: past it, a write fsyncs first (at the
	// default 1 s sync interval that is over 1M samples/s). The copy is
	// released at each segment rotation (a checkpoint rotates after every
	// flush) and after a burst (shrinkPendingLocked), so it is heap only
	// while the WAL is busy.
	maxPending = 4 << 20
	// minPending is the pending copy's first allocation; a larger one is
	// released when fsyncs cover under a quarter of it (shrinkPendingLocked).
	minPending = 64 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrClosed is returned by operations on a closed WAL.
var ErrClosed = errors.New("wal: closed")

// File is the part of *os.File a segment is written through.
type File interface {
	Write(p []byte) (int, error)
	Sync() error
	Truncate(size int64) error
	Close() error
}

// Options configures a WAL.
type Options struct {
	SegmentSize  int64         // default 128 MiB; a record never spans segments (a record larger than SegmentSize gets a segment of its own)
	SyncInterval time.Duration // group-commit fsync interval; 0 = fsync before Log returns
	Logger       *slog.Logger  // default slog.Default()
	// Registerer receives the WAL metrics; may be nil.
	Registerer prometheus.Registerer
	// OpenFile opens segment files for writing; nil means os.OpenFile. Tests
	// use it to inject write and fsync failures.
	OpenFile func(name string, flag int, perm os.FileMode) (File, error)
}

// CorruptionError reports damage that replay does not repair by itself: a bad
// frame outside the last segment, or a missing segment. `tandem tsdb repair`
// (Repair) makes such a log readable again.
type CorruptionError struct {
	Dir     string // the log's directory
	Segment int
	Offset  int64
	Err     error
}

// Error implements error.
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corruption in segment %d of %s at offset %d: %v", e.Segment, e.Dir, e.Offset, e.Err)
}

// Unwrap returns the underlying cause.
func (e *CorruptionError) Unwrap() error { return e.Err }

// segment is a segment file open for writing.
type segment struct {
	f    File
	num  int
	base int64 // write position (WAL.written) of the segment's first byte
	// size, synced and covered are guarded by WAL.mu.
	size   int64 // bytes written
	synced int64 // bytes covered by the last successful fsync; WAL.pending holds the rest
	// covered is set once everything written to the segment is durable, in
	// it or re-written to a later one: a late fsync of it no longer matters.
	covered bool

	// syncMu serialises fsyncs, so that a failure is never followed by a
	// success: after a failed fsync the kernel may have dropped the dirty
	// pages and a second fsync of the same file would report nothing.
	syncMu sync.Mutex
	failed error // first failed fsync; guarded by syncMu
}

func (s *segment) sync(m *metrics) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	start := time.Now()
	err := s.f.Sync()
	m.fsyncDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		s.failed = err
	}
	return err
}

// WAL is a segmented write-ahead log. Log, Sync, Segments and Truncate are
// safe for concurrent use; Replay must run before the first Log, and Log
// fails while Replay runs.
type WAL struct {
	dir      string
	opts     Options
	logger   *slog.Logger
	metrics  *metrics
	bufPool  sync.Pool // *[]byte frame buffers
	openFile func(name string, flag int, perm os.FileMode) (File, error)

	// mu guards the fields below and serialises writes.
	mu      sync.Mutex
	seg     *segment // current segment, nil until the first Log
	fresh   *segment // created for a rotation whose directory fsync failed: used by the next one
	nextSeg int      // number of the next segment to create
	written int64    // total bytes written by this process, across segments
	// pending is a copy of the current segment's bytes after its last
	// successful fsync, re-written to a new segment if an fsync fails.
	pending []byte
	// err is set when the current segment cannot be trusted (an fsync
	// failed, or a partial frame could not be removed); the next Log, Sync
	// or NextSegment recovers into a new segment.
	err error
	// failErr is the last failed write or fsync until one succeeds again.
	failErr   error
	failSince time.Time
	closed    bool
	// replaying is set while Replay runs; Log fails meanwhile.
	replaying bool

	failing       atomic.Bool  // failErr != nil
	synced        atomic.Int64 // write position covered by an fsync
	syncMu        sync.Mutex   // serialises syncTo
	writtenAtomic atomic.Int64 // mirror of written, for the background syncer
	stop          chan struct{}
	done          chan struct{}
}

// recoveryFile is where the records not yet synced are re-written after a
// failed fsync, before the file becomes the next segment.
const recoveryFile = "recovery.tmp"

// Open opens the WAL in dir, creating dir if missing. It does not read records.
func Open(dir string, opts Options) (*WAL, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if opts.SyncInterval < 0 {
		return nil, fmt.Errorf("wal: negative sync interval %v", opts.SyncInterval)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("wal: create dir: %w", err)
	}
	segs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	// A recovery or segment rewrite interrupted by a crash: its records are
	// still in the segment it worked on.
	if err := removeLeftovers(dir); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	w := &WAL{
		dir:      dir,
		opts:     opts,
		logger:   logger.With("component", "wal", "dir", dir),
		metrics:  m,
		openFile: opts.OpenFile,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if w.openFile == nil {
		w.openFile = func(name string, flag int, perm os.FileMode) (File, error) { return os.OpenFile(name, flag, perm) }
	}
	if len(segs) > 0 {
		w.nextSeg = segs[len(segs)-1] + 1
	}
	if opts.SyncInterval > 0 {
		go w.syncLoop()
	} else {
		close(w.done)
	}
	return w, nil
}

// segmentName returns the file name of segment n.
func segmentName(n int) string { return fmt.Sprintf("%08d", n) }

// listSegments returns the sorted numbers of the segment files in dir.
func listSegments(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: list segments: %w", err)
	}
	var segs []int
	for _, e := range entries {
		name := e.Name()
		if len(name) < 8 || !e.Type().IsRegular() || !allDigits(name) {
			continue
		}
		n, err := strconv.Atoi(name)
		if err != nil || n > math.MaxInt32 {
			continue
		}
		segs = append(segs, n)
	}
	slices.Sort(segs)
	return segs, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Segments returns the first and last segment numbers (for later truncation/checkpoint work).
// Both are -1 if the log has no segments.
func (w *WAL) Segments() (first, last int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	segs, err := listSegments(w.dir)
	if err != nil {
		return -1, -1, err
	}
	if len(segs) == 0 {
		return -1, -1, nil
	}
	return segs[0], segs[len(segs)-1], nil
}

// NextSegment closes the current segment (fsynced) and starts a new one;
// later records go to the returned segment number. Checkpointing uses it to
// separate what a checkpoint covers from what follows.
func (w *WAL) NextSegment() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, ErrClosed
	}
	if w.replaying {
		return 0, errors.New("wal: new segment during replay")
	}
	if w.err != nil {
		if err := w.recoverLocked(); err != nil {
			return 0, err
		}
	}
	if err := w.rotateLocked(); err != nil {
		return 0, err
	}
	return w.seg.num, nil
}

// Truncate deletes all segments numbered below n (used later by checkpointing).
// The segment currently written to cannot be deleted.
func (w *WAL) Truncate(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seg != nil && n > w.seg.num {
		return fmt.Errorf("wal: truncate below %d would delete the current segment %d", n, w.seg.num)
	}
	segs, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	removed := false
	// Delete in ascending order so a crash leaves a contiguous suffix.
	for _, s := range segs {
		if s >= n {
			break
		}
		if err := os.Remove(filepath.Join(w.dir, segmentName(s))); err != nil {
			return fmt.Errorf("wal: delete segment %d: %w", s, err)
		}
		removed = true
	}
	if removed {
		if err := fsutil.SyncDir(w.dir); err != nil {
			return fmt.Errorf("wal: %w", err)
		}
	}
	return nil
}

// Log appends one record atomically (single frame) and returns once it is
// written to the OS (write(2)), which survives kill -9; with SyncInterval 0 it
// also fsyncs. Safe for concurrent use. After Replay (or if Replay is never
// called) writing starts in a NEW segment. After a failed fsync, Log first
// re-writes the records not yet synced into a new segment (see Healthy); a
// record whose Log failed may still be replayed later.
func (w *WAL) Log(rec []byte) error {
	if uint64(len(rec)) > math.MaxUint32 {
		return fmt.Errorf("wal: record of %d bytes too large", len(rec))
	}
	// Build the frame outside the lock.
	bp, _ := w.bufPool.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	frame := appendFrame((*bp)[:0], rec)

	w.mu.Lock()
	pos, err := w.writeLocked(frame)
	w.mu.Unlock()

	if cap(frame) <= maxPooledBuf {
		*bp = frame
		w.bufPool.Put(bp)
	}
	if err != nil {
		return err
	}
	w.metrics.recordsWritten.Inc()
	w.metrics.bytesWritten.Add(float64(len(frame)))
	if w.opts.SyncInterval == 0 {
		if err := w.syncTo(pos); err != nil {
			return err
		}
		if w.failing.Load() {
			w.mu.Lock()
			w.healLocked()
			w.mu.Unlock()
		}
	}
	return nil
}

// appendFrame appends the frame of rec to dst.
func appendFrame(dst, rec []byte) []byte {
	dst = slices.Grow(dst, headerSize+len(rec))
	hdr := dst[len(dst) : len(dst)+headerSize]
	binary.LittleEndian.PutUint32(hdr[0:4], uint32(len(rec)))
	crc := crc32.Update(crc32.Update(0, castagnoli, hdr[0:4]), castagnoli, rec)
	binary.LittleEndian.PutUint32(hdr[4:8], crc)
	return append(dst[:len(dst)+headerSize], rec...)
}

// writeLocked writes one frame, rotating segments as needed, and returns the
// write position after it. w.mu must be held.
func (w *WAL) writeLocked(frame []byte) (int64, error) {
	if w.closed {
		return 0, ErrClosed
	}
	if w.replaying {
		return 0, errors.New("wal: log during replay")
	}
	if w.err != nil {
		if err := w.recoverLocked(); err != nil {
			return 0, err
		}
	}
	if w.seg == nil || (w.seg.size > 0 && w.seg.size+int64(len(frame)) > w.opts.SegmentSize) {
		if err := w.rotateLocked(); err != nil {
			return 0, err
		}
	}
	if len(w.pending) > 0 && len(w.pending)+len(frame) > maxPending {
		if err := w.syncSegmentLocked(); err != nil {
			return 0, err
		}
	}
	s := w.seg
	if _, err := s.f.Write(frame); err != nil {
		err = fmt.Errorf("wal: write segment %d: %w", s.num, err)
		// Remove a partial frame so later frames do not follow garbage.
		if terr := s.f.Truncate(s.size); terr != nil {
			err = fmt.Errorf("%w; removing the partial frame failed too: %w", err, terr)
			w.failLocked(err, true)
			return 0, err
		}
		w.failLocked(err, false)
		return 0, err
	}
	s.size += int64(len(frame))
	w.written += int64(len(frame))
	w.writtenAtomic.Store(w.written)
	if need := len(w.pending) + len(frame); need > cap(w.pending) {
		// Double up to maxPending (append grows large slices by 1.25x:
		// five times the final size allocated on the way).
		p := make([]byte, len(w.pending), max(need, min(2*cap(w.pending), maxPending), minPending))
		copy(p, w.pending)
		w.pending = p
	}
	w.pending = append(w.pending, frame...)
	if w.opts.SyncInterval > 0 && w.failErr != nil {
		w.healLocked()
	}
	return w.written, nil
}

// rotateLocked fsyncs and closes the current segment (if any) and creates the
// next one. w.mu must be held.
func (w *WAL) rotateLocked() error {
	if s := w.seg; s != nil {
		if s.synced < s.size {
			if err := s.sync(w.metrics); err != nil {
				err = fmt.Errorf("wal: sync segment %d before rotation: %w", s.num, err)
				w.failLocked(err, true)
				return err
			}
		}
		s.synced, s.covered = s.size, true
		w.pending = nil
		w.setSynced(w.written)
		if err := s.f.Close(); err != nil {
			w.logger.Warn("closing a synced WAL segment failed", "segment", s.num, "err", err)
		}
		w.seg = nil
	}
	s, err := w.newSegmentLocked()
	if err != nil {
		w.failLocked(err, false)
		return err
	}
	w.seg = s
	w.metrics.segmentCurrent.Set(float64(s.num))
	return nil
}

// newSegmentLocked creates the next segment file and makes its name durable.
// A file created by an earlier attempt whose directory fsync failed is used
// again, so a full disk never leaves a trail of empty segments.
func (w *WAL) newSegmentLocked() (*segment, error) {
	if w.fresh == nil {
		n := w.nextSeg
		f, err := w.openFile(filepath.Join(w.dir, segmentName(n)), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o666)
		if err != nil {
			return nil, fmt.Errorf("wal: create segment %d: %w", n, err)
		}
		w.fresh = &segment{f: f, num: n}
		w.nextSeg = n + 1
	}
	if err := fsutil.SyncDir(w.dir); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	s := w.fresh
	w.fresh = nil
	s.base = w.written
	return s, nil
}

// syncSegmentLocked fsyncs the current segment while w.mu is held.
func (w *WAL) syncSegmentLocked() error {
	s := w.seg
	if err := s.sync(w.metrics); err != nil {
		err = fmt.Errorf("wal: sync segment %d: %w", s.num, err)
		w.failLocked(err, true)
		return err
	}
	s.synced = s.size
	w.resetPendingLocked()
	w.setSynced(w.written)
	return nil
}

// resetPendingLocked empties w.pending, dropping a buffer grown by a huge record.
func (w *WAL) resetPendingLocked() {
	if cap(w.pending) > 2*maxPending {
		w.pending = nil
	}
	w.pending = w.pending[:0]
}

// shrinkPendingLocked releases the capacity a burst of writes left in
// w.pending: when an fsync covered under a quarter of it (used bytes), the
// buffer is cut to what it still holds, so a WAL idle after an ingest burst
// does not keep up to maxPending of heap. Steady writes keep their buffer.
func (w *WAL) shrinkPendingLocked(used int64) {
	if c := cap(w.pending); c > minPending && used < int64(c/4) {
		if len(w.pending) == 0 {
			w.pending = nil
		} else {
			w.pending = slices.Clone(w.pending)
		}
	}
}

// setSynced raises w.synced to pos.
func (w *WAL) setSynced(pos int64) {
	for {
		cur := w.synced.Load()
		if pos <= cur || w.synced.CompareAndSwap(cur, pos) {
			return
		}
	}
}

// syncTo makes sure everything up to write position pos is fsynced. Callers
// arriving while an fsync is running share the next one.
func (w *WAL) syncTo(pos int64) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if w.synced.Load() >= pos {
		w.mu.Lock()
		w.shrinkPendingLocked(0) // idle: nothing logged since the last fsync
		w.mu.Unlock()
		return nil
	}
	w.mu.Lock()
	s, target, sticky := w.seg, w.written, w.err
	w.mu.Unlock()
	if sticky != nil {
		return sticky
	}
	if s == nil {
		// The last segment was synced by its rotation and the next one
		// could not be created: nothing is unsynced.
		w.setSynced(target)
		return nil
	}
	err := s.sync(w.metrics)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seg != s {
		// Rotated or recovered meanwhile; either made s's bytes durable.
		if s.covered {
			w.setSynced(target)
			return nil
		}
		if err == nil {
			err = errors.New("segment replaced before it was synced")
		}
		return fmt.Errorf("wal: sync segment %d: %w", s.num, err)
	}
	if err != nil {
		err = fmt.Errorf("wal: sync segment %d: %w", s.num, err)
		w.failLocked(err, true)
		return err
	}
	if rel := target - s.base; rel > s.synced {
		used := rel - s.synced
		n := copy(w.pending, w.pending[used:])
		w.pending = w.pending[:n]
		s.synced = rel
		w.shrinkPendingLocked(used)
	}
	w.setSynced(target)
	return nil
}

// Sync fsyncs everything logged so far, recovering first from a failed fsync.
func (w *WAL) Sync() error {
	w.mu.Lock()
	if w.err != nil && !w.closed && !w.replaying {
		if err := w.recoverLocked(); err != nil {
			w.mu.Unlock()
			return err
		}
	}
	w.mu.Unlock()
	if err := w.syncTo(w.writtenAtomic.Load()); err != nil {
		return err
	}
	if w.failing.Load() {
		w.mu.Lock()
		w.healLocked()
		w.mu.Unlock()
	}
	return nil
}

func (w *WAL) syncLoop() {
	defer close(w.done)
	t := time.NewTicker(w.opts.SyncInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			err := w.Sync()
			if err != nil && !failing && !errors.Is(err, ErrClosed) {
				w.logger.Error("background WAL sync failed; retrying every sync interval", "err", err)
			}
			failing = err != nil
		}
	}
}

// Close syncs and closes the WAL and stops the background syncer. Closing
// twice is a no-op.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()

	close(w.stop)
	<-w.done

	// No writes can start now; hold syncMu so no fsync races the close.
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	if w.err != nil {
		// A last chance to make the records not yet synced durable.
		if err := w.recoverLocked(); err != nil {
			errs = append(errs, err)
		}
	}
	if f := w.fresh; f != nil {
		if err := f.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("wal: close segment %d: %w", f.num, err))
		}
		w.fresh = nil
	}
	if s := w.seg; s != nil {
		if w.err == nil {
			if err := s.sync(w.metrics); err != nil {
				errs = append(errs, fmt.Errorf("wal: sync segment %d: %w", s.num, err))
			}
		}
		if err := s.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("wal: close segment %d: %w", s.num, err))
		}
		w.seg = nil
	}
	return errors.Join(errs...)
}
