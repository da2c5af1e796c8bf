package compact

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// liveChunk is a source's shared-table chunk loaded while output chunks that overlap it are written.
type liveChunk struct {
	src    int // index into merger.srcs: its listed position, the priority of its samples
	ref    block.ChunkRef
	rd     block.ChunkReader
	rowMap []int32 // chunk row → row of the output chunk being written, -1 outside it
}

// candidate is a column of a live chunk holding samples of a merged member.
type candidate struct {
	member int32 // merged
	live   int32 // index into sharedState.live
	col    int32
}

// shadow is an unaligned table of a source holding samples of a merged member (overlapping merges).
type shadow struct {
	src, table, member int // member: the source's
}

// sharedState is the scratch state of mergeShared.
type sharedState struct {
	ts      []int64 // the merged shared table's rows
	live    []*liveChunk
	free    []*liveChunk
	cands   []candidate
	shadows [][]shadow // per merged member (overlapping merges)
	// Per row of the output chunk: the member's sample (index idx in
	// column cols[slot]), its source, and whether it has one (stamp == gen).
	slot  []int32
	idx   []int32
	owner []int32
	stamp []uint32
	gen   uint32
	cols  []block.Column // the member's columns in the live chunks, by candidate
	rows  []int32
	orows []int32
	ovals []float64
	ohs   []*histogram.Histogram
	ofhs  []*histogram.FloatHistogram
	// The group's samples of another kind than their member's column in
	// their output chunk, written as tables of their own after the shared one.
	spills []block.Table
}

// mergeShared writes the group's merged shared table, whose rows sharedRows
// listed; it is written one output chunk at a time and, within a chunk, one
// member at a time: the member's columns in the source chunks that overlap
// the output chunk are decoded, merged (at one timestamp the source listed
// last wins, also over the source's unaligned tables), stripped of deleted
// samples and encoded. Memory holds the loaded source chunks' timestamps, one
// member's columns and the output chunk's encoding. A member whose samples
// in an output chunk are of several kinds (a series that turned from floats
// into native histograms between its sources) keeps the kind of most of them
// there; the others are written after the shared table, in a table per
// member and kind.
func (m *merger) mergeShared(gw *block.GroupWriter) error {
	st := &m.shared
	st.spills = st.spills[:0]
	if err := gw.BeginTable(); err != nil {
		return err
	}
	for i := range m.srcs {
		m.srcs[i].next = 0
	}
	if !m.disjoint {
		m.findShadows()
	}
	defer m.releaseLive()
	for r0, r1 := 0, 0; r0 < len(st.ts); r0 = r1 {
		r1 = gw.ChunkEnd(r0, len(st.ts))
		if err := m.sharedChunk(gw, st.ts[r0:r1]); err != nil {
			return err
		}
	}
	for i := range st.spills {
		if err := gw.WriteTable(&st.spills[i]); err != nil {
			return err
		}
	}
	return nil
}

// sharedRows lists the rows of the group's merged shared table in m.shared.ts: the union of the
// sources' shared rows, without those left empty by deleted samples.
func (m *merger) sharedRows() error {
	st := &m.shared
	st.ts = st.ts[:0]
	for i := range m.srcs {
		s := &m.srcs[i]
		if !s.has {
			continue
		}
		for _, c := range s.tables[0] {
			if err := m.rd.Reset(s.b, c); err != nil {
				return fmt.Errorf("source %s: %w", s.b.Dir(), err)
			}
			if m.del.any {
				if err := m.liveRows(s, c); err != nil {
					return err
				}
				continue
			}
			st.ts = append(st.ts, m.rd.Timestamps()...)
		}
	}
	slices.Sort(st.ts)
	st.ts = slices.Compact(st.ts)
	return nil
}

// releaseLive returns every loaded chunk to the free list.
func (m *merger) releaseLive() {
	for i := range m.srcs {
		s := &m.srcs[i]
		m.shared.free = append(m.shared.free, s.loaded...)
		clear(s.loaded)
		s.loaded = s.loaded[:0]
	}
}

// findShadows lists, per merged member, the sources' unaligned tables that hold it.
func (m *merger) findShadows() {
	st := &m.shared
	st.shadows = resize(st.shadows, len(m.out))
	for i := range m.srcs {
		s := &m.srcs[i]
		if !s.has {
			continue
		}
		for ti := 1; ti < len(s.tables); ti++ {
			for _, sm := range s.members[ti] {
				mm := s.remap[sm]
				st.shadows[mm] = append(st.shadows[mm], shadow{src: i, table: ti, member: sm})
			}
		}
	}
}

