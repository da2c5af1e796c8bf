package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tandem-tsdb/tandem/internal/fsutil"
)

// checkpointPrefix names the checkpoints the head keeps next to the
// segments: checkpoint.N replaces the segments numbered below N (see
// tsdb/checkpoint.go), so the log starts at or below N.
const checkpointPrefix = "checkpoint."

// newestCheckpoint returns N of the newest complete checkpoint.N directory
// in dir, or -1 if there is none.
func newestCheckpoint(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return -1, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	best := -1
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, checkpointPrefix) || !allDigits(name[len(checkpointPrefix):]) {
			continue
		}
		if n, err := strconv.Atoi(name[len(checkpointPrefix):]); err == nil && n > best {
			best = n
		}
	}
	return best, nil
}

// checkContiguous returns a *CorruptionError for the first segment missing
// from segs: a gap, or, next to a checkpoint.N, segment N itself or segments
// between N and the first one (the checkpoint is written once segment N
// exists, and the segments below N are deleted after it).
func checkContiguous(dir string, segs []int) error {
	cp, err := newestCheckpoint(dir)
	if err != nil {
		return err
	}
	switch {
	case cp < 0:
	case len(segs) == 0:
		return &CorruptionError{Dir: dir, Segment: cp, Err: fmt.Errorf("segment missing: no segment follows checkpoint.%08d", cp)}
	case segs[0] > cp:
		return &CorruptionError{Dir: dir, Segment: cp, Err: fmt.Errorf("segments %d to %d missing (checkpoint.%08d is followed by segment %d)", cp, segs[0]-1, cp, segs[0])}
	case segs[len(segs)-1] < cp:
		last := segs[len(segs)-1]
		return &CorruptionError{Dir: dir, Segment: last + 1, Err: fmt.Errorf("segments %d to %d missing (checkpoint.%08d is followed by segment %d)", last+1, cp, cp, cp)}
	}
	for i := 1; i < len(segs); i++ {
		if segs[i] != segs[i-1]+1 {
			return &CorruptionError{Dir: dir, Segment: segs[i-1] + 1, Err: fmt.Errorf("segment missing (have %d and %d)", segs[i-1], segs[i])}
		}
	}
	return nil
}

// Replay calls fn for every record in order (all segments). In the LAST
// segment, damaged bytes are dropped with a logged warning and replay goes
// on after them: a torn or corrupt tail is truncated in place, damage
// followed by valid frames is cut out by rewriting the segment. Damage
// anywhere else, or a missing segment, returns a *CorruptionError naming
// segment and offset (records before it were replayed), which Repair fixes;
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
	if err := checkContiguous(w.dir, segs); err != nil {
		return err
	}
	r := newReplayer(readBufSize, replayBudget)
	call := func(_ int64, rec []byte) error { return fn(rec) }
	for i, s := range segs {
		if err := w.replaySegment(r, s, i == len(segs)-1, call); err != nil {
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

func (w *WAL) replaySegment(r *replayer, seg int, last bool, fn func(int64, []byte) error) error {
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

	damage, err := r.scan(f, size, !last, fn)
	if err != nil {
		return fmt.Errorf("wal: replay segment %d: %w", seg, err)
	}
	if len(damage) == 0 {
		return nil
	}
	w.metrics.corruptions.Add(float64(len(damage)))
	d := damage[0]
	if !last {
		return &CorruptionError{Dir: w.dir, Segment: seg, Offset: d.Offset, Err: d.Err}
	}
	for _, d := range damage {
		if d.Incomplete {
			return &CorruptionError{Dir: w.dir, Segment: seg, Offset: d.Offset,
				Err: fmt.Errorf("%w; no valid frame found within the search bound, %d bytes not searched", d.Err, d.Bytes)}
		}
	}
	var bytes int64
	records := 0
	for _, d := range damage {
		bytes += d.Bytes
		records += d.lost()
		w.logger.Warn("dropping damaged bytes from the last WAL segment", "segment", seg, "offset", d.Offset,
			"bytes", d.Bytes, "records", recordsAttr(d.Records), "tail", d.Tail, "err", d.Err)
	}
	w.metrics.droppedBytes.Add(float64(bytes))
	w.metrics.droppedRecords.Add(float64(records))
	if len(damage) == 1 && d.Tail {
		if err := f.Truncate(d.Offset); err != nil {
			return fmt.Errorf("wal: truncate segment %d to %d: %w", seg, d.Offset, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("wal: sync truncated segment %d: %w", seg, err)
		}
		return nil
	}
	return rewriteSegment(w.dir, seg, f, size, damage)
}

// recordsAttr renders a Damage.Records count for logs.
func recordsAttr(n int) string {
	if n < 0 {
		return "unknown (at least 1)"
	}
	return strconv.Itoa(n)
}

// rewriteSegment replaces segment seg of dir (size bytes read from src) by
// its bytes outside the damaged runs: a new file, fsynced, renamed over it.
func rewriteSegment(dir string, seg int, src io.ReaderAt, size int64, damage []Damage) error {
	path := filepath.Join(dir, segmentName(seg))
	tmp := path + ".repair"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return fmt.Errorf("wal: rewrite segment %d: %w", seg, err)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("wal: rewrite segment %d: %w", seg, err)
	}
	var off int64
	for _, d := range append(damage, Damage{Offset: size}) {
		if d.Offset > off {
			if _, err := io.Copy(f, io.NewSectionReader(src, off, d.Offset-off)); err != nil {
				return fail(err)
			}
		}
		off = d.Offset + d.Bytes
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("wal: rewrite segment %d: %w", seg, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("wal: rewrite segment %d: %w", seg, err)
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	return nil
}
