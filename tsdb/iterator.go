package tsdb

import (
	"math/bits"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
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
	err   error
	done  bool

	// Current chunk part.
	ts      encoding.TSDecoder
	vals    encoding.XORDecoder
	col     *colData
	row     int // rows of the timestamp column consumed
	next    int // next present row index to yield
	left    int // values left in the column
	inChunk bool

	// Current sample part.
	si int
}

func (it *partIterator) reset(d *seriesData, parts []part) {
	*it = partIterator{d: d, parts: parts, p: -1}
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
	it.col = pt.c.col(pt.col)
	if it.col == nil {
		return it.openPart(p + 1)
	}
	it.inChunk = true
	it.ts.Reset(pt.c.ts, pt.c.rows)
	it.vals.Reset(it.col.vals, it.col.n)
	it.row = 0
	it.left = it.col.n
	it.next = it.col.first
	return true
}

// nextPresent returns the first row >= from where the column has a value.
func (c *colData) nextPresent(from int) int {
	if c.bits == nil {
		return from
	}
	w := from >> 6
	if w >= len(c.bits) {
		return -1
	}
	word := c.bits[w] &^ (1<<(uint(from)&63) - 1)
	for word == 0 {
		w++
		if w >= len(c.bits) {
			return -1
		}
		word = c.bits[w]
	}
	return w<<6 + bits.TrailingZeros64(word)
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
			r := it.col.nextPresent(it.next)
			if r < 0 {
				it.err = errCorruptPresence
				it.done = true
				return false
			}
			for it.row <= r {
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
			if !it.vals.Next() {
				it.err = it.vals.Err()
				it.done = true
				return false
			}
			it.t, it.v = it.ts.At(), it.vals.At()
			it.next = r + 1
			it.left--
			return true
		}
		pt := &it.parts[it.p]
		it.si++
		if it.si >= len(pt.samples) {
			it.openPart(it.p + 1)
			continue
		}
		it.t, it.v = pt.samples[it.si].T, pt.samples[it.si].V
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
		return chunkenc.ValFloat
	}
	return chunkenc.ValNone
}

// Seek implements chunkenc.Iterator.
func (it *partIterator) Seek(t int64) chunkenc.ValueType {
	if it.done {
		return chunkenc.ValNone
	}
	if it.p >= 0 && it.t >= t && it.t >= it.d.mint {
		return chunkenc.ValFloat
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
		if pt := &it.parts[np]; pt.c != nil && pt.c.minT <= t || pt.c == nil && len(pt.samples) > 0 && pt.samples[0].T <= t {
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
		return chunkenc.ValFloat
	}
	return chunkenc.ValNone
}

// seriesIterator merges a member's shared-table and own-table samples.
type seriesIterator struct {
	a, o     partIterator
	aOK, oOK bool // the stream has a current sample
	started  bool
	cur      *partIterator
	only     bool // only one stream: no merging
}

var _ chunkenc.Iterator = (*seriesIterator)(nil)

func newSeriesIterator(d *seriesData) *seriesIterator {
	it := &seriesIterator{}
	it.reset(d)
	return it
}

func (it *seriesIterator) reset(d *seriesData) {
	it.a.reset(d, d.parts)
	it.o.reset(d, d.own)
	it.aOK, it.oOK, it.started, it.cur = false, false, false, &it.a
	it.only = len(d.own) == 0
}

// pick makes the stream with the smaller current timestamp current.
func (it *seriesIterator) pick() chunkenc.ValueType {
	switch {
	case it.aOK && it.oOK:
		if it.o.t < it.a.t {
			it.cur = &it.o
		} else {
			it.cur = &it.a
			if it.o.t == it.a.t { // never stored twice; be safe
				it.oOK = it.o.Next() != chunkenc.ValNone
			}
		}
	case it.aOK:
		it.cur = &it.a
	case it.oOK:
		it.cur = &it.o
	default:
		return chunkenc.ValNone
	}
	return chunkenc.ValFloat
}

// Next implements chunkenc.Iterator.
func (it *seriesIterator) Next() chunkenc.ValueType {
	if it.only {
		return it.a.Next()
	}
	if !it.started {
		it.started = true
		it.aOK = it.a.Next() != chunkenc.ValNone
		it.oOK = it.o.Next() != chunkenc.ValNone
		return it.pick()
	}
	if it.cur == &it.a {
		it.aOK = it.aOK && it.a.Next() != chunkenc.ValNone
	} else {
		it.oOK = it.oOK && it.o.Next() != chunkenc.ValNone
	}
	return it.pick()
}

// Seek implements chunkenc.Iterator.
func (it *seriesIterator) Seek(t int64) chunkenc.ValueType {
	if it.only {
		return it.a.Seek(t)
	}
	if !it.started {
		it.started = true
		it.aOK = it.a.Seek(t) != chunkenc.ValNone
		it.oOK = it.o.Seek(t) != chunkenc.ValNone
		return it.pick()
	}
	if it.aOK && it.a.t < t {
		it.aOK = it.a.Seek(t) != chunkenc.ValNone
	}
	if it.oOK && it.o.t < t {
		it.oOK = it.o.Seek(t) != chunkenc.ValNone
	}
	return it.pick()
}

// At implements chunkenc.Iterator.
func (it *seriesIterator) At() (int64, float64) { return it.cur.t, it.cur.v }

// AtHistogram implements chunkenc.Iterator; the head holds floats only.
func (it *seriesIterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.cur.t, nil
}

// AtFloatHistogram implements chunkenc.Iterator; the head holds floats only.
func (it *seriesIterator) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return it.cur.t, nil
}

// AtT implements chunkenc.Iterator.
func (it *seriesIterator) AtT() int64 { return it.cur.t }

// AtST implements chunkenc.Iterator; start timestamps are not stored yet.
func (it *seriesIterator) AtST() int64 { return 0 }

// Err implements chunkenc.Iterator.
func (it *seriesIterator) Err() error {
	if err := it.a.err; err != nil {
		return err
	}
	return it.o.err
}
