package head

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// A table is a set of value columns that share one timestamp column: the
// aligned members of a group, or a single unaligned member. New samples land in
// open rows (uncompressed, sorted by timestamp, any arrival order); rows older
// than the open window are sealed into the chunk being built, which is frozen
// into an immutable chunk every chunkRows rows. All access happens under the
// owning group's lock; frozen chunks may be read without it.
type table struct {
	ncols      int
	open       []*row // sorted by t
	free       []*row // recycled rows
	building   *chunkBuilder
	chunks     []*chunk // frozen chunks, in time order
	maxT       int64    // newest timestamp accepted
	sealedMaxT int64    // newest sealed row; samples at or behind it cannot be placed
	rowsSealed int      // previous sealed row's presence count (alignment heuristics)
}

func newTable(ncols int) *table {
	return &table{ncols: ncols, maxT: math.MinInt64, sealedMaxT: math.MinInt64}
}

// row is one open timestamp with a value slot per column.
type row struct {
	t       int64
	n       int // members present
	vals    []float64
	present []uint64
}

func (r *row) has(c int) bool {
	w := c >> 6
	return w < len(r.present) && r.present[w]&(1<<(uint(c)&63)) != 0
}

// search returns the index of the open row at t, or where it would go, and
// whether it exists: the newest row is checked first (most samples land on
// it or after it), older ones by binary search.
func (tb *table) search(t int64) (int, bool) {
	n := len(tb.open)
	if n == 0 || tb.open[n-1].t < t {
		return n, false
	}
	if tb.open[n-1].t == t {
		return n - 1, true
	}
	return slices.BinarySearchFunc(tb.open[:n-1], t, func(r *row, t int64) int { return cmp.Compare(r.t, t) })
}

// hasRow reports whether an open row at t exists.
func (tb *table) hasRow(t int64) bool {
	_, ok := tb.search(t)
	return ok
}

// openRow returns the open row at t, nil if there is none.
func (tb *table) openRow(t int64) *row {
	if i, ok := tb.search(t); ok {
		return tb.open[i]
	}
	return nil
}

// maxFreeRows is how many sealed rows a table keeps for reuse. Once a
// group's scrapes are steady, each scrape opens one row while the row before
// is still open and seals that one: one free row serves every scrape (the
// first minute of a group, or a lagging sender, opens more, which are then
// dropped rather than kept: a row holds 8 bytes per member).
const maxFreeRows = 1

// recycle keeps sealed row r for reuse, unless enough rows are kept.
func (tb *table) recycle(r *row) {
	if len(tb.free) < maxFreeRows {
		tb.free = append(tb.free, r)
	}
}

// completeScan bounds the rows completeBefore looks at: a row completed
// further back is sealed when it completes (group.append) or by the window.
const completeScan = 16

// completeBefore returns the time of the newest open row, other than the
// newest, that holds all full columns, among the completeScan rows before
// the newest; math.MinInt64 if there is none.
func (tb *table) completeBefore(full int) int64 {
	for i := len(tb.open) - 2; i >= 0 && i >= len(tb.open)-1-completeScan; i-- {
		if tb.open[i].n >= full {
			return tb.open[i].t
		}
	}
	return math.MinInt64
}

// rowFor returns the open row at t, creating it if needed, and whether it was created.
func (tb *table) rowFor(t int64) (*row, bool) {
	i, found := tb.search(t)
	if found {
		return tb.open[i], false
	}
	var r *row
	if n := len(tb.free); n > 0 {
		r = tb.free[n-1]
		tb.free = tb.free[:n-1]
	} else {
		r = &row{}
	}
	r.t, r.n = t, 0
	words := (tb.ncols + 63) >> 6
	if cap(r.present) < words {
		r.present = make([]uint64, words)
	} else {
		r.present = r.present[:words]
		clear(r.present)
	}
	if cap(r.vals) < tb.ncols {
		r.vals = make([]float64, tb.ncols, max(tb.ncols, 8))
	} else {
		r.vals = r.vals[:tb.ncols]
	}
	tb.open = slices.Insert(tb.open, i, r)
	return r, true
}