// load brings in the source chunks that overlap [lo, hi] and maps their rows onto win.
func (m *merger) load(win []int64) error {
	st := &m.shared
	lo, hi := win[0], win[len(win)-1]
	st.live = st.live[:0]
	for i := range m.srcs {
		s := &m.srcs[i]
		if !s.has {
			continue
		}
		keep := s.loaded[:0]
		for _, lc := range s.loaded {
			if lc.ref.MaxT < lo {
				st.free = append(st.free, lc)
			} else {
				keep = append(keep, lc)
			}
		}
		clear(s.loaded[len(keep):])
		s.loaded = keep
		for cs := s.tables[0]; s.next < len(cs) && cs[s.next].MinT <= hi; s.next++ {
			var lc *liveChunk
			if n := len(st.free); n > 0 {
				lc, st.free = st.free[n-1], st.free[:n-1]
			} else {
				lc = &liveChunk{}
			}
			lc.src, lc.ref = i, cs[s.next]
			if err := lc.rd.Reset(s.b, lc.ref); err != nil {
				st.free = append(st.free, lc)
				return fmt.Errorf("source %s: %w", s.b.Dir(), err)
			}
			s.loaded = append(s.loaded, lc)
		}
		for _, lc := range s.loaded {
			ts := lc.rd.Timestamps()
			lc.rowMap = slices.Grow(lc.rowMap[:0], len(ts))[:len(ts)]
			k := 0
			for r, t := range ts {
				for k < len(win) && win[k] < t {
					k++
				}
				if k < len(win) && win[k] == t {
					lc.rowMap[r] = int32(k)
				} else {
					lc.rowMap[r] = -1
				}
			}
			st.live = append(st.live, lc)
		}
	}
	return nil
}

// sharedChunk writes the output chunk of the shared table with rows win.
func (m *merger) sharedChunk(gw *block.GroupWriter, win []int64) error {
	st := &m.shared
	if err := m.load(win); err != nil {
		return err
	}
	st.cands = st.cands[:0]
	for li, lc := range st.live { // listed order, then time: the order samples override each other in
		remap := m.srcs[lc.src].remap
		for k := range lc.rd.NumColumns() {
			sm := lc.rd.Member(k)
			if sm >= len(remap) {
				return fmt.Errorf("source %s: shared table: column of member %d in a group of %d: %w",
					m.srcs[lc.src].b.Dir(), sm, len(remap), block.ErrCorrupt)
			}
			st.cands = append(st.cands, candidate{member: remap[sm], live: int32(li), col: int32(k)})
		}
	}
	slices.SortStableFunc(st.cands, func(a, b candidate) int { return cmp.Compare(a.member, b.member) })
	if len(st.stamp) < len(win) {
		n := len(win)
		st.slot, st.idx, st.owner, st.stamp, st.gen = make([]int32, n), make([]int32, n), make([]int32, n), make([]uint32, n), 0
	}
	if err := gw.BeginChunk(win); err != nil {
		return err
	}
	for lo := 0; lo < len(st.cands); {
		hi := lo + 1
		for hi < len(st.cands) && st.cands[hi].member == st.cands[lo].member {
			hi++
		}
		if err := m.sharedColumn(gw, win, st.cands[lo:hi]); err != nil {
			return err
		}
		lo = hi
	}
	return gw.EndChunk()
}

