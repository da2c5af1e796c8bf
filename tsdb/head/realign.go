package head

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// A member that lags behind its group (a sender replaying a backlog with its
// shards minutes apart, a late joiner) stores its samples in a table of its
// own until it catches up and rejoins the shared columns (group.append).
// Those own chunks cost a timestamp column each and a second merge on every
// read. The flush writes them realigned into blocks; Realign does the same
// within the head: an own chunk whose samples all fall on rows of the
// group's frozen shared chunks, where the member has no value yet, moves into
// those chunks as the member's column, and the own table goes once empty.

// Realign moves the samples of lagging members into their groups' shared
// chunks where the groups hold rows at their timestamps; it returns how many
// samples moved. Readers keep the chunks they took: frozen chunks are
// replaced, never changed.
func (h *Head) Realign() int {
	cut := h.cut()
	idleBefore := h.opts.Now() - h.opts.OpenWindow.Milliseconds()
	var sc realignScratch
	moved := 0
	h.forEachGroup(func(g *group) {
		g.mu.Lock()
		n, err := g.realign(cut, g.lastAppend < idleBefore, &sc)
		g.mu.Unlock()
		if err != nil {
			h.logger.Warn("realigning a group's lagging members failed; they stay on their own", "group", g.key, "err", err)
		}
		moved += n
	})
	h.counters.realigned.Add(int64(moved))
	return moved
}

// cell is one value of a column at a row of a chunk.
type cell struct {
	col int32
	row uint16
	v   float64
}

// placed is a sample of an own chunk at row row of shared chunk ci.
type placed struct {
	ci  int
	row uint16
	v   float64
}

// realignScratch holds one Realign pass's buffers, reused group to group.
type realignScratch struct {
	tss   map[int][]int64 // decoded timestamps of shared chunks, by index
	adds  map[int][]cell  // cells to add, by shared chunk index
	moves map[*memSeries][]*chunk
	fits  []placed // one own chunk's samples, before they are known to fit
	own   []cell
}

// timestamps returns the decoded timestamps of shared chunk i.
func (sc *realignScratch) timestamps(tb *table, i int) []int64 {
	if tss, ok := sc.tss[i]; ok {
		return tss
	}
	tss := decodeTimestamps(tb.chunks[i].ts, tb.chunks[i].rows)
	sc.tss[i] = tss
	return tss
}

