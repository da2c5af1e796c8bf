package head

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

func TestMain(m *testing.M) {
	// A read of a released chunk file must fault, not read a later mapping.
	keepDeadMappings = true
	os.Exit(m.Run())
}

// appendTruncScrapes appends scrapes 0..n-1 (15 s apart) of 3 targets × 20
// members plus one unaligned member, returning what it appended at or after from.
func appendTruncScrapes(t *testing.T, h *Head, n int, from int64) model {
	t.Helper()
	want := model{}
	for s := 0; s < n; s++ {
		var b Batch
		for g := 0; g < 3; g++ {
			for m := 0; m < 21; m++ {
				l := series("cs", "job", "j", "instance", fmt.Sprint(g), "m", fmt.Sprint(m))
				ts, v := int64(s)*15000, float64(s*m)+0.25
				if m == 20 {
					ts += 7 // unaligned member: its own table
				}
				b.Series = append(b.Series, BatchSeries{Labels: l, Samples: []Sample{{T: ts, V: v}}})
				if ts >= from {
					want.Add(l, ts, v)
				}
			}
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	return want
}

// inSegment reports whether b lies in the store's current file.
func inSegment(h *Head, b []byte) bool {
	h.chunks.mu.Lock()
	defer h.chunks.mu.Unlock()
	s := h.chunks.cur
	if s == nil || len(b) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&s.data[0]))
	return p >= lo && p < lo+uintptr(len(s.data))
}

// TestChunkStoreOffHeap: frozen head chunks live in mapped files, queries read
// them exactly, and a restart starts from an empty chunk directory.
func TestChunkStoreOffHeap(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, func(o *Options) { o.ChunkRows = 30 })
	want := appendTruncScrapes(t, h, 200, math.MinInt64)
	g := h.getOrCreateGroup(h.groupKey(series("cs", "job", "j", "instance", "0")))
	g.mu.Lock()
	last := g.aligned.chunks[len(g.aligned.chunks)-1]
	own := g.members[20].own().chunks
	g.mu.Unlock()
	if !inSegment(h, last.data) || !inSegment(h, last.ts) {
		t.Fatal("the newest frozen chunk is not in the mapped chunk file")
	}
	if len(own) == 0 || !inSegment(h, own[len(own)-1].data) {
		t.Fatal("the unaligned member's frozen chunk is not in the mapped chunk file")
	}
	if h.chunks.liveBytes.Load() == 0 || h.chunks.files.Load() != 1 {
		t.Fatalf("live bytes %d, files %d", h.chunks.liveBytes.Load(), h.chunks.files.Load())
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}

	// Leftovers of an earlier run (a crash leaves them) are removed on open,
	// and the WAL replay writes the chunks anew.
	stray := filepath.Join(dir, "chunks_head", "999999")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h = openHead(t, dir, func(o *Options) { o.ChunkRows = 30 })
	defer h.Close()
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("stray chunk file survived open: %v", err)
	}
	if h.chunks.liveBytes.Load() == 0 {
		t.Fatal("replay placed no chunk in a file")
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
}

