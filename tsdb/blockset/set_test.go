package blockset

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// TestAcquire: Acquire returns the blocks overlapping [mint, maxt] (maxt
// inclusive, a block's MaxTime exclusive), oldest first, each referenced:
// Close waits until they are released.
func TestAcquire(t *testing.T) {
	dir := t.TempDir()
	a := writeBlock(t, dir, 0, 100, 10, block.WriteOptions{})
	b := writeBlock(t, dir, 100, 200, 10, block.WriteOptions{})
	c := writeBlock(t, dir, 200, 300, 10, block.WriteOptions{})
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		mint, maxt int64
		want       []string
	}{
		{math.MinInt64, math.MaxInt64, []string{a.ULID, b.ULID, c.ULID}},
		{100, 100, []string{b.ULID}},
		{99, 100, []string{a.ULID, b.ULID}},
		{150, 250, []string{b.ULID, c.ULID}},
		{300, 400, nil},
		{-50, -1, nil},
	} {
		bs, done := s.Acquire(q.mint, q.maxt)
		if got := acquiredULIDs(bs); !slices.Equal(got, q.want) && (len(got) > 0 || len(q.want) > 0) {
			t.Errorf("Acquire(%d, %d) = %v, want %v", q.mint, q.maxt, got, q.want)
		}
		for _, x := range bs {
			x.Release()
		}
		done()
		done() // idempotent
	}
	bs, done := s.Acquire(0, 0)
	done()
	if len(bs) != 1 || bs[0].Dir() != filepath.Join(dir, a.ULID) || bs[0].Size() != DirSize(bs[0].Dir()) || bs[0].Size() == 0 {
		t.Fatalf("Acquire(0, 0): %v", acquiredULIDs(bs))
	}
	closed := async(s.Close)
	pending(t, closed, "Close with a block referenced")
	bs[0].Release()
	if err := result(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Metas()); n != 0 {
		t.Fatalf("%d blocks after Close", n)
	}
}

// TestAcquireIDs: the named blocks, each referenced, or an error and no
// reference when one is not listed.
func TestAcquireIDs(t *testing.T) {
	dir := t.TempDir()
	a := writeBlock(t, dir, 0, 100, 10, block.WriteOptions{})
	b := writeBlock(t, dir, 100, 200, 10, block.WriteOptions{})
	c := writeBlock(t, dir, 200, 300, 10, block.WriteOptions{})
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := s.AcquireIDs([]string{c.ULID, a.ULID})
	if err != nil {
		t.Fatal(err)
	}
	if got := acquiredULIDs(bs); !slices.Equal(got, []string{a.ULID, c.ULID}) {
		t.Fatalf("AcquireIDs = %v", got)
	}
	if _, err := s.AcquireIDs([]string{b.ULID, "01ARZ3NDEKTSV4RRFFQ69G5FAV"}); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("AcquireIDs of a missing block: %v", err)
	}
	closed := async(s.Close)
	pending(t, closed, "Close with blocks referenced")
	for _, x := range bs {
		x.Release()
	}
	// b was referenced by the failed AcquireIDs only: released already.
	if err := result(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
}

// TestAddEpochs: Add waits for the readers acquired before it (they read the
// new block's range from the head), and for no reader acquired after it
// listed the block; done is idempotent and counts once.
func TestAddEpochs(t *testing.T) {
	dir := t.TempDir()
	a := writeBlock(t, dir, 0, 100, 10, block.WriteOptions{})
	s := openSet(t, dir, Options{})

	r1, before1 := s.Acquire(0, 1000)
	r2, before2 := s.Acquire(0, 1000)
	for _, x := range append(r1, r2...) {
		x.Release() // the epoch is independent of the block references
	}
	b := writeBlock(t, dir, 100, 200, 10, block.WriteOptions{})
	added := async(func() error { return s.Add(filepath.Join(dir, b.ULID)) })
	// The block is visible at once, before Add returns.
	eventually(t, "new block listed", func() bool { return len(s.Metas()) == 2 })
	wantULIDs(t, s, a.ULID, b.ULID)
	bs, after := s.Acquire(150, 150)
	if got := acquiredULIDs(bs); !slices.Equal(got, []string{b.ULID}) {
		t.Fatalf("Acquire after Add listed the block: %v", got)
	}
	pending(t, added, "Add with two earlier readers")
	before1()
	before1() // a second call must not count for before2
	pending(t, added, "Add with one earlier reader")
	before2()
	if err := result(t, added, "Add with only a later reader left"); err != nil {
		t.Fatal(err)
	}

	// The reader acquired after the first Add belongs to the next epoch:
	// the next Add waits for it.
	c := writeBlock(t, dir, 200, 300, 10, block.WriteOptions{})
	added = async(func() error { return s.Add(filepath.Join(dir, c.ULID)) })
	pending(t, added, "second Add with a reader of its epoch")
	after()
	if err := result(t, added, "second Add"); err != nil {
		t.Fatal(err)
	}
	for _, x := range bs {
		x.Release()
	}
	wantULIDs(t, s, a.ULID, b.ULID, c.ULID)

	// Several blocks at once, out of order; no reader: no wait.
	d := writeBlock(t, dir, 400, 500, 10, block.WriteOptions{})
	e := writeBlock(t, dir, 300, 400, 10, block.WriteOptions{})
	if err := result(t, async(func() error { return s.Add(filepath.Join(dir, d.ULID), filepath.Join(dir, e.ULID)) }), "Add"); err != nil {
		t.Fatal(err)
	}
	wantULIDs(t, s, a.ULID, b.ULID, c.ULID, e.ULID, d.ULID)
	if err := s.Add(); err != nil {
		t.Fatal(err)
	}
}