// realign moves what it can of the group's members' own chunks into its
// shared chunks; called with g.mu held. Own chunks are looked at once: what
// does not fit when the shared chunks of its time are frozen never will.
// On an error (a chunk that does not decode) nothing changes. idle tells
// that the group received nothing for the open window.
func (g *group) realign(cut chunkCut, idle bool, sc *realignScratch) (int, error) {
	tb := g.aligned
	if g.nHist == len(g.members) || len(tb.chunks) == 0 && (tb.building == nil || tb.building.rows == 0) {
		return 0, nil
	}
	if sc.tss == nil {
		sc.tss, sc.adds, sc.moves = map[int][]int64{}, map[int][]cell{}, map[*memSeries][]*chunk{}
	}
	clear(sc.tss)
	clear(sc.adds)
	clear(sc.moves)
	frozenMax := int64(math.MinInt64)
	if len(tb.chunks) > 0 {
		frozenMax = tb.chunks[len(tb.chunks)-1].maxT
	}
	early := false // whether the shared chunk being built is frozen now
	for _, s := range g.members {
		if s == nil || s.x == nil || s.x.own == nil || s.x.hist || s.x.unaligned {
			continue
		}
		x, own := s.x, s.x.own
		if b := own.building; b != nil && b.rows > 0 && b.hist == nil && len(own.open) == 0 {
			// Rejoined: nothing more comes to its own table.
			own.chunks = append(own.chunks, cut.freeze(b))
			own.building = nil
		}
		// A rejoined member's last own chunks overlap the shared chunk
		// being built; they would wait for it to fill, and when the
		// sender is done catching up (or idle) it may not fill before the
		// flush. It is frozen short instead when the group is idle or the
		// chunk half full (a member that keeps leaving and rejoining
		// makes shared chunks at most twice as many), once per rejoining:
		// own chunks are examined once.
		if b := tb.building; b != nil && b.rows > 0 && b.hist == nil && (idle || 2*b.rows >= cut.rows) {
			for _, o := range own.chunks {
				early = early || o.maxT > frozenMax && o.maxT <= b.maxT && !(x.realignedAny && o.maxT <= x.realignedTo)
			}
		}
	}
	if early {
		tb.chunks = append(tb.chunks, cut.freeze(tb.building))
		tb.building = nil
		frozenMax = tb.chunks[len(tb.chunks)-1].maxT
	}
	moved := 0
	for _, s := range g.members {
		if s == nil || s.x == nil || s.x.own == nil || s.x.hist {
			continue
		}
		x, own := s.x, s.x.own
		for _, o := range own.chunks {
			if x.realignedAny && o.maxT <= x.realignedTo || o.maxT > frozenMax {
				continue
			}
			x.realignedTo, x.realignedAny = o.maxT, true
			if !sc.fit(tb, o, int(s.col)) {
				continue
			}
			for _, p := range sc.fits {
				sc.adds[p.ci] = append(sc.adds[p.ci], cell{col: s.col, row: p.row, v: p.v})
			}
			sc.moves[s] = append(sc.moves[s], o)
			moved += len(sc.fits)
		}
	}
	if moved == 0 {
		return 0, nil
	}
	rebuilt := make(map[int]*chunk, len(sc.adds))
	for ci, cells := range sc.adds {
		nc, err := tb.chunks[ci].withCells(cells, cut.store)
		if err != nil {
			return 0, fmt.Errorf("shared chunk from %d: %w", tb.chunks[ci].minT, err)
		}
		rebuilt[ci] = nc
	}
	for ci, nc := range rebuilt {
		tb.chunks[ci] = nc
	}
	for s, os := range sc.moves {
		x := s.x
		x.own.chunks = slices.DeleteFunc(x.own.chunks, func(c *chunk) bool { return slices.Contains(os, c) })
		if own := x.own; !x.unaligned && len(own.chunks) == 0 && len(own.open) == 0 && (own.building == nil || own.building.rows == 0) {
			x.own, x.realignedTo, x.realignedAny = nil, 0, false
			if x.unused() {
				s.x = nil
			}
		}
	}
	return moved, nil
}

// fit reports whether every sample of own chunk o falls on a row of the
// shared table's frozen chunks where column col has no value; sc.fits then
// holds them, placed.
func (sc *realignScratch) fit(tb *table, o *chunk, col int) bool {
	if len(o.cols) != 1 || o.cols[0].n == 0 || o.cols[0].kind.isHistogram() {
		return false
	}
	otss := decodeTimestamps(o.ts, o.rows)
	if otss == nil {
		return false
	}
	var err error
	if sc.own, err = o.appendCells(sc.own[:0], 0); err != nil {
		return false
	}
	sc.fits = sc.fits[:0]
	ci := 0
	for _, c := range sc.own {
		t := otss[c.row]
		for ci < len(tb.chunks) && tb.chunks[ci].maxT < t {
			ci++
		}
		if ci == len(tb.chunks) || tb.chunks[ci].minT > t {
			return false
		}
		r, found := slices.BinarySearch(sc.timestamps(tb, ci), t)
		if !found || tb.chunks[ci].hasCell(col, r) {
			return false
		}
		sc.fits = append(sc.fits, placed{ci: ci, row: uint16(r), v: c.v})
	}
	return true
}

// hasCell reports whether column c has a value at row r.
func (ch *chunk) hasCell(c, r int) bool {
	cd := ch.col(c)
	if cd == nil {
		return false
	}
	bm := ch.presence(cd)
	if bm == nil {
		return r >= int(cd.first) && r < int(cd.first+cd.n)
	}
	w := r >> 6
	return w < len(bm) && bm[w]&(1<<(uint(r)&63)) != 0
}

