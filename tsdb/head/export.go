package head

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/prometheus/prometheus/model/labels"

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
// boundaries, so every chunk is wholly inside or outside. The chunk being
// built is copied into fs when fs is not nil (valid until its next use),
// else into the heap. Called with the lock held.
func (tb *table) capture(mint, maxt int64, fs *freezeScratch) tableData {
	var d tableData
	for _, c := range tb.chunks {
		if c.minT >= mint && c.maxT < maxt {
			d.chunks = append(d.chunks, c)
		}
	}
	if b := tb.building; b != nil && b.rows > 0 && b.minT >= mint && b.maxT < maxt {
		if fs != nil {
			// Decoded after the lock is released: the timestamps are copied
			// too, as the builder rewrites its last byte.
			ch := b.freezeInto(fs)
			fs.ts = append(fs.ts[:0], ch.ts...)
			ch.ts = fs.ts
			d.chunks = append(d.chunks, ch)
		} else {
			d.chunks = append(d.chunks, b.freeze(nil))
		}
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

// decode turns captured data into block tables; member maps a column to the
// member index, increasing with the column. A column holds one kind of
// sample in a block table, so a chunk whose column kind differs from the one
// already decoded for that column (a series that changed type, in a
// one-column table) starts another table; the shared table holds floats
// only and decodes into one.
//
// The first table is decoded into sc's buffers when sc is not nil: they are
// the previous group's, whose tables the block writer is done with, so an
// export of many groups does not allocate each one's samples anew.
func (d tableData) decode(member func(col int) int, sc *exportScratch) ([]block.Table, error) {
	var out []block.Table
	var t block.Table
	var kinds []colKind // per column of t: the kind decoded so far (+1; 0 = none)
	var at []int32      // per column: 1 + the index of its block column in cols; 0 = none
	var cols []block.Column
	if sc != nil {
		t.Timestamps, kinds, at, cols = sc.ts[:0], sc.kinds[:0], sc.at[:0], sc.cols[:0]
	}
	col := func(c int) *block.Column {
		for len(at) <= c {
			at = append(at, 0)
		}
		if at[c] == 0 {
			if n := len(cols); n < cap(cols) {
				// A scratch column: its samples' buffers are reused.
				cols = cols[:n+1]
				bc := &cols[n]
				*bc = block.Column{Member: member(c), Rows: bc.Rows[:0], Values: bc.Values[:0]}
			} else {
				cols = append(cols, block.Column{Member: member(c)})
			}
			at[c] = int32(len(cols))
		}
		return &cols[at[c]-1]
	}
	finish := func() {
		if !slices.IsSortedFunc(cols, byMember) {
			slices.SortFunc(cols, byMember) // a column first present in a later chunk
		}
		t.Columns = cols
		if len(t.Timestamps) > 0 {
			out = append(out, t)
		}
		if sc != nil {
			// Kept for the next group; this decode's later tables get their own.
			sc.ts, sc.kinds, sc.at, sc.cols = t.Timestamps, kinds, at, cols
			sc = nil
		}
		t, kinds, at, cols = block.Table{}, nil, nil, nil
	}
	var ts encoding.TSDecoder
	var vd valDecoder
	for _, ch := range d.chunks {
		for c := range ch.cols {
			cd := &ch.cols[c]
			if cd.n == 0 {
				continue
			}
			k := blockKind(cd.kind)
			if c < len(kinds) && kinds[c] != 0 && kinds[c] != k+1 {
				finish()
				break
			}
		}
		for c := range ch.cols {
			if ch.cols[c].n > 0 {
				for len(kinds) <= c {
					kinds = append(kinds, 0)
				}
				kinds[c] = blockKind(ch.cols[c].kind) + 1
			}
		}
		base := int32(len(t.Timestamps))
		ts.Reset(ch.ts, ch.rows)
		for ts.Next() {
			t.Timestamps = append(t.Timestamps, ts.At())
		}
		if err := ts.Err(); err != nil {
			return out, fmt.Errorf("decode timestamps: %w", err)
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
					return out, errCorruptPresence
				}
				if !vd.next() {
					err := vd.error()
					if err == nil {
						err = errCorruptPresence
					}
					return out, fmt.Errorf("decode values: %w", err)
				}
				bc.Rows = append(bc.Rows, base+int32(r))
				switch cd.kind {
				case colHistogram:
					bc.Histograms = append(bc.Histograms, vd.h.At(nil))
				case colFloatHistogram:
					bc.FloatHistograms = append(bc.FloatHistograms, vd.fh.At(nil))
				default:
					bc.Values = append(bc.Values, vd.at())
				}
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
	finish()
	return out, nil
}

func byMember(a, b block.Column) int { return a.Member - b.Member }

// exportScratch holds the buffers an export decodes each group's shared
// table into, reused from group to group (tableData.decode).
type exportScratch struct {
	building freezeScratch // the copy of the shared table's chunk being built
	ts       []int64
	kinds    []colKind
	at       []int32
	cols     []block.Column
	members  []*memSeries // the group's members, copied under its lock
	remap    []int        // head column → block member, -1 when unused
}

// blockKind is the kind of block column a head column of kind k becomes:
// the float encodings are one.
func blockKind(k colKind) colKind {
	if k.isHistogram() {
		return k
	}
	return colXOR
}

// export calls fn with every group's data in [mint, maxt), decoded for a
// block writer, sealing open rows of the range first with seal; the late
// samples it exported are appended to exported (when not nil).
func (h *Head) export(mint, maxt int64, seal bool, exported *[]lateSeries, fn func(*block.Group) error) error {
	type ownData struct {
		member int
		d      tableData
		late   lateSeries
	}
	var err error
	var sc exportScratch
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
			shared := g.aligned.capture(mint, maxt, &sc.building)
			var owns []ownData
			members := append(sc.members[:0], g.members...)
			sc.members = members
			for i, s := range members {
				if s == nil {
					continue // a removed member's free column
				}
				od := ownData{member: i}
				if s.own() != nil {
					od.d = s.own().capture(mint, maxt, nil)
				}
				od.late = s.lateBetween(mint, maxt)
				if !od.late.empty() && exported != nil {
					*exported = append(*exported, od.late)
				}
				if len(od.d.chunks) > 0 || len(od.d.open) > 0 || !od.late.empty() {
					owns = append(owns, od)
				}
			}
			return shared, owns, members
		}()

		bg := &block.Group{Key: g.key}
		t0, e := shared.decode(func(c int) int { return c }, &sc)
		if e != nil {
			err = fmt.Errorf("export group %s: %w", g.key, e)
			return
		}
		if len(t0) == 0 {
			t0 = []block.Table{{}}
		}
		bg.Tables = append(bg.Tables, t0...)
		for _, od := range owns {
			ts, e := od.d.decode(func(int) int { return od.member }, nil)
			if e != nil {
				err = fmt.Errorf("export group %s: %w", g.key, e)
				return
			}
			bg.Tables = append(bg.Tables, ts...)
			bg.Tables = appendLateTables(bg.Tables, od.member, od.late, math.MinInt64, math.MaxInt64)
		}
		// Only members with data in the range go into the block, and the
		// block writer keeps their labels (sized exactly: a million of them
		// are held until the index is written).
		remap := slices.Grow(sc.remap[:0], len(members))[:len(members)]
		sc.remap = remap
		for i := range remap {
			remap[i] = -1
		}
		used := 0
		for _, t := range bg.Tables {
			for _, c := range t.Columns {
				if remap[c.Member] < 0 {
					remap[c.Member] = 0
					used++
				}
			}
		}
		if used == 0 {
			return
		}
		bg.Members = make([]labels.Labels, 0, used)
		for i, s := range members {
			if remap[i] == 0 {
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

// lateSeries is the captured late samples of a series: floats and histograms.
type lateSeries struct {
	s       *memSeries
	samples []Sample
	hists   []HistogramSample
}

func (l lateSeries) empty() bool { return len(l.samples) == 0 && len(l.hists) == 0 }

// lateBetween copies s's late samples in [mint, maxt); called with g.mu held.
func (s *memSeries) lateBetween(mint, maxt int64) lateSeries {
	l := lateSeries{s: s}
	for _, smp := range s.late() {
		if smp.T >= mint && smp.T < maxt {
			l.samples = append(l.samples, smp)
		}
	}
	for _, hs := range s.lateHist() {
		if hs.T >= mint && hs.T < maxt {
			l.hists = append(l.hists, hs)
		}
	}
	return l
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
			if l := s.lateBetween(math.MinInt64, before); !l.empty() {
				out = append(out, l)
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
			for _, hs := range l.hists {
				drop[hs.T] = true
			}
			x := l.s.x
			if x == nil {
				return
			}
			x.sortedLate()
			x.late = slices.DeleteFunc(x.late, func(smp Sample) bool { return drop[smp.T] })
			x.lateH = slices.DeleteFunc(x.lateH, func(hs HistogramSample) bool { return drop[hs.T] })
			if len(x.late) == 0 {
				x.late = nil
			}
			if len(x.lateH) == 0 {
				x.lateH = nil
			}
			if x.unused() {
				l.s.x = nil
			}
		}()
	}
}

// appendLateTables appends to tables a member's late samples in [mint,
// maxt): a one-column table of floats and one of each histogram kind.
func appendLateTables(tables []block.Table, member int, l lateSeries, mint, maxt int64) []block.Table {
	var ft, ht, fht block.Table
	add := func(t *block.Table, ts int64) *block.Column {
		if len(t.Columns) == 0 {
			t.Columns = []block.Column{{Member: member}}
		}
		c := &t.Columns[0]
		c.Rows = append(c.Rows, int32(len(t.Timestamps)))
		t.Timestamps = append(t.Timestamps, ts)
		return c
	}
	for _, smp := range l.samples {
		if smp.T >= mint && smp.T < maxt {
			c := add(&ft, smp.T)
			c.Values = append(c.Values, smp.V)
		}
	}
	for _, hs := range l.hists {
		if hs.T < mint || hs.T >= maxt {
			continue
		}
		if hs.FH != nil {
			c := add(&fht, hs.T)
			c.FloatHistograms = append(c.FloatHistograms, hs.FH)
		} else {
			c := add(&ht, hs.T)
			c.Histograms = append(c.Histograms, hs.H)
		}
	}
	for _, t := range [...]block.Table{ft, ht, fht} {
		if len(t.Timestamps) > 0 {
			tables = append(tables, t)
		}
	}
	return tables
}

// lateGroups turns captured late samples in [mint, maxt) into block groups:
// each series an unaligned table of its own in its group.
func lateGroups(ls []lateSeries, mint, maxt int64) []*block.Group {
	byGroup := map[*group]*block.Group{}
	var order []*group
	for _, l := range ls {
		bg := byGroup[l.s.g]
		if bg == nil {
			bg = &block.Group{Key: l.s.g.key, Tables: []block.Table{{}}}
		}
		n := len(bg.Tables)
		bg.Tables = appendLateTables(bg.Tables, len(bg.Members), l, mint, maxt)
		if len(bg.Tables) == n {
			continue
		}
		if byGroup[l.s.g] == nil {
			byGroup[l.s.g] = bg
			order = append(order, l.s.g)
		}
		bg.Members = append(bg.Members, l.s.lset)
	}
	out := make([]*block.Group, len(order))
	for i, g := range order {
		out[i] = byGroup[g]
	}
	return out
}
