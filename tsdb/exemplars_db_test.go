package tsdb

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/tsdb/internal/tsdbtest"
)

const exHour = int64(3600000)

// exModel is what exemplar queries should return: exemplars per series.
type exModel map[string]*exemplar.QueryResult

func (m exModel) add(l labels.Labels, e head.Exemplar) {
	r := m[l.String()]
	if r == nil {
		r = &exemplar.QueryResult{SeriesLabels: l}
		m[l.String()] = r
	}
	r.Exemplars = append(r.Exemplars, exemplar.Exemplar{Labels: e.Labels, Value: e.V, Ts: e.T, HasTs: true})
}

// want returns the expected result of Select(start, end, ms) in Prometheus's shape.
func (m exModel) want(start, end int64, ms ...[]*labels.Matcher) []exemplar.QueryResult {
	out := []exemplar.QueryResult{}
	for _, r := range m {
		if !matchesSomeMatcherSet(r.SeriesLabels, ms) {
			continue
		}
		var es []exemplar.Exemplar
		for _, e := range r.Exemplars {
			if e.Ts >= start && e.Ts <= end {
				es = append(es, e)
			}
		}
		slices.SortFunc(es, func(a, b exemplar.Exemplar) int { return int(a.Ts - b.Ts) })
		if len(es) > 0 {
			out = append(out, exemplar.QueryResult{SeriesLabels: r.SeriesLabels, Exemplars: es})
		}
	}
	slices.SortFunc(out, func(a, b exemplar.QueryResult) int { return labels.Compare(a.SeriesLabels, b.SeriesLabels) })
	return out
}

func (m exModel) count() int {
	n := 0
	for _, r := range m {
		n += len(r.Exemplars)
	}
	return n
}

var allBuckets = []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "req_bucket")}

