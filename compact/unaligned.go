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
	tabs    []block.Table
	ntab    int // tables of tabs in use (readPieces)
	drop    []int64
	rows    []int32
}

// concatUnaligned writes the unaligned tables of a merge whose sources do not
// overlap in time: a member's single-column tables are concatenated across
// sources (each source's are later than the previous ones), into one table
// while its samples keep their kind; other tables are carried over. Each
// output table (one series) is decoded whole.
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
		if err := m.readPieces(ps); err != nil {
			return err
		}
		for i := range u.ntab {
			tab := &u.tabs[i]
			if len(tab.Timestamps) == 0 || !m.withoutDeleted(tab) {
				continue
			}
			if err := gw.WriteTable(tab); err != nil {
				return err
			}
		}
	}
	return nil
}

// readPieces reads the source tables ps one after the other into
// u.tabs[:u.ntab]: one table, or a table more wherever a chunk holds a
// column of another kind than its member's column in the table being read
// (a series that turned from floats into native histograms).
func (m *merger) readPieces(ps []piece) error {
	m.unaligned.ntab = 0
	m.newTable()
	for _, p := range ps {
		if err := m.readTable(p); err != nil {
			return err
		}
	}
	return nil
}

// newTable starts the next table of u.tabs, reusing its buffers.
func (m *merger) newTable() *block.Table {
	u := &m.unaligned
	if u.ntab == len(u.tabs) {
		u.tabs = append(u.tabs, block.Table{})
	}
	tab := &u.tabs[u.ntab]
	u.ntab++
	tab.Timestamps, tab.Columns = tab.Timestamps[:0], tab.Columns[:0]
	return tab
}

// readTable appends the rows of source table p to the last table of
// u.tabs, its columns by merged member, starting a new table where a chunk
// holds a column of another kind than its member's column in the last one.
func (m *merger) readTable(p piece) error {
	u := &m.unaligned
	s := &m.srcs[p.src]
	for _, c := range s.tables[p.table] {
		if err := m.rd.Reset(s.b, c); err != nil {
			return fmt.Errorf("source %s: %w", s.b.Dir(), err)
		}
		tab := &u.tabs[u.ntab-1]
		for k := range m.rd.NumColumns() {
			mm := int(s.remap[m.rd.Member(k)]) // tableMembers checked the member
			if ci := columnOf(tab, mm); ci >= 0 && len(tab.Columns[ci].Rows) > 0 && tab.Columns[ci].Kind() != m.rd.Kind(k) {
				tab = m.newTable()
				break
			}
		}
		base := int32(len(tab.Timestamps))
		tab.Timestamps = append(tab.Timestamps, m.rd.Timestamps()...)
		for k := range m.rd.NumColumns() {
			mm := int(s.remap[m.rd.Member(k)])
			ci := columnOf(tab, mm)
			if ci < 0 {
				ci = len(tab.Columns)
				if ci < cap(tab.Columns) {
					tab.Columns = tab.Columns[:ci+1]
					c := &tab.Columns[ci]
					c.Rows, c.Values, c.Histograms, c.FloatHistograms = c.Rows[:0], c.Values[:0], c.Histograms[:0], c.FloatHistograms[:0]
				} else {
					tab.Columns = append(tab.Columns, block.Column{})
				}
				tab.Columns[ci].Member = mm
			}
			col := &tab.Columns[ci]
			r0 := len(col.Rows)
			if err := m.rd.ReadColumn(k, col); err != nil {
				return fmt.Errorf("source %s: %w", s.b.Dir(), err)
			}
			for j := r0; j < len(col.Rows); j++ {
				col.Rows[j] += base
			}
		}
	}
	return nil
}

// columnOf returns the index of member's column in tab, or -1.
func columnOf(tab *block.Table, member int) int {
	return slices.IndexFunc(tab.Columns, func(c block.Column) bool { return c.Member == member })
}

// keepSamples keeps, in order, the samples of c whose row keep accepts. It
// swaps histograms instead of copying them, so that no histogram is held
// twice by the slice and its spare capacity (which ReadColumn reuses).
func keepSamples(c *block.Column, keep func(r int32) bool) {
	kind := c.Kind()
	w := 0
	for k, r := range c.Rows {
		if !keep(r) {
			continue
		}
		c.Rows[w] = r
		switch kind {
		case block.KindHistogram:
			c.Histograms[w], c.Histograms[k] = c.Histograms[k], c.Histograms[w]
		case block.KindFloatHistogram:
			c.FloatHistograms[w], c.FloatHistograms[k] = c.FloatHistograms[k], c.FloatHistograms[w]
		default:
			c.Values[w] = c.Values[k]
		}
		w++
	}
	c.Rows = c.Rows[:w]
	switch kind {
	case block.KindHistogram:
		c.Histograms = c.Histograms[:w]
	case block.KindFloatHistogram:
		c.FloatHistograms = c.FloatHistograms[:w]
	default:
		c.Values = c.Values[:w]
	}
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
			if err := m.readPieces([]piece{{i, ti}}); err != nil {
				return err
			}
			for x := range u.ntab {
				tab := &u.tabs[x]
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
				if u.rows, err = m.rd.AppendRows(k, u.rows[:0]); err != nil {
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
	keepSamples(col, func(r int32) bool {
		_, found := slices.BinarySearch(u.drop, tab.Timestamps[r])
		return !found
	})
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