// TestAddFails: a block that does not open lists none of the blocks added
// with it, and the error starts with its directory, so that the caller's
// "open flushed block %w" reads as before.
func TestAddFails(t *testing.T) {
	dir := t.TempDir()
	a := writeBlock(t, dir, 0, 100, 10, block.WriteOptions{})
	s := openSet(t, dir, Options{})
	b := writeBlock(t, dir, 100, 200, 10, block.WriteOptions{})
	missing := filepath.Join(dir, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
	err := s.Add(filepath.Join(dir, b.ULID), missing)
	if err == nil || !strings.HasPrefix(err.Error(), missing+": open block: ") {
		t.Fatalf("Add of a missing block: %v", err)
	}
	wantULIDs(t, s, a.ULID)
}

// TestReplace: compaction (n→1) and tombstone rewriting (1→1). The new block
// is listed instead of the old ones in one step, at once; the old ones are
// deleted only once every reference is released, the caller's included,
// which Replace takes over.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	a := writeBlock(t, dir, 0, 100, 10, block.WriteOptions{})
	b := writeBlock(t, dir, 100, 200, 10, block.WriteOptions{})
	c := writeBlock(t, dir, 200, 300, 10, block.WriteOptions{})
	s := openSet(t, dir, Options{Registerer: reg})

	// A query holds b; compaction merges a and b.
	q, done := s.Acquire(150, 150)
	done()
	srcs, err := s.AcquireIDs([]string{a.ULID, b.ULID})
	if err != nil {
		t.Fatal(err)
	}
	m := writeBlock(t, dir, 0, 200, 20, block.WriteOptions{Level: 2, Sources: []string{a.ULID, b.ULID}})
	replaced := async(func() error { return s.Replace(srcs, filepath.Join(dir, m.ULID)) })
	eventually(t, "merged block listed", func() bool { return slices.Contains(ulids(s.Metas()), m.ULID) })
	wantULIDs(t, s, m.ULID, c.ULID)
	got, done := s.Acquire(0, 150)
	done()
	if ids := acquiredULIDs(got); !slices.Equal(ids, []string{m.ULID}) {
		t.Fatalf("Acquire after the swap: %v", ids)
	}
	got[0].Release()
	pending(t, replaced, "Replace with a source still read")
	// a is deleted already (its only other reference was the caller's);
	// b waits for the query.
	eventually(t, "a deleted", func() bool { return !exists(t, filepath.Join(dir, a.ULID)) })
	if !exists(t, filepath.Join(dir, b.ULID)) {
		t.Fatal("b deleted while a query reads it")
	}
	q[0].Release()
	if err := result(t, replaced, "Replace"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{a.ULID, b.ULID} {
		if exists(t, filepath.Join(dir, u)) {
			t.Errorf("source %s not deleted", u)
		}
	}
	noDebris(t, dir)
	if v := testutil.ToFloat64(s.deleted); v != 2 {
		t.Errorf("tandem_blocks_deleted_total = %v, want 2", v)
	}

	// 1→1: c rewritten in place, order kept.
	old, err := s.AcquireIDs([]string{c.ULID})
	if err != nil {
		t.Fatal(err)
	}
	r := writeBlock(t, dir, 200, 300, 5, block.WriteOptions{})
	if err := result(t, async(func() error { return s.Replace(old, filepath.Join(dir, r.ULID)) }), "Replace 1→1"); err != nil {
		t.Fatal(err)
	}
	wantULIDs(t, s, m.ULID, r.ULID)
	if exists(t, filepath.Join(dir, c.ULID)) {
		t.Error("rewritten block not deleted")
	}
	if v := testutil.ToFloat64(s.deleted); v != 3 {
		t.Errorf("tandem_blocks_deleted_total = %v, want 3", v)
	}

	// Reopened: exactly the new blocks.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openSet(t, dir, Options{})
	wantULIDs(t, s2, m.ULID, r.ULID)
}

// TestReplaceFails: a new block that does not open leaves the old ones
// listed; old blocks no longer listed leave the list as it is and delete the
// new block. Either way the caller's references are released (Close would
// wait for them).
func TestReplaceFails(t *testing.T) {
	dir := t.TempDir()
	a := writeBlock(t, dir, 0, 100, 10, block.WriteOptions{})
	b := writeBlock(t, dir, 100, 200, 10, block.WriteOptions{})
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.AcquireIDs([]string{a.ULID})
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
	if err := s.Replace(old, missing); err == nil || !strings.HasPrefix(err.Error(), missing+": ") {
		t.Fatalf("Replace by a missing block: %v", err)
	}
	wantULIDs(t, s, a.ULID, b.ULID)

	old, err = s.AcquireIDs([]string{a.ULID, b.ULID})
	if err != nil {
		t.Fatal(err)
	}
	// Retention drops a meanwhile (it waits for the compaction's reference).
	retained := async(func() error { return s.Retain(1000, 850*time.Millisecond, 0) })
	eventually(t, "a unlisted", func() bool { return len(s.Metas()) == 1 })
	m := writeBlock(t, dir, 0, 200, 10, block.WriteOptions{Level: 2, Sources: []string{a.ULID, b.ULID}})
	if err := s.Replace(old, filepath.Join(dir, m.ULID)); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("Replace of a block retention dropped: %v", err)
	}
	if err := result(t, retained, "Retain"); err != nil {
		t.Fatal(err)
	}
	wantULIDs(t, s, b.ULID)
	if exists(t, filepath.Join(dir, m.ULID)) || exists(t, filepath.Join(dir, a.ULID)) {
		t.Fatal("merged block or retained source left on disk")
	}
	if err := s.Replace(nil, filepath.Join(dir, b.ULID)); err == nil {
		t.Fatal("Replace of nothing succeeded")
	}
	if err := result(t, async(s.Close), "Close"); err != nil {
		t.Fatal(err)
	}
}