func selectExemplars(t *testing.T, q storage.ExemplarQueryable, start, end int64, ms ...[]*labels.Matcher) []exemplar.QueryResult {
	t.Helper()
	eq, err := q.ExemplarQuerier(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		ms = [][]*labels.Matcher{allBuckets}
	}
	res, err := eq.Select(start, end, ms...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func sameResults(got, want []exemplar.QueryResult) error {
	if got == nil {
		return fmt.Errorf("nil result (Prometheus returns an empty slice)")
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d series, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !labels.Equal(g.SeriesLabels, w.SeriesLabels) {
			return fmt.Errorf("series %d: %s, want %s", i, g.SeriesLabels, w.SeriesLabels)
		}
		if len(g.Exemplars) != len(w.Exemplars) {
			return fmt.Errorf("%s: %d exemplars, want %d", g.SeriesLabels, len(g.Exemplars), len(w.Exemplars))
		}
		for k := range g.Exemplars {
			ge, we := g.Exemplars[k], w.Exemplars[k]
			if ge.Ts != we.Ts || math.Float64bits(ge.Value) != math.Float64bits(we.Value) || !labels.Equal(ge.Labels, we.Labels) || ge.HasTs != we.HasTs {
				return fmt.Errorf("%s exemplar %d: %+v, want %+v", g.SeriesLabels, k, ge, we)
			}
		}
	}
	return nil
}

func checkExemplars(t *testing.T, q storage.ExemplarQueryable, m exModel, start, end int64, ms ...[]*labels.Matcher) {
	t.Helper()
	if len(ms) == 0 {
		ms = [][]*labels.Matcher{allBuckets}
	}
	if err := sameResults(selectExemplars(t, q, start, end, ms...), m.want(start, end, ms...)); err != nil {
		t.Fatalf("exemplars in [%d, %d]: %v", start, end, err)
	}
}

func bucket(le int) labels.Labels {
	return series("req_bucket", "job", "api", "instance", "a", "le", fmt.Sprint(le))
}

// appendExemplars writes samples every 15 s in [from, to) for 4 buckets and,
// every minute, an exemplar on buckets 1 and 3 (bucket 3 half a minute
// later, on a timestamp without a sample of its own).
func appendExemplars(t *testing.T, db *DB, m exModel, from, to int64) {
	t.Helper()
	if err := appendExemplarsErr(db, m, from, to); err != nil {
		t.Fatal(err)
	}
}

func appendExemplarsErr(db *DB, m exModel, from, to int64) error {
	for ts := from; ts < to; ts += 15000 {
		var b head.Batch
		for le := 0; le < 4; le++ {
			bs := head.BatchSeries{Labels: bucket(le), Samples: []head.Sample{{T: ts, V: float64(ts/1000 + int64(le))}}}
			et := ts
			if le == 3 {
				et = ts + 7
			}
			if le%2 == 1 && ts%60000 == 0 {
				e := head.Exemplar{Labels: labels.FromStrings("trace_id", fmt.Sprintf("t%d-%d", le, ts)), T: et, V: float64(ts)/1e3 + 0.125}
				bs.Exemplars = []head.Exemplar{e}
				if m != nil {
					m.add(bucket(le), e)
				}
			}
			b.Series = append(b.Series, bs)
		}
		res, err := db.AppendBatch(context.Background(), &b)
		if err != nil {
			return err
		}
		if err := res.Err(); err != nil {
			return err
		}
	}
	return nil
}

// blockExemplars returns the exemplars counted by the blocks' metas.
func blockExemplars(db *DB) int {
	n := 0
	for _, m := range db.Blocks() {
		n += int(m.Stats.NumExemplars)
	}
	return n
}

func ringLen(db *DB) int { return db.head.NumExemplars() }

// headExemplars queries the head's exemplars alone.
type headExemplars struct{ h *head.Head }

func (q headExemplars) ExemplarQuerier(context.Context) (storage.ExemplarQuerier, error) {
	return q, nil
}

func (q headExemplars) Select(start, end int64, ms ...[]*labels.Matcher) ([]exemplar.QueryResult, error) {
	x := newExemplarSet()
	q.h.Exemplars(start, end, func(l labels.Labels) bool { return matchesSomeMatcherSet(l, ms) }, x.add)
	return x.result(nil), nil
}

func exemplarOpts(o *DBOptions) {
	o.Head.BlockRange = time.Hour
	o.Head.MaxExemplars = 100000
}

// TestDBExemplarsPersisted: flushed exemplars live in blocks, leave the head,
// and are served after a restart whose WAL no longer holds them.
func TestDBExemplarsPersisted(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, exemplarOpts)
	m := exModel{}
	appendExemplars(t, db, m, 0, 5*exHour)
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64)
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	bs := db.Blocks()
	if len(bs) < 3 {
		t.Fatalf("%d blocks", len(bs))
	}
	flushedTo := bs[len(bs)-1].MaxTime
	inBlocks := 0
	for _, r := range m {
		for _, e := range r.Exemplars {
			if e.Ts < flushedTo {
				inBlocks++
			}
		}
	}
	for _, b := range bs {
		if b.Stats.NumExemplars == 0 {
			t.Fatalf("block [%d, %d) without exemplars", b.MinTime, b.MaxTime)
		}
		if _, err := os.Stat(filepath.Join(dir, b.ULID, block.ExemplarsFilename)); err != nil {
			t.Fatal(err)
		}
	}
	if got := blockExemplars(db); got != inBlocks {
		t.Fatalf("blocks hold %d exemplars, want %d", got, inBlocks)
	}
	if got := ringLen(db); got != m.count()-inBlocks {
		t.Fatalf("the head still holds %d exemplars, want %d (the flushed ones left it)", got, m.count()-inBlocks)
	}
	check := func(db *DB) {
		t.Helper()
		checkExemplars(t, db, m, math.MinInt64, math.MaxInt64)
		checkExemplars(t, db, m, exHour+60000, exHour+60000) // one timestamp, inclusive
		checkExemplars(t, db, m, flushedTo-10*60000, flushedTo+10*60000)
		checkExemplars(t, db, m, 0, 5*exHour, // two matcher sets: a union
			[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "le", "1")},
			[]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "le", "3|4"), labels.MustNewMatcher(labels.MatchEqual, "job", "api")})
		checkExemplars(t, db, m, 0, 5*exHour, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "le", "0")})
		// An empty matcher set matches every series.
		checkExemplars(t, db, m, 0, 5*exHour, []*labels.Matcher{})
		// The head alone serves only what it holds.
		inHead := exModel{}
		for _, r := range m {
			for _, e := range r.Exemplars {
				if e.Ts >= flushedTo {
					inHead.add(r.SeriesLabels, head.Exemplar{Labels: e.Labels, T: e.Ts, V: e.Value})
				}
			}
		}
		checkExemplars(t, headExemplars{db.head}, inHead, math.MinInt64, math.MaxInt64)
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, dir, exemplarOpts)
	defer db2.Close()
	check(db2)
	if got := ringLen(db2); got != m.count()-inBlocks {
		t.Fatalf("after restart the head holds %d exemplars, want %d", got, m.count()-inBlocks)
	}
	// No matcher set selects nothing, as in Prometheus.
	eq, _ := db2.ExemplarQuerier(context.Background())
	if res, err := eq.Select(math.MinInt64, math.MaxInt64); err != nil || res == nil || len(res) != 0 {
		t.Fatalf("no matchers: %v %v", res, err)
	}
	// Blocks' exemplars pass verification.
	for _, bm := range db2.Blocks() {
		b, err := block.Open(filepath.Join(dir, bm.ULID))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Verify(); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
}

