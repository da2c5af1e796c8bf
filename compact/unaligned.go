package compact

import (
	"fmt"
	"slices"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// piece is one source table that is part of an output table.
type piece struct{ src, table int }

// unalignedState is the scratch state of the unaligned tables' merge.
type unalignedState struct {
	outs    [][]piece
	open    []int // merged member → output table open for appending, -1 if none
	openPos []int // merged member → position in order of the source that filled open
	tab     block.Table
	drop    []int64
	rows    []int32
	vals    []float64
}

// concatUnaligned writes the unaligned tables of a merge whose sources do not
// overlap in time: a member's single-column tables are concatenated across
// sources (each source's are later than the previous ones); other tables are
// carried over. Each output table (one series) is decoded whole.
func (m *merger) concatUnaligned(gw *block.GroupWriter) error {
	u := &m.unaligned
	u.outs = u.outs[:0]
	u.open = resize(u.open, len(m.out))
	u.openPos = resize(u.openPos, len(m.out))
	for k := range u.open {
		u.open[k] = -1
	}
	for pos, i := range m.order {
		s := &m.srcs[i]
		for ti := 1; ti < len(s.tables); ti++ {
			ms := s.members[ti]
			if len(s.tables[ti]) == 0 || len(ms) == 0 {
				continue
			}
			if len(ms) == 1 {
				mm := s.remap[ms[0]]
				if o := u.open[mm]; o >= 0 && u.openPos[mm] < pos {
					u.outs[o] = append(u.outs[o], piece{i, ti})
					u.openPos[mm] = pos
					continue
				}
				u.open[mm], u.openPos[mm] = len(u.outs), pos
			}
			u.outs = append(u.outs, []piece{{i, ti}})
		}
	}
	for _, ps := range u.outs {
		tab := &u.tab
		tab.Timestamps, tab.Columns = tab.Timestamps[:0], tab.Columns[:0]
		for _, p := range ps {
			if err := m.readTable(p, tab); err != nil {
				return err
			}
		}
		if !m.withoutDeleted(tab) {
			continue
		}
		if err := gw.WriteTable(tab); err != nil {
			return err
		}
	}
	return nil
}

// readTable appends the rows of source table p to tab, its columns by merged member.
func (m *merger) readTable(p piece, tab *block.Table) error {
	s := &m.srcs[p.src]
	for _, c := range s.tables[p.table] {
		if err := m.rd.Reset(s.b, c); err != nil {
			return fmt.Errorf("source %s: %w", s.b.Dir(), err)
		}
		base := int32(len(tab.Timestamps))
		tab.Timestamps = append(tab.Timestamps, m.rd.Timestamps()...)
		for k := range m.rd.NumColumns() {
			mm := int(s.remap[m.rd.Member(k)]) // tableMembers checked the member
			ci := slices.IndexFunc(tab.Columns, func(c block.Column) bool { return c.Member == mm })
			if ci < 0 {
				ci = len(tab.Columns)
				if ci < cap(tab.Columns) {
					tab.Columns = tab.Columns[:ci+1]
					tab.Columns[ci].Rows, tab.Columns[ci].Values = tab.Columns[ci].Rows[:0], tab.Columns[ci].Values[:0]
				} else {
					tab.Columns = append(tab.Columns, block.Column{})
				}
				tab.Columns[ci].Member = mm
			}
			col := &tab.Columns[ci]
			r0 := len(col.Rows)
			var err error
			if col.Rows, col.Values, err = m.rd.AppendColumn(k, col.Rows, col.Values); err != nil {
				return fmt.Errorf("source %s: %w", s.b.Dir(), err)
			}
			for j := r0; j < len(col.Rows); j++ {
				col.Rows[j] += base
			}
		}
	}
	return nil
}

// overlappingUnaligned writes the unaligned tables of a merge whose sources
// overlap in time: each source's table is carried over without the samples
// that a source listed later has at the same timestamp (in any table), and
// without the rows left empty.
func (m *merger) overlappingUnaligned(gw *block.GroupWriter) error {
	u := &m.unaligned
	for i := range m.srcs {
		s := &m.srcs[i]
		if !s.has {
			continue
		}
		for ti := 1; ti < len(s.tables); ti++ {
			tab := &u.tab
			tab.Timestamps, tab.Columns = tab.Timestamps[:0], tab.Columns[:0]
			if err := m.readTable(piece{i, ti}, tab); err != nil {
				return err
			}
			for ci := range tab.Columns {
				if err := m.dropShadowed(i, tab, &tab.Columns[ci]); err != nil {
					return err
				}
			}
			if m.withoutDeleted(tab) && compactTable(tab) {
				if err := gw.WriteTable(tab); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// dropShadowed removes from col (of tab, from source i) the samples that a source listed after i has at the same timestamp.
func (m *merger) dropShadowed(i int, tab *block.Table, col *block.Column) error {
	u := &m.unaligned
	if len(col.Rows) == 0 {
		return nil
	}
	lo, hi := tab.Timestamps[col.Rows[0]], tab.Timestamps[col.Rows[len(col.Rows)-1]]
	u.drop = u.drop[:0]
	for j := i + 1; j < len(m.srcs); j++ {
		s := &m.srcs[j]
		if !s.has {
			continue
		}
		sm := int(s.inv[col.Member])
		if sm < 0 {
			continue
		}
		for ti := range s.tables {
			if ti > 0 && !slices.Contains(s.members[ti], sm) {
				continue
			}
			for _, c := range s.tables[ti] {
				if c.MaxT < lo || c.MinT > hi {
					continue
				}
				if err := m.rd.Reset(s.b, c); err != nil {
					return fmt.Errorf("source %s: %w", s.b.Dir(), err)
				}
				k := m.rd.Find(sm)
				if k < 0 {
					continue
				}
				var err error
				if u.rows, u.vals, err = m.rd.AppendColumn(k, u.rows[:0], u.vals[:0]); err != nil {
					return fmt.Errorf("source %s: %w", s.b.Dir(), err)
				}
				ts := m.rd.Timestamps()
				for _, r := range u.rows {
					u.drop = append(u.drop, ts[r])
				}
			}
		}
	}
	if len(u.drop) == 0 {
		return nil
	}
	slices.Sort(u.drop)
	w := 0
	for k, r := range col.Rows {
		if _, found := slices.BinarySearch(u.drop, tab.Timestamps[r]); found {
			continue
		}
		col.Rows[w], col.Values[w] = r, col.Values[k]
		w++
	}
	col.Rows, col.Values = col.Rows[:w], col.Values[:w]
	return nil
}

// compactTable removes tab's empty columns and the rows no column uses; it reports whether any sample is left.
func compactTable(tab *block.Table) bool {
	used := make([]bool, len(tab.Timestamps))
	w := 0
	for _, c := range tab.Columns {
		if len(c.Rows) == 0 {
			continue
		}
		for _, r := range c.Rows {
			used[r] = true
		}
		tab.Columns[w] = c
		w++
	}
	clear(tab.Columns[w:]) // not reused: their slices may alias kept ones
	tab.Columns = tab.Columns[:w]
	if w == 0 {
		return false
	}
	newRow := make([]int32, len(tab.Timestamps))
	n := 0
	for r, ok := range used {
		if ok {
			newRow[r] = int32(n)
			tab.Timestamps[n] = tab.Timestamps[r]
			n++
		}
	}
	tab.Timestamps = tab.Timestamps[:n]
	for _, c := range tab.Columns {
		for k, r := range c.Rows {
			c.Rows[k] = newRow[r]
		}
	}
	return true
}
