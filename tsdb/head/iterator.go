package head

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// partIterator walks one list of parts of a member, trimmed to [mint, maxt].
// It decodes the shared timestamp column alongside the member's value column
// and skips rows where the member is absent.
type partIterator struct {
	d     *seriesData
	parts []part
	p     int // current part
	t     int64
	v     float64
	vt    chunkenc.ValueType        // of the current sample
	h     *histogram.Histogram      // the current histogram (vt ValHistogram): hbuf or a late one
	fh    *histogram.FloatHistogram // the current float histogram (vt ValFloatHistogram)
	hbuf  *histogram.Histogram      // decoded into, reused
	fhbuf *histogram.FloatHistogram
	err   error
	done  bool

	// Current chunk part.
	ts      encoding.TSDecoder
	tss     []int64 // the part's decoded timestamps, when shared; else ts decodes them
	vals    valDecoder
	col     *colData
	bits    []uint64 // the column's presence bitmap; nil when contiguous
	row     int      // rows of the timestamp column consumed
	next    int      // next present row index to yield
	left    int      // values left in the column
	inChunk bool

	// Current sample part.
	si int
}

// firstT returns the time of a sample part's first sample (MaxInt64 if none).
func (p *part) firstT() int64 {
	switch {
	case p.raw == nil:
	case len(p.raw.hists) > 0:
		return p.raw.hists[0].T
	case len(p.raw.samples) > 0:
		return p.raw.samples[0].T
	}
	return math.MaxInt64
}

func (it *partIterator) reset(d *seriesData, parts []part) {
	hbuf, fhbuf := it.hbuf, it.fhbuf
	*it = partIterator{d: d, parts: parts, p: -1, hbuf: hbuf, fhbuf: fhbuf}
}

// openPart moves to part p; false when there are no more.
func (it *partIterator) openPart(p int) bool {
	it.p = p
	it.inChunk = false
	if p >= len(it.parts) {
		it.done = true
		return false
	}
	pt := &it.parts[p]
	if pt.c == nil {
		it.si = -1
		return true
	}
	it.col = pt.c.col(int(pt.col))
	if it.col == nil {
		return it.openPart(p + 1)
	}
	it.inChunk = true
	it.tss = pt.tss
	if it.tss == nil && pt.frozen {
		it.tss = pt.c.timestamps()
	}
	if it.tss == nil {
		it.ts.Reset(pt.c.ts, pt.c.rows) // decoded as read (a copy of the chunk being built, or corrupt bytes)
	}
	it.vals.reset(pt.c, it.col)
	it.bits = pt.c.presence(it.col)
	it.row = 0
	it.left = int(it.col.n)
	it.next = int(it.col.first)
	return true
}

// nextPresent returns the first row >= from where a column with presence
// bitmap bm (nil: every row from its first on) has a value, -1 if none.
func nextPresent(bm []uint64, from int) int {
	if bm == nil {
		return from
	}
	w := from >> 6
	if w >= len(bm) {
		return -1
	}
	word := bm[w] &^ (1<<(uint(from)&63) - 1)
	for word == 0 {
		w++
		if w >= len(bm) {
			return -1
		}
		word = bm[w]
	}
	return w<<6 + bits.TrailingZeros64(word)
}

// valDecoder decodes a frozen column's values whatever their encoding.
type valDecoder struct {
	kind colKind
	xor  encoding.XORDecoder
	dec  encoding.DecimalDecoder
	h    *encoding.HistogramDecoder      // colHistogram, made on first use
	fh   *encoding.FloatHistogramDecoder // colFloatHistogram, made on first use
	cv   float64                         // colConst: the value
	left int                             // colConst: values left
	err  error
}

func (d *valDecoder) reset(c *chunk, cd *colData) {
	d.kind, d.err = cd.kind, nil
	b := c.vals(cd)
	switch cd.kind {
	case colConst:
		d.left = int(cd.n)
		if len(b) != 8 {
			d.err, d.left = errCorruptPresence, 0
			return
		}
		d.cv = math.Float64frombits(binary.LittleEndian.Uint64(b))
	case colDecimal:
		d.dec.Reset(b, int(cd.n))
	case colHistogram:
		if d.h == nil {
			d.h = new(encoding.HistogramDecoder)
		}
		d.h.Reset(b, int(cd.n))
	case colFloatHistogram:
		if d.fh == nil {
			d.fh = new(encoding.FloatHistogramDecoder)
		}
		d.fh.Reset(b, int(cd.n))
	default:
		d.xor.Reset(b, int(cd.n))
	}
}

func (d *valDecoder) next() bool {
	switch d.kind {
	case colConst:
		if d.left == 0 {
			return false
		}
		d.left--
		return true
	case colDecimal:
		return d.dec.Next()
	case colHistogram:
		return d.h.Next()
	case colFloatHistogram:
		return d.fh.Next()
	default:
		return d.xor.Next()
	}
}

