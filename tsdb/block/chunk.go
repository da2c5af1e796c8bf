package block

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// Chunk layout constants; see docs/format/block.md.
const (
	chunkKindTable = 1 // the only chunk kind: a table slice

	tsDoD     = 0 // delta-of-delta timestamp column
	tsRegular = 1 // start (the chunk's minT) and step

	colFloat = 1 // float64 value column
	// Constant float64 columns in every row (version 3): the value, nothing
	// else; stats are the value, sum is value × rows.
	colConstInt   = 2 // signed varint
	colConstFloat = 3 // f64
	// Native histogram columns (version 5): presence, the first and last
	// histograms' count and sum, and the tsdb/encoding histogram stream.
	colHistogram      = 4 // integer histograms (encoding.HistogramEncoder)
	colFloatHistogram = 5 // float histograms (encoding.FloatHistogramEncoder)

	presAll    = 0
	presRun    = 1
	presBitmap = 2

	encConst   = 0
	encXOR     = 1
	encDecimal = 2
	encNone    = 0xff // in memory only: a histogram column has no value encoding byte

	statMin  = 1 << 0
	statMax  = 1 << 1
	statSum  = 1 << 2
	statLast = 1 << 3
	// statSumIsFirstTimesCount: sum is not stored, it equals first*count
	// (float64 product, bit for bit); never set with statSum.
	statSumIsFirstTimesCount = 1 << 4
	// statInts: the stored stats are integers written as signed varints
	// instead of 8-byte floats.
	statInts = 1 << 5

	maxChunkRows = 1 << 24 // sanity bound when decoding
)

var encNames = [...]string{encConst: "const", encXOR: "xor", encDecimal: "decimal"}
var presNames = [...]string{presAll: "all", presRun: "run", presBitmap: "bitmap"}

func encName(e byte) string {
	if int(e) < len(encNames) {
		return encNames[e]
	}
	return fmt.Sprintf("unknown(%d)", e)
}

// colInput is one column restricted to a chunk: rows relative to the chunk's
// first row, and the samples of one kind (see Column).
type colInput struct {
	member int
	rows   []int32
	vals   []float64
	hs     []*histogram.Histogram
	fhs    []*histogram.FloatHistogram
}

// kind returns the kind of c's samples.
func (c *colInput) kind() Kind {
	switch {
	case len(c.hs) > 0:
		return KindHistogram
	case len(c.fhs) > 0:
		return KindFloatHistogram
	}
	return KindFloat
}

// chunkEncoder builds chunk bodies, reusing its buffers: begin, then add
// each column in member order, then the body is head (header and column
// directory, from finish) followed by area.
type chunkEncoder struct {
	maxScale int
	ts       encoding.TSEncoder
	xor      encoding.XOREncoder
	hist     encoding.HistogramEncoder
	fhist    encoding.FloatHistogramEncoder
	ms       []int64
	exc      []int32 // values a patched decimal stream keeps whole
	dec      []byte
	head     []byte
	area     []byte
	offs     []uint64
	members  []int
	rows     []int64 // the current chunk's timestamps
}

// colStats computes the statistics documented on ChunkStat.
func colStats(vals []float64) (mn, mx, sum float64) {
	mn, mx, sum = math.NaN(), math.NaN(), math.NaN()
	seen := false
	for _, v := range vals {
		if math.IsNaN(v) {
			continue
		}
		if !seen {
			mn, mx, sum, seen = v, v, v, true
			continue
		}
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
		sum += v
	}
	return mn, mx, sum
}

// encode appends the body of a chunk with timestamps ts and columns cols (sorted by member, non-empty) to dst.
func (e *chunkEncoder) encode(dst []byte, ts []int64, cols []colInput) ([]byte, error) {
	e.begin(ts)
	for _, c := range cols {
		if err := e.add(c); err != nil {
			return dst, err
		}
	}
	e.finish()
	return append(append(dst, e.head...), e.area...), nil
}

