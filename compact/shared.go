package compact

import (
	"cmp"
	"fmt"
	"slices"

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
	// Per row of the output chunk: the member's value, its source, and whether it has one (stamp == gen).
	vals  []float64
	owner []int32
	stamp []uint32
	gen   uint32
	rows  []int32
	vs    []float64
	orows []int32
	ovals []float64
}

// mergeShared writes the group's merged shared table, whose rows sharedRows
// listed; it is written one output chunk at a time and, within a chunk, one
// member at a time: the member's columns in the source chunks that overlap
// the output chunk are decoded, merged (at one timestamp the source listed
// last wins, also over the source's unaligned tables), stripped of deleted
// samples and encoded. Memory holds the loaded source chunks' timestamps, one
// column and the output chunk's encoding.
func (m *merger) mergeShared(gw *block.GroupWriter) error {
	st := &m.shared
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
		st.vals, st.owner, st.stamp, st.gen = make([]float64, len(win)), make([]int32, len(win)), make([]uint32, len(win)), 0
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
	first, last := len(win), -1
	for _, c := range cs {
		lc := st.live[c.live]
		var err error
		st.rows, st.vs, err = lc.rd.AppendColumn(int(c.col), st.rows[:0], st.vs[:0])
		if err != nil {
			return fmt.Errorf("source %s: %w", m.srcs[lc.src].b.Dir(), err)
		}
		for k, r := range st.rows {
			o := lc.rowMap[r]
			if o < 0 {
				continue
			}
			st.vals[o], st.owner[o], st.stamp[o] = st.vs[k], int32(lc.src), st.gen
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
	st.orows, st.ovals = st.orows[:0], st.ovals[:0]
	for o := first; o <= last; o++ {
		if st.stamp[o] == st.gen && (dead == nil || !deadAt(dead, win[o])) {
			st.orows = append(st.orows, int32(o))
			st.ovals = append(st.ovals, st.vals[o])
		}
	}
	if len(st.orows) == 0 {
		return nil
	}
	return gw.AddColumn(m.written(mm), st.orows, st.ovals)
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
			if st.rows, st.vs, err = m.rd.AppendColumn(k, st.rows[:0], st.vs[:0]); err != nil {
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
