package encoding

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
)

const (
	histRiceEscape = 24 // a Rice quotient of 24 or more is written as 24 ones and the 64-bit value
	histKBits      = 5  // width of the Rice parameter field
	histMinSchema  = -4 // smallest exponential schema whose buckets can be remapped
	histMaxSchema  = 8  // largest exponential schema whose buckets can be remapped

	histFlagLayout   = 0b1000 // row flag: a layout follows
	histFlagHint     = 0b0100 // row flag: a counter reset hint follows
	histFlagK        = 0b0010 // row flag: a Rice parameter follows
	histFlagAbsolute = 0b0001 // row flag: counts are predicted from zero, not the previous row
)

// spanIter walks the bucket indices described by a slice of spans.
type spanIter struct {
	spans []histogram.Span
	si    int
	left  uint32
	idx   int64
}

func (it *spanIter) init(spans []histogram.Span) { *it = spanIter{spans: spans, si: -1} }

// next returns the next bucket index; ok is false after the last bucket.
func (it *spanIter) next() (idx int64, ok bool) {
	for it.left == 0 {
		it.si++
		if it.si >= len(it.spans) {
			return 0, false
		}
		it.idx += int64(it.spans[it.si].Offset)
		it.left = it.spans[it.si].Length
	}
	idx = it.idx
	it.idx++
	it.left--
	return idx, true
}

// spanBuckets returns the number of buckets the spans describe.
func spanBuckets(spans []histogram.Span) uint64 {
	var n uint64
	for _, s := range spans {
		n += uint64(s.Length)
	}
	return n
}

// mapShift reports how buckets of a row with schema old map to a row with
// schema cur: by index shifted right by shift (merging 2^shift buckets), or
// not at all (ok false: the prediction is zero).
func mapShift(old, cur int32) (shift uint, ok bool) {
	switch {
	case old == cur:
		return 0, true
	case cur < old && cur >= histMinSchema && old <= histMaxSchema:
		return uint(old - cur), true
	}
	return 0, false
}

// mapCounts fills dst (one count per bucket of spans) with the prediction
// from the previous row: the sum of the previous absolute counts oldAbs (one
// per bucket of old) whose index, shifted as for a schema reduction, equals the
// bucket's index. Indices that are not increasing only make the prediction worse.
func mapCounts(dst []int64, spans []histogram.Span, old []histogram.Span, oldAbs []int64, shift uint, ok bool) {
	if !ok || len(oldAbs) == 0 {
		clear(dst)
		return
	}
	reduce := func(i int64) int64 { return ((i - 1) >> shift) + 1 }
	var ni, oi spanIter
	ni.init(spans)
	oi.init(old)
	oIdx, oOK := oi.next()
	k := 0
	for j := range dst {
		t, _ := ni.next()
		var acc int64
		for oOK && reduce(oIdx) < t {
			oIdx, oOK = oi.next()
			k++
		}
		for oOK && reduce(oIdx) == t {
			acc += oldAbs[k]
			oIdx, oOK = oi.next()
			k++
		}
		dst[j] = acc
	}
}

// absCounts appends the absolute counts of the delta-encoded buckets to dst[:0].
func absCounts(dst []int64, deltas []int64) []int64 {
	dst = dst[:0]
	var c int64
	for _, d := range deltas {
		c += d
		dst = append(dst, c)
	}
	return dst
}

func zigzag(x int64) uint64   { return uint64(x<<1) ^ uint64(x>>63) }
func unzigzag(z uint64) int64 { return int64(z>>1) ^ -int64(z&1) }

// riceBits is the size of z Rice-coded with parameter k.
func riceBits(z uint64, k uint) uint64 {
	if q := z >> k; q < histRiceEscape {
		return q + 1 + uint64(k)
	}
	return histRiceEscape + 64
}