// begin starts a chunk with timestamps ts (kept until finish): its header goes to e.head.
func (e *chunkEncoder) begin(ts []int64) {
	rows := len(ts)
	minT, maxT := ts[0], ts[rows-1]
	dst := append(e.head[:0], chunkKindTable)
	dst = binary.AppendVarint(dst, minT)
	dst = binary.AppendUvarint(dst, uint64(maxT-minT))
	dst = binary.AppendUvarint(dst, uint64(rows))
	regular := true
	var step int64
	if rows > 1 {
		step = ts[1] - ts[0]
		for i := 2; i < rows; i++ {
			if ts[i]-ts[i-1] != step {
				regular = false
				break
			}
		}
	}
	if regular {
		dst = append(dst, tsRegular)
		dst = binary.AppendUvarint(dst, uint64(step))
	} else {
		e.ts.Reset()
		for _, t := range ts {
			e.ts.Append(t)
		}
		dst = append(dst, tsDoD)
		dst = binary.AppendUvarint(dst, uint64(len(e.ts.Bytes())))
		dst = append(dst, e.ts.Bytes()...)
	}
	e.head, e.rows = dst, ts
	e.area, e.offs, e.members = e.area[:0], e.offs[:0], e.members[:0]
}

// add encodes column c (non-empty, its member above the previous column's)
// into e.area; on error (histogram spans that do not describe their
// buckets) nothing is added.
func (e *chunkEncoder) add(c colInput) error {
	off := len(e.area)
	if k := c.kind(); k != KindFloat {
		area, err := e.encodeHistColumn(e.area, e.rows, c, k)
		if err != nil {
			return err
		}
		e.area = area
	} else {
		e.area = e.encodeColumn(e.area, e.rows, c)
	}
	e.offs = append(e.offs, uint64(off))
	e.members = append(e.members, c.member)
	return nil
}

// finish appends the column count and directory to e.head; the chunk has at least one column.
func (e *chunkEncoder) finish() {
	dst := binary.AppendUvarint(e.head, uint64(len(e.members)))
	wm := 0 // version 7: the members are 0..ncols-1 (every member of an aligned table)
	if last := len(e.members) - 1; e.members[last] != last {
		wm = bytesFor(uint64(e.members[last]))
	}
	wo := bytesFor(e.offs[len(e.offs)-1])
	dst = append(dst, byte(wm), byte(wo))
	for i, m := range e.members {
		dst = putBE(dst, uint64(m), wm)
		dst = putBE(dst, e.offs[i], wo)
	}
	e.head, e.rows = dst, nil
}

// encodeColumn appends one column's header and data.
func (e *chunkEncoder) encodeColumn(dst []byte, ts []int64, c colInput) []byte {
	rows, n := len(ts), len(c.rows)
	if v, ok := constantAll(c.vals, rows); ok {
		if isInt(v) {
			return binary.AppendVarint(append(dst, colConstInt), int64(v))
		}
		return binary.LittleEndian.AppendUint64(append(dst, colConstFloat), math.Float64bits(v))
	}
	dst = appendPresence(append(dst, colFloat), ts, c.rows)
	dst = appendStats(dst, c.vals)
	fb := math.Float64bits(c.vals[0])

	constant := true
	for _, v := range c.vals[1:] {
		if math.Float64bits(v) != fb {
			constant = false
			break
		}
	}
	if constant {
		return append(dst, encConst)
	}
	e.xor.Reset()
	for _, v := range c.vals {
		e.xor.Append(v)
	}
	best, enc := e.xor.Bytes(), byte(encXOR)
	if e.maxScale >= 0 {
		if cap(e.ms) < n {
			e.ms = make([]int64, n)
		}
		if k, ok := encoding.DecimalScale(c.vals, e.maxScale, e.ms[:n]); ok {
			e.dec = encoding.AppendDecimalRice(e.dec[:0], e.ms[:n], k)
			if len(e.dec) < len(best) {
				best, enc = e.dec, encDecimal
			}
		} else if k, exc, ok := encoding.DecimalScalePatched(c.vals, e.maxScale, e.ms[:n], e.exc); ok && len(exc) > 0 {
			// Version 7: a few values that are not decimals (float
			// artifacts, staleness markers) are kept whole.
			e.exc = exc
			e.dec = encoding.AppendDecimalRicePatched(e.dec[:0], e.ms[:n], k, c.vals, exc)
			if len(e.dec) < len(best) {
				best, enc = e.dec, encDecimal
			}
		}
	}
	dst = append(dst, enc)
	dst = binary.AppendUvarint(dst, uint64(len(best)))
	return append(dst, best...)
}

