package tsdb

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// Exemplar is one exemplar of a series: labels (e.g. a trace id), value and timestamp.
type Exemplar struct {
	Labels labels.Labels
	T      int64
	V      float64
}

// exemplarStore keeps the newest exemplars of all series in a ring of fixed
// capacity (--storage.exemplars.max). They are logged in the WAL with their
// request and written to checkpoints, so they survive restarts. When the
// head range holding them is flushed, they are written into the block (the
// exemplars file) and removed from the ring: each exemplar is then in the
// ring or in blocks, and queries merge both (see DB.ExemplarQuerier).
type exemplarStore struct {
	mu   sync.RWMutex
	ring []exemplarEntry // allocated with the first exemplar
	// capacity is the ring's size once allocated.
	capacity int
	next     int
	n        int
	last     map[*memSeries]Exemplar // newest exemplar per series (order and duplicates)
}

type exemplarEntry struct {
	s *memSeries
	e Exemplar
}

func newExemplarStore(capacity int) *exemplarStore {
	return &exemplarStore{capacity: max(capacity, 0), last: map[*memSeries]Exemplar{}}
}

// add stores e for s. It reports whether the exemplar is stored (or already
// was: a resent identical one) and whether it is new (to be logged).
func (x *exemplarStore) add(s *memSeries, e Exemplar) (written, isNew bool) {
	if x.capacity == 0 {
		return false, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ring == nil {
		x.ring = make([]exemplarEntry, x.capacity)
	}
	if l, ok := x.last[s]; ok {
		if e.T == l.T && math.Float64bits(e.V) == math.Float64bits(l.V) && labels.Equal(e.Labels, l.Labels) {
			return true, false // a resent exemplar
		}
		if e.T <= l.T {
			return false, false // out of order for the series: dropped, as Prometheus does
		}
	}
	if old := x.ring[x.next]; old.s != nil {
		if l, ok := x.last[old.s]; ok && l.T == old.e.T {
			delete(x.last, old.s)
		}
	}
	x.ring[x.next] = exemplarEntry{s: s, e: Exemplar{Labels: e.Labels.Copy(), T: e.T, V: e.V}}
	x.next = (x.next + 1) % len(x.ring)
	x.n = min(x.n+1, len(x.ring))
	x.last[s] = e
	return true, true
}

// all calls fn for every stored exemplar, oldest first.
func (x *exemplarStore) all(fn func(s *memSeries, e Exemplar)) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	start := (x.next - x.n + len(x.ring)) % max(len(x.ring), 1)
	for i := 0; i < x.n; i++ {
		en := x.ring[(start+i)%len(x.ring)]
		fn(en.s, en.e)
	}
}

// collect returns the stored exemplars whose timestamps keep accepts, oldest first.
func (x *exemplarStore) collect(keep func(t int64) bool) []exemplarEntry {
	var out []exemplarEntry
	x.all(func(s *memSeries, e Exemplar) {
		if keep(e.T) {
			out = append(out, exemplarEntry{s: s, e: e})
		}
	})
	return out
}

