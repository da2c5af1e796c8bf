package head

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// SelectStream implements fastread.Streamer: the series of Select, unsorted,
// in up to parts sets of whole groups, each snapshotting one group at a
// time into memory its next group reuses, so that a query over a million
// series holds one group's snapshots per set instead of a million. A
// series read is valid until the next call of its set's Next (its labels
// stay valid).
func (q *querier) SelectStream(ctx context.Context, parts int, hints *storage.SelectHints, ms ...*labels.Matcher) []storage.SeriesSet {
	if hints != nil && hints.Limit > 0 {
		return []storage.SeriesSet{q.Select(ctx, false, hints, ms...)}
	}
	sel := q.selection(hints, ms)
	bounds := []int{0, len(sel.list)}
	if parts > 1 && len(sel.list) >= streamSplitMin {
		bounds = groupCuts(sel.list, parts)
	}
	sh := &streamShared{sel: sel}
	sh.left.Store(int32(len(bounds) - 1))
	sets := make([]storage.SeriesSet, len(bounds)-1)
	for i := range sets {
		sets[i] = &streamSet{ctx: ctx, h: q.h, sh: sh, list: sel.list[bounds[i]:bounds[i+1]]}
	}
	return sets
}

// streamSplitMin is the selection size from which SelectStream splits it.
const streamSplitMin = 128

// streamShared is what the sets of one SelectStream share: the selection,
// whose slices the last set to end gives back.
type streamShared struct {
	sel  selection
	left atomic.Int32 // sets not ended
}

// streamSet yields a run of whole groups of a selection, group by group.
type streamSet struct {
	ctx  context.Context
	h    *Head
	sh   *streamShared
	list []*memSeries // the run; nil once ended
	next int          // the first series of list not snapshotted yet
	cur  []headSeries // the current group's snapshots
	k    int          // the series At returns, in cur
	sl   snapSlab     // where cur's data is taken from, reset group by group
	sc   snapCache    // the building chunk's timestamps, reset group by group
	err  error
	done bool // ended: the set's share of the selection is given back
}

// Next moves to the next series, snapshotting the next group when the
// current one is read.
func (s *streamSet) Next() bool {
	if s.k+1 < len(s.cur) {
		s.k++
		return true
	}
	for s.err == nil && s.next < len(s.list) {
		if s.err = s.ctx.Err(); s.err != nil {
			break
		}
		s.fill()
		if len(s.cur) > 0 && s.err == nil {
			s.k = 0
			return true
		}
	}
	if !s.done {
		s.h.logSnapshotPanic(s.err)
		s.release()
	}
	return false
}

// fill snapshots the group of list[next] under its lock into cur.
func (s *streamSet) fill() {
	clear(s.cur)
	s.cur = s.cur[:0]
	list := s.list
	g := list[s.next].g
	end := s.next + 1
	for end < len(list) && list[end].g == g {
		end++
	}
	s.sl.reset(end - s.next)
	// The cache serves a group of one too: its copies then come from the
	// reused slab and cache instead of the heap.
	s.sc.reset()
	shared := &s.sc
	defer recoverSnapshot(&s.err) // after the unlock below
	g.mu.Lock()
	defer g.mu.Unlock()
	if snapshotGroupHook != nil {
		snapshotGroupHook(g)
	}
	mint, maxt := s.sh.sel.mint, s.sh.sel.maxt
	for ; s.next < end; s.next++ {
		m := list[s.next]
		if s.sh.sel.lastOnly {
			if one, in, ok := m.lastSample(mint, maxt); ok {
				if in {
					s.cur = append(s.cur, headSeries{lset: m.lset, one: one, oneST: m.startAt(one.T)})
				}
				continue
			}
		}
		d := s.sl.data()
		if g.snapshotInto(d, m, mint, maxt, shared, &s.sl); d.empty() {
			s.sl.unData()
			continue
		}
		s.cur = append(s.cur, headSeries{lset: m.lset, d: d})
	}
}

// release ends the set: the last set of a selection to end gives its
// slices back, and the last group's snapshots are dropped.
func (s *streamSet) release() {
	s.done = true
	s.list = nil
	if s.sh.left.Add(-1) == 0 {
		s.sh.sel.buf.put(s.sh.sel.list)
	}
	clear(s.cur)
	s.cur = s.cur[:0]
	s.sl, s.sc = snapSlab{}, snapCache{}
}

// Len implements fastread.Sized: the series of the run, of which those
// without samples in the range are not yielded.
func (s *streamSet) Len() int { return len(s.list) }

// At returns the current series, valid until the next call of Next.
func (s *streamSet) At() storage.Series { return &s.cur[s.k] }

func (s *streamSet) Err() error { return s.err }

func (s *streamSet) Warnings() annotations.Annotations { return nil }
