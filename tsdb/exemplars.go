package tsdb

import (
	"cmp"
	"context"
	"slices"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

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
	bs, done := db.blocks.Acquire(start, end)
	defer func() {
		for _, b := range bs {
			b.Release()
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
	db.head.Exemplars(start, end, match, x.add)
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