// appendPresence appends the presence of a column with rows (non-empty,
// ascending) in a chunk with timestamps ts and, unless it is every row, the
// column's first and last timestamps relative to the chunk's.
func appendPresence(dst []byte, ts []int64, crows []int32) []byte {
	rows, n := len(ts), len(crows)
	first, last := int(crows[0]), int(crows[n-1])
	switch {
	case n == rows:
		return append(dst, presAll)
	case last-first+1 == n:
		dst = append(dst, presRun)
		dst = binary.AppendUvarint(dst, uint64(first))
		dst = binary.AppendUvarint(dst, uint64(n))
	default:
		dst = append(dst, presBitmap)
		start := len(dst)
		dst = append(dst, make([]byte, (rows+7)/8)...)
		for _, r := range crows {
			dst[start+int(r)/8] |= 0x80 >> (uint(r) % 8)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(ts[first]-ts[0]))
	return binary.AppendUvarint(dst, uint64(ts[rows-1]-ts[last]))
}

// constantAll returns the value of a column that holds one value (bit for
// bit) in all rows of its chunk, when its stats are all that value but the
// sum, and the sum (added in time order, as the stats are) is the value
// times rows (float64 product); never for NaN, whose stats differ.
func constantAll(vals []float64, rows int) (float64, bool) {
	if len(vals) != rows || math.IsNaN(vals[0]) {
		return 0, false
	}
	x := vals[0]
	fb, sum := math.Float64bits(x), x
	for _, v := range vals[1:] {
		if math.Float64bits(v) != fb {
			return 0, false
		}
		sum += v
	}
	return x, math.Float64bits(sum) == math.Float64bits(x*float64(rows))
}

// isInt reports whether v is an integer that a signed varint holds exactly
// (|v| < 2^53, and not -0, which would come back as +0).
func isInt(v float64) bool {
	return v == math.Trunc(v) && math.Abs(v) < 1<<53 && !(v == 0 && math.Signbit(v))
}

// appendStat appends one stat value: a signed varint if asInt, else the
// float's 8 bytes little endian.
func appendStat(dst []byte, v float64, asInt bool) []byte {
	if asInt {
		return binary.AppendVarint(dst, int64(v))
	}
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

// chunkView is a parsed chunk header; its slices alias the chunk body.
type chunkView struct {
	minT, maxT int64
	rows       int
	regular    bool
	step       int64
	tsData     []byte
	ncols      int
	wm, wo     int
	dir        []byte
	area       []byte
}

// parseChunk parses a chunk body's header and column directory.
func parseChunk(body []byte) (chunkView, error) {
	var c chunkView
	d := decbuf{b: body}
	if k := d.byte1(); d.err == nil && k != chunkKindTable {
		return c, fmt.Errorf("unknown chunk kind %d: %w", k, ErrCorrupt)
	}
	c.minT = d.varint()
	span := d.uvarint()
	c.maxT = c.minT + int64(span)
	c.rows = d.uvarintInt(maxChunkRows)
	if d.err == nil && (c.rows == 0 || span > math.MaxInt64 || c.maxT < c.minT) {
		return c, fmt.Errorf("chunk rows %d time span %d: %w", c.rows, span, ErrCorrupt)
	}
	switch te := d.byte1(); te {
	case tsRegular:
		c.regular = true
		c.step = int64(d.uvarint())
		if d.err == nil && (c.step < 0 || (c.rows == 1) != (c.step == 0) ||
			(c.rows > 1 && (c.step > (c.maxT-c.minT)/int64(c.rows-1) || c.step*int64(c.rows-1) != c.maxT-c.minT))) {
			return c, fmt.Errorf("regular timestamps: step %d rows %d span %d: %w", c.step, c.rows, span, ErrCorrupt)
		}
	case tsDoD:
		c.tsData = d.bytes(d.uvarintInt(len(body)))
	default:
		if d.err == nil {
			return c, fmt.Errorf("unknown timestamp encoding %d: %w", te, ErrCorrupt)
		}
	}
	c.ncols = d.uvarintInt(len(body))
	c.wm, c.wo = int(d.byte1()), int(d.byte1())
	if d.err == nil && (c.wm > 8 || c.wo < 1 || c.wo > 8) {
		return c, fmt.Errorf("column directory widths %d, %d: %w", c.wm, c.wo, ErrCorrupt)
	}
	c.dir = d.bytes(c.ncols * (c.wm + c.wo))
	c.area = d.b
	if d.err != nil {
		return c, fmt.Errorf("chunk header: %w: %w", d.err, ErrCorrupt)
	}
	return c, nil
}

// dirEntry returns the member and area offset of the i-th column.
func (c *chunkView) dirEntry(i int) (int, uint64) {
	e := c.dir[i*(c.wm+c.wo):]
	if c.wm == 0 {
		return i, beN(e[:c.wo])
	}
	return int(beN(e[:c.wm])), beN(e[c.wm : c.wm+c.wo])
}

// find returns the index of member's column, or -1.
func (c *chunkView) find(member int) int {
	if c.wm == 0 {
		if member >= 0 && member < c.ncols {
			return member
		}
		return -1
	}
	lo, hi := 0, c.ncols
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if mm, _ := c.dirEntry(m); mm < member {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < c.ncols {
		if mm, _ := c.dirEntry(lo); mm == member {
			return lo
		}
	}
	return -1
}

// colView is a parsed column header; its slices alias the chunk body.
type colView struct {
	member                     int
	kind                       Kind
	presence                   byte
	runFirst                   int
	count                      int
	bitmap                     []byte
	minT, maxT                 int64
	first, min, max, sum, last float64
	enc                        byte // encNone for histogram columns
	hFirst, hLast              HistStat
	data                       []byte
	size                       int // bytes of header and data
}

// column parses the i-th column's header.
func (c *chunkView) column(i int) (colView, error) {
	var v colView
	member, off := c.dirEntry(i)
	v.member = member
	if off > uint64(len(c.area)) {
		return v, fmt.Errorf("column %d offset %d beyond chunk: %w", i, off, ErrCorrupt)
	}
	d := decbuf{b: c.area[off:]}
	start := len(d.b)
	switch t := d.byte1(); {
	case d.err != nil:
	case t == colConstInt || t == colConstFloat:
		var x float64
		if t == colConstInt {
			x = float64(d.varint())
		} else {
			x = d.f64()
		}
		if d.err != nil {
			return v, fmt.Errorf("column %d header: %w: %w", i, d.err, ErrCorrupt)
		}
		v.presence, v.count, v.enc = presAll, c.rows, encConst
		v.minT, v.maxT = c.minT, c.maxT
		v.first, v.min, v.max, v.last = x, x, x, x
		v.sum = x * float64(c.rows)
		v.size = start - len(d.b)
		return v, nil
	case t == colHistogram || t == colFloatHistogram:
		return c.histColumn(i, t, d, start, v)
	case t != colFloat:
		return v, fmt.Errorf("column %d: unknown column type %d: %w", i, t, ErrCorrupt)
	}
	if err := c.presence(i, &d, &v); err != nil {
		return v, err
	}
	if err := d.readStats(i, &v); err != nil {
		return v, err
	}
	v.enc = d.byte1()
	switch v.enc {
	case encConst:
	case encXOR, encDecimal:
		v.data = d.bytes(d.uvarintInt(len(c.area)))
	default:
		if d.err == nil {
			return v, fmt.Errorf("column %d: unknown value encoding %d: %w", i, v.enc, ErrCorrupt)
		}
	}
	if d.err != nil {
		return v, fmt.Errorf("column %d header: %w: %w", i, d.err, ErrCorrupt)
	}
	v.size = start - len(d.b)
	return v, nil
}

// presence parses the presence of column i (whose header d is at), the
// column's sample count and its first and last timestamps into v.
func (c *chunkView) presence(i int, d *decbuf, v *colView) error {
	v.presence = d.byte1()
	v.minT, v.maxT = c.minT, c.maxT
	switch v.presence {
	case presAll:
		v.count = c.rows
	case presRun:
		v.runFirst = d.uvarintInt(c.rows)
		v.count = d.uvarintInt(c.rows)
		if d.err == nil && (v.count == 0 || v.runFirst+v.count > c.rows) {
			return fmt.Errorf("column %d: run %d+%d of %d rows: %w", i, v.runFirst, v.count, c.rows, ErrCorrupt)
		}
	case presBitmap:
		v.bitmap = d.bytes((c.rows + 7) / 8)
		for _, b := range v.bitmap {
			v.count += bits.OnesCount8(b)
		}
		if d.err == nil && (v.count == 0 || (c.rows%8 != 0 && v.bitmap[len(v.bitmap)-1]&(0xff>>uint(c.rows%8)) != 0)) {
			return fmt.Errorf("column %d: bad presence bitmap: %w", i, ErrCorrupt)
		}
	default:
		if d.err == nil {
			return fmt.Errorf("column %d: unknown presence %d: %w", i, v.presence, ErrCorrupt)
		}
	}
	if v.presence != presAll {
		v.minT += int64(d.uvarint())
		v.maxT -= int64(d.uvarint())
	}
	return nil
}

// colCursor iterates the samples of one column of one chunk.
type colCursor struct {
	ch  chunkView
	col colView
	row int
	end int // one past the last row that can hold a sample
	n   int // values decoded
	ts  encoding.TSDecoder
	xor encoding.XORDecoder
	dec encoding.DecimalDecoder
	// Histogram columns: the current histogram stays in the decoder (At).
	hdec encoding.HistogramDecoder
	fdec encoding.FloatHistogramDecoder
	t    int64
	v    float64 // float columns
}

// reset starts iterating col of ch.
func (c *colCursor) reset(ch chunkView, col colView) {
	c.ch, c.col, c.row, c.n = ch, col, 0, 0
	c.end = ch.rows
	if !ch.regular {
		c.ts.Reset(ch.tsData, ch.rows)
	} else if col.presence == presRun {
		c.row = col.runFirst // regular timestamps need no decoding of earlier rows
	}
	if col.presence == presRun {
		c.end = col.runFirst + col.count
	}
	switch {
	case col.kind == KindHistogram:
		c.hdec.Reset(col.data, col.count)
	case col.kind == KindFloatHistogram:
		c.fdec.Reset(col.data, col.count)
	case col.enc == encXOR:
		c.xor.Reset(col.data, col.count)
	case col.enc == encDecimal:
		c.dec.Reset(col.data, col.count)
	}
}

// next advances to the next sample of the column; it returns false at the end or on error.
func (c *colCursor) next() (bool, error) {
	for c.row < c.end {
		r := c.row
		c.row++
		var t int64
		if c.ch.regular {
			t = c.ch.minT + int64(r)*c.ch.step
		} else {
			if !c.ts.Next() {
				return false, c.tsErr()
			}
			t = c.ts.At()
		}
		switch c.col.presence {
		case presRun:
			if r < c.col.runFirst {
				continue
			}
		case presBitmap:
			if c.col.bitmap[r>>3]&(0x80>>uint(r&7)) == 0 {
				continue
			}
		}
		if c.n >= c.col.count {
			return false, fmt.Errorf("more present rows than values: %w", ErrCorrupt)
		}
		c.n++
		switch {
		case c.col.kind == KindHistogram:
			if !c.hdec.Next() {
				return false, fmt.Errorf("histograms: %w: %w", errOr(c.hdec.Err()), ErrCorrupt)
			}
			c.t = t
			return true, nil
		case c.col.kind == KindFloatHistogram:
			if !c.fdec.Next() {
				return false, fmt.Errorf("float histograms: %w: %w", errOr(c.fdec.Err()), ErrCorrupt)
			}
			c.t = t
			return true, nil
		}
		switch c.col.enc {
		case encConst:
			c.v = c.col.first
		case encXOR:
			if !c.xor.Next() {
				return false, fmt.Errorf("values: %w: %w", c.xor.Err(), ErrCorrupt)
			}
			c.v = c.xor.At()
		case encDecimal:
			if !c.dec.Next() {
				return false, fmt.Errorf("values: %w: %w", c.dec.Err(), ErrCorrupt)
			}
			c.v = c.dec.At()
		}
		c.t = t
		return true, nil
	}
	return false, nil
}

// skipBefore moves the cursor past the rows before from when the chunk's
// timestamps are regular and the column has no bitmap: the rows are computed,
// and a decimal column's skipped values decoded in one loop (a constant
// column's not at all). Other cursors are left alone; next then skips the
// rows one by one.
func (c *colCursor) skipBefore(from int64) {
	ch := c.ch
	if !ch.regular || ch.step <= 0 || from <= ch.minT || c.col.presence == presBitmap || c.col.kind != KindFloat {
		return
	}
	k := min(int((from-ch.minT+ch.step-1)/ch.step), c.end) - c.row
	if k <= 0 {
		return
	}
	switch c.col.enc {
	case encConst:
	case encDecimal:
		c.dec.AppendNext(nil, k, 0) // an error stops the next call to Next
	default:
		return
	}
	c.row += k
	c.n += k
}

// bulk reports whether appendRange can take the column: regular timestamps,
// contiguous rows, constant or decimal float values.
func (c *colCursor) bulk() bool {
	return c.col.kind == KindFloat && c.ch.regular && c.col.presence != presBitmap && (c.col.enc == encConst || c.col.enc == encDecimal)
}

// appendRange appends the column's samples in [mint, maxt] (a fresh cursor
// that bulk accepts), computing the rows in range from the regular
// timestamps and decoding the values in one loop; past reports that the
// chunk has rows after maxt.
func (c *colCursor) appendRange(ts []int64, vs []float64, mint, maxt int64) (_ []int64, _ []float64, past bool, err error) {
	first, n := 0, c.col.count
	if c.col.presence == presRun {
		first = c.col.runFirst
	}
	last := first + n - 1 // rows first..last hold the values
	a, b := first, last
	ch := c.ch
	if ch.step > 0 {
		if mint > ch.minT {
			a = max(a, int((mint-ch.minT+ch.step-1)/ch.step))
		}
		if maxt < ch.maxT {
			b = min(b, int((maxt-ch.minT)/ch.step))
		}
	} else if ch.minT < mint || ch.minT > maxt {
		a, b = 1, 0
	}
	past = ch.minT+int64(last)*ch.step > maxt
	if a > b {
		return ts, vs, past, nil
	}
	k := b - a + 1
	switch c.col.enc {
	case encConst:
		start := len(vs)
		vs = slices.Grow(vs, k)[:start+k]
		for j := range vs[start:] {
			vs[start+j] = c.col.first
		}
	case encDecimal:
		start := len(vs)
		if vs = c.dec.AppendNext(vs, a-first, k); len(vs)-start != k {
			return ts, vs[:start], past, fmt.Errorf("values: %w: %w", cmp.Or(c.dec.Err(), errFewValues), ErrCorrupt)
		}
	}
	// The rows' times, written by index into ts grown once.
	start := len(ts)
	ts = slices.Grow(ts, k)[:start+k]
	t := ch.minT + int64(a)*ch.step
	for j := range ts[start:] {
		ts[start+j] = t
		t += ch.step
	}
	c.n = n
	return ts, vs, past, nil
}

var errFewValues = errors.New("fewer values than present rows")

func (c *colCursor) tsErr() error {
	if err := c.ts.Err(); err != nil {
		return fmt.Errorf("timestamps: %w: %w", err, ErrCorrupt)
	}
	return fmt.Errorf("timestamps: %w", ErrCorrupt)
}

// sortColumns sorts chunk columns by member.
func sortColumns(cols []colInput) {
	slices.SortFunc(cols, func(a, b colInput) int { return a.member - b.member })
}