func (d *valDecoder) at() float64 {
	switch d.kind {
	case colConst:
		return d.cv
	case colDecimal:
		return d.dec.At()
	case colHistogram, colFloatHistogram:
		return math.NaN() // read with atHistogram / atFloatHistogram
	default:
		return d.xor.At()
	}
}

func (d *valDecoder) error() error {
	switch {
	case d.err != nil:
		return d.err
	case d.kind == colDecimal:
		return d.dec.Err()
	case d.kind == colXOR:
		return d.xor.Err()
	case d.kind == colHistogram:
		return d.h.Err()
	case d.kind == colFloatHistogram:
		return d.fh.Err()
	}
	return nil
}

// atInto sets it's current value from d: a float, or a histogram decoded
// into it's buffers.
func (it *partIterator) atInto(d *valDecoder) {
	switch d.kind {
	case colHistogram:
		it.hbuf = d.h.At(it.hbuf)
		it.vt, it.h, it.fh = chunkenc.ValHistogram, it.hbuf, nil
	case colFloatHistogram:
		it.fhbuf = d.fh.At(it.fhbuf)
		it.vt, it.h, it.fh = chunkenc.ValFloatHistogram, nil, it.fhbuf
	default:
		it.vt, it.h, it.fh = chunkenc.ValFloat, nil, nil
		it.v = d.at()
	}
}

// step advances one sample regardless of range; false at the end.
func (it *partIterator) step() bool {
	for !it.done {
		if it.p < 0 {
			if !it.openPart(0) {
				return false
			}
		}
		if it.inChunk {
			if it.left == 0 {
				it.openPart(it.p + 1)
				continue
			}
			r := nextPresent(it.bits, it.next)
			if r < 0 {
				it.err = errCorruptPresence
				it.done = true
				return false
			}
			if it.tss != nil {
				if r >= len(it.tss) {
					it.err = errCorruptPresence
					it.done = true
					return false
				}
				it.t = it.tss[r]
			}
			for it.tss == nil && it.row <= r {
				if !it.ts.Next() {
					it.err = it.ts.Err()
					if it.err == nil {
						it.err = errCorruptPresence
					}
					it.done = true
					return false
				}
				it.row++
			}
			if !it.vals.next() {
				it.err = it.vals.error()
				if it.err == nil {
					it.err = errCorruptPresence
				}
				it.done = true
				return false
			}
			if it.tss == nil {
				it.t = it.ts.At()
			}
			it.atInto(&it.vals)
			it.next = r + 1
			it.left--
			return true
		}
		pt := it.parts[it.p].raw
		it.si++
		if pt.hists != nil {
			if it.si >= len(pt.hists) {
				it.openPart(it.p + 1)
				continue
			}
			hs := &pt.hists[it.si]
			it.t, it.h, it.fh, it.vt = hs.T, hs.H, hs.FH, chunkenc.ValHistogram
			if hs.FH != nil {
				it.vt = chunkenc.ValFloatHistogram
			}
			return true
		}
		if it.si >= len(pt.samples) {
			it.openPart(it.p + 1)
			continue
		}
		it.t, it.v, it.vt = pt.samples[it.si].T, pt.samples[it.si].V, chunkenc.ValFloat
		return true
	}
	return false
}

// Next implements chunkenc.Iterator.
func (it *partIterator) Next() chunkenc.ValueType {
	for it.step() {
		if it.t < it.d.mint {
			continue
		}
		if it.t > it.d.maxt {
			it.done = true
			return chunkenc.ValNone
		}
		return it.vt
	}
	return chunkenc.ValNone
}

// Seek implements chunkenc.Iterator.
func (it *partIterator) Seek(t int64) chunkenc.ValueType {
	if it.done {
		return chunkenc.ValNone
	}
	if it.p >= 0 && it.t >= t && it.t >= it.d.mint {
		return it.vt
	}
	if t < it.d.mint {
		t = it.d.mint
	}
	// Skip whole parts that end before t.
	for {
		np := it.p + 1
		if np >= len(it.parts) {
			break
		}
		if pt := &it.parts[np]; pt.c != nil && pt.c.minT <= t || pt.c == nil && pt.firstT() <= t {
			if !it.openPart(np) {
				return chunkenc.ValNone
			}
			continue
		}
		break
	}
	for it.step() {
		if it.t < t {
			continue
		}
		if it.t > it.d.maxt {
			it.done = true
			return chunkenc.ValNone
		}
		return it.vt
	}
	return chunkenc.ValNone
}

// seriesIterator merges a member's streams in time order: its samples in
// the group's shared table, in its own table and those accepted out of order.
type seriesIterator struct {
	st      [4]partIterator
	ok      [4]bool // the stream has a current sample
	n       int     // streams in use
	started bool
	cur     *partIterator
	starts  starts.Cursor
}

var _ chunkenc.Iterator = (*seriesIterator)(nil)

