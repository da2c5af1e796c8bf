package encoding

import (
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
)

// FloatHistogramEncoder appends float native histograms
// (*histogram.FloatHistogram) to a histogram column, with the layouts of
// HistogramEncoder and every count, the zero count and the sum XORed with
// its prediction; see the package documentation. The zero value is an empty
// encoder; after the buffers have grown, Append does not allocate.
type FloatHistogramEncoder struct {
	l     HistogramEncoder // writer, row count and current layout
	np    int              // positive buckets in the layout
	vals  []float64        // the last row's counts: positive, negative, zero count
	cur   []float64        // scratch: the row being appended
	pred  []float64        // scratch: predictions
	win   []XORAppender    // per slot, then count and sum: only the XOR windows are used
	count uint64
	sum   uint64
}

// Append adds h to the column; every field round-trips bit for bit, except
// that CounterResetHint keeps only its two low bits. It returns an error, and
// appends nothing, if the spans do not describe exactly the buckets given.
func (e *FloatHistogramEncoder) Append(h *histogram.FloatHistogram) error {
	if err := checkBuckets(h.PositiveSpans, h.NegativeSpans, len(h.PositiveBuckets), len(h.NegativeBuckets)); err != nil {
		return err
	}
	l := &e.l
	newLayout := l.n == 0 || !l.sameLayoutOf(h.Schema, h.ZeroThreshold, h.PositiveSpans, h.NegativeSpans, h.CustomValues)
	np, nn := len(h.PositiveBuckets), len(h.NegativeBuckets)
	m := np + nn + 1
	e.cur = append(append(append(e.cur[:0], h.PositiveBuckets...), h.NegativeBuckets...), h.ZeroCount)
	e.pred = slices.Grow(e.pred[:0], m)[:m]
	if newLayout {
		shift, ok := mapShift(l.schema, h.Schema)
		ok = ok && l.n > 0
		mapCounts(e.pred[:np], h.PositiveSpans, l.pos, e.vals[:e.np], shift, ok)
		mapCounts(e.pred[np:np+nn], h.NegativeSpans, l.neg, e.vals[e.np:max(len(e.vals)-1, e.np)], shift, ok)
		e.pred[m-1] = 0
		if l.n > 0 {
			e.pred[m-1] = e.vals[len(e.vals)-1]
		}
	} else {
		copy(e.pred, e.vals)
	}
	if newLayout { // every value starts without a window
		e.win = slices.Grow(e.win[:0], m+2)[:m+2]
		for j := range e.win {
			e.win[j].leading = noWindow
		}
	}
	hint := h.CounterResetHint & 3
	var flags uint64
	if newLayout {
		flags |= histFlagLayout
	}
	if hint != l.hint {
		flags |= histFlagHint
	}
	if flags == 0 {
		l.w.writeBit(0)
	} else {
		l.w.writeBits(1<<4|flags, 5)
	}
	if newLayout {
		l.writeLayout(h.Schema, h.ZeroThreshold, h.PositiveSpans, h.NegativeSpans, h.CustomValues)
	}
	b, free := l.w.b, l.w.free
	if hint != l.hint {
		b, free = appendBits(b, free, uint64(hint), 2)
	}
	cb := math.Float64bits(h.Count)
	b, free = e.win[m].appendXORValue(b, free, cb^e.count)
	for j, v := range e.cur {
		b, free = e.win[j].appendXORValue(b, free, math.Float64bits(v)^math.Float64bits(e.pred[j]))
	}
	sb := math.Float64bits(h.Sum)
	b, free = e.win[m+1].appendXORValue(b, free, sb^e.sum)
	l.w.b, l.w.free = b, free
	e.vals, e.cur = e.cur, e.vals
	e.np, e.count, e.sum, l.hint = np, cb, sb, hint
	l.n++
	return nil
}

// Bytes returns the encoded stream; it aliases internal storage and its last byte may change on the next Append.
func (e *FloatHistogramEncoder) Bytes() []byte { return e.l.Bytes() }

// Count returns the number of appended histograms.
func (e *FloatHistogramEncoder) Count() int { return e.l.n }

// Reset empties the encoder, keeping the capacity of its buffers.
func (e *FloatHistogramEncoder) Reset() {
	e.l.Reset()
	e.np, e.vals, e.count, e.sum = 0, e.vals[:0], 0, 0
}

// FloatHistogramDecoder decodes histograms produced by
// FloatHistogramEncoder; the zero value is an empty decoder. It allocates as
// HistogramDecoder does.
type FloatHistogramDecoder struct {
	l     HistogramDecoder // reader, row counters and current layout
	np    int
	vals  []float64
	cur   []float64
	win   []xorWindow // per slot, then count and sum
	count uint64
	sum   uint64
}

