package head

import (
	"fmt"
	"math/bits"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// tableData is what a table holds in a time range: frozen chunks (shared,
// immutable) and copies of newer rows, taken under the group lock.
type tableData struct {
	chunks []*chunk
	open   []*row
}

// capture collects tb's data in [mint, maxt); mint and maxt are block-range
// boundaries, so every chunk is wholly inside or outside. Called with the lock held.
func (tb *table) capture(mint, maxt int64) tableData {
	var d tableData
	for _, c := range tb.chunks {
		if c.minT >= mint && c.maxT < maxt {
			d.chunks = append(d.chunks, c)
		}
	}
	if b := tb.building; b != nil && b.rows > 0 && b.minT >= mint && b.maxT < maxt {
		d.chunks = append(d.chunks, b.freeze(nil))
	}
	// Rows of the range are in chunks or open, never both: open rows are
	// newer than every sealed row.
	for _, r := range tb.open {
		if r.t >= mint && r.t < maxt {
			cp := &row{t: r.t, n: r.n, vals: append([]float64(nil), r.vals...), present: append([]uint64(nil), r.present...)}
			d.open = append(d.open, cp)
		}
	}
	return d
}

// decode turns captured data into a block table; member maps a column to the member index.
func (d tableData) decode(member func(col int) int) (block.Table, error) {
	var t block.Table
	cols := map[int]*block.Column{}
	col := func(c int) *block.Column {
		bc := cols[c]
		if bc == nil {
			bc = &block.Column{Member: member(c)}
			cols[c] = bc
		}
		return bc
	}
	var ts encoding.TSDecoder
	var vd valDecoder
	for _, ch := range d.chunks {
		base := int32(len(t.Timestamps))
		ts.Reset(ch.ts, ch.rows)
		for ts.Next() {
			t.Timestamps = append(t.Timestamps, ts.At())
		}
		if err := ts.Err(); err != nil {
			return t, fmt.Errorf("decode timestamps: %w", err)
		}
		for c := range ch.cols {
			cd := &ch.cols[c]
			if cd.n == 0 {
				continue
			}
			bc := col(c)
			vd.reset(ch, cd)
			bm := ch.presence(cd)
			r := int(cd.first)
			for i := 0; i < int(cd.n); i++ {
				if r = nextPresent(bm, r); r < 0 {
					return t, errCorruptPresence
				}
				if !vd.next() {
					err := vd.error()
					if err == nil {
						err = errCorruptPresence
					}
					return t, fmt.Errorf("decode values: %w", err)
				}
				bc.Rows = append(bc.Rows, base+int32(r))
				bc.Values = append(bc.Values, vd.at())
				r++
			}
		}
	}
	for _, r := range d.open {
		idx := int32(len(t.Timestamps))
		t.Timestamps = append(t.Timestamps, r.t)
		for w, word := range r.present {
			for word != 0 {
				c := w<<6 + bits.TrailingZeros64(word)
				word &= word - 1
				bc := col(c)
				bc.Rows = append(bc.Rows, idx)
				bc.Values = append(bc.Values, r.vals[c])
			}
		}
	}
	for c := 0; len(cols) > 0; c++ {
		if bc, ok := cols[c]; ok {
			t.Columns = append(t.Columns, *bc)
			delete(cols, c)
		}
	}
	return t, nil
}

// export calls fn with every group's data in [mint, maxt), decoded for a
// block writer, sealing open rows of the range first with seal; the late
// samples it exported are appended to exported (when not nil).
func (h *Head) export(mint, maxt int64, seal bool, exported *[]lateSeries, fn func(*block.Group) error) error {
	type ownData struct {
		member int
		d      tableData
		late   []Sample
	}
	var err error
	h.forEachGroup(func(g *group) {
		if err != nil {
			return
		}
		// Captured under the group's lock, released even on a panic.
		shared, owns, members := func() (tableData, []ownData, []*memSeries) {
			g.mu.Lock()
			defer g.mu.Unlock()
			if seal {
				// Seal rows of the range that are still open (an idle or lagging group).
				g.aligned.sealUpTo(maxt-1, h.cut(), func(r *row, prevHas func(int) bool) { g.onSeal(r, prevHas, &h.counters) })
			}
			shared := g.aligned.capture(mint, maxt)
			var owns []ownData
			members := make([]*memSeries, len(g.members))
			copy(members, g.members)
			for i, s := range members {
				if s == nil {
					continue // a removed member's free column
				}
				od := ownData{member: i}
				if s.own() != nil {
					od.d = s.own().capture(mint, maxt)
				}
				for _, l := range s.late() {
					if l.T >= mint && l.T < maxt {
						od.late = append(od.late, l)
					}
				}
				if len(od.late) > 0 && exported != nil {
					*exported = append(*exported, lateSeries{s: s, samples: od.late})
				}
				if len(od.d.chunks) > 0 || len(od.d.open) > 0 || len(od.late) > 0 {
					owns = append(owns, od)
				}
			}
			return shared, owns, members
		}()

		bg := &block.Group{Key: g.key}
		t0, e := shared.decode(func(c int) int { return c })
		if e != nil {
			err = fmt.Errorf("export group %s: %w", g.key, e)
			return
		}
		bg.Tables = append(bg.Tables, t0)
		for _, od := range owns {
			t, e := od.d.decode(func(int) int { return od.member })
			if e != nil {
				err = fmt.Errorf("export group %s: %w", g.key, e)
				return
			}
			if len(t.Timestamps) > 0 {
				bg.Tables = append(bg.Tables, t)
			}
			if len(od.late) > 0 {
				lt := block.Table{Columns: []block.Column{{Member: od.member}}}
				for i, l := range od.late {
					lt.Timestamps = append(lt.Timestamps, l.T)
					lt.Columns[0].Rows = append(lt.Columns[0].Rows, int32(i))
					lt.Columns[0].Values = append(lt.Columns[0].Values, l.V)
				}
				bg.Tables = append(bg.Tables, lt)
			}
		}
		// Only members with data in the range go into the block.
		used := map[int]bool{}
		for _, t := range bg.Tables {
			for _, c := range t.Columns {
				used[c.Member] = true
			}
		}
		if len(used) == 0 {
			return
		}
		remap := make([]int, len(members))
		for i, s := range members {
			remap[i] = -1
			if used[i] {
				remap[i] = len(bg.Members)
				bg.Members = append(bg.Members, s.lset)
			}
		}
		for ti := range bg.Tables {
			for ci := range bg.Tables[ti].Columns {
				bg.Tables[ti].Columns[ci].Member = remap[bg.Tables[ti].Columns[ci].Member]
			}
		}
		err = fn(bg)
	})
	return err
}

// lateSample is one captured late sample of a series.
type lateSeries struct {
	s       *memSeries
	samples []Sample
}

// captureLate copies every late sample older than before, per series.
func (h *Head) captureLate(before int64) []lateSeries {
	var out []lateSeries
	h.forEachGroup(func(g *group) {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, s := range g.members {
			if s == nil {
				continue
			}
			var ls []Sample
			for _, l := range s.late() {
				if l.T >= before {
					break
				}
				ls = append(ls, l)
			}
			if len(ls) > 0 {
				out = append(out, lateSeries{s: s, samples: ls})
			}
		}
	})
	return out
}

// dropLate removes captured late samples (now in blocks) from their series.
func (h *Head) dropLate(ls []lateSeries) {
	for _, l := range ls {
		g := l.s.g
		func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			drop := map[int64]bool{}
			for _, smp := range l.samples {
				drop[smp.T] = true
			}
			if x := l.s.x; x != nil {
				keep := x.late[:0]
				for _, smp := range x.late {
					if !drop[smp.T] {
						keep = append(keep, smp)
					}
				}
				clear(x.late[len(keep):])
				x.late = keep
				if len(keep) == 0 {
					x.late = nil
				}
				if x.unused() {
					l.s.x = nil
				}
			}
		}()
	}
}

// lateGroups turns captured late samples in [mint, maxt) into block groups:
// each series an unaligned table of its own in its group.
func lateGroups(ls []lateSeries, mint, maxt int64) []*block.Group {
	byGroup := map[*group]*block.Group{}
	var order []*group
	for _, l := range ls {
		var t block.Table
		col := block.Column{}
		for _, smp := range l.samples {
			if smp.T < mint || smp.T >= maxt {
				continue
			}
			col.Rows = append(col.Rows, int32(len(t.Timestamps)))
			col.Values = append(col.Values, smp.V)
			t.Timestamps = append(t.Timestamps, smp.T)
		}
		if len(t.Timestamps) == 0 {
			continue
		}
		bg := byGroup[l.s.g]
		if bg == nil {
			bg = &block.Group{Key: l.s.g.key, Tables: []block.Table{{}}}
			byGroup[l.s.g] = bg
			order = append(order, l.s.g)
		}
		col.Member = len(bg.Members)
		bg.Members = append(bg.Members, l.s.lset)
		t.Columns = []block.Column{col}
		bg.Tables = append(bg.Tables, t)
	}
	out := make([]*block.Group, len(order))
	for i, g := range order {
		out[i] = byGroup[g]
	}
	return out
}