// set stores column c's value in row r; the column must be absent from it.
func (tb *table) set(r *row, c int, v float64) {
	if c >= len(r.vals) {
		r.vals = append(r.vals, make([]float64, c+1-len(r.vals))...)
	}
	w := c >> 6
	if w >= len(r.present) {
		r.present = append(r.present, make([]uint64, w+1-len(r.present))...)
	}
	r.vals[c] = v
	r.present[w] |= 1 << (uint(c) & 63)
	r.n++
	if r.t > tb.maxT {
		tb.maxT = r.t
	}
}

// sealedRow reports whether the table's sealed rows (its chunks and the
// chunk being built) hold a row at t, decoding timestamps only: most samples
// looked up there (an out-of-order flood) match no row, so no value is decoded.
func (tb *table) sealedRow(t int64) bool {
	if t > tb.sealedMaxT {
		return false
	}
	if b := tb.building; b != nil && b.rows > 0 && t >= b.minT {
		return t <= b.maxT && hasTimestamp(b.ts.Bytes(), b.rows, t)
	}
	i := sort.Search(len(tb.chunks), func(i int) bool { return tb.chunks[i].maxT >= t })
	return i < len(tb.chunks) && tb.chunks[i].minT <= t && hasTimestamp(tb.chunks[i].ts, tb.chunks[i].rows, t)
}

// hasTimestamp reports whether a timestamp column of rows entries holds t;
// true when it does not decode (the caller's read then reports the error).
func hasTimestamp(b []byte, rows int, t int64) bool {
	var d encoding.TSDecoder
	d.Reset(b, rows)
	for d.Next() {
		if at := d.At(); at >= t {
			return at == t
		}
	}
	return d.Err() != nil
}

// sealer receives notice of each sealed row so the group can track alignment.
type sealer func(r *row, prevHas func(c int) bool)

// chunkCut decides where head chunks end: after a number of rows, and
// always at block-range boundaries (so a block flush takes whole chunks);
// and where they go when frozen.
type chunkCut struct {
	rows       int
	blockRange int64       // ms; boundaries are multiples of it, like Prometheus's
	store      *chunkStore // frozen chunks' home; nil: the heap
}

// freeze freezes b into a chunk placed in the store.
func (c chunkCut) freeze(b *chunkBuilder) *chunk { return b.freeze(c.store) }

// rangeEnd returns the end (exclusive) of the block range holding t.
func (c chunkCut) rangeEnd(t int64) int64 {
	if c.blockRange <= 0 {
		return math.MaxInt64
	}
	start := t - t%c.blockRange
	if t < 0 && t%c.blockRange != 0 {
		start -= c.blockRange
	}
	return start + c.blockRange
}

// sealUpTo moves all open rows with t <= horizon into the chunk being built.
func (tb *table) sealUpTo(horizon int64, cut chunkCut, onSeal sealer) {
	k := 0
	for k < len(tb.open) && tb.open[k].t <= horizon {
		r := tb.open[k]
		if b := tb.building; b != nil && b.rows > 0 && (r.t >= cut.rangeEnd(b.minT) || b.hist != nil) {
			// A float row after histograms (a series that changed type) starts a chunk too.
			tb.chunks = append(tb.chunks, cut.freeze(b))
			tb.building = nil
		}
		if tb.building == nil {
			tb.building = newChunkBuilder(tb.ncols)
		}
		b := tb.building
		if onSeal != nil {
			onSeal(r, b.hadPrev)
		}
		b.appendRow(r)
		tb.sealedMaxT = r.t
		if b.rows >= cut.rows {
			tb.chunks = append(tb.chunks, cut.freeze(b))
			tb.building = nil
		}
		tb.recycle(r)
		k++
	}
	if k > 0 {
		n := copy(tb.open, tb.open[k:])
		clear(tb.open[n:])
		tb.open = tb.open[:n]
	}
}

// chunkBuilder encodes sealed rows of a table: one timestamp column and per
// column the values of the rows where the column is present.
type chunkBuilder struct {
	minT, maxT int64
	rows       int
	ts         encoding.TSEncoder
	cols       []colBuilder // by column, held by value: 32 bytes per member
	bitmaps    [][]uint64   // presence bitmaps of the columns with gaps
	// bufs holds the XOR streams of the columns whose values changed; a
	// constant column has none (encoding.XORAppender).
	bufs [][]byte
	// hist, when not nil, is the chunk's only column: native histograms of
	// a one-column table (histogram.go); cols is then empty.
	hist *histColumn
}