// TestDBExemplarsCompactionRetention: compaction carries exemplars into the
// merged blocks (each once), snapshots keep them, retention removes them.
func TestDBExemplarsCompactionRetention(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *DBOptions) {
		exemplarOpts(o)
		o.CompactionRanges = []int64{exHour, 3 * exHour, 9 * exHour}
		o.RetentionTime = 4 * time.Hour
	}
	db := openDB(t, dir, mod)
	m := exModel{}
	appendExemplars(t, db, m, 0, 8*exHour)
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	before := len(db.Blocks())
	inBlocks := blockExemplars(db)
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	after := db.Blocks()
	if len(after) >= before {
		t.Fatalf("compaction left %d of %d blocks", len(after), before)
	}
	merged := false
	for _, b := range after {
		merged = merged || b.Compaction.Level > 1 && b.Stats.NumExemplars > 0
	}
	if !merged {
		t.Fatalf("no merged block with exemplars: %+v", after)
	}
	if got := blockExemplars(db); got != inBlocks {
		t.Fatalf("merged blocks hold %d exemplars, the sources %d", got, inBlocks)
	}
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64)
	checkExemplars(t, db, m, 2*exHour+30000, 4*exHour-1)

	// A snapshot (hard links plus the head as a block) serves the same exemplars.
	snap := filepath.Join(t.TempDir(), "snap")
	if err := db.Snapshot(snap, true); err != nil {
		t.Fatal(err)
	}
	sdb := openDB(t, snap, mod)
	checkExemplars(t, sdb, m, math.MinInt64, math.MaxInt64)
	sdb.Close()

	if err := db.ApplyRetention(); err != nil {
		t.Fatal(err)
	}
	first := db.Blocks()[0].MinTime
	if first == 0 {
		t.Fatal("retention deleted nothing")
	}
	kept := exModel{}
	for _, r := range m {
		for _, e := range r.Exemplars {
			if e.Ts >= first {
				kept.add(r.SeriesLabels, head.Exemplar{Labels: e.Labels, T: e.Ts, V: e.Value})
			}
		}
	}
	checkExemplars(t, db, kept, math.MinInt64, math.MaxInt64)
	db.Close()
	db2 := openDB(t, dir, mod)
	defer db2.Close()
	checkExemplars(t, db2, kept, math.MinInt64, math.MaxInt64)
}