// Reset prepares the decoder to read n histograms from b (a copy of FloatHistogramEncoder.Bytes taken when Count was at least n).
func (d *FloatHistogramDecoder) Reset(b []byte, n int) {
	d.l.Reset(b, n)
	d.np, d.vals, d.count, d.sum = 0, d.vals[:0], 0, 0
}

// Next advances to the next histogram and reports whether there is one.
func (d *FloatHistogramDecoder) Next() bool {
	l := &d.l
	if l.err != nil || l.i >= l.n {
		return false
	}
	if err := d.read(); err != nil {
		l.err = fmt.Errorf("decode float histogram %d of %d: %w", l.i, l.n, err)
		return false
	}
	l.i++
	return true
}

// read decodes one row.
func (d *FloatHistogramDecoder) read() error {
	l := &d.l
	bit, ok := l.r.readBit()
	if !ok {
		return ErrTruncated
	}
	var flags uint64
	if bit == 1 {
		if flags, ok = l.r.readBits(4); !ok {
			return ErrTruncated
		}
		if flags&^(histFlagLayout|histFlagHint) != 0 || flags == 0 {
			return fmt.Errorf("float histogram row flags %04b: %w", flags, ErrMalformed)
		}
	}
	if l.i == 0 && flags&histFlagLayout == 0 {
		return fmt.Errorf("first row without a layout: %w", ErrMalformed)
	}
	if flags&histFlagLayout != 0 {
		s, zt, np, nn, err := l.readLayoutFields()
		if err != nil {
			return err
		}
		m := int(np + nn + 1)
		d.cur = slices.Grow(d.cur[:0], m)[:m]
		shift, ok := mapShift(l.schema, s)
		ok = ok && l.i > 0
		mapCounts(d.cur[:np], l.pos2, l.pos, d.vals[:d.np], shift, ok)
		mapCounts(d.cur[np:m-1], l.neg2, l.neg, d.vals[d.np:max(len(d.vals)-1, d.np)], shift, ok)
		d.cur[m-1] = 0
		if l.i > 0 {
			d.cur[m-1] = d.vals[len(d.vals)-1]
		}
		d.np = int(np)
		d.win = slices.Grow(d.win[:0], m+2)[:m+2]
		for j := range d.win {
			d.win[j] = xorWindow{leading: noWindow}
		}
		l.pos, l.pos2 = l.pos2, l.pos
		l.neg, l.neg2 = l.neg2, l.neg
		l.schema, l.zt = s, zt
	} else {
		d.cur = append(d.cur[:0], d.vals...)
	}
	if flags&histFlagHint != 0 {
		v, ok := l.r.readBits(2)
		if !ok {
			return ErrTruncated
		}
		l.hint = histogram.CounterResetHint(v)
	}
	m := len(d.cur)
	x, err := l.r.readXORValue(&d.win[m])
	if err != nil {
		return err
	}
	d.count ^= x
	for j, v := range d.cur {
		if x, err = l.r.readXORValue(&d.win[j]); err != nil {
			return err
		}
		d.cur[j] = math.Float64frombits(math.Float64bits(v) ^ x)
	}
	if x, err = l.r.readXORValue(&d.win[m+1]); err != nil {
		return err
	}
	d.sum ^= x
	d.vals, d.cur = d.cur, d.vals
	return nil
}

// At returns the current histogram, written into h (allocated if nil) and
// reusing its span and bucket slices; CustomValues are shared as HistogramDecoder.At shares them.
func (d *FloatHistogramDecoder) At(h *histogram.FloatHistogram) *histogram.FloatHistogram {
	if h == nil {
		h = &histogram.FloatHistogram{}
	}
	l := &d.l
	if len(d.vals) == 0 { // before the first Next
		d.vals = append(d.vals, 0)
	}
	h.CounterResetHint = l.hint
	h.Schema = l.schema
	h.ZeroThreshold = math.Float64frombits(l.zt)
	h.ZeroCount = d.vals[len(d.vals)-1]
	h.Count = math.Float64frombits(d.count)
	h.Sum = math.Float64frombits(d.sum)
	h.PositiveSpans = append(h.PositiveSpans[:0], l.pos...)
	h.NegativeSpans = append(h.NegativeSpans[:0], l.neg...)
	h.PositiveBuckets = append(h.PositiveBuckets[:0], d.vals[:d.np]...)
	h.NegativeBuckets = append(h.NegativeBuckets[:0], d.vals[d.np:len(d.vals)-1]...)
	h.CustomValues = l.customValues()
	return h
}

// Err returns the error that stopped decoding, if any.
func (d *FloatHistogramDecoder) Err() error { return d.l.err }