type colBuilder struct {
	vals  encoding.XORAppender // no values: the column is absent from this chunk
	buf   int32                // 1 + index of the stream in chunkBuilder.bufs; 0 while constant
	first uint16               // first row with a value (rows per chunk are at most maxChunkRows)
	last  uint16               // last row with a value
	bm    int32                // 1 + index of the row presence bitmap; 0 while rows first..last are all present
}

// maxChunkRows bounds the rows of a head chunk (colBuilder's row fields).
const maxChunkRows = math.MaxUint16

func (cb *colBuilder) empty() bool { return cb.vals.Count() == 0 }

// stream returns cb's XOR stream so far: empty while the column is constant.
func (b *chunkBuilder) stream(cb *colBuilder) []byte {
	if cb.buf == 0 {
		return nil
	}
	return b.bufs[cb.buf-1]
}

// newChunkBuilder returns a builder for a table of about ncols columns.
func newChunkBuilder(ncols int) *chunkBuilder {
	return &chunkBuilder{cols: make([]colBuilder, 0, ncols)}
}

// col returns column c's builder, nil if c has no value in this chunk.
func (b *chunkBuilder) col(c int) *colBuilder {
	if c >= len(b.cols) || b.cols[c].empty() {
		return nil
	}
	return &b.cols[c]
}

// bitmap returns cb's presence bitmap (nil: rows first..last all present).
func (b *chunkBuilder) bitmap(cb *colBuilder) []uint64 {
	if cb.bm == 0 {
		return nil
	}
	return b.bitmaps[cb.bm-1]
}

// hadPrev reports whether column c has a value in the previously sealed row.
func (b *chunkBuilder) hadPrev(c int) bool {
	cb := b.col(c)
	return b.rows > 0 && cb != nil && int(cb.last) == b.rows-1
}

func (b *chunkBuilder) appendRow(r *row) {
	if b.rows == 0 {
		b.minT = r.t
	}
	b.maxT = r.t
	b.ts.Append(r.t)
	idx := uint16(b.rows)
	b.rows++
	for w, word := range r.present {
		for word != 0 {
			c := w<<6 + bits.TrailingZeros64(word)
			word &= word - 1
			b.appendCell(c, idx, r.vals[c])
		}
	}
}

// appendCell adds column c's value v at row idx, after the column's last row.
func (b *chunkBuilder) appendCell(c int, idx uint16, v float64) {
	if c >= len(b.cols) {
		b.cols = append(b.cols, make([]colBuilder, c+1-len(b.cols))...)
	}
	cb := &b.cols[c]
	if cb.empty() {
		cb.first = idx
	} else if cb.bm == 0 && idx != cb.last+1 {
		bm := make([]uint64, (idx>>6)+1, 4)
		for i := cb.first; i <= cb.last; i++ {
			bm[i>>6] |= 1 << (uint(i) & 63)
		}
		b.bitmaps = append(b.bitmaps, bm)
		cb.bm = int32(len(b.bitmaps))
	}
	if cb.bm != 0 {
		bm := b.bitmaps[cb.bm-1]
		for int(idx>>6) >= len(bm) {
			bm = append(bm, 0)
		}
		bm[idx>>6] |= 1 << (uint(idx) & 63)
		b.bitmaps[cb.bm-1] = bm
	}
	if cb.buf == 0 {
		if st := cb.vals.Append(nil, v); len(st) > 0 {
			b.bufs = append(b.bufs, st)
			cb.buf = int32(len(b.bufs))
		}
	} else {
		st := &b.bufs[cb.buf-1]
		*st = cb.vals.Append(*st, v)
	}
	cb.last = idx
}

// freeze copies the builder into an immutable chunk, re-encoding each column
// as compactly as its values allow: a constant column keeps only its value,
// a column of decimal numbers (counters, gauges with a few digits) takes the
// decimal codec when that is smaller than XOR. The chunk's columns, bitmaps,
// timestamps and values are one block of memory: mapped from the store's
// files when store is not nil (and has room), else in the heap.
func (b *chunkBuilder) freeze(store *chunkStore) *chunk {
	sc := freezePool.Get().(*freezeScratch)
	defer freezePool.Put(sc)
	c := b.freezeInto(sc)
	if !store.place(c) {
		c.cols, c.bits, c.ts, c.data = heapCopy(c.cols), heapCopy(c.bits), heapCopy(c.ts), heapCopy(c.data)
	}
	return c
}