// appendRice appends z Rice-coded with parameter k (0..31).
func appendRice(b []byte, free uint, z uint64, k uint) ([]byte, uint) {
	q := z >> k
	if q >= histRiceEscape {
		b, free = appendBits(b, free, lowMask(histRiceEscape), histRiceEscape)
		return appendBits(b, free, z, 64)
	}
	// q ones, a zero, the k low bits: at most 24+1+31 bits in one write.
	return appendBits(b, free, lowMask(uint(q))<<(k+1)|z&lowMask(k), uint(q)+1+k)
}

// HistogramEncoder appends integer native histograms (*histogram.Histogram)
// to a histogram column; the timestamps are the group's. See the package
// documentation for the format. The zero value is an empty encoder; after the
// buffers have grown to the largest layout, Append does not allocate.
type HistogramEncoder struct {
	w      bitWriter
	n      int
	schema int32
	zt     uint64 // bits of the zero threshold
	pos    []histogram.Span
	neg    []histogram.Span
	custom []float64
	abs    []int64 // absolute positive bucket counts of the last row
	nabs   []int64 // absolute negative bucket counts of the last row
	cur    []int64 // scratch: absolute positive counts of the row being appended
	ncur   []int64
	pred   []int64 // scratch: predictions
	npred  []int64
	zs     []uint64 // scratch: zig-zagged residuals
	zc     uint64
	count  uint64
	sum    uint64
	hint   histogram.CounterResetHint
	k      uint
	xor    XOREncoder // only its window state is used
}

// sameLayout reports whether h has the encoder's current layout, bit for bit.
func (e *HistogramEncoder) sameLayout(h *histogram.Histogram) bool {
	return h.Schema == e.schema && math.Float64bits(h.ZeroThreshold) == e.zt &&
		slices.Equal(h.PositiveSpans, e.pos) && slices.Equal(h.NegativeSpans, e.neg) &&
		sameFloatBits(h.CustomValues, e.custom)
}