func newSeriesIterator(d *seriesData) *seriesIterator {
	it := &seriesIterator{}
	it.reset(d)
	return it
}

// noExtra is the dataExtra of a snapshot without one (read only).
var noExtra dataExtra

func (it *seriesIterator) reset(d *seriesData) {
	x := d.x
	if x == nil {
		x = &noExtra
	}
	it.starts.Reset(x.starts)
	it.st[0].reset(d, d.parts)
	it.n = 1
	if len(x.own) > 0 {
		it.st[it.n].reset(d, x.own)
		it.n++
	}
	if len(x.late) > 0 {
		it.st[it.n].reset(d, []part{{raw: &rawRun{samples: x.late}}})
		it.n++
	}
	if len(x.lateH) > 0 {
		it.st[it.n].reset(d, []part{{raw: &rawRun{hists: x.lateH}}})
		it.n++
	}
	it.ok, it.started, it.cur = [4]bool{}, false, &it.st[0]
}

// pick makes the stream with the smallest current timestamp current; a
// timestamp present in several streams (never stored so) is yielded once.
func (it *seriesIterator) pick() chunkenc.ValueType {
	best := -1
	for i := 0; i < it.n; i++ {
		if !it.ok[i] {
			continue
		}
		if best < 0 || it.st[i].t < it.st[best].t {
			best = i
		}
	}
	if best < 0 {
		return chunkenc.ValNone
	}
	for i := 0; i < it.n; i++ {
		if i != best && it.ok[i] && it.st[i].t == it.st[best].t {
			it.ok[i] = it.st[i].Next() != chunkenc.ValNone
		}
	}
	it.cur = &it.st[best]
	return it.cur.vt
}

// Next implements chunkenc.Iterator.
func (it *seriesIterator) Next() chunkenc.ValueType {
	if it.n == 1 {
		return it.st[0].Next()
	}
	if !it.started {
		it.started = true
		for i := 0; i < it.n; i++ {
			it.ok[i] = it.st[i].Next() != chunkenc.ValNone
		}
		return it.pick()
	}
	for i := 0; i < it.n; i++ {
		if &it.st[i] == it.cur {
			it.ok[i] = it.ok[i] && it.st[i].Next() != chunkenc.ValNone
		}
	}
	return it.pick()
}

// Seek implements chunkenc.Iterator.
func (it *seriesIterator) Seek(t int64) chunkenc.ValueType {
	if it.n == 1 {
		return it.st[0].Seek(t)
	}
	if !it.started {
		it.started = true
		for i := 0; i < it.n; i++ {
			it.ok[i] = it.st[i].Seek(t) != chunkenc.ValNone
		}
		return it.pick()
	}
	for i := 0; i < it.n; i++ {
		if it.ok[i] && it.st[i].t < t {
			it.ok[i] = it.st[i].Seek(t) != chunkenc.ValNone
		}
	}
	return it.pick()
}

// At implements chunkenc.Iterator.
func (it *seriesIterator) At() (int64, float64) { return it.cur.t, it.cur.v }

// AtHistogram implements chunkenc.Iterator: the current histogram, copied
// into h (allocated when nil).
func (it *seriesIterator) AtHistogram(h *histogram.Histogram) (int64, *histogram.Histogram) {
	c := it.cur
	if c.h == nil {
		return c.t, nil
	}
	if h == nil {
		return c.t, c.h.Copy()
	}
	c.h.CopyTo(h)
	return c.t, h
}

// AtFloatHistogram implements chunkenc.Iterator: the current histogram
// (integer ones converted), copied into fh (allocated when nil).
func (it *seriesIterator) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	c := it.cur
	switch {
	case c.h != nil:
		return c.t, c.h.ToFloat(fh)
	case c.fh == nil:
		return c.t, nil
	case fh == nil:
		return c.t, c.fh.Copy()
	}
	c.fh.CopyTo(fh)
	return c.t, fh
}

// value returns the current sample as lookup compares it (histograms copied).
func (it *seriesIterator) value(vt chunkenc.ValueType) sampleValue {
	switch vt {
	case chunkenc.ValHistogram:
		_, h := it.AtHistogram(nil)
		return sampleValue{h: h}
	case chunkenc.ValFloatHistogram:
		_, fh := it.AtFloatHistogram(nil)
		return sampleValue{fh: fh}
	}
	_, v := it.At()
	return sampleValue{v: v}
}

// AtT implements chunkenc.Iterator.
func (it *seriesIterator) AtT() int64 { return it.cur.t }

// AtST implements chunkenc.Iterator: the current sample's start timestamp.
func (it *seriesIterator) AtST() int64 {
	if it.starts.Empty() {
		return 0
	}
	return it.starts.At(it.AtT())
}

// Err implements chunkenc.Iterator.
func (it *seriesIterator) Err() error {
	for i := 0; i < it.n; i++ {
		if err := it.st[i].err; err != nil {
			return err
		}
	}
	return nil
}