// remove drops the given exemplars (collected earlier and now in a block)
// from the ring, keeping the others in order. The newest exemplar of each
// series stays known, so that a resent one is still recognised.
func (x *exemplarStore) remove(es []exemplarEntry) {
	if len(es) == 0 {
		return
	}
	type key struct {
		s *memSeries
		t int64
	}
	drop := make(map[key]Exemplar, len(es))
	for _, en := range es {
		drop[key{en.s, en.e.T}] = en.e
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	start := (x.next - x.n + len(x.ring)) % max(len(x.ring), 1)
	kept := make([]exemplarEntry, 0, x.n)
	for i := 0; i < x.n; i++ {
		en := x.ring[(start+i)%len(x.ring)]
		if d, ok := drop[key{en.s, en.e.T}]; ok && sameExemplar(d, en.e) {
			continue
		}
		kept = append(kept, en)
	}
	if len(kept) == x.n {
		return
	}
	copy(x.ring, kept)
	clear(x.ring[len(kept):])
	x.n = len(kept)
	x.next = x.n % len(x.ring)
}

func sameExemplar(a, b Exemplar) bool {
	return a.T == b.T && math.Float64bits(a.V) == math.Float64bits(b.V) && labels.Equal(a.Labels, b.Labels)
}

// exemplarSource turns collected exemplars into a block.ExemplarSource:
// series in label order, each one's exemplars in time order (at one
// timestamp, the one stored last). Exemplars whose labels are not a valid
// label set (an empty or repeated name, which Prometheus refuses) cannot be
// written: they are left out (and so dropped from the head with the others).
func (db *DB) exemplarSource(es []exemplarEntry) block.ExemplarSource {
	if len(es) == 0 {
		return nil
	}
	bySeries := map[*memSeries][]block.Exemplar{}
	var order []*memSeries
	invalid := 0
	for _, en := range es {
		if !validExemplarLabels(en.e.Labels) {
			invalid++
			continue
		}
		if _, ok := bySeries[en.s]; !ok {
			order = append(order, en.s)
		}
		bySeries[en.s] = append(bySeries[en.s], block.Exemplar{Labels: en.e.Labels, T: en.e.T, V: en.e.V})
	}
	if invalid > 0 {
		db.logger.Warn("exemplars with invalid labels not written to the block", "exemplars", invalid)
	}
	slices.SortFunc(order, func(a, b *memSeries) int { return labels.Compare(a.lset, b.lset) })
	return func(yield func(*block.SeriesExemplars) error) error {
		for _, s := range order {
			xs := bySeries[s]
			slices.SortStableFunc(xs, func(a, b block.Exemplar) int { return cmp.Compare(a.T, b.T) })
			w := 0
			for i := range xs {
				if i+1 < len(xs) && xs[i+1].T == xs[i].T {
					continue
				}
				xs[w] = xs[i]
				w++
			}
			if err := yield(&block.SeriesExemplars{Labels: s.lset, Exemplars: xs[:w]}); err != nil {
				return err
			}
		}
		return nil
	}
}

// validExemplarLabels reports whether names are non-empty and strictly ascending.
func validExemplarLabels(ls labels.Labels) bool {
	ok, prev, first := true, "", true
	ls.Range(func(l labels.Label) {
		ok = ok && l.Name != "" && (first || l.Name > prev)
		prev, first = l.Name, false
	})
	return ok
}

// exemplarBounds returns the lowest and highest timestamp of es (ok false if es is empty).
func exemplarBounds(es []exemplarEntry) (lo, hi int64, ok bool) {
	lo, hi = math.MaxInt64, math.MinInt64
	for _, en := range es {
		lo, hi = min(lo, en.e.T), max(hi, en.e.T)
	}
	return lo, hi, len(es) > 0
}

// lateExemplars returns the exemplars of the ring older than before (their
// range is flushed already) but within --storage.late-max-age, the limit of
// late samples: they go to out-of-order blocks. Older ones stay in the
// ring, served from memory only, until it overwrites them.
func (h *Head) lateExemplars(before int64) []exemplarEntry {
	if h.opts.LateMaxAge <= 0 {
		return nil
	}
	lateMin := h.opts.Now() - h.opts.LateMaxAge.Milliseconds()
	return h.exemplars.collect(func(t int64) bool { return t < before && t >= lateMin })
}

// matchesSomeMatcherSet reports whether lset matches every matcher of one of
// the sets (Prometheus's exemplar selection; no sets match nothing).
func matchesSomeMatcherSet(lset labels.Labels, sets [][]*labels.Matcher) bool {
outer:
	for _, ms := range sets {
		for _, m := range ms {
			if !m.Matches(lset.Get(m.Name)) {
				continue outer
			}
		}
		return true
	}
	return false
}

// exemplarSet gathers the exemplars of a query from several sources (blocks,
// oldest first, then the head), series by series.
type exemplarSet struct {
	series map[string]*exemplar.QueryResult
	buf    []byte
}

func newExemplarSet() *exemplarSet {
	return &exemplarSet{series: map[string]*exemplar.QueryResult{}}
}

// add appends exemplars of the series lset; later sources win at equal timestamps.
func (x *exemplarSet) add(lset labels.Labels, es []exemplar.Exemplar) {
	if len(es) == 0 {
		return
	}
	x.buf = lset.Bytes(x.buf)
	r := x.series[string(x.buf)]
	if r == nil {
		r = &exemplar.QueryResult{SeriesLabels: lset}
		x.series[string(x.buf)] = r
	}
	r.Exemplars = append(r.Exemplars, es...)
}

// result returns the series sorted by labels, each with its exemplars in
// time order and one exemplar per timestamp: the shape of Prometheus's
// CircularExemplarStorage.Select. keep, when not nil, filters exemplars.
func (x *exemplarSet) result(keep func(lset labels.Labels, es []exemplar.Exemplar) []exemplar.Exemplar) []exemplar.QueryResult {
	out := make([]exemplar.QueryResult, 0, len(x.series))
	for _, r := range x.series {
		es := r.Exemplars
		slices.SortStableFunc(es, func(a, b exemplar.Exemplar) int { return cmp.Compare(a.Ts, b.Ts) })
		w := 0
		for i := range es {
			if i+1 < len(es) && es[i+1].Ts == es[i].Ts {
				continue // the same exemplar in a block and the head (or in two blocks): once
			}
			es[w] = es[i]
			w++
		}
		es = es[:w]
		if keep != nil {
			es = keep(r.SeriesLabels, es)
		}
		if len(es) > 0 {
			out = append(out, exemplar.QueryResult{SeriesLabels: r.SeriesLabels, Exemplars: es})
		}
	}
	slices.SortFunc(out, func(a, b exemplar.QueryResult) int { return labels.Compare(a.SeriesLabels, b.SeriesLabels) })
	return out
}

// addHeadExemplars adds the head's exemplars in [start, end] of the series matching a matcher set.
func (h *Head) addHeadExemplars(x *exemplarSet, start, end int64, matchers [][]*labels.Matcher) {
	match := map[*memSeries]bool{}
	bySeries := map[*memSeries][]exemplar.Exemplar{}
	var order []*memSeries
	h.exemplars.all(func(s *memSeries, e Exemplar) {
		if e.T < start || e.T > end {
			return
		}
		ok, seen := match[s]
		if !seen {
			ok = matchesSomeMatcherSet(s.lset, matchers)
			match[s] = ok
		}
		if !ok {
			return
		}
		if _, have := bySeries[s]; !have {
			order = append(order, s)
		}
		bySeries[s] = append(bySeries[s], exemplar.Exemplar{Labels: e.Labels, Value: e.V, Ts: e.T, HasTs: true})
	})
	for _, s := range order {
		x.add(s.lset, bySeries[s])
	}
}

// ExemplarQuerier implements storage.ExemplarQueryable over the head's exemplars only.
func (h *Head) ExemplarQuerier(context.Context) (storage.ExemplarQuerier, error) {
	return exemplarQuerier{h}, nil
}

type exemplarQuerier struct{ h *Head }

// Select returns the exemplars in [start, end] of the series matching any of the matcher sets.
func (q exemplarQuerier) Select(start, end int64, matchers ...[]*labels.Matcher) ([]exemplar.QueryResult, error) {
	x := newExemplarSet()
	q.h.addHeadExemplars(x, start, end, matchers)
	return x.result(nil), nil
}

// ExemplarQuerier implements storage.ExemplarQueryable over the blocks' and
// the head's exemplars.
func (db *DB) ExemplarQuerier(context.Context) (storage.ExemplarQuerier, error) {
	return dbExemplarQuerier{db}, nil
}

type dbExemplarQuerier struct{ db *DB }

// Select returns the exemplars in [start, end] (inclusive) of the series
// matching any of the matcher sets, from the blocks overlapping the range
// and the head: one result per series, sorted by series labels, exemplars in
// time order, an exemplar held both by a block and the head (during a flush,
// or after a crash before the WAL checkpoint) once. Deleted series ranges
// (tombstones) are left out.
func (q dbExemplarQuerier) Select(start, end int64, matchers ...[]*labels.Matcher) ([]exemplar.QueryResult, error) {
	db := q.db
	if len(matchers) == 0 || start > end {
		return []exemplar.QueryResult{}, nil
	}
	bs, done := db.acquire(start, end)
	defer func() {
		for _, b := range bs {
			b.release()
		}
		done()
	}()
	x := newExemplarSet()
	match := func(l labels.Labels) bool { return matchesSomeMatcherSet(l, matchers) }
	var conv []exemplar.Exemplar
	for _, b := range bs { // oldest first: at equal timestamps, later blocks and then the head win
		if b.NumExemplars() == 0 {
			continue
		}
		it := b.Exemplars(start, end, match)
		for it.Next() {
			se := it.At()
			conv = conv[:0]
			for _, e := range se.Exemplars {
				conv = append(conv, exemplar.Exemplar{Labels: e.Labels, Value: e.V, Ts: e.T, HasTs: true})
			}
			x.add(se.Labels, conv)
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	db.head.addHeadExemplars(x, start, end, matchers)
	var keep func(labels.Labels, []exemplar.Exemplar) []exemplar.Exemplar
	if !db.tombs.empty() {
		keep = func(lset labels.Labels, es []exemplar.Exemplar) []exemplar.Exemplar {
			iv := db.tombs.intervals(lset)
			if iv == nil {
				return es
			}
			return slices.DeleteFunc(es, func(e exemplar.Exemplar) bool { return inIntervals(e.Ts, iv) })
		}
	}
	return x.result(keep), nil
}