// sameFloatBits reports whether a and b hold the same bit patterns.
func sameFloatBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// Append adds h to the column. Every field round-trips exactly, including
// zero-length spans and NaN sums, except that CounterResetHint keeps only its
// two low bits (all defined hints fit).
func (e *HistogramEncoder) Append(h *histogram.Histogram) {
	newLayout := e.n == 0 || !e.sameLayout(h)
	e.cur = absCounts(e.cur, h.PositiveBuckets)
	e.ncur = absCounts(e.ncur, h.NegativeBuckets)
	e.pred = slices.Grow(e.pred[:0], len(e.cur))[:len(e.cur)]
	e.npred = slices.Grow(e.npred[:0], len(e.ncur))[:len(e.ncur)]
	if newLayout {
		shift, ok := mapShift(e.schema, h.Schema)
		ok = ok && e.n > 0
		mapCounts(e.pred, h.PositiveSpans, e.pos, e.abs, shift, ok)
		mapCounts(e.npred, h.NegativeSpans, e.neg, e.nabs, shift, ok)
	} else {
		copy(e.pred, e.abs)
		copy(e.npred, e.nabs)
	}
	// Residuals against the prediction and against zero; keep the smaller.
	var sumDelta, sumAbs uint64
	for j, a := range e.cur {
		sumDelta += min(zigzag(a-e.pred[j]), 1<<40)
		sumAbs += min(zigzag(a), 1<<40)
	}
	for j, a := range e.ncur {
		sumDelta += min(zigzag(a-e.npred[j]), 1<<40)
		sumAbs += min(zigzag(a), 1<<40)
	}
	absolute := e.n > 0 && sumAbs < sumDelta
	if absolute {
		clear(e.pred)
		clear(e.npred)
	}
	e.zs = e.zs[:0]
	var predCount uint64 // Count predicted from the buckets and the zero count
	predZC := e.zc
	if absolute || e.n == 0 {
		predZC = 0
	} else {
		predCount = e.count
	}
	for j, a := range e.cur {
		d := a - e.pred[j]
		e.zs = append(e.zs, zigzag(d))
		predCount += uint64(d)
	}
	for j, a := range e.ncur {
		d := a - e.npred[j]
		e.zs = append(e.zs, zigzag(d))
		predCount += uint64(d)
	}
	dzc := h.ZeroCount - predZC
	predCount += dzc
	zzc := zigzag(int64(dzc))
	hint := h.CounterResetHint & 3
	k := e.chooseK(newLayout || hint != e.hint || absolute)

	// Row header.
	b, free := e.w.b, e.w.free
	var flags uint64
	if newLayout {
		flags |= histFlagLayout
	}
	if hint != e.hint {
		flags |= histFlagHint
	}
	if k != e.k {
		flags |= histFlagK
	}
	if absolute {
		flags |= histFlagAbsolute
	}
	if flags == 0 {
		b, free = appendBit(b, free, 0)
	} else {
		b, free = appendBits(b, free, 1<<4|flags, 5)
	}
	e.w.b, e.w.free = b, free
	if newLayout {
		e.writeLayout(h)
	}
	b, free = e.w.b, e.w.free
	if hint != e.hint {
		b, free = appendBits(b, free, uint64(hint), 2)
	}
	if k != e.k {
		b, free = appendBits(b, free, uint64(k), histKBits)
	}
	for _, z := range e.zs {
		b, free = appendRice(b, free, z, k)
	}
	if zzc == 0 {
		b, free = appendBit(b, free, 0)
	} else {
		b, free = appendBit(b, free, 1)
		b, free = appendRice(b, free, zzc-1, k)
	}
	e.w.b, e.w.free = b, free
	if r := h.Count - predCount; r == 0 {
		e.w.writeBit(0)
	} else {
		e.w.writeBit(1)
		e.w.writeVarint(int64(r))
	}
	sb := math.Float64bits(h.Sum)
	b, free = e.w.b, e.w.free
	if e.n == 0 {
		b, free = appendBits(b, free, sb, 64)
		e.xor.leading = noWindow
	} else if x := sb ^ e.sum; x == 0 {
		b, free = appendBit(b, free, 0)
	} else {
		b, free = e.xor.appendXOR(b, free, x)
	}
	e.w.b, e.w.free = b, free

	e.abs, e.cur = e.cur, e.abs
	e.nabs, e.ncur = e.ncur, e.nabs
	e.zc, e.count, e.sum, e.hint, e.k = h.ZeroCount, h.Count, sb, hint, k
	e.n++
}

// chooseK picks the Rice parameter for e.zs; flagged reports whether the row
// header carries flags anyway (so changing k costs only the parameter).
func (e *HistogramEncoder) chooseK(flagged bool) uint {
	if len(e.zs) == 0 {
		return e.k
	}
	var sum uint64
	for _, z := range e.zs {
		sum += min(z, 1<<40)
	}
	mean := sum / uint64(len(e.zs))
	k0 := bits.Len64(mean) // about log2 of the mean
	cost := func(k uint) uint64 {
		var c uint64
		for _, z := range e.zs {
			c += riceBits(z, k)
		}
		if k != e.k {
			c += histKBits
			if !flagged {
				c += 4
			}
		}
		return c
	}
	best, bestCost := e.k, cost(e.k)
	for k := max(k0-2, 0); k <= min(k0+1, 1<<histKBits-1); k++ {
		if c := cost(uint(k)); c < bestCost {
			best, bestCost = uint(k), c
		}
	}
	return best
}

// writeLayout writes h's layout and makes it the current one.
func (e *HistogramEncoder) writeLayout(h *histogram.Histogram) {
	w := &e.w
	w.writeVarint(int64(h.Schema))
	w.writeBits(math.Float64bits(h.ZeroThreshold), 64)
	for _, spans := range [2][]histogram.Span{h.PositiveSpans, h.NegativeSpans} {
		w.writeUvarint(uint64(len(spans)))
		for _, s := range spans {
			w.writeVarint(int64(s.Offset))
			w.writeUvarint(uint64(s.Length))
		}
	}
	if sameFloatBits(h.CustomValues, e.custom) {
		w.writeBit(0)
	} else {
		w.writeBit(1)
		w.writeUvarint(uint64(len(h.CustomValues)))
		for _, v := range h.CustomValues {
			w.writeBits(math.Float64bits(v), 64)
		}
		e.custom = append(e.custom[:0], h.CustomValues...)
	}
	e.schema, e.zt = h.Schema, math.Float64bits(h.ZeroThreshold)
	e.pos = append(e.pos[:0], h.PositiveSpans...)
	e.neg = append(e.neg[:0], h.NegativeSpans...)
}