// TestDBExemplarsHeadBlockDedup: after a crash between writing a block and
// checkpointing the WAL, the head replays exemplars that a block holds too:
// queries return each once, and the next flush and compaction keep one copy.
func TestDBExemplarsHeadBlockDedup(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *DBOptions) {
		exemplarOpts(o)
		o.Head.Now = func() int64 { return 4 * exHour }
		o.CompactionRanges = []int64{exHour, 3 * exHour}
	}
	db := openDB(t, dir, mod)
	m := exModel{}
	appendExemplars(t, db, m, 0, 3*exHour)
	db.Close()
	wal := filepath.Join(dir, "wal")
	backup := filepath.Join(t.TempDir(), "wal")
	tsdbtest.CopyTree(t, wal, backup)

	db = openDB(t, dir, mod)
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if len(db.Blocks()) == 0 || blockExemplars(db) == 0 {
		t.Fatal("nothing flushed")
	}
	db.Close()
	// The crash: the WAL as it was before the flush's checkpoint.
	if err := os.RemoveAll(wal); err != nil {
		t.Fatal(err)
	}
	tsdbtest.CopyTree(t, backup, wal)
	db = openDB(t, dir, mod)
	if ringLen(db) != m.count() {
		t.Fatalf("replay restored %d exemplars, want all %d", ringLen(db), m.count())
	}
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64)
	checkExemplars(t, db, m, exHour-60000, exHour+60000)
	// The next flush writes the replayed exemplars older than the head to an
	// out-of-order block, compaction merges the copies.
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64)
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64)
	flushedTo := db.head.MinValidTime()
	inBlocks := 0
	for _, r := range m {
		for _, e := range r.Exemplars {
			if e.Ts < flushedTo {
				inBlocks++
			}
		}
	}
	if got := blockExemplars(db); got != inBlocks {
		t.Fatalf("blocks hold %d exemplars after compaction, want %d (one copy each)", got, inBlocks)
	}
	if got := ringLen(db); got != m.count()-inBlocks {
		t.Fatalf("the head holds %d exemplars, want %d", got, m.count()-inBlocks)
	}
	db.Close()
	db = openDB(t, dir, mod)
	defer db.Close()
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64)
}

// TestDBExemplarsLate: exemplars for flushed ranges go to out-of-order blocks
// within --storage.late-max-age; older ones stay in the head only.
func TestDBExemplarsLate(t *testing.T) {
	dir := t.TempDir()
	now := 6 * exHour
	mod := func(o *DBOptions) {
		exemplarOpts(o)
		o.Head.Now = func() int64 { return now }
		o.Head.LateMaxAge = 5 * time.Hour
		o.CompactionRanges = []int64{exHour, 3 * exHour}
	}
	db := openDB(t, dir, mod)
	m := exModel{}
	appendExemplars(t, db, m, 0, 5*exHour)
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	blocks := len(db.Blocks())
	late := head.Exemplar{Labels: labels.FromStrings("trace_id", "late"), T: 2*exHour + 12345, V: 42}
	ancient := head.Exemplar{Labels: labels.FromStrings("trace_id", "ancient"), T: now - 5*exHour - 1, V: 43}
	other := series("other", "job", "api", "instance", "b") // exemplars without samples
	res, err := db.AppendBatch(context.Background(), &head.Batch{Series: []head.BatchSeries{
		{Labels: other, Exemplars: []head.Exemplar{ancient, late}},
	}})
	if err != nil || res.ExemplarsWritten != 2 {
		t.Fatalf("late exemplars: %d written, %v", res.ExemplarsWritten, err)
	}
	m.add(other, ancient)
	m.add(other, late)
	all := [][]*labels.Matcher{allBuckets, {labels.MustNewMatcher(labels.MatchEqual, "__name__", "other")}}
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64, all...)
	ring := ringLen(db)
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if len(db.Blocks()) != blocks+1 {
		t.Fatalf("%d blocks, want one more out-of-order block than %d", len(db.Blocks()), blocks)
	}
	if ringLen(db) != ring-1 {
		t.Fatalf("the head holds %d exemplars, want %d (the late one moved to a block)", ringLen(db), ring-1)
	}
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64, all...)
	if err := db.Compact(); err != nil {
		t.Fatal(err)
	}
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64, all...)
	db.Close()
	db = openDB(t, dir, mod)
	defer db.Close()
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64, all...)
}

