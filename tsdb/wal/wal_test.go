package wal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLogger(buf io.Writer) *slog.Logger {
	if buf == nil {
		buf = io.Discard
	}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func mustOpen(t testing.TB, dir string, opts Options) *WAL {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(nil)
	}
	w, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// payload returns a deterministic record of size n identifying i.
func payload(i, n int) []byte {
	if n < 8 {
		n = 8
	}
	b := make([]byte, n)
	binary.LittleEndian.PutUint64(b, uint64(i))
	for j := 8; j < n; j++ {
		b[j] = byte(i*31 + j)
	}
	return b
}

func replayAll(t testing.TB, w *WAL) [][]byte {
	t.Helper()
	var recs [][]byte
	if err := w.Replay(func(rec []byte) error {
		recs = append(recs, bytes.Clone(rec))
		return nil
	}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	return recs
}

func assertRecords(t testing.TB, want, got [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d differs: got %d bytes %x..., want %d bytes", i, len(got[i]), got[i][:min(16, len(got[i]))], len(want[i]))
		}
	}
}

func segPath(dir string, n int) string { return filepath.Join(dir, segmentName(n)) }

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestRoundTripAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	const segSize = 1024
	w := mustOpen(t, dir, Options{SegmentSize: segSize})
	var want [][]byte
	for i := range 300 {
		n := (i * 37) % 300
		if i == 150 {
			n = 5000 // larger than a segment: gets one of its own
		}
		want = append(want, payload(i, n))
		if err := w.Log(want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Log(nil); err != nil { // empty records are allowed
		t.Fatal(err)
	}
	want = append(want, []byte{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	first, last, err := w.Segments()
	if err != nil {
		t.Fatal(err)
	}
	if first != 0 || last < 20 {
		t.Fatalf("segments %d..%d, want 0..>=20", first, last)
	}
	big := 0
	for s := first; s <= last; s++ {
		size := fileSize(t, segPath(dir, s))
		if size > segSize {
			big++
			if size != 5000+headerSize {
				t.Fatalf("segment %d has %d bytes: only the oversized record may exceed the segment size", s, size)
			}
		}
	}
	if big != 1 {
		t.Fatalf("%d oversized segments, want 1", big)
	}

	w = mustOpen(t, dir, Options{SegmentSize: segSize})
	assertRecords(t, want, replayAll(t, w))
	// Writing after replay starts a new segment.
	extra := payload(999, 10)
	if err := w.Log(extra); err != nil {
		t.Fatal(err)
	}
	if _, l, _ := w.Segments(); l != last+1 {
		t.Fatalf("after replay wrote to segment %d, want new segment %d", l, last+1)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = mustOpen(t, dir, Options{SegmentSize: segSize})
	defer w.Close()
	assertRecords(t, append(want, extra), replayAll(t, w))
}

func TestLogWithoutReplayStartsNewSegment(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, Options{})
	if err := w.Log([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = mustOpen(t, dir, Options{})
	if err := w.Log([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if f, l, _ := w.Segments(); f != 0 || l != 1 {
		t.Fatalf("segments %d..%d, want 0..1", f, l)
	}
	if err := w.Replay(func([]byte) error { return nil }); err == nil {
		t.Fatal("replay after writing started succeeded")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = mustOpen(t, dir, Options{})
	defer w.Close()
	assertRecords(t, [][]byte{[]byte("a"), []byte("b")}, replayAll(t, w))
}

// writeWAL logs recs into a fresh WAL in dir and returns the offset of every
// frame in the segment it landed in.
func writeWAL(t *testing.T, dir string, segSize int64, recs [][]byte) (segs []int, offs []int64) {
	t.Helper()
	w := mustOpen(t, dir, Options{SegmentSize: segSize, SyncInterval: time.Hour})
	for _, r := range recs {
		if err := w.Log(r); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		segs = append(segs, w.seg.num)
		offs = append(offs, w.seg.size-int64(len(r))-headerSize)
		w.mu.Unlock()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return segs, offs
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestTornTail(t *testing.T) {
	var recs [][]byte
	for i := range 40 {
		recs = append(recs, payload(i, 20+i))
	}
	src := t.TempDir()
	segs, offs := writeWAL(t, src, 256, recs)
	lastSeg := segs[len(segs)-1]
	if lastSeg < 2 {
		t.Fatalf("want several segments, got last %d", lastSeg)
	}
	lastOff := offs[len(offs)-1]
	lastEnd := fileSize(t, segPath(src, lastSeg))
	if lastEnd-lastOff != int64(len(recs[len(recs)-1])+headerSize) {
		t.Fatal("bad test setup: last frame is not at the end of the last segment")
	}
	good := recs[:len(recs)-1]

	for cut := lastOff; cut < lastEnd; cut++ {
		dir := copyDir(t, src)
		if err := os.Truncate(segPath(dir, lastSeg), cut); err != nil {
			t.Fatal(err)
		}
		var logs syncBuffer
		w := mustOpen(t, dir, Options{SegmentSize: 256, Logger: testLogger(&logs)})
		assertRecords(t, good, replayAll(t, w))
		if cut > lastOff && !bytes.Contains([]byte(logs.String()), []byte("level=WARN")) {
			t.Fatalf("cut %d: no warning logged: %q", cut, logs.String())
		}
		if got := fileSize(t, segPath(dir, lastSeg)); got != lastOff {
			t.Fatalf("cut %d: segment truncated to %d, want %d", cut, got, lastOff)
		}
		newRec := []byte(fmt.Sprintf("new after cut %d", cut))
		if err := w.Log(newRec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		w = mustOpen(t, dir, Options{SegmentSize: 256})
		assertRecords(t, append(bytes2D(good), newRec), replayAll(t, w))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func bytes2D(b [][]byte) [][]byte { return append([][]byte(nil), b...) }

func TestCorruptLastRecordTruncated(t *testing.T) {
	recs := [][]byte{payload(1, 100), payload(2, 100), payload(3, 100)}
	src := t.TempDir()
	_, offs := writeWAL(t, src, 0, recs)
	last := offs[2]
	for name, pos := range map[string]int64{
		"length":         last + 1, // length grows past the end of the file
		"crc":            last + 5,
		"payload":        last + headerSize + 50,
		"length shrinks": last, // length now shorter: checksum fails
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyDir(t, src)
			flipByte(t, segPath(dir, 0), pos, 0x01)
			reg := prometheus.NewRegistry()
			w := mustOpen(t, dir, Options{Registerer: reg})
			assertRecords(t, recs[:2], replayAll(t, w))
			if got := fileSize(t, segPath(dir, 0)); got != last {
				t.Fatalf("segment truncated to %d, want %d", got, last)
			}
			if v := testutil.ToFloat64(w.metrics.corruptions); v != 1 {
				t.Fatalf("corruptions_total = %v, want 1", v)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCorruptMiddleOfLastSegmentKeepsRest(t *testing.T) {
	recs := [][]byte{payload(1, 10), payload(2, 10), payload(3, 10), payload(4, 10)}
	dir := t.TempDir()
	_, offs := writeWAL(t, dir, 0, recs)
	before := mustRead(t, segPath(dir, 0))
	flipByte(t, segPath(dir, 0), offs[1]+headerSize, 0xff)
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	w := mustOpen(t, dir, Options{Logger: testLogger(&logs), Registerer: reg})
	defer w.Close()
	keep := [][]byte{recs[0], recs[2], recs[3]}
	assertRecords(t, keep, replayAll(t, w))
	// The segment is rewritten without the damaged frame, so that it replays
	// cleanly once it is no longer the last one.
	want := append(bytes.Clone(before[:offs[1]]), before[offs[2]:]...)
	if got := mustRead(t, segPath(dir, 0)); !bytes.Equal(got, want) {
		t.Fatalf("segment is %d bytes after replay, want the %d bytes of the good frames", len(got), len(want))
	}
	if v := testutil.ToFloat64(w.metrics.droppedBytes); v != float64(offs[2]-offs[1]) {
		t.Fatalf("dropped bytes = %v, want %d", v, offs[2]-offs[1])
	}
	if v := testutil.ToFloat64(w.metrics.droppedRecords); v != 1 {
		t.Fatalf("dropped records = %v, want 1", v)
	}
	if !strings.Contains(logs.String(), "records=1") || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("damage not logged: %s", logs.String())
	}
	if err := w.Log([]byte("new")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w = mustOpen(t, dir, Options{})
	assertRecords(t, append(keep, []byte("new")), replayAll(t, w))
}

func flipByte(t *testing.T, path string, off int64, mask byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= mask
	if err := os.WriteFile(path, b, 0o666); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptEarlierSegment(t *testing.T) {
	var recs [][]byte
	for i := range 30 {
		recs = append(recs, payload(i, 50))
	}
	dir := t.TempDir()
	segs, offs := writeWAL(t, dir, 200, recs)
	// Corrupt the second record of segment 1.
	idx := -1
	for i := range segs {
		if segs[i] == 1 && offs[i] > 0 {
			idx = i
			break
		}
	}
	if idx < 0 || segs[len(segs)-1] <= 1 {
		t.Fatal("bad test setup")
	}
	flipByte(t, segPath(dir, 1), offs[idx]+headerSize+3, 0x80)
	sizeBefore := fileSize(t, segPath(dir, 1))

	w := mustOpen(t, dir, Options{})
	defer w.Close()
	var n int
	err := w.Replay(func([]byte) error { n++; return nil })
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v, want *CorruptionError", err)
	}
	if ce.Segment != 1 || ce.Offset != offs[idx] {
		t.Fatalf("corruption reported at segment %d offset %d, want 1/%d", ce.Segment, ce.Offset, offs[idx])
	}
	if n != idx {
		t.Fatalf("fn called %d times before the corruption, want %d", n, idx)
	}
	if ce.Unwrap() == nil || ce.Error() == "" {
		t.Fatal("CorruptionError without cause or message")
	}
	if got := fileSize(t, segPath(dir, 1)); got != sizeBefore {
		t.Fatal("a non-last segment was modified")
	}
}

func TestEmptyAndGarbageSegments(t *testing.T) {
	garbage := bytes.Repeat([]byte("not a wal frame!"), 100)
	zeros := make([]byte, 4096)
	tests := []struct {
		name    string
		files   map[int][]byte
		wantErr bool
		// wantSize is the expected size of the last segment after replay.
		wantSize int64
	}{
		{name: "empty segments", files: map[int][]byte{3: nil, 4: nil, 5: nil}},
		{name: "garbage last", files: map[int][]byte{0: nil, 1: garbage}},
		{name: "zeros last", files: map[int][]byte{0: nil, 1: zeros}},
		{name: "single garbage byte", files: map[int][]byte{7: {0x42}}},
		{name: "garbage earlier", files: map[int][]byte{0: garbage, 1: nil}, wantErr: true},
		{name: "zeros earlier", files: map[int][]byte{0: zeros, 1: nil}, wantErr: true},
		{name: "missing segment", files: map[int][]byte{0: nil, 2: nil}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			last := -1
			for n, b := range tc.files {
				if err := os.WriteFile(segPath(dir, n), b, 0o666); err != nil {
					t.Fatal(err)
				}
				last = max(last, n)
			}
			// Files that are not segments are ignored.
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), garbage, 0o666); err != nil {
				t.Fatal(err)
			}
			first := last
			for n := range tc.files {
				first = min(first, n)
			}
			if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf("checkpoint.%08d", first)), 0o777); err != nil {
				t.Fatal(err)
			}
			w := mustOpen(t, dir, Options{})
			defer w.Close()
			var n int
			err := w.Replay(func([]byte) error { n++; return nil })
			var ce *CorruptionError
			if tc.wantErr {
				if !errors.As(err, &ce) {
					t.Fatalf("got %v, want *CorruptionError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("replayed %d records from garbage", n)
			}
			if got := fileSize(t, segPath(dir, last)); got != tc.wantSize {
				t.Fatalf("last segment has %d bytes after replay, want %d", got, tc.wantSize)
			}
			if err := w.Log([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if _, l, _ := w.Segments(); l != last+1 {
				t.Fatalf("writing to segment %d, want %d", l, last+1)
			}
		})
	}
}

func TestReplayCallbackError(t *testing.T) {
	dir := t.TempDir()
	writeWAL(t, dir, 0, [][]byte{[]byte("a"), []byte("b")})
	w := mustOpen(t, dir, Options{})
	defer w.Close()
	boom := errors.New("boom")
	err := w.Replay(func([]byte) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	var ce *CorruptionError
	if errors.As(err, &ce) {
		t.Fatal("callback error reported as corruption")
	}
	if got := fileSize(t, segPath(dir, 0)); got != 2*(headerSize+1) {
		t.Fatal("callback error modified the segment")
	}
}

func TestLogDuringReplayFails(t *testing.T) {
	dir := t.TempDir()
	writeWAL(t, dir, 0, [][]byte{[]byte("a")})
	w := mustOpen(t, dir, Options{})
	defer w.Close()
	var logErr error
	if err := w.Replay(func([]byte) error { logErr = w.Log([]byte("x")); return nil }); err != nil {
		t.Fatal(err)
	}
	if logErr == nil {
		t.Fatal("Log during Replay succeeded")
	}
}

func TestConcurrentLog(t *testing.T) {
	for _, interval := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("sync=%v", interval), func(t *testing.T) {
			dir := t.TempDir()
			w := mustOpen(t, dir, Options{SegmentSize: 32 << 10, SyncInterval: interval})
			const writers, perWriter = 16, 300
			var wg sync.WaitGroup
			for g := range writers {
				wg.Go(func() {
					for i := range perWriter {
						rec := payload(g<<20|i, 8+(g*i)%200)
						if err := w.Log(rec); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			w = mustOpen(t, dir, Options{})
			defer w.Close()
			next := make([]int, writers)
			recs := replayAll(t, w)
			for _, rec := range recs {
				id := int(binary.LittleEndian.Uint64(rec))
				g, i := id>>20, id&(1<<20-1)
				if g >= writers || i != next[g] {
					t.Fatalf("record from writer %d #%d out of order or duplicated (expected #%d)", g, i, next[g])
				}
				if !bytes.Equal(rec, payload(id, 8+(g*i)%200)) {
					t.Fatalf("record %d/%d corrupted", g, i)
				}
				next[g]++
			}
			if len(recs) != writers*perWriter {
				t.Fatalf("replayed %d records, want %d", len(recs), writers*perWriter)
			}
		})
	}
}

func TestCloseAndTruncate(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, Options{SegmentSize: 100})
	for i := range 10 {
		if err := w.Log(payload(i, 80)); err != nil { // one record per segment
			t.Fatal(err)
		}
	}
	if f, l, err := w.Segments(); err != nil || f != 0 || l != 9 {
		t.Fatalf("segments %d..%d (%v), want 0..9", f, l, err)
	}
	if err := w.Truncate(10); err == nil {
		t.Fatal("truncate deleted the current segment")
	}
	if err := w.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if f, l, _ := w.Segments(); f != 4 || l != 9 {
		t.Fatalf("segments %d..%d after truncate, want 4..9", f, l)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := w.Log([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("log after close: %v", err)
	}
	w = mustOpen(t, dir, Options{})
	defer w.Close()
	recs := replayAll(t, w)
	if len(recs) != 6 || binary.LittleEndian.Uint64(recs[0]) != 4 {
		t.Fatalf("after truncate replayed %d records starting at %d", len(recs), binary.LittleEndian.Uint64(recs[0]))
	}
	empty := mustOpen(t, t.TempDir(), Options{})
	defer empty.Close()
	if f, l, err := empty.Segments(); f != -1 || l != -1 || err != nil {
		t.Fatalf("empty WAL segments %d..%d %v", f, l, err)
	}
}

func TestMetricsAndBackgroundSync(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := mustOpen(t, t.TempDir(), Options{SyncInterval: 5 * time.Millisecond, Registerer: reg, SegmentSize: 100})
	defer w.Close()
	for i := range 3 {
		if err := w.Log(payload(i, 60)); err != nil {
			t.Fatal(err)
		}
	}
	if v := testutil.ToFloat64(w.metrics.recordsWritten); v != 3 {
		t.Fatalf("records_written_total = %v", v)
	}
	if v := testutil.ToFloat64(w.metrics.bytesWritten); v != 3*(60+headerSize) {
		t.Fatalf("bytes_written_total = %v", v)
	}
	if v := testutil.ToFloat64(w.metrics.segmentCurrent); v != 2 {
		t.Fatalf("segment_current = %v, want 2", v)
	}
	// Rotations (or the syncer) fsynced segments 0 and 1; the syncer must
	// fsync segment 2. (A rotation racing the syncer may fsync a segment twice.)
	deadline := time.Now().Add(5 * time.Second)
	for fsyncCount(t, w) < 3 || w.synced.Load() < w.writtenAtomic.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("background syncer did not fsync: %d fsyncs", fsyncCount(t, w))
		}
		time.Sleep(time.Millisecond)
	}
	// Nothing new written: the syncer must not keep fsyncing.
	n := fsyncCount(t, w)
	time.Sleep(50 * time.Millisecond)
	if got := fsyncCount(t, w); got != n {
		t.Fatalf("idle syncer fsynced %d more times", got-n)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 10 {
		t.Fatalf("registered %d metrics (%v), want 10", n, err)
	}
	if _, err := Open(t.TempDir(), Options{Registerer: reg}); err == nil {
		t.Fatal("duplicate registration not reported")
	}
}

func fsyncCount(t *testing.T, w *WAL) uint64 {
	t.Helper()
	var m dto.Metric
	if err := w.metrics.fsyncDuration.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestReplayDoesNotAllocatePerRecord(t *testing.T) {
	dir := t.TempDir()
	var recs [][]byte
	for i := range 2000 {
		recs = append(recs, payload(i, 100+i%50))
	}
	writeWAL(t, dir, 64<<10, recs)
	w := mustOpen(t, dir, Options{})
	defer w.Close()
	var n int
	allocs := testing.AllocsPerRun(3, func() {
		if err := w.Replay(func([]byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	})
	if n != 4*len(recs) {
		t.Fatalf("replayed %d records, want %d", n, 4*len(recs))
	}
	if allocs > 100 {
		t.Fatalf("replay of %d records allocated %v times", len(recs), allocs)
	}
}

const crashEnv = "TANDEM_WAL_CRASH_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashHelper(dir)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashHelper replays dir, then logs numbered records after the last one
// found, printing each number once Log returned, until it is killed.
func crashHelper(dir string) {
	w, err := Open(dir, Options{SegmentSize: 64 << 10, SyncInterval: time.Hour, Logger: testLogger(os.Stderr)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	next := 1
	if err := w.Replay(func(rec []byte) error {
		next = int(binary.LittleEndian.Uint64(rec)) + 1
		return nil
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	deadline := time.Now().Add(30 * time.Second) // in case the parent died
	for i := next; time.Now().Before(deadline); i++ {
		if err := w.Log(payload(i, 8+i%700)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if _, err := os.Stdout.WriteString(strconv.Itoa(i) + "\n"); err != nil {
			os.Exit(3)
		}
	}
	os.Exit(4)
}

func TestCrashKill9(t *testing.T) {
	dir := t.TempDir()
	maxAcked := 0
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil { // test failed mid-round
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		killAfter := 2000 + rand.IntN(20000)
		r := bufio.NewReader(out)
		lines := 0
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break // EOF after the kill; a partial last line is not an ack
			}
			n, perr := strconv.Atoi(line[:len(line)-1])
			if perr != nil {
				t.Fatalf("bad helper output %q", line)
			}
			// Within a round acks are consecutive; a new round resumes after
			// the last recovered record, which may be newer than the last ack.
			if (lines > 0 && n != maxAcked+1) || n <= maxAcked {
				t.Fatalf("round %d: helper acked %d after %d", round, n, maxAcked)
			}
			maxAcked = n
			lines++
			if lines == killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		err = cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: helper was not killed: %v; stderr: %s", round, err, stderr.String())
		}
		if lines < killAfter {
			t.Fatalf("round %d: helper stopped after %d acks; stderr: %s", round, lines, stderr.String())
		}
	}

	w := mustOpen(t, dir, Options{})
	defer w.Close()
	want := 1
	if err := w.Replay(func(rec []byte) error {
		i := int(binary.LittleEndian.Uint64(rec))
		if i != want {
			return fmt.Errorf("record %d found, want %d", i, want)
		}
		if !bytes.Equal(rec, payload(i, 8+i%700)) {
			return fmt.Errorf("record %d corrupted", i)
		}
		want++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want-1 < maxAcked {
		t.Fatalf("recovered records 1..%d, but %d were acknowledged", want-1, maxAcked)
	}
}

// segmentSeeds returns segment contents for fuzz seeds and file tests.
func segmentSeeds() [][]byte {
	var valid []byte
	for _, r := range [][]byte{[]byte("hello"), payload(7, 100), nil, []byte("world")} {
		valid = appendFrame(valid, r)
	}
	return [][]byte{
		valid,
		valid[:len(valid)-3],
		valid[:11],
		make([]byte, 64),
		{},
		{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0},
		append(bytes.Clone(valid), bytes.Repeat([]byte{0xab}, 40)...),
	}
}

// checkScan scans a segment held in data and checks the invariants of the
// scanner; it returns the number of good records and the repaired segment
// (the good frames, in order).
func checkScan(t *testing.T, data []byte) (int, []byte) {
	r := newReplayer(64, replayBudget) // small buffer to cover frames spanning refills
	var n int
	var repaired []byte
	var pos int64
	damage, err := r.scan(bytes.NewReader(data), int64(len(data)), false, func(off int64, rec []byte) error {
		// Frames and damaged runs tile the segment in order.
		if off < pos {
			t.Fatalf("record %d at offset %d overlaps what came before (up to %d)", n, off, pos)
		}
		pos = off + headerSize + int64(len(rec))
		// Every good record sits, unchanged, where its frame says.
		if !bytes.Equal(rec, data[off+headerSize:pos]) || !bytes.Equal(appendFrame(nil, rec), data[off:pos]) {
			t.Fatalf("record %d does not match the segment bytes", n)
		}
		n++
		repaired = append(repaired, data[off:pos]...)
		return nil
	})
	if err != nil {
		t.Fatalf("scan of in-memory segment failed: %v", err)
	}
	var dropped int64
	for i, d := range damage {
		if d.Bytes <= 0 || d.Err == nil || d.Incomplete {
			t.Fatalf("damage %d: %+v", i, d)
		}
		if d.Tail != (d.Offset+d.Bytes == int64(len(data))) {
			t.Fatalf("damage %d: tail=%v but runs to %d of %d", i, d.Tail, d.Offset+d.Bytes, len(data))
		}
		dropped += d.Bytes
	}
	if int64(len(repaired))+dropped != int64(len(data)) {
		t.Fatalf("%d bytes of records and %d damaged do not add up to %d", len(repaired), dropped, len(data))
	}
	// The repaired segment rescans cleanly to the same records.
	var again int
	d2, err := newReplayer(4096, replayBudget).scan(bytes.NewReader(repaired), int64(len(repaired)), false, func(int64, []byte) error { again++; return nil })
	if err != nil || len(d2) != 0 || again != n {
		t.Fatalf("rescan of repaired segment: %d records (%v, %v), want %d", again, d2, err, n)
	}
	return n, repaired
}

// FuzzReplay fuzzes the bytes of a single (last) segment. It exercises the
// in-memory frame scanner that Replay runs on each segment file, so coverage
// is not disturbed by file system noise; TestReplayFileMatchesScan checks that
// Replay on real files agrees with it. The same bytes followed by two good
// frames must end with those frames: the search after damage finds them.
func FuzzReplay(f *testing.F) {
	for _, s := range segmentSeeds() {
		f.Add(s)
	}
	x, y := []byte("resync target x"), []byte("resync target y")
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScan(t, data)
		seg := appendFrame(appendFrame(bytes.Clone(data), x), y)
		var last []byte
		if _, err := newReplayer(64, replayBudget).scan(bytes.NewReader(seg), int64(len(seg)), false, func(_ int64, rec []byte) error {
			last = bytes.Clone(rec)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(last, y) {
			t.Fatalf("last record %q, want %q", last, y)
		}
	})
}

func TestReplayFileMatchesScan(t *testing.T) {
	inputs := segmentSeeds()
	rng := rand.New(rand.NewPCG(1, 2))
	valid := inputs[0]
	for range 100 {
		b := bytes.Clone(valid)
		switch rng.IntN(3) {
		case 0:
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		case 1:
			b = b[:rng.IntN(len(b))]
		default:
			b = append(b, make([]byte, rng.IntN(20))...)
		}
		inputs = append(inputs, b)
	}
	for i, data := range inputs {
		wantN, repaired := checkScan(t, data)
		dir := t.TempDir()
		if err := os.WriteFile(segPath(dir, 0), data, 0o666); err != nil {
			t.Fatal(err)
		}
		w := mustOpen(t, dir, Options{})
		var n int
		if err := w.Replay(func([]byte) error { n++; return nil }); err != nil {
			t.Fatalf("input %d: replay of a single segment failed: %v", i, err)
		}
		w.Close()
		if n != wantN {
			t.Fatalf("input %d: replayed %d records, scanner found %d", i, n, wantN)
		}
		if got := mustRead(t, segPath(dir, 0)); !bytes.Equal(got, repaired) {
			t.Fatalf("input %d: segment is %d bytes after replay, want the %d bytes of its good frames", i, len(got), len(repaired))
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func BenchmarkLog(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		rec := payload(1, size)
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			w := mustOpen(b, b.TempDir(), Options{SyncInterval: time.Second})
			defer w.Close()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Log(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("size=%dKiB/parallel", size>>10), func(b *testing.B) {
			w := mustOpen(b, b.TempDir(), Options{SyncInterval: time.Second})
			defer w.Close()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := w.Log(rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkReplay(b *testing.B) {
	dir := b.TempDir()
	w := mustOpen(b, dir, Options{SyncInterval: time.Hour})
	rec := payload(1, 1<<10)
	const n = 10000
	for range n {
		if err := w.Log(rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	w = mustOpen(b, dir, Options{})
	defer w.Close()
	b.SetBytes(n * int64(len(rec)+headerSize))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Replay(func([]byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func TestNextSegmentAndTruncate(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, Options{SyncInterval: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Replay(func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := w.Log([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := w.NextSegment()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Log([]byte{9}); err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(n); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	var got []byte
	if err := w2.Replay(func(r []byte) error { got = append(got, r...); return nil }); err != nil {
		t.Fatal(err)
	}
	if string(got) != "\x09" {
		t.Fatalf("after truncation replayed %v, want [9]", got)
	}
}

// TestPendingReleasedAfterBurst: the copy of not yet fsynced bytes grows
// with a burst of writes and is released once fsyncs cover little of it, so
// an idle WAL does not keep a burst's buffer; steady writes keep theirs.
func TestPendingReleasedAfterBurst(t *testing.T) {
	w := mustOpen(t, t.TempDir(), Options{SyncInterval: time.Hour})
	defer w.Close()
	pendingCap := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		return cap(w.pending)
	}
	for i := 0; i < 200; i++ { // a burst: 2 MB between two fsyncs
		if err := w.Log(payload(i, 10<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if c := pendingCap(); c < 2<<20 {
		t.Fatalf("pending capacity %d after a 2 MB burst", c)
	}
	if err := w.Sync(); err != nil { // covers the burst: kept for more of it
		t.Fatal(err)
	}
	if c := pendingCap(); c < 2<<20 {
		t.Fatalf("pending capacity %d right after the burst's fsync, want it kept", c)
	}
	if err := w.Sync(); err != nil { // idle
		t.Fatal(err)
	}
	if c := pendingCap(); c != 0 {
		t.Fatalf("pending capacity %d when idle, want 0", c)
	}
	// A small write after the burst gets a small buffer, still re-writable.
	if err := w.Log(payload(1000, 100)); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	got := slices.Clone(w.pending)
	w.mu.Unlock()
	if len(got) != headerSize+100 || !bytes.Equal(got[headerSize:], payload(1000, 100)) {
		t.Fatalf("pending after a small write: %d bytes", len(got))
	}
	if c := pendingCap(); c > minPending {
		t.Fatalf("pending capacity %d for one small record", c)
	}
	// Steady writes: each fsync covers about the same amount, the buffer stays.
	for round := 0; round < 4; round++ {
		for i := 0; i < 50; i++ {
			if err := w.Log(payload(i, 10<<10)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		if c := pendingCap(); round > 0 && c < 500<<10 {
			t.Fatalf("round %d: pending capacity %d under steady writes of 500 kB per fsync", round, c)
		}
	}
}