// appendCells appends the values of float column c, with their rows, to dst.
func (ch *chunk) appendCells(dst []cell, c int) ([]cell, error) {
	cd := ch.col(c)
	if cd == nil {
		return dst, nil
	}
	if cd.kind.isHistogram() {
		return dst, fmt.Errorf("column %d holds histograms", c)
	}
	var vd valDecoder
	vd.reset(ch, cd)
	bm := ch.presence(cd)
	r := int(cd.first)
	for i := 0; i < int(cd.n); i++ {
		if r = nextPresent(bm, r); r < 0 || r >= ch.rows {
			return dst, errCorruptPresence
		}
		if !vd.next() {
			if err := vd.error(); err != nil {
				return dst, err
			}
			return dst, errCorruptPresence
		}
		dst = append(dst, cell{col: int32(c), row: uint16(r), v: vd.at()})
		r++
	}
	return dst, nil
}

// withCells returns a copy of ch with cells added to its columns (at rows
// where they have no value), the changed columns re-encoded, the others'
// bytes copied; placed in store like a frozen chunk.
func (ch *chunk) withCells(cells []cell, store *chunkStore) (*chunk, error) {
	slices.SortFunc(cells, func(a, b cell) int {
		if a.col != b.col {
			return cmp.Compare(a.col, b.col)
		}
		return cmp.Compare(a.row, b.row)
	})
	b := newChunkBuilder(0)
	var old []cell
	for i := 0; i < len(cells); {
		c := cells[i].col
		j := i
		for j < len(cells) && cells[j].col == c {
			j++
		}
		var err error
		if old, err = ch.appendCells(old[:0], int(c)); err != nil {
			return nil, err
		}
		add := cells[i:j]
		for len(old) > 0 || len(add) > 0 {
			var next cell
			switch {
			case len(add) == 0 || len(old) > 0 && old[0].row < add[0].row:
				next, old = old[0], old[1:]
			case len(old) > 0 && old[0].row == add[0].row:
				return nil, fmt.Errorf("column %d has a value at row %d already", c, add[0].row)
			default:
				next, add = add[0], add[1:]
			}
			b.appendCell(int(c), next.row, next.v)
		}
		i = j
	}
	sc := freezePool.Get().(*freezeScratch)
	defer freezePool.Put(sc)
	n := max(len(ch.cols), len(b.cols))
	sc.cols = slices.Grow(sc.cols[:0], n)[:n]
	clear(sc.cols)
	sc.data, sc.bits = sc.data[:0], sc.bits[:0]
	for k := 0; k < n; k++ {
		if cb := b.col(k); cb != nil {
			sc.cols[k] = sc.addCol(cb, b.stream(cb), b.bitmap(cb))
			continue
		}
		cd := ch.col(k)
		if cd == nil {
			continue
		}
		nd := *cd
		nd.off = uint32(len(sc.data))
		sc.data = append(sc.data, ch.vals(cd)...)
		nd.end = uint32(len(sc.data))
		if bm := ch.presence(cd); bm != nil {
			nd.boff = uint32(len(sc.bits))
			sc.bits = append(sc.bits, bm...)
			nd.bend = uint32(len(sc.bits))
		} else {
			nd.boff, nd.bend = 0, 0
		}
		sc.cols[k] = nd
	}
	nc := &chunk{minT: ch.minT, maxT: ch.maxT, rows: ch.rows, ts: ch.ts, cols: sc.cols, data: sc.data, bits: sc.bits}
	if !store.place(nc) {
		nc.cols, nc.bits, nc.ts, nc.data = heapCopy(sc.cols), heapCopy(sc.bits), heapCopy(ch.ts), heapCopy(sc.data)
	}
	return nc, nil
}
