package block

import (
	"errors"
	"fmt"

	"github.com/prometheus/prometheus/model/labels"
)

// GroupWriter writes the groups of a block that WriteStream is writing,
// chunk by chunk: BeginGroup; for each table BeginTable, then its chunks
// (BeginChunk, AddColumn per column in ascending member order, EndChunk)
// or the whole table with WriteTable; EndGroup. Groups are not realigned
// (see Write). Its methods check what Write checks and fail on misuse.
type GroupWriter struct {
	w       *blockWriter
	gr      *groupRec // the open group (&rec), nil if none
	rec     groupRec
	ti      int   // the open table, -1 before BeginTable
	lastT   int64 // the last timestamp of the open table's chunks, if hasRows
	hasRows bool
	inChunk bool
	chunkTS []int64 // the open chunk's timestamps
	member  int     // the open chunk's last column's member, -1 if none
	cols    []colInput
	rel     []int32
	pos     []int
}

var errOrder = errors.New("block: GroupWriter calls out of order")

// ChunkRows returns the maximum rows of a chunk (WriteOptions.ChunkRows).
func (g *GroupWriter) ChunkRows() int { return g.w.opts.ChunkRows }

// ChunkEnd returns the end (exclusive) of the chunk that starts at row r0 of a table of n rows, as Write splits tables.
func (g *GroupWriter) ChunkEnd(r0, n int) int { return chunkEnd(r0, n, g.w.opts.ChunkRows) }

// BeginGroup starts the group key with members (copied).
func (g *GroupWriter) BeginGroup(key string, members []labels.Labels) error {
	if g.gr != nil {
		return fmt.Errorf("begin group %q: group %q not ended: %w", key, g.gr.key, errOrder)
	}
	g.rec = groupRec{key: key, members: make([]labels.Labels, len(members)), memberTables: make([][]memberTable, len(members))}
	for i, l := range members {
		g.rec.members[i] = l.Copy()
	}
	g.gr, g.ti = &g.rec, -1
	return nil
}

// BeginTable starts the group's next table; the first is the shared one.
func (g *GroupWriter) BeginTable() error {
	if g.gr == nil || g.inChunk {
		return fmt.Errorf("begin table: %w", errOrder)
	}
	g.gr.tables = append(g.gr.tables, nil)
	g.ti, g.hasRows = len(g.gr.tables)-1, false
	return nil
}

// BeginChunk starts a chunk of the open table with timestamps ts, which must
// increase strictly, follow the table's previous chunks and lie in the
// block's range; ts must not change until EndChunk.
func (g *GroupWriter) BeginChunk(ts []int64) error {
	if g.gr == nil || g.ti < 0 || g.inChunk || len(ts) == 0 {
		return fmt.Errorf("begin chunk of %d rows: %w", len(ts), errOrder)
	}
	for i, t := range ts {
		if t < g.w.mint || t >= g.w.maxt {
			return fmt.Errorf("group %q table %d: timestamp %d outside [%d, %d)", g.gr.key, g.ti, t, g.w.mint, g.w.maxt)
		}
		if (i > 0 && t <= ts[i-1]) || (i == 0 && g.hasRows && t <= g.lastT) {
			return fmt.Errorf("group %q table %d: timestamps not strictly increasing at %d", g.gr.key, g.ti, t)
		}
	}
	g.beginChunk(ts)
	return nil
}

func (g *GroupWriter) beginChunk(ts []int64) {
	g.w.enc.begin(ts)
	g.inChunk, g.chunkTS, g.member = true, ts, -1
}

// AddColumn adds member's column to the open chunk: rows (relative to the
// chunk's first row, strictly ascending, at least one) and their values.
func (g *GroupWriter) AddColumn(member int, rows []int32, vals []float64) error {
	if !g.inChunk {
		return fmt.Errorf("add column: %w", errOrder)
	}
	if member <= g.member || member >= len(g.gr.members) {
		return fmt.Errorf("group %q table %d: member %d after %d of %d", g.gr.key, g.ti, member, g.member, len(g.gr.members))
	}
	if len(rows) == 0 || len(rows) != len(vals) {
		return fmt.Errorf("group %q table %d member %d: %d rows but %d values", g.gr.key, g.ti, member, len(rows), len(vals))
	}
	for i, r := range rows {
		if r < 0 || int(r) >= len(g.chunkTS) || (i > 0 && r <= rows[i-1]) {
			return fmt.Errorf("group %q table %d member %d: bad row %d at %d", g.gr.key, g.ti, member, r, i)
		}
	}
	g.addColumn(colInput{member: member, rows: rows, vals: vals})
	return nil
}

func (g *GroupWriter) addColumn(c colInput) {
	g.w.enc.add(c)
	g.member = c.member
	g.w.meta.Stats.NumSamples += uint64(len(c.rows))
}