// freezeInto is freeze into sc's buffers: the chunk is valid until sc's
// next use, but its timestamps are the builder's own bytes (freeze copies
// them with the rest; an export that keeps the chunk past the group's lock
// copies them into sc.ts).
func (b *chunkBuilder) freezeInto(sc *freezeScratch) *chunk {
	c := &chunk{minT: b.minT, maxT: b.maxT, rows: b.rows}
	sc.cols = slices.Grow(sc.cols[:0], len(b.cols))[:len(b.cols)]
	clear(sc.cols)
	sc.data, sc.bits = sc.data[:0], sc.bits[:0]
	for i := range b.cols {
		if cb := &b.cols[i]; !cb.empty() {
			sc.cols[i] = sc.addCol(cb, b.stream(cb), b.bitmap(cb))
		}
	}
	if b.hist != nil {
		sc.cols = append(sc.cols[:0], b.hist.colData(0))
		sc.data = append(sc.data, b.hist.bytes()...)
	}
	c.cols, c.bits, c.ts, c.data = sc.cols, sc.bits, b.ts.Bytes(), sc.data
	return c
}

// heapCopy returns a copy of s, nil when s is empty (an empty clone would
// still point into the pooled scratch).
func heapCopy[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

var freezePool = sync.Pool{New: func() any { return new(freezeScratch) }}

// freezeScratch holds the buffers of one freeze, reused by the next.
type freezeScratch struct {
	ts   []byte // an export's copy of the timestamps (capture)
	cols []colData
	data []byte
	bits []uint64
	vals []float64
	ms   []int64
	dec  []byte
	xd   encoding.XORDecoder
}

// addCol appends cb's values (its XOR stream st), re-encoded if smaller, and
// its presence bitmap bm to the scratch chunk.
func (sc *freezeScratch) addCol(cb *colBuilder, st []byte, bm []uint64) colData {
	n := cb.vals.Count()
	cd := colData{kind: colXOR, first: int32(cb.first), n: int32(n)}
	if bm != nil {
		cd.boff = uint32(len(sc.bits))
		sc.bits = append(sc.bits, bm...)
		cd.bend = uint32(len(sc.bits))
	}
	if v, ok := cb.vals.Constant(st); ok {
		// Held without bytes while constant (encoding.XORAppender).
		cd.kind = colConst
		cd.off = uint32(len(sc.data))
		sc.data = binary.LittleEndian.AppendUint64(sc.data, math.Float64bits(v))
		cd.end = uint32(len(sc.data))
		return cd
	}
	xor := st
	enc := xor
	sc.vals = sc.vals[:0]
	sc.xd.Reset(xor, n)
	for sc.xd.Next() {
		sc.vals = append(sc.vals, sc.xd.At())
	}
	if sc.xd.Err() == nil && len(sc.vals) == n {
		constant := true
		fb := math.Float64bits(sc.vals[0])
		for _, v := range sc.vals[1:] {
			if math.Float64bits(v) != fb {
				constant = false
				break
			}
		}
		if constant {
			cd.kind = colConst
			sc.dec = binary.LittleEndian.AppendUint64(sc.dec[:0], fb)
			enc = sc.dec
		} else {
			if cap(sc.ms) < n {
				sc.ms = make([]int64, n)
			}
			if k, ok := encoding.DecimalScale(sc.vals, encoding.MaxDecimalScale, sc.ms[:n]); ok {
				sc.dec = encoding.AppendDecimal(sc.dec[:0], sc.ms[:n], k)
				if len(sc.dec) < len(xor) {
					cd.kind, enc = colDecimal, sc.dec
				}
			}
		}
	}
	cd.off = uint32(len(sc.data))
	sc.data = append(sc.data, enc...)
	cd.end = uint32(len(sc.data))
	return cd
}

// snapshotCol returns an immutable chunk holding only column c (nil if c has
// no value), XOR-encoded as built: for queries of the chunk being built.
func (b *chunkBuilder) snapshotCol(c int) *chunk {
	if b.col(c) == nil && (b.hist == nil || c != 0 || b.rows == 0) {
		return nil
	}
	return b.snapshotColTS(c, slices.Clone(b.ts.Bytes()), nil)
}

// snapshotColTS is snapshotCol with the timestamp column already copied
// (ts, shared by the snapshots of several columns), its structure and
// bytes taken from sl (nil: allocated).
func (b *chunkBuilder) snapshotColTS(c int, ts []byte, sl *snapSlab) *chunk {
	if b.hist != nil {
		if c != 0 || b.rows == 0 {
			return nil
		}
		data := slices.Clone(b.hist.bytes())
		return &chunk{minT: b.minT, maxT: b.maxT, rows: b.rows, ts: ts, data: data, cols: []colData{b.hist.colData(0)}}
	}
	cb := b.col(c)
	if cb == nil {
		return nil
	}
	n := cb.vals.Count()
	one := sl.oneCol()
	ch := &one.chunk
	ch.minT, ch.maxT, ch.rows, ch.ts = b.minT, b.maxT, b.rows, ts
	cd := colData{kind: colXOR, first: int32(cb.first), n: int32(n)}
	if st := b.stream(cb); len(st) == 0 {
		v, _ := cb.vals.Constant(st)
		var vb [8]byte
		binary.LittleEndian.PutUint64(vb[:], math.Float64bits(v))
		cd.kind, ch.data = colConst, sl.bytes(vb[:])
	} else {
		ch.data = sl.bytes(st)
	}
	cd.end = uint32(len(ch.data))
	if bm := b.bitmap(cb); bm != nil {
		ch.bits = slices.Clone(bm)
		cd.bend = uint32(len(bm))
	}
	one.col[0] = cd
	ch.cols = one.col[:]
	return ch
}

// oneColChunk is a one-column chunk and its column in one allocation (a
// query's snapshot makes one per series of the chunk being built).
type oneColChunk struct {
	chunk
	col [1]colData
}

// chunk is an immutable, compressed run of rows.
type chunk struct {
	minT, maxT int64
	rows       int
	ts         []byte
	cols       []colData
	data       []byte   // every column's encoded values, back to back
	bits       []uint64 // presence bitmaps of the columns that need one
	// decoded holds the timestamps decoded by timestamps, weakly: the
	// garbage collector frees them once no query reads them.
	decoded atomic.Pointer[weak.Pointer[int64]]
}

// timestamps returns the chunk's decoded timestamps (nil if they do not
// decode), shared by every reader until the next garbage collection frees
// them: the members of a group, and the queries of a dashboard refreshed
// in a row, decode a chunk's timestamp column once instead of once each,
// and no memory is held for chunks nobody reads. Callers do not modify it.
func (c *chunk) timestamps() []int64 {
	if w := c.decoded.Load(); w != nil {
		if first := w.Value(); first != nil {
			return unsafe.Slice(first, c.rows)
		}
	}
	tss := decodeTimestamps(c.ts, c.rows)
	if len(tss) > 0 {
		w := weak.Make(&tss[0])
		c.decoded.Store(&w)
	}
	return tss
}

// colKind is the encoding of a column's values.
type colKind uint8

const (
	colXOR            colKind = iota // Gorilla XOR
	colConst                         // every value equal: the value's 8 bytes
	colDecimal                       // encoding.AppendDecimal
	colHistogram                     // encoding.HistogramEncoder: integer native histograms
	colFloatHistogram                // encoding.FloatHistogramEncoder: float native histograms
)

// isHistogram reports whether a column of kind k holds native histograms.
func (k colKind) isHistogram() bool { return k == colHistogram || k == colFloatHistogram }

// colData is one column of a frozen chunk: its values are
// chunk.data[off:end] and, unless every row from first on holds a value,
// its presence bitmap is chunk.bits[boff:bend].
type colData struct {
	kind       colKind
	first, n   int32
	off, end   uint32
	boff, bend uint32
}

func (c *chunk) col(i int) *colData {
	if i >= len(c.cols) || c.cols[i].n == 0 {
		return nil
	}
	return &c.cols[i]
}

// vals returns the encoded values of column cd. Its capacity runs on into
// the next columns' bytes, which fixed-width decoding may load but never uses.
func (c *chunk) vals(cd *colData) []byte { return c.data[cd.off:cd.end] }

// presence returns the presence bitmap of column cd (nil: rows first..first+n-1).
func (c *chunk) presence(cd *colData) []uint64 {
	if cd.bend == cd.boff {
		return nil
	}
	return c.bits[cd.boff:cd.bend:cd.bend]
}

// size returns the chunk's approximate memory footprint in bytes.
func (c *chunk) size() int {
	return 96 + len(c.ts) + int(unsafe.Sizeof(colData{}))*len(c.cols) + len(c.data) + 8*len(c.bits)
}