// Bytes returns the encoded stream; it aliases internal storage and its last byte may change on the next Append.
func (e *HistogramEncoder) Bytes() []byte { return e.w.b }

// Count returns the number of appended histograms.
func (e *HistogramEncoder) Count() int { return e.n }

// Reset empties the encoder, keeping the capacity of its buffers.
func (e *HistogramEncoder) Reset() {
	e.w.reset()
	e.n, e.schema, e.zt = 0, 0, 0
	e.pos, e.neg, e.custom = e.pos[:0], e.neg[:0], e.custom[:0]
	e.abs, e.nabs = e.abs[:0], e.nabs[:0]
	e.zc, e.count, e.sum, e.hint, e.k = 0, 0, 0, 0, 0
	e.xor.leading, e.xor.trailing = noWindow, 0
}

// HistogramDecoder decodes histograms produced by HistogramEncoder; the zero
// value is an empty decoder. It keeps the current layout and counts in
// buffers that grow to the largest layout and are reused across Reset.
type HistogramDecoder struct {
	r         bitReader
	n, i      int
	schema    int32
	zt        uint64
	pos, neg  []histogram.Span
	pos2      []histogram.Span // spare buffers for reading a new layout
	neg2      []histogram.Span
	custom    []float64
	customOut []float64 // immutable copy of custom handed to callers, nil until needed
	abs, nabs []int64
	cur, ncur []int64
	zc        uint64
	count     uint64
	sum       uint64
	hint      histogram.CounterResetHint
	k         uint
	leading   uint8
	trailing  uint8
	err       error
}

// Reset prepares the decoder to read n histograms from b (a copy of HistogramEncoder.Bytes taken when Count was at least n).
func (d *HistogramDecoder) Reset(b []byte, n int) {
	d.r.reset(b)
	d.n, d.i = max(n, 0), 0
	d.schema, d.zt = 0, 0
	d.pos, d.neg = d.pos[:0], d.neg[:0]
	d.custom, d.customOut = d.custom[:0], nil
	d.abs, d.nabs = d.abs[:0], d.nabs[:0]
	d.zc, d.count, d.sum, d.hint, d.k = 0, 0, 0, 0, 0
	d.leading, d.trailing = noWindow, 0
	d.err = nil
}

// Next advances to the next histogram and reports whether there is one.
func (d *HistogramDecoder) Next() bool {
	if d.err != nil || d.i >= d.n {
		return false
	}
	if err := d.read(); err != nil {
		d.err = fmt.Errorf("decode histogram %d of %d: %w", d.i, d.n, err)
		return false
	}
	d.i++
	return true
}

// remaining returns the number of unread bits.
func (r *bitReader) remaining() uint64 {
	return uint64(len(r.b)-r.pos)*8 + uint64(r.n)
}

// readRice reads a value Rice-coded with parameter k.
func (d *HistogramDecoder) readRice() (uint64, bool) {
	q, ok := d.r.readUnary(histRiceEscape)
	if !ok {
		return 0, false
	}
	if q == histRiceEscape {
		return d.r.readBits(64)
	}
	low, ok := d.r.readBits(d.k)
	return uint64(q)<<d.k | low, ok
}