// TestDBExemplarsCorruption: a damaged exemplar record is reported by
// queries and Verify (the block stays, like a damaged chunk); a damaged
// exemplars file header or TOC makes the block unreadable: it is
// quarantined at start-up like any damaged block.
func TestDBExemplarsCorruption(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, exemplarOpts)
	m := exModel{}
	appendExemplars(t, db, m, 0, 5*exHour)
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	bs := db.Blocks()
	db.Close()
	if len(bs) < 3 {
		t.Fatalf("%d blocks", len(bs))
	}
	// A record of the first block.
	rec := filepath.Join(dir, bs[0].ULID, block.ExemplarsFilename)
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	data[40] ^= 0x20
	os.WriteFile(rec, data, 0o644)
	// The TOC of the second block.
	toc := filepath.Join(dir, bs[1].ULID, block.ExemplarsFilename)
	data, _ = os.ReadFile(toc)
	data[len(data)-10] ^= 0x01
	os.WriteFile(toc, data, 0o644)

	db = openDB(t, dir, exemplarOpts)
	defer db.Close()
	if n := len(db.Blocks()); n != len(bs)-1 {
		t.Fatalf("%d blocks, want %d (one quarantined)", n, len(bs)-1)
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine", bs[1].ULID)); err != nil {
		t.Fatalf("block with a damaged exemplars TOC not in quarantine: %v", err)
	}
	eq, _ := db.ExemplarQuerier(context.Background())
	if _, err := eq.Select(bs[0].MinTime, bs[0].MaxTime-1, allBuckets); err == nil || !strings.Contains(err.Error(), rec) {
		t.Fatalf("query over a damaged exemplar record: %v", err)
	}
	b, err := block.Open(filepath.Dir(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Verify(); err == nil || !strings.Contains(err.Error(), rec) {
		t.Fatalf("Verify: %v", err)
	}
	// The rest is served.
	kept := exModel{}
	for _, r := range m {
		for _, e := range r.Exemplars {
			if e.Ts >= bs[2].MinTime {
				kept.add(r.SeriesLabels, head.Exemplar{Labels: e.Labels, T: e.Ts, V: e.Value})
			}
		}
	}
	checkExemplars(t, db, kept, bs[2].MinTime, math.MaxInt64)
}

// TestDBExemplarsTombstones: deleted series ranges hide their exemplars, and
// CleanTombstones rewrites blocks without them.
func TestDBExemplarsTombstones(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, exemplarOpts)
	defer db.Close()
	m := exModel{}
	appendExemplars(t, db, m, 0, 5*exHour)
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	lo, hi := exHour/2, 2*exHour+exHour/2
	if err := db.Delete(context.Background(), lo, hi, labels.MustNewMatcher(labels.MatchEqual, "le", "1")); err != nil {
		t.Fatal(err)
	}
	kept := exModel{}
	for _, r := range m {
		for _, e := range r.Exemplars {
			if r.SeriesLabels.Get("le") != "1" || e.Ts < lo || e.Ts > hi {
				kept.add(r.SeriesLabels, head.Exemplar{Labels: e.Labels, T: e.Ts, V: e.Value})
			}
		}
	}
	if kept.count() == m.count() {
		t.Fatal("the deletion covers no exemplar")
	}
	checkExemplars(t, db, kept, math.MinInt64, math.MaxInt64)
	if err := db.CleanTombstones(); err != nil {
		t.Fatal(err)
	}
	if !db.tombs.empty() {
		t.Fatal("tombstones left")
	}
	checkExemplars(t, db, kept, math.MinInt64, math.MaxInt64)
	if got := blockExemplars(db) + ringLen(db); got != kept.count() {
		t.Fatalf("%d exemplars stored after cleaning, want %d", got, kept.count())
	}
}

