package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

func openDB(t testing.TB, dir string, mod func(*DBOptions)) *DB {
	t.Helper()
	opts := DBOptions{Head: head.DefaultOptions()}
	opts.Head.WALSyncInterval = 0
	opts.Head.Now = func() int64 { return 1 << 50 }
	if mod != nil {
		mod(&opts)
	}
	db, err := OpenDB(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// readQuerier reads every sample of every series through q (closing it).
func readQuerier(t *testing.T, q storage.Querier, ms ...*labels.Matcher) model {
	t.Helper()
	return readSeries(t, q, math.MinInt64, math.MaxInt64, ms...)
}

func dbAll(t *testing.T, db *DB) model {
	t.Helper()
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	return readQuerier(t, q)
}

// TestDBFlushWhileWriting flushes head ranges into blocks while writers
// continue, then restarts: no sample may be missing or doubled.
func TestDBFlushWhileWriting(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *DBOptions) { o.Head.BlockRange = time.Hour; o.Head.ChunkRows = 60 }
	db := openDB(t, dir, mod)
	const targets, members, scrapes = 4, 30, 1200 // 5 h at 15 s
	want := model{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for tg := 0; tg < targets; tg++ {
		wg.Add(1)
		go func(tg int) {
			defer wg.Done()
			for s := 0; s < scrapes; s++ {
				var b head.Batch
				for m := 0; m < members; m++ {
					l := series(fmt.Sprintf("metric_%d", m%7), "job", "node", "instance", fmt.Sprintf("host%d", tg), "m", fmt.Sprint(m))
					ts := int64(s) * 15000
					if m == members-1 {
						ts += 4321 // one unaligned member per target
					}
					v := float64(s*m) + 0.25
					b.Series = append(b.Series, head.BatchSeries{Labels: l, Samples: []head.Sample{{T: ts, V: v}}})
					mu.Lock()
					want.Add(l, ts, v)
					mu.Unlock()
				}
				if res, err := db.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
					t.Error(err, res.Err())
					return
				}
			}
		}(tg)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			if err := db.Flush(false); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	<-done
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if n := len(db.Blocks()); n < 3 {
		t.Fatalf("%d blocks after 5 h of data at 1 h ranges", n)
	}
	compareModels(t, want, dbAll(t, db))
	// Windows across block and head boundaries.
	for _, r := range [][2]int64{{0, 3599999}, {3000000, 9000000}, {10000000, 18000000}} {
		q, _ := db.Querier(r[0], r[1])
		got := readQuerier(t, q)
		for k, ss := range want {
			for ts, v := range ss {
				if ts >= r[0] && ts <= r[1] && got[k][ts] != v {
					t.Fatalf("%s at %d missing in window %v", k, ts, r)
				}
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, dir, mod)
	defer db2.Close()
	compareModels(t, want, dbAll(t, db2))
	// The WAL was checkpointed: start-up replays only the head's part.
	if st, _ := db2.Stats("__name__", 10); st.MinTime < db2.blocks.MaxTime() {
		t.Fatalf("head starts at %d, before the blocks' end %d", st.MinTime, db2.blocks.MaxTime())
	}
	q, _ := db2.Querier(math.MinInt64, math.MaxInt64)
	vals, _, err := q.LabelValues(context.Background(), "instance", nil)
	q.Close()
	if err != nil || len(vals) != targets {
		t.Fatalf("label values across blocks and head: %v %v", vals, err)
	}
}

func TestDBRetentionAndQuarantine(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *DBOptions) { o.Head.BlockRange = time.Hour; o.RetentionTime = 2 * time.Hour }
	db := openDB(t, dir, mod)
	l := series("r", "job", "j", "instance", "i")
	for s := 0; s < 6*240; s++ { // 6 h at 15 s
		if _, err := db.AppendBatch(context.Background(), &head.Batch{Series: []head.BatchSeries{{Labels: l, Samples: []head.Sample{{T: int64(s) * 15000, V: 1}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	before := len(db.Blocks())
	if err := db.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	after := db.Blocks()
	if len(after) >= before || len(after) == 0 {
		t.Fatalf("retention kept %d of %d blocks", len(after), before)
	}
	for _, m := range after {
		if m.MaxTime <= 6*3600000-2*3600000-15000 {
			t.Fatalf("block [%d, %d) outlived the retention", m.MinTime, m.MaxTime)
		}
	}
	db.Close()
	// Damage a block: start-up moves it to quarantine and goes on.
	victim := filepath.Join(dir, after[0].ULID, "index")
	if err := os.WriteFile(victim, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, dir, mod)
	defer db2.Close()
	if len(db2.Blocks()) != len(after)-1 {
		t.Fatalf("%d blocks after quarantining one of %d", len(db2.Blocks()), len(after))
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine", after[0].ULID)); err != nil {
		t.Fatalf("damaged block not in quarantine: %v", err)
	}
}

// flushingStorage flushes everything to blocks before each query, so the
// PromQL suite reads blocks (and whatever a later load adds to the head).
type flushingStorage struct {
	*DB
	t testing.TB
}

func (s flushingStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	if err := s.DB.Flush(true); err != nil {
		s.t.Fatal(err)
	}
	return s.DB.Querier(mint, maxt)
}

// TestPromQLAcceptanceBlocks runs the acceptance suite with the data flushed
// to blocks before the queries run.
func TestPromQLAcceptanceBlocks(t *testing.T) {
	runAcceptance(t, nil, newFlushingStorage, knownFailures)
}

// TestPromQLAcceptanceBlocksPushdown runs the suite through tandem's query
// engine (with push-down) over blocks.
func TestPromQLAcceptanceBlocksPushdown(t *testing.T) {
	runAcceptance(t, pushdownEngine(t), newFlushingStorage, knownFailures)
}

func newFlushingStorage(tb testing.TB) storage.Storage {
	// The suite's data is from the first days of 1970: with the clock at
	// day 200 and late data accepted back to 1970, a later load older than a
	// flushed range is late data, written to an out-of-order block.
	db := openDB(tb, tb.(interface{ TempDir() string }).TempDir(), func(o *DBOptions) {
		o.Head.Now = func() int64 { return 200 * 24 * time.Hour.Milliseconds() }
		o.Head.LateMaxAge = 250 * 24 * time.Hour
	})
	tb.Cleanup(func() { db.Close() })
	return flushingStorage{DB: db, t: tb}
}

// TestDBQueriesDuringFlush: queries running while ranges move from the head
// to blocks always see every sample exactly once.
func TestDBQueriesDuringFlush(t *testing.T) {
	db := openDB(t, t.TempDir(), func(o *DBOptions) { o.Head.BlockRange = 10 * time.Minute })
	defer db.Close()
	want := model{}
	for s := 0; s < 600; s++ { // 2.5 h at 15 s: 15 ranges
		var b head.Batch
		for m := 0; m < 40; m++ {
			l := series("q", "job", "j", "instance", fmt.Sprint(m%3), "m", fmt.Sprint(m))
			b.Series = append(b.Series, head.BatchSeries{Labels: l, Samples: []head.Sample{{T: int64(s) * 15000, V: float64(s + m)}}})
			want.Add(l, int64(s)*15000, float64(s+m))
		}
		if _, err := db.AppendBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error)
	go func() { done <- db.Flush(false) }()
	queries := 0
	for flushing := true; flushing; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			flushing = false
		default:
		}
		compareModels(t, want, dbAll(t, db))
		queries++
		if t.Failed() {
			t.Fatalf("query %d during the flush saw wrong data", queries)
		}
	}
	if n := len(db.Blocks()); n < 10 {
		t.Fatalf("%d blocks", n)
	}
	t.Logf("%d queries during the flush", queries)
}

func TestDBSnapshot(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *DBOptions) { o.Head.BlockRange = time.Hour }
	db := openDB(t, dir, mod)
	want := model{}
	// Groups of different sizes, in turn larger and smaller (the export
	// decodes each into the previous one's buffers), with members that join
	// late (a column first present in a later chunk).
	sizes := []int{5, 9, 2, 7}
	for s := 0; s < 700; s++ { // ~2.9 h: blocks plus a head
		var b head.Batch
		for g, size := range sizes {
			for m := 0; m < size; m++ {
				if g > 0 && m == size-1 && s < 600 {
					continue // joins in the head's last chunk
				}
				l := series("snap", "job", "j", "instance", fmt.Sprint("i", g), "m", fmt.Sprint(m))
				ts := int64(s) * 15000
				if g == 0 && m == 4 {
					ts += 5 // unaligned
				}
				v := float64(s*m + g)
				b.Series = append(b.Series, head.BatchSeries{Labels: l, Samples: []head.Sample{{T: ts, V: v}}})
				want.Add(l, ts, v)
			}
		}
		if _, err := db.AppendBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if len(db.Blocks()) == 0 {
		t.Fatal("no blocks before the snapshot")
	}
	snap := filepath.Join(t.TempDir(), "snap")
	if err := db.Snapshot(snap, true); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// The snapshot is a data directory of its own.
	db2 := openDB(t, snap, mod)
	defer db2.Close()
	compareModels(t, want, dbAll(t, db2))
}

// TestDBCompaction merges flushed blocks into larger ranges while queries see
// the same data, and recovers from a crash that left merged sources behind.
func TestDBCompaction(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *DBOptions) {
		o.Head.BlockRange = time.Hour
		o.CompactionRanges = []int64{3600000, 3 * 3600000, 9 * 3600000}
	}
	db := openDB(t, dir, mod)
	want := model{}
	for s := 0; s < 8*240; s++ { // 8 h at 15 s
		var b head.Batch
		for m := 0; m < 6; m++ {
			if m == 5 && s > 3*240 && s < 5*240 {
				continue // a member that leaves and comes back
			}
			l := series("c", "job", "j", "instance", "i", "m", fmt.Sprint(m))
			ts := int64(s) * 15000
			if m == 4 && s%240 < 120 {
				ts += 3 // unaligned half of the time
			}
			b.Series = append(b.Series, head.BatchSeries{Labels: l, Samples: []head.Sample{{T: ts, V: float64(s*m) / 7}}})
			want.Add(l, ts, float64(s*m)/7)
		}
		if _, err := db.AppendBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	before := db.Blocks()
	backup := t.TempDir()
	for _, m := range before {
		copyDir(t, filepath.Join(dir, m.ULID), filepath.Join(backup, m.ULID))
	}
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	after := db.Blocks()
	if len(after) >= len(before) {
		t.Fatalf("compaction left %d blocks of %d", len(after), len(before))
	}
	levels := 0
	for _, m := range after {
		levels = max(levels, m.Compaction.Level)
	}
	if levels < 2 {
		t.Fatalf("no merged block: %+v", after)
	}
	compareModels(t, want, dbAll(t, db))
	db.Close()

	// A crash after writing a merged block but before deleting its sources:
	// put one source back; start-up removes it again.
	var src block.Meta
	for _, m := range before {
		if _, err := os.Stat(filepath.Join(dir, m.ULID)); os.IsNotExist(err) {
			src = m
			break
		}
	}
	if src.ULID == "" {
		t.Fatal("compaction deleted no source block")
	}
	copyDir(t, filepath.Join(backup, src.ULID), filepath.Join(dir, src.ULID))
	db2 := openDB(t, dir, mod)
	n := len(db2.Blocks())
	db2.Close()
	if n != len(after) {
		t.Fatalf("%d blocks after restart, want %d", n, len(after))
	}
	db3 := openDB(t, dir, mod)
	defer db3.Close()
	compareModels(t, want, dbAll(t, db3))
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDBDeleteAndCleanTombstones(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *DBOptions) { o.Head.BlockRange = time.Hour }
	db := openDB(t, dir, mod)
	want := model{}
	for s := 0; s < 4*240; s++ { // 4 h
		var b head.Batch
		for m := 0; m < 4; m++ {
			l := series("del", "job", "j", "instance", "i", "m", fmt.Sprint(m))
			ts := int64(s)*15000 + int64(m/3)*7 // member 3 unaligned
			b.Series = append(b.Series, head.BatchSeries{Labels: l, Samples: []head.Sample{{T: ts, V: float64(s)}}})
			// Members 1 and 3 lose [1h, 3h]: in blocks and in the head.
			if (m == 1 || m == 3) && ts >= 3600000 && ts <= 3*3600000 {
				continue
			}
			want.Add(l, ts, float64(s))
		}
		if _, err := db.AppendBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(context.Background(), 3600000, 3*3600000, labels.MustNewMatcher(labels.MatchRegexp, "m", "1|3")); err != nil {
		t.Fatal(err)
	}
	compareModels(t, want, dbAll(t, db))
	db.Close()
	db = openDB(t, dir, mod) // tombstones survive a restart
	compareModels(t, want, dbAll(t, db))
	if err := db.CleanTombstones(); err != nil {
		t.Fatal(err)
	}
	compareModels(t, want, dbAll(t, db))
	// The tombstone still covers head data, so it stays; flush the rest and clean again.
	if err := db.Flush(true); err != nil {
		t.Fatal(err)
	}
	if err := db.CleanTombstones(); err != nil {
		t.Fatal(err)
	}
	if !db.tombs.empty() {
		t.Fatalf("tombstones left after cleaning: %+v", db.tombs.list)
	}
	// Without tombstones, the data read is the rewritten blocks'.
	compareModels(t, want, dbAll(t, db))
	db.Close()
	db = openDB(t, dir, mod)
	defer db.Close()
	compareModels(t, want, dbAll(t, db))
}

// TestDBLateData: out-of-order samples within a group's window join the head;
// a lagging target's samples for ranges already flushed go to out-of-order
// blocks; both are visible at once, survive restarts and merge in compaction.
func TestDBLateData(t *testing.T) {
	dir := t.TempDir()
	const hour = int64(3600000)
	now := 6 * hour
	mod := func(o *DBOptions) {
		o.Head.BlockRange = time.Hour
		o.Head.Now = func() int64 { return now }
		o.Head.OutOfOrderWindow = 30 * time.Minute
		o.Head.LateMaxAge = 5 * time.Hour
		o.CompactionRanges = []int64{hour, 3 * hour}
	}
	db := openDB(t, dir, mod)
	want := model{}
	app := func(l labels.Labels, ts int64, v float64) error {
		res, err := db.AppendBatch(context.Background(), &head.Batch{Series: []head.BatchSeries{{Labels: l, Samples: []head.Sample{{T: ts, V: v}}}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Err() == nil {
			want.Add(l, ts, v)
		}
		return res.Err()
	}
	fast := series("late", "job", "j", "instance", "fast")
	slow := series("late", "job", "j", "instance", "slow")
	// The fast target runs to 5.5 h; the slow one stalls after 1 h.
	for ts := int64(0); ts < 5*hour+hour/2; ts += 15000 {
		if err := app(fast, ts, float64(ts)); err != nil {
			t.Fatal(err)
		}
		if ts < hour {
			if err := app(slow, ts, -float64(ts)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if db.head.MinValidTime() < 3*hour {
		t.Fatalf("head starts at %d: nothing flushed", db.head.MinValidTime())
	}
	// Out of order within the fast group's window: accepted into the head.
	if err := app(fast, 5*hour+hour/4+7, 1); err != nil {
		t.Fatalf("sample within the out-of-order window: %v", err)
	}
	// Beyond the window: refused as out of order.
	if err := app(fast, 4*hour+7, 1); !errors.Is(err, head.ErrOutOfOrderSample) {
		t.Fatalf("sample beyond the window: %v", err)
	}
	// The slow target catches up: its samples for flushed ranges are accepted.
	for ts := hour; ts < 5*hour+hour/2; ts += 15000 {
		if err := app(slow, ts, -float64(ts)); err != nil {
			t.Fatalf("lagging target at %d: %v", ts, err)
		}
	}
	// Older than the maximum age: too old.
	if err := app(series("late", "job", "j", "instance", "ancient"), now-6*hour, 1); !errors.Is(err, head.ErrTooOldSample) {
		t.Fatalf("sample beyond the maximum age: %v", err)
	}
	compareModels(t, want, dbAll(t, db))
	db.Close()
	db = openDB(t, dir, mod) // late samples replayed from the WAL
	compareModels(t, want, dbAll(t, db))
	blocksBefore := len(db.Blocks())
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if len(db.Blocks()) <= blocksBefore {
		t.Fatalf("no out-of-order block written (%d blocks)", len(db.Blocks()))
	}
	compareModels(t, want, dbAll(t, db))
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	compareModels(t, want, dbAll(t, db))
	for _, a := range db.Blocks() {
		for _, b := range db.Blocks() {
			if a.ULID != b.ULID && a.MinTime < b.MaxTime && b.MinTime < a.MaxTime {
				t.Fatalf("blocks overlap after compaction: %+v and %+v", a, b)
			}
		}
	}
	db.Close()
	db = openDB(t, dir, mod)
	defer db.Close()
	compareModels(t, want, dbAll(t, db))
}

func TestDBRetentionSize(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, func(o *DBOptions) { o.Head.BlockRange = time.Hour })
	defer db.Close()
	for s := 0; s < 6*240; s++ {
		var b head.Batch
		for m := 0; m < 20; m++ {
			b.Series = append(b.Series, head.BatchSeries{Labels: series("rs", "job", "j", "instance", "i", "m", fmt.Sprint(m)), Samples: []head.Sample{{T: int64(s) * 15000, V: float64(s*m) * 1.1}}})
		}
		if _, err := db.AppendBatch(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	blocks := db.Blocks()
	if len(blocks) < 3 {
		t.Fatalf("%d blocks", len(blocks))
	}
	limit := db.blocks.Size() * 6 / 10
	db.opts.RetentionSize = limit
	if err := db.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	if got := db.blocks.Size(); got > limit || len(db.Blocks()) == 0 || len(db.Blocks()) >= len(blocks) {
		t.Fatalf("after size retention: %d bytes in %d blocks (limit %d, before %d blocks)", got, len(db.Blocks()), limit, len(blocks))
	}
	if db.Blocks()[0].MinTime == blocks[0].MinTime {
		t.Fatal("size retention kept the oldest block")
	}
}

// TestDBLateOnlySeriesVisible: a series that only ever sends data for ranges
// already flushed is visible as soon as its samples are acknowledged.
func TestDBLateOnlySeriesVisible(t *testing.T) {
	const hour = int64(3600000)
	db := openDB(t, t.TempDir(), func(o *DBOptions) {
		o.Head.BlockRange = time.Hour
		o.Head.Now = func() int64 { return 6 * hour }
	})
	defer db.Close()
	want := model{}
	fast := series("lo", "job", "j", "instance", "fast")
	for ts := int64(0); ts < 5*hour; ts += 15000 {
		if _, err := db.AppendBatch(context.Background(), &head.Batch{Series: []head.BatchSeries{{Labels: fast, Samples: []head.Sample{{T: ts, V: 1}}}}}); err != nil {
			t.Fatal(err)
		}
		want.Add(fast, ts, 1)
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	// A new target whose first samples are 4 h old; then an older one arrives too.
	late := series("lo", "job", "j", "instance", "late")
	for _, ts := range []int64{2 * hour, 2*hour + 15000, hour} {
		res, err := db.AppendBatch(context.Background(), &head.Batch{Series: []head.BatchSeries{{Labels: late, Samples: []head.Sample{{T: ts, V: 2}}}}})
		if err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
		want.Add(late, ts, 2)
		compareModels(t, want, dbAll(t, db))
		q, _ := db.Querier(ts, ts)
		if got := readQuerier(t, q, labels.MustNewMatcher(labels.MatchEqual, "instance", "late")); len(got) != 1 {
			t.Fatalf("late sample at %d not visible in a window around it: %v", ts, got)
		}
	}
	if err := db.Flush(false); err != nil { // a truncation with late samples waiting
		t.Fatal(err)
	}
	compareModels(t, want, dbAll(t, db))
}
