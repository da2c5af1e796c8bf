package tsdb

import (
	"context"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// Exemplar is one exemplar of a series: labels (e.g. a trace id), value and timestamp.
type Exemplar struct {
	Labels labels.Labels
	T      int64
	V      float64
}

// exemplarStore keeps the newest exemplars of all series in a ring of fixed
// capacity (--storage.exemplars.max). They are logged in the WAL with their
// request and written to checkpoints, so they survive restarts.
type exemplarStore struct {
	mu   sync.RWMutex
	ring []exemplarEntry
	next int
	n    int
	last map[*memSeries]Exemplar // newest exemplar per series (order and duplicates)
}

type exemplarEntry struct {
	s *memSeries
	e Exemplar
}

func newExemplarStore(capacity int) *exemplarStore {
	return &exemplarStore{ring: make([]exemplarEntry, max(capacity, 0)), last: map[*memSeries]Exemplar{}}
}

// add stores e for s. It reports whether the exemplar is stored (or already
// was: a resent identical one) and whether it is new (to be logged).
func (x *exemplarStore) add(s *memSeries, e Exemplar) (written, isNew bool) {
	if len(x.ring) == 0 {
		return false, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
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

// ExemplarQuerier implements storage.ExemplarQueryable.
func (h *Head) ExemplarQuerier(context.Context) (storage.ExemplarQuerier, error) {
	return exemplarQuerier{h}, nil
}

type exemplarQuerier struct{ h *Head }

// Select returns the exemplars in [start, end] of the series matching any of the matcher sets.
func (q exemplarQuerier) Select(start, end int64, matchers ...[]*labels.Matcher) ([]exemplar.QueryResult, error) {
	want := map[uint64]bool{}
	for _, ms := range matchers {
		for _, ref := range q.h.index.postingsFor(ms...) {
			want[ref] = true
		}
	}
	bySeries := map[*memSeries]*exemplar.QueryResult{}
	var order []*memSeries
	q.h.exemplars.all(func(s *memSeries, e Exemplar) {
		if e.T < start || e.T > end || !want[s.ref] {
			return
		}
		r := bySeries[s]
		if r == nil {
			r = &exemplar.QueryResult{SeriesLabels: s.lset}
			bySeries[s] = r
			order = append(order, s)
		}
		r.Exemplars = append(r.Exemplars, exemplar.Exemplar{Labels: e.Labels, Value: e.V, Ts: e.T, HasTs: true})
	})
	out := make([]exemplar.QueryResult, 0, len(order))
	for _, s := range order {
		r := bySeries[s]
		slices.SortFunc(r.Exemplars, func(a, b exemplar.Exemplar) int {
			switch {
			case a.Ts < b.Ts:
				return -1
			case a.Ts > b.Ts:
				return 1
			}
			return 0
		})
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b exemplar.QueryResult) int { return labels.Compare(a.SeriesLabels, b.SeriesLabels) })
	return out, nil
}

// ExemplarQuerier implements storage.ExemplarQueryable over the head's exemplars.
func (db *DB) ExemplarQuerier(ctx context.Context) (storage.ExemplarQuerier, error) {
	return db.head.ExemplarQuerier(ctx)
}
