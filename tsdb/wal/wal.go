package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
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
)

const (
	// DefaultSegmentSize is the segment size used when Options.SegmentSize is zero.
	DefaultSegmentSize = 128 << 20

	headerSize = 8
	// maxPooledBuf bounds the frame buffers kept for reuse, so one huge record
	// does not pin its buffer forever.
	maxPooledBuf = 1 << 20
	readBufSize  = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrClosed is returned by operations on a closed WAL.
var ErrClosed = errors.New("wal: closed")

// Options configures a WAL.
type Options struct {
	SegmentSize  int64         // default 128 MiB; a record never spans segments (a record larger than SegmentSize gets a segment of its own)
	SyncInterval time.Duration // group-commit fsync interval; 0 = fsync before Log returns
	Logger       *slog.Logger  // default slog.Default()
	// Registerer receives the WAL metrics; may be nil.
	Registerer prometheus.Registerer
}

// CorruptionError reports a bad record outside the repairable tail of the log.
type CorruptionError struct {
	Segment int
	Offset  int64
	Err     error
}

// Error implements error.
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corruption in segment %d at offset %d: %v", e.Segment, e.Offset, e.Err)
}

// Unwrap returns the underlying cause.
func (e *CorruptionError) Unwrap() error { return e.Err }

type metrics struct {
	fsyncDuration  prometheus.Histogram
	recordsWritten prometheus.Counter
	bytesWritten   prometheus.Counter
	corruptions    prometheus.Counter
	segmentCurrent prometheus.Gauge
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		fsyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tandem_wal_fsync_duration_seconds",
			Help:    "Duration of WAL segment fsyncs.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		recordsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_records_written_total",
			Help: "Records appended to the WAL.",
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_bytes_written_total",
			Help: "Bytes appended to WAL segments, including frame headers.",
		}),
		corruptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_corruptions_total",
			Help: "Corrupt or torn WAL records found during replay.",
		}),
		segmentCurrent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_wal_segment_current",
			Help: "Number of the WAL segment currently written to.",
		}),
	}
	if r != nil {
		cs := []prometheus.Collector{m.fsyncDuration, m.recordsWritten, m.bytesWritten, m.corruptions, m.segmentCurrent}
		for i, c := range cs {
			if err := r.Register(c); err != nil {
				for _, done := range cs[:i] {
					r.Unregister(done)
				}
				return nil, fmt.Errorf("wal: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// WAL is a segmented write-ahead log. Log, Sync, Segments and Truncate are
// safe for concurrent use; Replay must run before the first Log, and Log
// fails while Replay runs.
type WAL struct {
	dir     string
	opts    Options
	logger  *slog.Logger
	metrics *metrics
	bufPool sync.Pool // *[]byte frame buffers

	// mu guards the fields below and serialises writes.
	mu      sync.Mutex
	seg     *os.File // current segment, nil until the first Log
	segNum  int      // number of seg
	segSize int64    // bytes in seg
	nextSeg int      // number of the next segment to create
	written int64    // total bytes written by this process, across segments
	err     error    // sticky write/fsync error
	closed  bool
	// replaying is set while Replay runs; Log fails meanwhile.
	replaying bool

	// syncMu serialises fsyncs; synced is the value of written covered by the last one.
	syncMu sync.Mutex
	synced int64

	writtenAtomic atomic.Int64 // mirror of written, for the background syncer
	stop          chan struct{}
	done          chan struct{}
}

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
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	w := &WAL{
		dir:     dir,
		opts:    opts,
		logger:  logger.With("component", "wal", "dir", dir),
		metrics: m,
		segNum:  -1,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
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
	return true
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
	if w.err != nil {
		return 0, w.err
	}
	if w.replaying {
		return 0, errors.New("wal: new segment during replay")
	}
	if err := w.rotateLocked(); err != nil {
		return 0, err
	}
	return w.segNum, nil
}

// Truncate deletes all segments numbered below n (used later by checkpointing).
// The segment currently written to cannot be deleted.
func (w *WAL) Truncate(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seg != nil && n > w.segNum {
		return fmt.Errorf("wal: truncate below %d would delete the current segment %d", n, w.segNum)
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
		if err := syncDir(w.dir); err != nil {
			return err
		}
	}
	return nil
}

// Replay calls fn for every record in order (all segments). A torn or corrupt
// tail of the LAST segment is truncated in place (file truncated to the end of
// the last good record) with a logged warning, and replay succeeds. A bad
// record anywhere else returns a *CorruptionError naming segment and offset;
// never panics. fn's slice is only valid during the call.
func (w *WAL) Replay(fn func(rec []byte) error) error {
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return ErrClosed
	case w.seg != nil:
		w.mu.Unlock()
		return errors.New("wal: replay after writing started")
	case w.replaying:
		w.mu.Unlock()
		return errors.New("wal: replay already running")
	}
	w.replaying = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.replaying = false
		w.mu.Unlock()
	}()

	segs, err := listSegments(w.dir)
	if err != nil {
		return err
	}
	for i := 1; i < len(segs); i++ {
		if segs[i] != segs[i-1]+1 {
			return &CorruptionError{Segment: segs[i-1] + 1, Err: fmt.Errorf("segment missing (have %d and %d)", segs[i-1], segs[i])}
		}
	}
	r := newReplayer(readBufSize)
	for i, s := range segs {
		if err := w.replaySegment(r, s, i == len(segs)-1, fn); err != nil {
			return err
		}
	}
	if len(segs) > 0 {
		w.mu.Lock()
		w.nextSeg = max(w.nextSeg, segs[len(segs)-1]+1)
		w.mu.Unlock()
	}
	return nil
}

func (w *WAL) replaySegment(r *replayer, seg int, last bool, fn func([]byte) error) error {
	name := filepath.Join(w.dir, segmentName(seg))
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR // may need to truncate a torn tail
	}
	f, err := os.OpenFile(name, flag, 0)
	if err != nil {
		return fmt.Errorf("wal: open segment %d: %w", seg, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("wal: stat segment %d: %w", seg, err)
	}
	size := fi.Size()

	end, bad, err := r.scan(f, size, fn)
	if err != nil {
		return fmt.Errorf("wal: replay segment %d: %w", seg, err)
	}
	if bad == nil {
		return nil
	}
	w.metrics.corruptions.Inc()
	if !last {
		return &CorruptionError{Segment: seg, Offset: end, Err: bad}
	}
	w.logger.Warn("truncating torn or corrupt tail of last WAL segment",
		"segment", seg, "offset", end, "dropped_bytes", size-end, "err", bad)
	if err := f.Truncate(end); err != nil {
		return fmt.Errorf("wal: truncate segment %d to %d: %w", seg, end, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: sync truncated segment %d: %w", seg, err)
	}
	return nil
}

// replayer holds the buffers reused across segments and records.
type replayer struct {
	br  *bufio.Reader
	hdr [headerSize]byte
	buf []byte
}

func newReplayer(bufSize int) *replayer {
	return &replayer{br: bufio.NewReaderSize(nil, bufSize)}
}

// scan reads the frames of a segment holding size bytes from src and calls fn
// for each good one. It returns the offset just past the last good frame and,
// if bytes follow that are not a good frame, why (bad). err reports I/O errors
// and errors returned by fn.
func (r *replayer) scan(src io.Reader, size int64, fn func([]byte) error) (end int64, bad, err error) {
	r.br.Reset(src)
	for end < size {
		bad, err := r.next(size - end)
		if err != nil {
			return end, nil, fmt.Errorf("read at offset %d: %w", end, err)
		}
		if bad != nil {
			return end, bad, nil
		}
		if err := fn(r.buf); err != nil {
			return end, nil, fmt.Errorf("record at offset %d: %w", end, err)
		}
		end += headerSize + int64(len(r.buf))
	}
	return end, nil, nil
}

// next reads one frame into r.buf, given the bytes left in the segment. It
// returns a non-nil bad for a torn or corrupt frame, and err for I/O errors.
func (r *replayer) next(remaining int64) (bad, err error) {
	if remaining < headerSize {
		return fmt.Errorf("torn frame header (%d bytes)", remaining), nil
	}
	if _, err := io.ReadFull(r.br, r.hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(r.hdr[0:4])
	if int64(n) > remaining-headerSize {
		return fmt.Errorf("frame length %d exceeds the %d bytes left", n, remaining-headerSize), nil
	}
	r.buf = slices.Grow(r.buf[:0], int(n))[:n]
	if _, err := io.ReadFull(r.br, r.buf); err != nil {
		return nil, err
	}
	crc := crc32.Update(crc32.Update(0, castagnoli, r.hdr[0:4]), castagnoli, r.buf)
	if want := binary.LittleEndian.Uint32(r.hdr[4:8]); crc != want {
		return fmt.Errorf("checksum mismatch (stored %#08x, computed %#08x)", want, crc), nil
	}
	return nil, nil
}

// Log appends one record atomically (single frame) and returns once it is
// written to the OS (write(2)), which survives kill -9; with SyncInterval 0 it
// also fsyncs. Safe for concurrent use. After Replay (or if Replay is never
// called) writing starts in a NEW segment.
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
		return w.syncTo(pos)
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
	if w.err != nil {
		return 0, w.err
	}
	if w.replaying {
		return 0, errors.New("wal: log during replay")
	}
	if w.seg == nil || (w.segSize > 0 && w.segSize+int64(len(frame)) > w.opts.SegmentSize) {
		if err := w.rotateLocked(); err != nil {
			return 0, err
		}
	}
	if _, err := w.seg.Write(frame); err != nil {
		// Remove a partial frame so later frames do not follow garbage.
		if terr := w.seg.Truncate(w.segSize); terr != nil {
			w.err = fmt.Errorf("wal: write failed (%v) and partial frame could not be removed: %w", err, terr)
			return 0, w.err
		}
		return 0, fmt.Errorf("wal: write segment %d: %w", w.segNum, err)
	}
	w.segSize += int64(len(frame))
	w.written += int64(len(frame))
	w.writtenAtomic.Store(w.written)
	return w.written, nil
}

// rotateLocked fsyncs and closes the current segment (if any) and creates the
// next one. w.mu must be held.
func (w *WAL) rotateLocked() error {
	if w.seg != nil {
		if err := w.fsync(w.seg); err != nil {
			w.err = fmt.Errorf("wal: sync segment %d before rotation: %w", w.segNum, err)
			return w.err
		}
		if err := w.seg.Close(); err != nil {
			w.err = fmt.Errorf("wal: close segment %d: %w", w.segNum, err)
			return w.err
		}
		w.seg = nil
	}
	n := w.nextSeg
	f, err := os.OpenFile(filepath.Join(w.dir, segmentName(n)), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o666)
	if err != nil {
		return fmt.Errorf("wal: create segment %d: %w", n, err)
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return err
	}
	w.seg, w.segNum, w.segSize, w.nextSeg = f, n, 0, n+1
	w.metrics.segmentCurrent.Set(float64(n))
	return nil
}

func (w *WAL) fsync(f *os.File) error {
	start := time.Now()
	err := f.Sync()
	w.metrics.fsyncDuration.Observe(time.Since(start).Seconds())
	return err
}

// syncTo makes sure everything up to write position pos is fsynced. Callers
// arriving while an fsync is running share the next one.
func (w *WAL) syncTo(pos int64) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if w.synced >= pos {
		return nil
	}
	w.mu.Lock()
	f, target, sticky := w.seg, w.written, w.err
	w.mu.Unlock()
	if sticky != nil {
		return sticky
	}
	if f != nil {
		if err := w.fsync(f); err != nil {
			if !errors.Is(err, os.ErrClosed) {
				err = fmt.Errorf("wal: sync segment: %w", err)
				// After a failed fsync the kernel may have dropped dirty pages;
				// never pretend later writes are durable.
				w.mu.Lock()
				if w.err == nil {
					w.err = err
				}
				w.mu.Unlock()
				return err
			}
			// f was rotated or closed meanwhile, which fsynced it; report a
			// failure of that fsync if there was one.
			w.mu.Lock()
			sticky = w.err
			w.mu.Unlock()
			if sticky != nil {
				return sticky
			}
		}
	}
	w.synced = target
	return nil
}

// Sync fsyncs everything logged so far.
func (w *WAL) Sync() error {
	return w.syncTo(w.writtenAtomic.Load())
}

func (w *WAL) syncLoop() {
	defer close(w.done)
	t := time.NewTicker(w.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			if err := w.Sync(); err != nil {
				w.logger.Error("background WAL sync failed", "err", err)
			}
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
	if w.seg == nil {
		return w.err
	}
	var errs []error
	if w.err != nil {
		errs = append(errs, w.err)
	} else if err := w.fsync(w.seg); err != nil {
		errs = append(errs, fmt.Errorf("wal: sync segment %d: %w", w.segNum, err))
	}
	if err := w.seg.Close(); err != nil {
		errs = append(errs, fmt.Errorf("wal: close segment %d: %w", w.segNum, err))
	}
	w.seg = nil
	return errors.Join(errs...)
}

// syncDir fsyncs a directory so that created or removed entries are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("wal: open dir for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: sync dir: %w", err)
	}
	return nil
}