// read decodes one row.
func (d *HistogramDecoder) read() error {
	bit, ok := d.r.readBit()
	if !ok {
		return ErrTruncated
	}
	var flags uint64
	if bit == 1 {
		if flags, ok = d.r.readBits(4); !ok {
			return ErrTruncated
		}
		if flags == 0 {
			return fmt.Errorf("row header without flags: %w", ErrMalformed)
		}
	}
	if d.i == 0 && flags&histFlagLayout == 0 {
		return fmt.Errorf("first row without a layout: %w", ErrMalformed)
	}
	if flags&histFlagLayout != 0 {
		if err := d.readLayout(flags&histFlagAbsolute != 0); err != nil {
			return err
		}
	} else {
		d.cur = append(d.cur[:0], d.abs...)
		d.ncur = append(d.ncur[:0], d.nabs...)
		if flags&histFlagAbsolute != 0 {
			clear(d.cur)
			clear(d.ncur)
		}
	}
	if flags&histFlagHint != 0 {
		v, ok := d.r.readBits(2)
		if !ok {
			return ErrTruncated
		}
		d.hint = histogram.CounterResetHint(v)
	}
	if flags&histFlagK != 0 {
		v, ok := d.r.readBits(histKBits)
		if !ok {
			return ErrTruncated
		}
		d.k = uint(v)
	}
	var predCount uint64
	predZC := d.zc
	if flags&histFlagAbsolute != 0 || d.i == 0 {
		predZC = 0
	} else {
		predCount = d.count
	}
	for _, c := range [2][]int64{d.cur, d.ncur} {
		for j := range c {
			z, ok := d.readRice()
			if !ok {
				return ErrTruncated
			}
			dv := unzigzag(z)
			c[j] += dv
			predCount += uint64(dv)
		}
	}
	if bit, ok = d.r.readBit(); !ok {
		return ErrTruncated
	}
	var dzc uint64
	if bit == 1 {
		z, ok := d.readRice()
		if !ok {
			return ErrTruncated
		}
		dzc = uint64(unzigzag(z + 1))
	}
	zc := predZC + dzc
	predCount += dzc
	if bit, ok = d.r.readBit(); !ok {
		return ErrTruncated
	}
	if bit == 1 {
		r, err := d.r.readVarint()
		if err != nil {
			return err
		}
		predCount += uint64(r)
	}
	if err := d.readSum(); err != nil {
		return err
	}
	d.abs, d.cur = d.cur, d.abs
	d.nabs, d.ncur = d.ncur, d.nabs
	d.zc, d.count = zc, predCount
	return nil
}

// readSum reads the sum as the XOR value column does.
func (d *HistogramDecoder) readSum() error {
	if d.i == 0 {
		v, ok := d.r.readBits(64)
		if !ok {
			return ErrTruncated
		}
		d.sum = v
		return nil
	}
	bit, ok := d.r.readBit()
	if !ok {
		return ErrTruncated
	}
	if bit == 0 {
		return nil
	}
	if bit, ok = d.r.readBit(); !ok {
		return ErrTruncated
	}
	if bit == 1 {
		hdr, ok := d.r.readBits(11)
		if !ok {
			return ErrTruncated
		}
		lead, sig := uint(hdr>>6), uint(hdr&63)
		if sig == 0 {
			sig = 64
		}
		if lead+sig > 64 {
			return fmt.Errorf("sum window of %d leading and %d significant bits: %w", lead, sig, ErrMalformed)
		}
		d.leading, d.trailing = uint8(lead), uint8(64-lead-sig)
	} else if d.leading == noWindow {
		return fmt.Errorf("sum window reused before one was set: %w", ErrMalformed)
	}
	x, ok := d.r.readBits(64 - uint(d.leading) - uint(d.trailing))
	if !ok {
		return ErrTruncated
	}
	d.sum ^= x << d.trailing
	return nil
}

// readSpans reads a span list into dst[:0].
func (d *HistogramDecoder) readSpans(dst []histogram.Span) ([]histogram.Span, error) {
	ns, err := d.r.readUvarint()
	if err != nil {
		return dst, err
	}
	if ns > d.r.remaining()/16 { // each span takes at least two bytes
		return dst, ErrTruncated
	}
	dst = dst[:0]
	for range ns {
		off, err := d.r.readVarint()
		if err != nil {
			return dst, err
		}
		l, err := d.r.readUvarint()
		if err != nil {
			return dst, err
		}
		if off != int64(int32(off)) || l > math.MaxUint32 {
			return dst, fmt.Errorf("span offset %d or length %d out of range: %w", off, l, ErrMalformed)
		}
		dst = append(dst, histogram.Span{Offset: int32(off), Length: uint32(l)})
	}
	return dst, nil
}