// TestDBExemplarsDuringFlush queries exemplars while a writer appends and
// flushes run: every query sees each exemplar written before it exactly once.
func TestDBExemplarsDuringFlush(t *testing.T) {
	db := openDB(t, t.TempDir(), exemplarOpts)
	defer db.Close()
	var written atomic.Int64 // the last timestamp whose batch is written
	written.Store(-1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // the writer: 6 h, one scrape at a time
		defer wg.Done()
		defer close(done)
		for ts := int64(0); ts < 6*exHour; ts += 15000 {
			if err := appendExemplarsErr(db, nil, ts, ts+1); err != nil {
				t.Error(err)
				return
			}
			written.Store(ts)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := db.Flush(false); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	queries := 0
	for stop := false; !stop; queries++ {
		select {
		case <-done:
			stop = true
		default:
		}
		w := written.Load()
		if w < 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		eq, _ := db.ExemplarQuerier(context.Background())
		res, err := eq.Select(0, w, allBuckets)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range res {
			for i, e := range r.Exemplars {
				if i > 0 && e.Ts <= r.Exemplars[i-1].Ts {
					t.Fatalf("%s: exemplars at %d and %d", r.SeriesLabels, r.Exemplars[i-1].Ts, e.Ts)
				}
			}
			n += len(r.Exemplars)
		}
		// Bucket 1 has one at every minute <= w, bucket 3 one 7 ms later.
		want := int(w/60000 + 1)
		if w >= 7 {
			want += int((w-7)/60000 + 1)
		}
		if n != want {
			t.Fatalf("query up to %d: %d exemplars, want %d", w, n, want)
		}
	}
	wg.Wait()
	if len(db.Blocks()) < 3 {
		t.Fatalf("%d blocks flushed meanwhile", len(db.Blocks()))
	}
	t.Logf("%d queries, %d blocks", queries, len(db.Blocks()))
}

// TestDBExemplarsInvalidLabels: an exemplar whose labels the block format
// cannot hold (a repeated name) does not stop the flush.
func TestDBExemplarsInvalidLabels(t *testing.T) {
	db := openDB(t, t.TempDir(), exemplarOpts)
	defer db.Close()
	m := exModel{}
	appendExemplars(t, db, m, 0, 3*exHour)
	var sb labels.ScratchBuilder
	sb.Add("trace_id", "a")
	sb.Add("trace_id", "b")
	bad := head.Exemplar{Labels: sb.Labels(), T: 30*60000 + 1, V: 1}
	if _, err := db.AppendBatch(context.Background(), &head.Batch{Series: []head.BatchSeries{{Labels: bucket(0), Exemplars: []head.Exemplar{bad}}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if len(db.Blocks()) == 0 {
		t.Fatal("nothing flushed")
	}
	checkExemplars(t, db, m, math.MinInt64, math.MaxInt64)
}

// TestDBSetMaxExemplars: the DB passes a new exemplar limit to its head;
// queries and flushes see the newest exemplars it kept.
func TestDBSetMaxExemplars(t *testing.T) {
	db := openDB(t, t.TempDir(), exemplarOpts)
	defer db.Close()
	all := exModel{}
	appendExemplars(t, db, all, 0, 10*60000) // 20 exemplars, two a minute
	db.SetMaxExemplars(4)
	if got := db.head.Options().MaxExemplars; got != 4 {
		t.Fatalf("head options: MaxExemplars %d, want 4", got)
	}
	kept := exModel{}
	for _, r := range all {
		for _, e := range r.Exemplars {
			if e.Ts >= 8*60000 {
				kept.add(r.SeriesLabels, head.Exemplar{Labels: e.Labels, T: e.Ts, V: e.Value})
			}
		}
	}
	if kept.count() != 4 {
		t.Fatalf("model: %d exemplars kept, want 4", kept.count())
	}
	checkExemplars(t, db, kept, math.MinInt64, math.MaxInt64)
	if err := db.Flush(true); err != nil {
		t.Fatal(err)
	}
	if got := blockExemplars(db); got != 4 || ringLen(db) != 0 {
		t.Fatalf("after the flush: %d exemplars in blocks, %d in the head; want 4 and 0", got, ringLen(db))
	}
	checkExemplars(t, db, kept, math.MinInt64, math.MaxInt64)
}