// sharedColumn merges one member's columns cs of the live chunks into the output chunk with rows win.
func (m *merger) sharedColumn(gw *block.GroupWriter, win []int64, cs []candidate) error {
	st := &m.shared
	st.gen++
	if st.gen == 0 { // wrapped: forget every stamp
		clear(st.stamp)
		st.gen = 1
	}
	if len(st.cols) < len(cs) {
		st.cols = append(st.cols, make([]block.Column, len(cs)-len(st.cols))...)
	}
	first, last := len(win), -1
	for ci, c := range cs {
		lc := st.live[c.live]
		col := &st.cols[ci]
		col.Rows, col.Values, col.Histograms, col.FloatHistograms = col.Rows[:0], col.Values[:0], col.Histograms[:0], col.FloatHistograms[:0]
		if err := lc.rd.ReadColumn(int(c.col), col); err != nil {
			return fmt.Errorf("source %s: %w", m.srcs[lc.src].b.Dir(), err)
		}
		for k, r := range col.Rows {
			o := lc.rowMap[r]
			if o < 0 {
				continue
			}
			st.slot[o], st.idx[o], st.owner[o], st.stamp[o] = int32(ci), int32(k), int32(lc.src), st.gen
			first, last = min(first, int(o)), max(last, int(o))
		}
	}
	mm := int(cs[0].member)
	if !m.disjoint {
		if err := m.applyShadows(win, mm); err != nil {
			return err
		}
	}
	var dead [][2]int64
	if m.del.any {
		dead = m.del.dead[mm]
	}
	var kinds [3]int // samples left by kind
	for o := first; o <= last; o++ {
		if st.stamp[o] != st.gen {
			continue
		}
		if dead != nil && deadAt(dead, win[o]) {
			st.stamp[o] = 0
			continue
		}
		kinds[st.cols[st.slot[o]].Kind()]++
	}
	keep := block.KindFloat // the kind of most samples, the first of a tie
	for k := range kinds {
		if kinds[k] > kinds[keep] {
			keep = block.Kind(k)
		}
	}
	if kinds[keep] == 0 {
		return nil
	}
	wm := m.written(mm)
	st.orows, st.ovals, st.ohs, st.ofhs = st.orows[:0], st.ovals[:0], st.ohs[:0], st.ofhs[:0]
	for o := first; o <= last; o++ {
		if st.stamp[o] != st.gen {
			continue
		}
		c, i := &st.cols[st.slot[o]], int(st.idx[o])
		if c.Kind() != keep {
			st.spill(wm, win[o], c, i)
			continue
		}
		st.orows = append(st.orows, int32(o))
		switch keep {
		case block.KindHistogram:
			st.ohs = append(st.ohs, c.Histograms[i])
		case block.KindFloatHistogram:
			st.ofhs = append(st.ofhs, c.FloatHistograms[i])
		default:
			st.ovals = append(st.ovals, c.Values[i])
		}
	}
	switch keep {
	case block.KindHistogram:
		return gw.AddHistogramColumn(wm, st.orows, st.ohs)
	case block.KindFloatHistogram:
		return gw.AddFloatHistogramColumn(wm, st.orows, st.ofhs)
	}
	return gw.AddColumn(wm, st.orows, st.ovals)
}

// spill adds sample i of c, at t, to the table of member's samples of c's kind (copying a histogram).
func (st *sharedState) spill(member int, t int64, c *block.Column, i int) {
	k := c.Kind()
	x := slices.IndexFunc(st.spills, func(tb block.Table) bool { return tb.Columns[0].Member == member && tb.Columns[0].Kind() == k })
	if x < 0 {
		x = len(st.spills)
		st.spills = append(st.spills, block.Table{Columns: []block.Column{{Member: member}}})
	}
	tb := &st.spills[x]
	sc := &tb.Columns[0]
	sc.Rows = append(sc.Rows, int32(len(tb.Timestamps)))
	tb.Timestamps = append(tb.Timestamps, t)
	switch k {
	case block.KindHistogram:
		sc.Histograms = append(sc.Histograms, c.Histograms[i].Copy())
	case block.KindFloatHistogram:
		sc.FloatHistograms = append(sc.FloatHistograms, c.FloatHistograms[i].Copy())
	default:
		sc.Values = append(sc.Values, c.Values[i])
	}
}

// applyShadows drops the member's samples in the output chunk that a source listed later holds in an unaligned table.
func (m *merger) applyShadows(win []int64, mm int) error {
	st := &m.shared
	lo, hi := win[0], win[len(win)-1]
	for _, sh := range st.shadows[mm] {
		s := &m.srcs[sh.src]
		for _, c := range s.tables[sh.table] {
			if c.MaxT < lo || c.MinT > hi {
				continue
			}
			if err := m.rd.Reset(s.b, c); err != nil {
				return fmt.Errorf("source %s: %w", s.b.Dir(), err)
			}
			k := m.rd.Find(sh.member)
			if k < 0 {
				continue
			}
			var err error
			if st.rows, err = m.rd.AppendRows(k, st.rows[:0]); err != nil {
				return fmt.Errorf("source %s: %w", s.b.Dir(), err)
			}
			ts := m.rd.Timestamps()
			for _, r := range st.rows {
				if o, ok := slices.BinarySearch(win, ts[r]); ok && st.stamp[o] == st.gen && int(st.owner[o]) < sh.src {
					st.stamp[o] = 0
				}
			}
		}
	}
	return nil
}