// readLayout reads a new layout and the predicted counts for its buckets into d.cur, d.ncur.
func (d *HistogramDecoder) readLayout(absolute bool) error {
	s, err := d.r.readVarint()
	if err != nil {
		return err
	}
	if s != int64(int32(s)) {
		return fmt.Errorf("schema %d out of range: %w", s, ErrMalformed)
	}
	zt, ok := d.r.readBits(64)
	if !ok {
		return ErrTruncated
	}
	if d.pos2, err = d.readSpans(d.pos2); err != nil {
		return err
	}
	if d.neg2, err = d.readSpans(d.neg2); err != nil {
		return err
	}
	bit, ok := d.r.readBit()
	if !ok {
		return ErrTruncated
	}
	if bit == 1 {
		nc, err := d.r.readUvarint()
		if err != nil {
			return err
		}
		if nc > d.r.remaining()/64 {
			return ErrTruncated
		}
		d.custom = d.custom[:0]
		for range nc {
			v, _ := d.r.readBits(64)
			d.custom = append(d.custom, math.Float64frombits(v))
		}
		d.customOut = nil
	}
	np, nn := spanBuckets(d.pos2), spanBuckets(d.neg2)
	if np+nn > d.r.remaining() { // each bucket takes at least one bit
		return ErrTruncated
	}
	d.cur = slices.Grow(d.cur[:0], int(np))[:np]
	d.ncur = slices.Grow(d.ncur[:0], int(nn))[:nn]
	shift, ok := mapShift(d.schema, int32(s))
	ok = ok && d.i > 0 && !absolute
	mapCounts(d.cur, d.pos2, d.pos, d.abs, shift, ok)
	mapCounts(d.ncur, d.neg2, d.neg, d.nabs, shift, ok)
	d.pos, d.pos2 = d.pos2, d.pos
	d.neg, d.neg2 = d.neg2, d.neg
	d.schema, d.zt = int32(s), zt
	return nil
}

// At returns the current histogram, written into h (allocated if nil) and
// reusing its span and bucket slices. CustomValues are shared by reference
// between the histograms of one layout, as Prometheus interns them: the
// decoder allocates one copy per distinct set of custom values, on first use.
func (d *HistogramDecoder) At(h *histogram.Histogram) *histogram.Histogram {
	if h == nil {
		h = &histogram.Histogram{}
	}
	h.CounterResetHint = d.hint
	h.Schema = d.schema
	h.ZeroThreshold = math.Float64frombits(d.zt)
	h.ZeroCount = d.zc
	h.Count = d.count
	h.Sum = math.Float64frombits(d.sum)
	h.PositiveSpans = append(h.PositiveSpans[:0], d.pos...)
	h.NegativeSpans = append(h.NegativeSpans[:0], d.neg...)
	h.PositiveBuckets = appendDeltas(h.PositiveBuckets[:0], d.abs)
	h.NegativeBuckets = appendDeltas(h.NegativeBuckets[:0], d.nabs)
	if len(d.custom) == 0 {
		h.CustomValues = nil
	} else {
		if d.customOut == nil {
			d.customOut = slices.Clone(d.custom)
		}
		h.CustomValues = d.customOut
	}
	return h
}

// appendDeltas appends the absolute counts abs as Prometheus's bucket deltas.
func appendDeltas(dst []int64, abs []int64) []int64 {
	var prev int64
	for _, a := range abs {
		dst = append(dst, a-prev)
		prev = a
	}
	return dst
}

// Err returns the error that stopped decoding, if any.
func (d *HistogramDecoder) Err() error { return d.err }