// TestChunkStoreReaderOutlivesTruncation: a reader that holds chunks keeps
// their file mapped after truncation drops them; once nothing holds them the
// files are unmapped and removed. The files are small here so that many are
// released; with keepDeadMappings a read of a released file would fault.
func TestChunkStoreReaderOutlivesTruncation(t *testing.T) {
	const cut = 3600000
	h := openHead(t, t.TempDir(), func(o *Options) { o.ChunkRows = 30; o.BlockRange = time.Hour })
	defer h.Close()
	h.chunks.segSize = 2048
	want := appendTruncScrapes(t, h, 400, cut) // 100 min: two ranges
	filesBefore := h.chunks.files.Load()
	if filesBefore < 10 {
		t.Fatalf("only %d chunk files", filesBefore)
	}

	q, err := h.Querier(0, cut-1)
	if err != nil {
		t.Fatal(err)
	}
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "cs"))
	var its []chunkenc.Iterator
	for ss.Next() {
		it := ss.At().Iterator(nil)
		if it.Next() != chunkenc.ValFloat { // start reading, keep the rest for later
			t.Fatal("series without samples")
		}
		its = append(its, it)
	}
	if len(its) != 63 {
		t.Fatalf("%d series", len(its))
	}
	h.truncate(cut)
	for range 3 {
		runtime.GC()
	}
	time.Sleep(20 * time.Millisecond)
	for i, it := range its {
		n := 1
		for it.Next() == chunkenc.ValFloat {
			n++
		}
		if err := it.Err(); err != nil || n != cut/15000 {
			t.Fatalf("series %d after truncation: %d samples, err %v", i, n, err)
		}
	}
	runtime.KeepAlive(its)
	its = nil
	q.Close()

	// Unreachable now: their files go.
	gcUntil(t, func() bool { return h.chunks.files.Load() <= filesBefore/2 },
		func() string {
			return fmt.Sprintf("%d of %d chunk files still mapped", h.chunks.files.Load(), filesBefore)
		})
	entries, err := os.ReadDir(h.chunks.dir)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(entries)) != h.chunks.files.Load() {
		t.Fatalf("%d files in %s, %d mapped", len(entries), h.chunks.dir, h.chunks.files.Load())
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
}

// TestChunkStoreFallsBackToHeap: when no chunk file can be made (here: one
// larger than any file system takes), chunks stay in the heap and nothing
// is lost.
func TestChunkStoreFallsBackToHeap(t *testing.T) {
	h := openHead(t, t.TempDir(), func(o *Options) { o.ChunkRows = 30 })
	defer h.Close()
	h.chunks.segSize = 1 << 62
	want := appendTruncScrapes(t, h, 100, math.MinInt64)
	if h.chunks.failed.IsZero() || h.chunks.files.Load() != 0 {
		t.Fatalf("failed at %v, %d files", h.chunks.failed, h.chunks.files.Load())
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))

	// A minute later the store tries again, and files work again.
	h.chunks.segSize = 1 << 20
	h.chunks.mu.Lock()
	h.chunks.failed = h.chunks.failed.Add(-time.Minute)
	h.chunks.mu.Unlock()
	more := appendTruncScrapes(t, h, 200, math.MinInt64) // rewrites 0..99 (duplicates), adds 100..199
	if !h.chunks.failed.IsZero() || h.chunks.files.Load() != 1 {
		t.Fatalf("after the retry: failed at %v, %d files", h.chunks.failed, h.chunks.files.Load())
	}
	compareModels(t, more, readAll(t, h, math.MinInt64, math.MaxInt64))
}

// TestChunkStoreReopenKeepsNewFiles: the chunks of a closed head, released
// after a new head opened the same directory, take only their own files.
func TestChunkStoreReopenKeepsNewFiles(t *testing.T) {
	dir := t.TempDir()
	h := openHead(t, dir, func(o *Options) { o.ChunkRows = 30 })
	appendTruncScrapes(t, h, 100, math.MinInt64)
	old := h.chunks // holds no chunk: its files go when the chunks do
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h2 := openHead(t, dir, func(o *Options) { o.ChunkRows = 30 })
	defer h2.Close()
	want := appendTruncScrapes(t, h2, 150, math.MinInt64)
	// The first head's chunks are unreachable: their cleanups run.
	files := func() int64 {
		entries, err := os.ReadDir(h2.chunks.dir)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(entries))
	}
	gcUntil(t, func() bool { return old.files.Load() == 0 },
		func() string { return fmt.Sprintf("the closed head still maps %d files", old.files.Load()) })
	if got, want := files(), h2.chunks.files.Load(); got != want {
		t.Fatalf("%d files in %s, the open head maps %d", got, h2.chunks.dir, want)
	}
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}

// gcUntil collects garbage (cleanups run after it, on their own goroutine)
// until cond holds, failing with what() after 10 s.
func gcUntil(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		runtime.GC()
	}
}
