package head

import (
	"errors"
	"math"

	"github.com/prometheus/prometheus/model/labels"
)

// ErrSeriesGone is returned by AppendBatch, before it changed anything, for
// a series given by reference that GC removed meanwhile: decode the request
// again by labels and retry.
var ErrSeriesGone = errors.New("series no longer in the head")

// empty reports whether the table holds nothing: no chunks, no rows being
// built or open.
func (tb *table) empty() bool {
	return len(tb.chunks) == 0 && (tb.building == nil || tb.building.rows == 0) && len(tb.open) == 0
}

// idleEmpty reports whether g holds nothing in the head and has not been
// written since idleBefore (wall clock, ms). Called with g.mu held.
func (g *group) idleEmpty(idleBefore int64) bool {
	if g.lastAppend >= idleBefore || !g.aligned.empty() {
		return false
	}
	for _, s := range g.members {
		if s != nil && !s.nothingInHead() {
			return false
		}
	}
	return true
}

// nothingInHead reports whether none of s's samples is in the head's own
// table or late list (its shared-table samples are checked separately).
// Called with the group's lock held.
func (s *memSeries) nothingInHead() bool {
	return (s.own() == nil || s.own().empty()) && len(s.late()) == 0 && len(s.lateHist()) == 0
}

// GC removes the groups that hold nothing in the head any more and were not
// written since idleBefore (wall clock, ms), with their series: a target
// that stopped sending, whose data is all in blocks. In the groups that
// stay it removes the series whose samples are all in blocks and that their
// group has gone on without for a block range (a series that disappeared
// from a target); their columns are reused. Without it, series churn (pods
// coming and going, label values changing) would grow the head for ever. A
// target or series that comes back gets new series. Appends wait meanwhile
// (gcMu), so none holds a series being removed; a request that resolved a
// series by reference before the GC gets ErrSeriesGone from AppendBatch
// (the write handler decodes it again by labels), and a query that found it
// before reads it as empty. It returns the number of groups and series
// removed.
func (h *Head) GC(idleBefore int64) (groups, series int) {
	h.gcMu.Lock()
	defer h.gcMu.Unlock()
	removed := map[*memSeries]bool{}
	minValid := h.minValid.Load()
	exemplars := h.exemplars.inRing()
	rng := h.opts.BlockRange.Milliseconds()
	for i := range h.groups {
		gs := &h.groups[i]
		gs.mu.Lock()
		for key, g := range gs.byKey {
			g.mu.Lock()
			ok := g.idleEmpty(idleBefore) && !holdsAny(exemplars, g.members)
			if ok {
				delete(gs.byKey, key)
				for _, s := range g.members {
					if s != nil {
						s.flags.Or(seriesRemoved)
						removed[s] = true
					}
				}
				h.counters.unaligned.Add(-int64(g.nUnaligned))
				h.counters.groups.Add(-1)
				groups++
			} else if rng > 0 {
				for _, s := range g.members {
					// All its samples are before the flushed boundary (so none
					// is in the shared table's head chunks or rows), and the
					// group went on without it for a block range.
					if s != nil && s.lastT < minValid && g.maxT > math.MinInt64+rng && s.lastT < g.maxT-rng &&
						s.nothingInHead() && !exemplars[s] {
						g.removeMember(s, &h.counters)
						removed[s] = true
					}
				}
			}
			g.mu.Unlock()
		}
		gs.mu.Unlock()
	}
	if len(removed) == 0 {
		return 0, 0
	}
	h.exemplars.forget(removed)
	unindexed := make(map[uint64]labels.Labels, len(removed))
	for s := range removed {
		s.rawNext.Store(nil) // no chain of removed series stays reachable
		hash := s.lset.Hash()
		st := &h.series[hash%stripes]
		st.mu.Lock()
		st.remove(hash, s)
		st.mu.Unlock()
		h.refs.delete(s.ref)
		h.perMetric.dec(s.lset.Get(labels.MetricName))
		unindexed[s.ref] = s.lset
		h.counters.series.Add(-1)
		h.counters.gcSeries.Add(1)
		series++
	}
	h.index.remove(unindexed)
	return groups, series
}

// inRing returns the series with an exemplar in the ring (not yet in a block).
func (x *exemplarStore) inRing() map[*memSeries]bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[*memSeries]bool{}
	for _, en := range x.ring {
		if en.s != nil {
			out[en.s] = true
		}
	}
	return out
}

// forget drops what the store remembers of removed series.
func (x *exemplarStore) forget(removed map[*memSeries]bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for s := range removed {
		delete(x.last, s)
	}
}

// holdsAny reports whether any of ss is in inRing.
func holdsAny(inRing map[*memSeries]bool, ss []*memSeries) bool {
	for _, s := range ss {
		if s != nil && inRing[s] {
			return true
		}
	}
	return false
}
