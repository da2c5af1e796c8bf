package block

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
)

// GroupWriter writes the groups of a block that WriteStream is writing,
// chunk by chunk: BeginGroup; for each table BeginTable, then its chunks
// (BeginChunk, AddColumn, AddHistogramColumn or AddFloatHistogramColumn per
// column in ascending member order, EndChunk) or the whole table with
// WriteTable; EndGroup. A chunk's column holds samples of one kind, but a
// member's columns in different chunks of a table may differ in kind. Groups
// are not realigned (see Write). Its methods check what Write checks and
// fail on misuse.
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

// BeginGroup starts the group key with members: copied, unless
// WriteOptions.KeepLabels, which keeps the slice itself until the index is
// written (the source must not change it).
func (g *GroupWriter) BeginGroup(key string, members []labels.Labels) error {
	if g.gr != nil {
		return fmt.Errorf("begin group %q: group %q not ended: %w", key, g.gr.key, errOrder)
	}
	g.rec = groupRec{key: key, members: members, spans: newMemberSpans(len(members))}
	if !g.w.opts.KeepLabels {
		g.rec.members = make([]labels.Labels, len(members))
		for i, l := range members {
			g.rec.members[i] = l.Copy()
		}
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

// AddColumn adds member's float column to the open chunk: rows (relative to
// the chunk's first row, strictly ascending, at least one) and their values.
func (g *GroupWriter) AddColumn(member int, rows []int32, vals []float64) error {
	if err := g.checkColumn(member, rows, len(vals), "values"); err != nil {
		return err
	}
	return g.addColumn(colInput{member: member, rows: rows, vals: vals})
}

// AddHistogramColumn adds member's column of integer native histograms
// (non-nil, encoded before it returns) to the open chunk, as AddColumn adds
// float values; the spans of each histogram must describe its buckets.
func (g *GroupWriter) AddHistogramColumn(member int, rows []int32, hs []*histogram.Histogram) error {
	if err := g.checkColumn(member, rows, len(hs), "histograms"); err != nil {
		return err
	}
	if i := slices.Index(hs, nil); i >= 0 {
		return fmt.Errorf("group %q table %d member %d: nil histogram at %d", g.gr.key, g.ti, member, i)
	}
	return g.addColumn(colInput{member: member, rows: rows, hs: hs})
}

// AddFloatHistogramColumn adds member's column of float native histograms, as AddHistogramColumn adds integer ones.
func (g *GroupWriter) AddFloatHistogramColumn(member int, rows []int32, fhs []*histogram.FloatHistogram) error {
	if err := g.checkColumn(member, rows, len(fhs), "float histograms"); err != nil {
		return err
	}
	if i := slices.Index(fhs, nil); i >= 0 {
		return fmt.Errorf("group %q table %d member %d: nil float histogram at %d", g.gr.key, g.ti, member, i)
	}
	return g.addColumn(colInput{member: member, rows: rows, fhs: fhs})
}

// checkColumn checks a column of member with rows and n samples (what they are) added to the open chunk.
func (g *GroupWriter) checkColumn(member int, rows []int32, n int, what string) error {
	if !g.inChunk {
		return fmt.Errorf("add column: %w", errOrder)
	}
	if member <= g.member || member >= len(g.gr.members) {
		return fmt.Errorf("group %q table %d: member %d after %d of %d", g.gr.key, g.ti, member, g.member, len(g.gr.members))
	}
	if len(rows) == 0 || len(rows) != n {
		return fmt.Errorf("group %q table %d member %d: %d rows but %d %s", g.gr.key, g.ti, member, len(rows), n, what)
	}
	for i, r := range rows {
		if r < 0 || int(r) >= len(g.chunkTS) || (i > 0 && r <= rows[i-1]) {
			return fmt.Errorf("group %q table %d member %d: bad row %d at %d", g.gr.key, g.ti, member, r, i)
		}
	}
	return nil
}

func (g *GroupWriter) addColumn(c colInput) error {
	if err := g.w.enc.add(c); err != nil {
		return fmt.Errorf("group %q table %d: %w", g.gr.key, g.ti, err)
	}
	g.member = c.member
	g.w.meta.Stats.NumSamples += uint64(len(c.rows))
	return nil
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
		g.gr.spans.add(m, g.ti, ci)
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
			ci := colInput{member: c.Member, rows: g.rel[s:len(g.rel):len(g.rel)]}
			switch c.Kind() {
			case KindHistogram:
				ci.hs = c.Histograms[p:q]
			case KindFloatHistogram:
				ci.fhs = c.FloatHistograms[p:q]
			default:
				ci.vals = c.Values[p:q]
			}
			g.cols = append(g.cols, ci)
		}
		if len(g.cols) == 0 {
			continue
		}
		sortColumns(g.cols)
		g.beginChunk(tb.Timestamps[r0:r1])
		for _, c := range g.cols {
			if err := g.addColumn(c); err != nil {
				g.inChunk = false
				return err
			}
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
	var seen []bool // members seen, once the columns are out of member order
	for i, c := range tb.Columns {
		if c.Member < 0 || c.Member >= nm {
			return fmt.Errorf("group %q table %d: bad or repeated member %d", key, ti, c.Member)
		}
		if seen == nil && i > 0 && c.Member <= tb.Columns[i-1].Member {
			seen = make([]bool, nm)
			for _, p := range tb.Columns[:i] {
				seen[p.Member] = true
			}
		}
		if seen != nil {
			if seen[c.Member] {
				return fmt.Errorf("group %q table %d: bad or repeated member %d", key, ti, c.Member)
			}
			seen[c.Member] = true
		}
		if err := validateSamples(&c); err != nil {
			return fmt.Errorf("group %q table %d member %d: %w", key, ti, c.Member, err)
		}
		for i, r := range c.Rows {
			if r < 0 || int(r) >= len(tb.Timestamps) || (i > 0 && r <= c.Rows[i-1]) {
				return fmt.Errorf("group %q table %d member %d: bad row %d at %d", key, ti, c.Member, r, i)
			}
		}
	}
	return nil
}

// validateSamples checks that exactly one of c's sample slices has an entry
// per row (none has any when c has no rows), and that no histogram is nil.
func validateSamples(c *Column) error {
	nv, nh, nf := len(c.Values), len(c.Histograms), len(c.FloatHistograms)
	n := len(c.Rows)
	switch {
	case nv == n && nh == 0 && nf == 0:
	case nh == n && nv == 0 && nf == 0:
		if i := slices.Index(c.Histograms, nil); i >= 0 {
			return fmt.Errorf("nil histogram at %d", i)
		}
	case nf == n && nv == 0 && nh == 0:
		if i := slices.Index(c.FloatHistograms, nil); i >= 0 {
			return fmt.Errorf("nil float histogram at %d", i)
		}
	default:
		return fmt.Errorf("%d rows but %d values, %d histograms and %d float histograms", n, nv, nh, nf)
	}
	return nil
}