// TestRetain: the time rule (relative to the newest of the given time and
// the blocks' end), then the size rule (oldest first), both, neither.
func TestRetain(t *testing.T) {
	for _, c := range []struct {
		name      string
		newest    int64
		retention time.Duration
		maxBytes  func(sizes []int64) int64
		keep      []int // indices into the blocks written
	}{
		{"nothing", 0, 0, nil, []int{0, 1, 2}},
		{"time from the blocks' end", 250, 100 * time.Millisecond, nil, []int{1, 2}},
		{"time from a newer head", 1000, 790 * time.Millisecond, nil, []int{1, 2}},
		{"time boundary dropped", 1000, 800 * time.Millisecond, nil, []int{1, 2}},
		{"time boundary kept", 1000, 801 * time.Millisecond, nil, []int{0, 1, 2}},
		{"time drops all", 1000, 10 * time.Millisecond, nil, nil},
		{"size fits", 0, 0, func(s []int64) int64 { return s[0] + s[1] + s[2] }, []int{0, 1, 2}},
		{"size one byte over", 0, 0, func(s []int64) int64 { return s[0] + s[1] + s[2] - 1 }, []int{1, 2}},
		{"size keeps newest", 0, 0, func(s []int64) int64 { return s[2] }, []int{2}},
		{"size drops all", 0, 0, func(s []int64) int64 { return 1 }, nil},
		{"time then size", 1000, 790 * time.Millisecond, func(s []int64) int64 { return s[2] + 1 }, []int{2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			reg := prometheus.NewRegistry()
			ms := []block.Meta{
				writeBlock(t, dir, 0, 200, 100, block.WriteOptions{}),
				writeBlock(t, dir, 200, 250, 10, block.WriteOptions{}),
				writeBlock(t, dir, 250, 300, 30, block.WriteOptions{}),
			}
			s := openSet(t, dir, Options{Registerer: reg})
			var sizes []int64
			for _, m := range ms {
				sizes = append(sizes, DirSize(filepath.Join(dir, m.ULID)))
			}
			var maxBytes int64
			if c.maxBytes != nil {
				maxBytes = c.maxBytes(sizes)
			}
			if err := s.Retain(c.newest, c.retention, maxBytes); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, i := range c.keep {
				want = append(want, ms[i].ULID)
			}
			if got := ulids(s.Metas()); !slices.Equal(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Fatalf("kept %v, want %v", got, want)
			}
			for i, m := range ms {
				if exists(t, filepath.Join(dir, m.ULID)) != slices.Contains(c.keep, i) {
					t.Errorf("block %d on disk: %v", i, !slices.Contains(c.keep, i))
				}
			}
			noDebris(t, dir)
			if v := testutil.ToFloat64(s.deleted); v != float64(len(ms)-len(c.keep)) {
				t.Errorf("tandem_blocks_deleted_total = %v, want %d", v, len(ms)-len(c.keep))
			}
		})
	}
}