// EndChunk writes the open chunk; a chunk without columns is dropped.
func (g *GroupWriter) EndChunk() error {
	if !g.inChunk {
		return fmt.Errorf("end chunk: %w", errOrder)
	}
	g.inChunk = false
	if g.member < 0 {
		return nil
	}
	ts := g.chunkTS
	off, err := g.w.writeChunk()
	if err != nil {
		return err
	}
	cms := &g.gr.tables[g.ti]
	ci := len(*cms)
	*cms = append(*cms, chunkMeta{minT: ts[0], maxT: ts[len(ts)-1], off: off})
	for _, m := range g.w.enc.members {
		mt := g.gr.memberTables[m]
		if n := len(mt); n > 0 && mt[n-1].table == g.ti {
			mt[n-1].last = ci
		} else {
			g.gr.memberTables[m] = append(mt, memberTable{table: g.ti, first: ci, last: ci})
		}
	}
	g.lastT, g.hasRows, g.chunkTS = ts[len(ts)-1], true, nil
	return nil
}

// WriteTable writes tb as the group's next table (BeginTable and its chunks, split as Write splits tables).
func (g *GroupWriter) WriteTable(tb *Table) error {
	if err := g.BeginTable(); err != nil {
		return err
	}
	if err := validateTable(g.gr.key, g.ti, tb, len(g.gr.members), g.w.mint, g.w.maxt); err != nil {
		return err
	}
	return g.writeTable(tb)
}

// EndGroup ends the open group.
func (g *GroupWriter) EndGroup() error {
	if g.gr == nil || g.inChunk {
		return fmt.Errorf("end group: %w", errOrder)
	}
	g.w.meta.Stats.NumGroups++
	g.w.meta.Stats.NumSeries += uint64(len(g.gr.members))
	g.w.groups = append(g.w.groups, g.rec)
	g.gr, g.rec = nil, groupRec{}
	return nil
}

// addGroup validates and realigns a group and writes it (Write's GroupSource callback).
func (g *GroupWriter) addGroup(gr *Group) error {
	for ti := range gr.Tables {
		if err := validateTable(gr.Key, ti, &gr.Tables[ti], len(gr.Members), g.w.mint, g.w.maxt); err != nil {
			return err
		}
	}
	gr = realign(gr)
	if err := g.BeginGroup(gr.Key, gr.Members); err != nil {
		return err
	}
	for ti := range gr.Tables {
		if err := g.BeginTable(); err != nil {
			return err
		}
		if err := g.writeTable(&gr.Tables[ti]); err != nil {
			return err
		}
	}
	return g.EndGroup()
}

// writeTable writes the chunks of the open table from tb, validated.
func (g *GroupWriter) writeTable(tb *Table) error {
	g.pos = append(g.pos[:0], make([]int, len(tb.Columns))...)
	for r0, r1 := 0, 0; r0 < len(tb.Timestamps); r0 = r1 {
		r1 = chunkEnd(r0, len(tb.Timestamps), g.w.opts.ChunkRows)
		g.cols, g.rel = g.cols[:0], g.rel[:0]
		for ci := range tb.Columns {
			c := &tb.Columns[ci]
			p := g.pos[ci]
			q := p
			for q < len(c.Rows) && int(c.Rows[q]) < r1 {
				q++
			}
			g.pos[ci] = q
			if q == p {
				continue
			}
			s := len(g.rel)
			for _, r := range c.Rows[p:q] {
				g.rel = append(g.rel, r-int32(r0))
			}
			g.cols = append(g.cols, colInput{member: c.Member, rows: g.rel[s:len(g.rel):len(g.rel)], vals: c.Values[p:q]})
		}
		if len(g.cols) == 0 {
			continue
		}
		sortColumns(g.cols)
		g.beginChunk(tb.Timestamps[r0:r1])
		for _, c := range g.cols {
			g.addColumn(c)
		}
		if err := g.EndChunk(); err != nil {
			return err
		}
	}
	return nil
}

// validateTable checks table ti of group key, of nm members.
func validateTable(key string, ti int, tb *Table, nm int, mint, maxt int64) error {
	for i, t := range tb.Timestamps {
		if t < mint || t >= maxt {
			return fmt.Errorf("group %q table %d: timestamp %d outside [%d, %d)", key, ti, t, mint, maxt)
		}
		if i > 0 && t <= tb.Timestamps[i-1] {
			return fmt.Errorf("group %q table %d: timestamps not strictly increasing at row %d", key, ti, i)
		}
	}
	seen := make(map[int]bool, len(tb.Columns))
	for _, c := range tb.Columns {
		if c.Member < 0 || c.Member >= nm || seen[c.Member] {
			return fmt.Errorf("group %q table %d: bad or repeated member %d", key, ti, c.Member)
		}
		seen[c.Member] = true
		if len(c.Rows) != len(c.Values) {
			return fmt.Errorf("group %q table %d member %d: %d rows but %d values", key, ti, c.Member, len(c.Rows), len(c.Values))
		}
		for i, r := range c.Rows {
			if r < 0 || int(r) >= len(tb.Timestamps) || (i > 0 && r <= c.Rows[i-1]) {
				return fmt.Errorf("group %q table %d member %d: bad row %d at %d", key, ti, c.Member, r, i)
			}
		}
	}
	return nil
}
