package tsdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tandem-tsdb/tandem/compact"
	"github.com/tandem-tsdb/tandem/internal/fsutil"
	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/blockset"
	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// A tombstone deletes the samples of the series matching a selector in a
// time range. Tombstones live in <data>/tombstones.json and are applied when
// data is read; CleanTombstones rewrites the blocks they cover without the
// deleted samples and drops the tombstones that no longer cover head data.
type tombstone struct {
	Selector string `json:"selector"` // e.g. {job="node",instance=~"a.*"}
	MinTime  int64  `json:"minTime"`
	MaxTime  int64  `json:"maxTime"`

	matchers []*labels.Matcher
}

const tombstonesFile = "tombstones.json"

var selectorParser = parser.NewParser(parser.Options{})

type tombstones struct {
	mu   sync.RWMutex
	path string
	list []tombstone
}

func loadTombstones(dir string) (*tombstones, error) {
	ts := &tombstones{path: filepath.Join(dir, tombstonesFile)}
	b, err := os.ReadFile(ts.path)
	if os.IsNotExist(err) {
		return ts, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ts.path, err)
	}
	if err := json.Unmarshal(b, &ts.list); err != nil {
		return nil, fmt.Errorf("parse %s: %w", ts.path, err)
	}
	for i := range ts.list {
		ms, err := selectorParser.ParseMetricSelector(ts.list[i].Selector)
		if err != nil {
			return nil, fmt.Errorf("%s: tombstone %d: %w", ts.path, i, err)
		}
		ts.list[i].matchers = ms
	}
	return ts, nil
}

// save writes the list atomically; called with mu held.
func (ts *tombstones) save() error {
	b, err := json.MarshalIndent(ts.list, "", "  ")
	if err != nil {
		return err
	}
	tmp := ts.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, ts.path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return fsutil.SyncDir(filepath.Dir(ts.path))
}

func (ts *tombstones) empty() bool {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return len(ts.list) == 0
}

// intervals returns the deleted ranges of a series, sorted, or nil.
func (ts *tombstones) intervals(lset labels.Labels) [][2]int64 {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	var out [][2]int64
	for _, t := range ts.list {
		ok := true
		for _, m := range t.matchers {
			if !m.Matches(lset.Get(m.Name)) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, [2]int64{t.MinTime, t.MaxTime})
		}
	}
	slices.SortFunc(out, func(a, b [2]int64) int {
		switch {
		case a[0] < b[0]:
			return -1
		case a[0] > b[0]:
			return 1
		}
		return 0
	})
	return out
}

func selectorString(ms []*labels.Matcher) string {
	s := "{"
	for i, m := range ms {
		if i > 0 {
			s += ","
		}
		s += m.String()
	}
	return s + "}"
}