// TestRetainInUse: a block retention drops is unlisted at once and deleted
// only once its readers release it; Retain waits for that.
func TestRetainInUse(t *testing.T) {
	dir := t.TempDir()
	a := writeBlock(t, dir, 0, 100, 10, block.WriteOptions{})
	b := writeBlock(t, dir, 100, 200, 10, block.WriteOptions{})
	s := openSet(t, dir, Options{})
	bs, done := s.Acquire(0, 0)
	done()
	retained := async(func() error { return s.Retain(0, 0, 1) })
	eventually(t, "blocks unlisted", func() bool { return len(s.Metas()) == 0 })
	pending(t, retained, "Retain with a block in use")
	if !exists(t, filepath.Join(dir, a.ULID)) {
		t.Fatal("block deleted while in use")
	}
	if got := acquiredULIDs(bs); !slices.Equal(got, []string{a.ULID}) {
		t.Fatalf("acquired %v", got)
	}
	// The block stays readable for its reader.
	if bs[0].Meta().ULID != a.ULID || bs[0].NumSeries() != 1 {
		t.Fatal("block in use unreadable")
	}
	bs[0].Release()
	if err := result(t, retained, "Retain"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{a.ULID, b.ULID} {
		if exists(t, filepath.Join(dir, u)) {
			t.Errorf("%s not deleted", u)
		}
	}
}

// TestMetrics: tandem_blocks, tandem_blocks_bytes and
// tandem_blocks_deleted_total follow the set, with today's names and help
// texts; Close unregisters them.
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	writeBlock(t, dir, 0, 100, 50, block.WriteOptions{})
	writeBlock(t, dir, 100, 200, 50, block.WriteOptions{})
	s, err := Open(dir, Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	cur := s
	check := func(blocks int, bytes int64, deleted int) {
		t.Helper()
		if bytes != cur.Size() {
			t.Fatalf("size %d, Size() %d", bytes, cur.Size())
		}
		want := fmt.Sprintf(`# HELP tandem_blocks Blocks on disk.
# TYPE tandem_blocks gauge
tandem_blocks %d
# HELP tandem_blocks_bytes Bytes of the blocks on disk.
# TYPE tandem_blocks_bytes gauge
tandem_blocks_bytes %d
# HELP tandem_blocks_deleted_total Blocks deleted by retention or replaced by compaction.
# TYPE tandem_blocks_deleted_total counter
tandem_blocks_deleted_total %d
`, blocks, bytes, deleted)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
			t.Fatal(err)
		}
	}
	ms := s.Metas()
	size := func(ms ...block.Meta) int64 {
		var n int64
		for _, m := range ms {
			n += DirSize(filepath.Join(dir, m.ULID))
		}
		return n
	}
	check(2, size(ms...), 0)

	c := writeBlock(t, dir, 200, 300, 100, block.WriteOptions{})
	if err := s.Add(filepath.Join(dir, c.ULID)); err != nil {
		t.Fatal(err)
	}
	check(3, size(append(ms, c)...), 0)

	old, err := s.AcquireIDs([]string{ms[0].ULID, ms[1].ULID})
	if err != nil {
		t.Fatal(err)
	}
	m := writeBlock(t, dir, 0, 200, 100, block.WriteOptions{Level: 2, Sources: []string{ms[0].ULID, ms[1].ULID}})
	if err := s.Replace(old, filepath.Join(dir, m.ULID)); err != nil {
		t.Fatal(err)
	}
	check(2, size(m, c), 2)

	if err := s.Retain(300, 100*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	check(1, size(c), 3)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d metrics after Close (%v)", n, err)
	}
	// Registered again by a new set on the same registry.
	s2 := openSet(t, dir, Options{Registerer: reg})
	cur = s2
	check(1, size(c), 0)
	// A second set on the same registry fails to open, and leaves the
	// first one's metrics registered.
	if _, err := Open(dir, Options{Registerer: reg}); err == nil {
		t.Fatal("two sets registered the same metrics")
	}
	check(1, s2.Size(), 0)
}
