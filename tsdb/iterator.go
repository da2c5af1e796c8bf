package tsdb

import (
	"math/bits"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// seriesIterator walks one member's samples across its parts, trimmed to
// [mint, maxt]. It decodes the shared timestamp column alongside the member's
// value column and skips rows where the member is absent.
type seriesIterator struct {
	d    *seriesData
	p    int // current part
	t    int64
	v    float64
	err  error
	done bool

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

var _ chunkenc.Iterator = (*seriesIterator)(nil)

func newSeriesIterator(d *seriesData) *seriesIterator {
	it := &seriesIterator{d: d, p: -1}
	return it
}

func (it *seriesIterator) reset(d *seriesData) {
	*it = seriesIterator{d: d, p: -1}
}

// openPart moves to part p; false when there are no more.
func (it *seriesIterator) openPart(p int) bool {
	it.p = p
	it.inChunk = false
	if p >= len(it.d.parts) {
		it.done = true
		return false
	}
	pt := &it.d.parts[p]
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
func (it *seriesIterator) step() bool {
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
		pt := &it.d.parts[it.p]
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
func (it *seriesIterator) Next() chunkenc.ValueType {
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
func (it *seriesIterator) Seek(t int64) chunkenc.ValueType {
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
		if np >= len(it.d.parts) {
			break
		}
		if pt := &it.d.parts[np]; pt.c != nil && pt.c.minT <= t || pt.c == nil && len(pt.samples) > 0 && pt.samples[0].T <= t {
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

// At implements chunkenc.Iterator.
func (it *seriesIterator) At() (int64, float64) { return it.t, it.v }

// AtHistogram implements chunkenc.Iterator; the head holds floats only.
func (it *seriesIterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.t, nil
}

// AtFloatHistogram implements chunkenc.Iterator; the head holds floats only.
func (it *seriesIterator) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return it.t, nil
}

// AtT implements chunkenc.Iterator.
func (it *seriesIterator) AtT() int64 { return it.t }

// AtST implements chunkenc.Iterator; start timestamps are not stored yet.
func (it *seriesIterator) AtST() int64 { return 0 }

// Err implements chunkenc.Iterator.
func (it *seriesIterator) Err() error { return it.err }