// Delete marks the samples of the series matching ms in [mint, maxt] as
// deleted (durably, before returning); they disappear from queries at once.
func (db *DB) Delete(_ context.Context, mint, maxt int64, ms ...*labels.Matcher) error {
	if len(ms) == 0 {
		return errors.New("delete needs at least one matcher")
	}
	sel := selectorString(ms)
	if _, err := selectorParser.ParseMetricSelector(sel); err != nil {
		return fmt.Errorf("delete: selector %s: %w", sel, err)
	}
	db.tombs.mu.Lock()
	defer db.tombs.mu.Unlock()
	db.tombs.list = append(db.tombs.list, tombstone{Selector: sel, MinTime: mint, MaxTime: maxt, matchers: ms})
	if err := db.tombs.save(); err != nil {
		db.tombs.list = db.tombs.list[:len(db.tombs.list)-1]
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

// CleanTombstones rewrites every block that holds deleted samples without
// them, then forgets the tombstones that cover no head data any more.
func (db *DB) CleanTombstones() error {
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	db.tombs.mu.RLock()
	list := slices.Clone(db.tombs.list)
	db.tombs.mu.RUnlock()
	if len(list) == 0 {
		return nil
	}
	bs, done := db.blocks.Acquire(math.MinInt64, math.MaxInt64)
	done() // no head data is read
	var todo []*blockset.Block
	for _, b := range bs {
		m := b.Meta()
		if slices.ContainsFunc(list, func(t tombstone) bool { return t.MinTime < m.MaxTime && t.MaxTime >= m.MinTime }) {
			todo = append(todo, b)
		} else {
			b.Release()
		}
	}
	for i, b := range todo {
		if err := db.rewriteWithout(b); err != nil {
			for _, r := range todo[i+1:] { // rewriteWithout released b
				r.Release()
			}
			return err
		}
	}
	// Tombstones entirely before the head's data are fully applied now.
	safe := db.head.MinValidTime()
	db.tombs.mu.Lock()
	defer db.tombs.mu.Unlock()
	keep := db.tombs.list[:0]
	for _, t := range db.tombs.list {
		if t.MaxTime >= safe {
			keep = append(keep, t)
		}
	}
	db.tombs.list = keep
	return db.tombs.save()
}

// rewriteWithout replaces block b (referenced once by the caller, a
// reference it takes over) by a copy without deleted samples. The copy is
// written as compaction writes blocks, chunk by chunk and column by column,
// so its memory is bounded whatever the block's length and its groups'
// width; series left without samples leave the block.
func (db *DB) rewriteWithout(b *blockset.Block) error {
	meta, err := compact.Rewrite(db.dir, b.Block, db.tombs.intervals, block.WriteOptions{})
	if err != nil {
		b.Release()
		return fmt.Errorf("rewrite block %s without deleted samples: %w", b.Dir(), err)
	}
	if err := db.blocks.Replace([]*blockset.Block{b}, filepath.Join(db.dir, meta.ULID)); err != nil {
		return fmt.Errorf("open rewritten block %w", err)
	}
	return nil
}

func inIntervals(t int64, iv [][2]int64) bool {
	for _, x := range iv {
		if t >= x[0] && t <= x[1] {
			return true
		}
	}
	return false
}

// tombstoneQuerier hides deleted samples.
type tombstoneQuerier struct {
	storage.Querier
	ts *tombstones
}

func (q *tombstoneQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	if hints != nil && (hints.Func == fastread.HintLastSample || hints.Func == fastread.HintSeries) {
		// The newest sample may be deleted: the one before it is then the
		// answer (or shows the series has samples in the range), so the
		// head must return everything.
		h := *hints
		h.Func = ""
		hints = &h
	}
	return &tombstoneSeriesSet{SeriesSet: q.Querier.Select(ctx, sortSeries, hints, ms...), ts: q.ts}
}

type tombstoneSeriesSet struct {
	storage.SeriesSet
	ts  *tombstones
	cur storage.Series
}

func (s *tombstoneSeriesSet) Next() bool {
	for s.SeriesSet.Next() {
		sr := s.SeriesSet.At()
		iv := s.ts.intervals(sr.Labels())
		if iv == nil {
			s.cur = sr
			return true
		}
		// Skip series left without samples.
		fs := &filteredSeries{Series: sr, iv: iv}
		if fs.Iterator(nil).Next() == chunkenc.ValNone {
			continue
		}
		s.cur = fs
		return true
	}
	return false
}

func (s *tombstoneSeriesSet) At() storage.Series { return s.cur }

func (s *tombstoneSeriesSet) Warnings() annotations.Annotations { return s.SeriesSet.Warnings() }

type filteredSeries struct {
	storage.Series
	iv [][2]int64
}

func (s *filteredSeries) Iterator(reuse chunkenc.Iterator) chunkenc.Iterator {
	if f, ok := reuse.(*filteredIterator); ok {
		f.Iterator, f.iv = s.Series.Iterator(f.Iterator), s.iv
		return f
	}
	return &filteredIterator{Iterator: s.Series.Iterator(nil), iv: s.iv}
}

// filteredIterator skips samples inside deleted intervals.
type filteredIterator struct {
	chunkenc.Iterator
	iv [][2]int64
}

func (it *filteredIterator) Next() chunkenc.ValueType {
	for {
		vt := it.Iterator.Next()
		if vt == chunkenc.ValNone || !inIntervals(it.Iterator.AtT(), it.iv) {
			return vt
		}
	}
}

func (it *filteredIterator) Seek(t int64) chunkenc.ValueType {
	vt := it.Iterator.Seek(t)
	for vt != chunkenc.ValNone && inIntervals(it.Iterator.AtT(), it.iv) {
		vt = it.Iterator.Next()
	}
	return vt
}
