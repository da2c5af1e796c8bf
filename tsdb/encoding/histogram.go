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
func mapCounts[T int64 | float64](dst []T, spans []histogram.Span, old []histogram.Span, oldAbs []T, shift uint, ok bool) {
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
		var acc T
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

// kOffset is subtracted from a row's Rice parameter K: a bucket whose
// predicted increment is λ is Rice-coded with parameter
// clamp(bits.Len64(λ)/2 + K - kOffset, 0, 31).
const kOffset = 8

// bucketK returns the Rice parameter of a bucket with predicted increment lambda in a row with parameter k.
func bucketK(lambda uint64, k uint) uint {
	return uint(min(max(kBase(lambda)+int(k)-kOffset, 0), 31))
}

// kBase is the Rice parameter for a residual of a bucket with predicted
// increment lambda before the row's adjustment: about log2 of the standard
// deviation sqrt(lambda) of a Poisson count.
func kBase(lambda uint64) int { return bits.Len64(lambda) / 2 }

const KB = 2

// countK returns the Rice parameter of a count delta after one whose zig-zag form was zprev.
func countK(zprev uint64) uint { return uint(min(max(bits.Len64(zprev)-1, 0), 31)) }

// predictions fills lambdas with the predicted increment of each bucket: the
// row's count delta n shared out in proportion to the predicted counts pred
// (buckets with a negative prediction get 0). All arithmetic is unsigned
// 64-bit and 128-bit integer arithmetic, so encoder and decoder agree.
func predictions(lambdas []uint64, pred []int64, n uint64) {
	var total uint64
	for _, p := range pred {
		if p > 0 {
			total += uint64(p)
		}
	}
	if int64(n) <= 0 || total == 0 {
		clear(lambdas)
		return
	}
	for j, p := range pred {
		lambdas[j] = 0
		if p <= 0 {
			continue
		}
		hi, lo := bits.Mul64(n, uint64(p))
		if hi < total {
			lambdas[j], _ = bits.Div64(hi, lo, total)
		}
	}
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
	np     int      // positive buckets in the layout
	abs    []int64  // absolute counts of the last row: positive buckets, negative buckets, zero count
	cur    []int64  // scratch: absolute counts of the row being appended
	pred   []int64  // scratch: predictions
	lambda []uint64 // scratch: predicted increments
	zs     []uint64 // scratch: zig-zagged residuals
	ks     []uint8  // scratch: bits.Len64(lambda)/2 of each residual
	count  uint64
	zn     uint64 // zig-zag form of the last count delta
	sum    uint64
	hint   histogram.CounterResetHint
	k      uint
	xor    XORAppender // only its window state is used
}

// sameLayout reports whether h has the encoder's current layout, bit for bit.
func (e *HistogramEncoder) sameLayout(h *histogram.Histogram) bool {
	return e.sameLayoutOf(h.Schema, h.ZeroThreshold, h.PositiveSpans, h.NegativeSpans, h.CustomValues)
}

// sameLayoutOf reports whether the layout given is the encoder's current one, bit for bit.
func (e *HistogramEncoder) sameLayoutOf(schema int32, zt float64, pos, neg []histogram.Span, custom []float64) bool {
	return schema == e.schema && math.Float64bits(zt) == e.zt &&
		slices.Equal(pos, e.pos) && slices.Equal(neg, e.neg) && sameFloatBits(custom, e.custom)
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

// checkBuckets reports an error unless the spans describe exactly as many buckets as there are.
func checkBuckets(pos, neg []histogram.Span, np, nn int) error {
	if spanBuckets(pos) != uint64(np) || spanBuckets(neg) != uint64(nn) {
		return fmt.Errorf("encoding: histogram spans of %d positive and %d negative buckets hold %d and %d",
			spanBuckets(pos), spanBuckets(neg), np, nn)
	}
	return nil
}

// Append adds h to the column. Every field round-trips exactly, including
// zero-length spans and NaN sums, except that CounterResetHint keeps only its
// two low bits (all defined hints fit). It returns an error, and appends
// nothing, if the spans do not describe exactly the buckets given.
func (e *HistogramEncoder) Append(h *histogram.Histogram) error {
	if err := checkBuckets(h.PositiveSpans, h.NegativeSpans, len(h.PositiveBuckets), len(h.NegativeBuckets)); err != nil {
		return err
	}
	newLayout := e.n == 0 || !e.sameLayout(h)
	np, nn := len(h.PositiveBuckets), len(h.NegativeBuckets)
	m := np + nn + 1
	e.cur = absCounts(e.cur, h.PositiveBuckets)
	e.cur = append(e.cur, absCounts(e.pred, h.NegativeBuckets)...)
	e.cur = append(e.cur, int64(h.ZeroCount))
	e.pred = slices.Grow(e.pred[:0], m)[:m]
	if newLayout {
		shift, ok := mapShift(e.schema, h.Schema)
		ok = ok && e.n > 0
		mapCounts(e.pred[:np], h.PositiveSpans, e.pos, e.abs[:e.np], shift, ok)
		mapCounts(e.pred[np:np+nn], h.NegativeSpans, e.neg, e.abs[e.np:max(len(e.abs)-1, e.np)], shift, ok)
		e.pred[m-1] = 0
		if e.n > 0 {
			e.pred[m-1] = e.abs[len(e.abs)-1] // the zero count carries over
		}
	} else {
		copy(e.pred, e.abs)
	}
	// Residuals against the prediction and against zero; keep the smaller.
	var sumDelta, sumAbs uint64
	for j, a := range e.cur {
		sumDelta += min(zigzag(a-e.pred[j]), 1<<40)
		sumAbs += min(zigzag(a), 1<<40)
	}
	absolute := e.n > 0 && sumAbs < sumDelta
	base := e.count
	if absolute || e.n == 0 {
		clear(e.pred)
		base = 0
	}
	zn := zigzag(int64(h.Count - base))
	e.lambda = slices.Grow(e.lambda[:0], m)[:m]
	predictions(e.lambda, e.pred, h.Count-base)
	e.zs, e.ks = e.zs[:0], e.ks[:0]
	for j, a := range e.cur {
		e.zs = append(e.zs, zigzag(e.pred[j]+int64(e.lambda[j])-a)) // increments above the prediction come first
		e.ks = append(e.ks, uint8(kBase(e.lambda[j])))
	}
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
		e.writeLayout(h.Schema, h.ZeroThreshold, h.PositiveSpans, h.NegativeSpans, h.CustomValues)
	}
	b, free = e.w.b, e.w.free
	if hint != e.hint {
		b, free = appendBits(b, free, uint64(hint), 2)
	}
	if k != e.k {
		b, free = appendBits(b, free, uint64(k), histKBits)
	}
	b, free = appendRice(b, free, zn, countK(e.zn))
	b, free = e.appendResiduals(b, free, k)
	sb := math.Float64bits(h.Sum)
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
	e.np = np
	e.count, e.zn, e.sum, e.hint, e.k = h.Count, zn, sb, hint, k
	e.n++
	return nil
}

// appendResiduals appends e.zs for the row parameter k: a residual whose
// parameter is 0 is paired with the next one if that one's parameter is 0 too:
// '0' when both are 0, else '1', rice(z1, 0) and rice(z2, 0), less 1 when z1 == 0.
func (e *HistogramEncoder) appendResiduals(b []byte, free uint, k uint) ([]byte, uint) {
	for j := 0; j < len(e.zs); j++ {
		kj := uint(min(max(int(e.ks[j])+int(k)-kOffset, 0), 31))
		if kj == 0 && j+1 < len(e.zs) && int(e.ks[j+1])+int(k) <= kOffset {
			z1, z2 := e.zs[j], e.zs[j+1]
			j++
			if z1 == 0 && z2 == 0 {
				b, free = appendBit(b, free, 0)
				continue
			}
			b, free = appendBit(b, free, 1)
			b, free = appendRice(b, free, z1, 0)
			if z1 == 0 {
				z2--
			}
			b, free = appendRice(b, free, z2, 0)
			continue
		}
		b, free = appendRice(b, free, e.zs[j], kj)
	}
	return b, free
}

// residualBits is the size appendResiduals writes for k.
func (e *HistogramEncoder) residualBits(k uint) uint64 {
	var c uint64
	for j := 0; j < len(e.zs); j++ {
		kj := uint(min(max(int(e.ks[j])+int(k)-kOffset, 0), 31))
		if kj == 0 && j+1 < len(e.zs) && int(e.ks[j+1])+int(k) <= kOffset {
			z1, z2 := e.zs[j], e.zs[j+1]
			j++
			if z1 == 0 && z2 == 0 {
				c++
				continue
			}
			if z1 == 0 {
				z2--
			}
			c += 1 + riceBits(z1, 0) + riceBits(z2, 0)
			continue
		}
		c += riceBits(e.zs[j], kj)
	}
	return c
}

// chooseK picks the row's Rice parameter K for e.zs; flagged reports whether
// the row header carries flags anyway (so changing K costs only its field).
func (e *HistogramEncoder) chooseK(flagged bool) uint {
	cost := func(k uint) uint64 {
		c := e.residualBits(k)
		if k != e.k {
			c += histKBits
			if !flagged {
				c += 4
			}
		}
		return c
	}
	var sum uint64
	for _, z := range e.zs {
		sum += min(z, 1<<40)
	}
	k0 := kOffset + bits.Len64(sum/uint64(len(e.zs))) - 1 // for rows without predictions
	best, bestCost := e.k, cost(e.k)
	try := func(lo, hi int) {
		for k := max(lo, 0); k <= min(hi, 1<<histKBits-1); k++ {
			if c := cost(uint(k)); c < bestCost {
				best, bestCost = uint(k), c
			}
		}
	}
	try(int(e.k)-1, int(e.k)+1)
	if k0 < int(e.k)-1 || k0 > int(e.k)+1 {
		try(k0-1, k0+1)
	}
	return best
}

// writeGamma appends v as its bit length L (0..64) in unary (L ones and a
// zero, or 64 ones) followed by the L-1 bits of v below its top bit.
func (w *bitWriter) writeGamma(v uint64) {
	l := uint(bits.Len64(v))
	if l == 64 {
		w.writeBits(lowMask(64), 64)
	} else {
		w.writeBits(lowMask(l)<<1, l+1)
	}
	if l > 1 {
		w.writeBits(v, l-1)
	}
}

// readGamma reads a value written by writeGamma.
func (r *bitReader) readGamma() (uint64, bool) {
	l, ok := r.readUnary(64)
	if !ok || l <= 1 {
		return uint64(l), ok
	}
	v, ok := r.readBits(l - 1)
	return 1<<(l-1) | v, ok
}

// writeLayout writes a layout and makes it the current one.
func (e *HistogramEncoder) writeLayout(schema int32, zt float64, pos, neg []histogram.Span, custom []float64) {
	w := &e.w
	if e.n > 0 && schema == e.schema && math.Float64bits(zt) == e.zt {
		w.writeBit(0)
	} else {
		w.writeBit(1)
		w.writeGamma(zigzag(int64(schema)))
		w.writeBits(math.Float64bits(zt), 64)
	}
	for _, spans := range [2][]histogram.Span{pos, neg} {
		w.writeGamma(uint64(len(spans)))
		for _, s := range spans {
			w.writeGamma(zigzag(int64(s.Offset)))
			w.writeGamma(uint64(s.Length))
		}
	}
	if sameFloatBits(custom, e.custom) {
		w.writeBit(0)
	} else {
		w.writeBit(1)
		w.writeGamma(uint64(len(custom)))
		for _, v := range custom {
			w.writeBits(math.Float64bits(v), 64)
		}
		e.custom = append(e.custom[:0], custom...)
	}
	e.schema, e.zt = schema, math.Float64bits(zt)
	e.pos = append(e.pos[:0], pos...)
	e.neg = append(e.neg[:0], neg...)
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
	e.np, e.abs = 0, e.abs[:0]
	e.count, e.zn, e.sum, e.hint, e.k = 0, 0, 0, 0, 0
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
	np        int       // positive buckets in the layout
	abs       []int64   // absolute counts: positive buckets, negative buckets, zero count
	cur       []int64   // the next row's predictions, then its counts
	lambda    []uint64
	count     uint64
	zn        uint64
	sum       uint64
	hint      histogram.CounterResetHint
	k         uint
	sumWin    xorWindow // the sum's XOR window
	err       error
}

// Reset prepares the decoder to read n histograms from b (a copy of HistogramEncoder.Bytes taken when Count was at least n).
func (d *HistogramDecoder) Reset(b []byte, n int) {
	d.r.reset(b)
	d.n, d.i = max(n, 0), 0
	d.schema, d.zt = 0, 0
	d.pos, d.neg = d.pos[:0], d.neg[:0]
	d.custom = d.custom[:0] // customOut stays: it is reused if the same custom values come again
	d.np, d.abs = 0, d.abs[:0]
	d.count, d.zn, d.sum, d.hint, d.k = 0, 0, 0, 0, 0
	d.sumWin = xorWindow{leading: noWindow}
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
func (d *HistogramDecoder) readRice(k uint) (uint64, bool) {
	q, ok := d.r.readUnary(histRiceEscape)
	if !ok {
		return 0, false
	}
	if q == histRiceEscape {
		return d.r.readBits(64)
	}
	low, ok := d.r.readBits(k)
	return uint64(q)<<k | low, ok
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
	absolute := flags&histFlagAbsolute != 0 || d.i == 0
	if flags&histFlagLayout != 0 {
		if err := d.readLayout(absolute); err != nil {
			return err
		}
	} else {
		d.cur = append(d.cur[:0], d.abs...)
	}
	if absolute {
		clear(d.cur)
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
	zn, ok := d.readRice(countK(d.zn))
	if !ok {
		return ErrTruncated
	}
	base := d.count
	if absolute {
		base = 0
	}
	dn := uint64(unzigzag(zn))
	d.lambda = slices.Grow(d.lambda[:0], len(d.cur))[:len(d.cur)]
	predictions(d.lambda, d.cur, dn)
	for j := 0; j < len(d.lambda); j++ {
		l := d.lambda[j]
		kj := bucketK(l, d.k)
		if kj == 0 && j+1 < len(d.lambda) && bucketK(d.lambda[j+1], d.k) == 0 {
			bit, ok := d.r.readBit()
			if !ok {
				return ErrTruncated
			}
			var z1, z2 uint64
			if bit == 1 {
				if z1, ok = d.readRice(0); !ok {
					return ErrTruncated
				}
				if z2, ok = d.readRice(0); !ok {
					return ErrTruncated
				}
				if z1 == 0 {
					z2++ // wraps only for a z2 no encoder writes, and then consistently
				}
			}
			d.cur[j] += int64(l) - unzigzag(z1)
			j++
			d.cur[j] += int64(d.lambda[j]) - unzigzag(z2)
			continue
		}
		z, ok := d.readRice(kj)
		if !ok {
			return ErrTruncated
		}
		d.cur[j] += int64(l) - unzigzag(z)
	}
	if err := d.readSum(); err != nil {
		return err
	}
	d.abs, d.cur = d.cur, d.abs
	d.count, d.zn = base+dn, zn
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
	x, err := d.r.readXORValue(&d.sumWin)
	if err != nil {
		return fmt.Errorf("sum: %w", err)
	}
	d.sum ^= x
	return nil
}

// readSpans reads a span list into dst[:0].
func (d *HistogramDecoder) readSpans(dst []histogram.Span) ([]histogram.Span, error) {
	ns, ok := d.r.readGamma()
	if !ok {
		return dst, ErrTruncated
	}
	if ns > d.r.remaining()/2 { // each span takes at least two bits
		return dst, ErrTruncated
	}
	dst = dst[:0]
	for range ns {
		zoff, ok := d.r.readGamma()
		if !ok {
			return dst, ErrTruncated
		}
		l, ok := d.r.readGamma()
		if !ok {
			return dst, ErrTruncated
		}
		off := unzigzag(zoff)
		if off != int64(int32(off)) || l > math.MaxUint32 {
			return dst, fmt.Errorf("span offset %d or length %d out of range: %w", off, l, ErrMalformed)
		}
		dst = append(dst, histogram.Span{Offset: int32(off), Length: uint32(l)})
	}
	return dst, nil
}

// readLayoutFields reads a layout: its spans into d.pos2 and d.neg2, its custom
// values into d.custom; it returns the schema, the zero threshold's bits and
// the numbers of positive and negative buckets.
func (d *HistogramDecoder) readLayoutFields() (schema int32, zt uint64, np, nn uint64, err error) {
	bit, ok := d.r.readBit()
	if !ok {
		return 0, 0, 0, 0, ErrTruncated
	}
	s, zt := int64(d.schema), d.zt
	if bit == 1 {
		zs, ok := d.r.readGamma()
		if !ok {
			return 0, 0, 0, 0, ErrTruncated
		}
		if s = unzigzag(zs); s != int64(int32(s)) {
			return 0, 0, 0, 0, fmt.Errorf("schema %d out of range: %w", s, ErrMalformed)
		}
		if zt, ok = d.r.readBits(64); !ok {
			return 0, 0, 0, 0, ErrTruncated
		}
	} else if d.i == 0 {
		return 0, 0, 0, 0, fmt.Errorf("first layout without a schema: %w", ErrMalformed)
	}
	if d.pos2, err = d.readSpans(d.pos2); err != nil {
		return 0, 0, 0, 0, err
	}
	if d.neg2, err = d.readSpans(d.neg2); err != nil {
		return 0, 0, 0, 0, err
	}
	bit, ok = d.r.readBit()
	if !ok {
		return 0, 0, 0, 0, ErrTruncated
	}
	if bit == 1 {
		nc, ok := d.r.readGamma()
		if !ok {
			return 0, 0, 0, 0, ErrTruncated
		}
		if nc > d.r.remaining()/64 {
			return 0, 0, 0, 0, ErrTruncated
		}
		d.custom = d.custom[:0]
		for range nc {
			v, _ := d.r.readBits(64)
			d.custom = append(d.custom, math.Float64frombits(v))
		}
		if !sameFloatBits(d.custom, d.customOut) {
			d.customOut = nil
		}
	}
	np, nn = spanBuckets(d.pos2), spanBuckets(d.neg2)
	if np+nn > d.r.remaining() { // each bucket takes at least one bit
		return 0, 0, 0, 0, ErrTruncated
	}
	return int32(s), zt, np, nn, nil
}

// readLayout reads a new layout and the predictions for its buckets into d.cur.
func (d *HistogramDecoder) readLayout(absolute bool) error {
	s, zt, np, nn, err := d.readLayoutFields()
	if err != nil {
		return err
	}
	m := int(np + nn + 1)
	d.cur = slices.Grow(d.cur[:0], m)[:m]
	shift, ok := mapShift(d.schema, s)
	ok = ok && !absolute
	mapCounts(d.cur[:np], d.pos2, d.pos, d.abs[:d.np], shift, ok)
	mapCounts(d.cur[np:m-1], d.neg2, d.neg, d.abs[d.np:max(len(d.abs)-1, d.np)], shift, ok)
	d.cur[m-1] = 0
	if !absolute {
		d.cur[m-1] = d.abs[len(d.abs)-1] // the zero count carries over
	}
	d.np = int(np)
	d.pos, d.pos2 = d.pos2, d.pos
	d.neg, d.neg2 = d.neg2, d.neg
	d.schema, d.zt = s, zt
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
	if len(d.abs) == 0 { // before the first Next
		d.abs = append(d.abs, 0)
	}
	h.CounterResetHint = d.hint
	h.Schema = d.schema
	h.ZeroThreshold = math.Float64frombits(d.zt)
	h.ZeroCount = uint64(d.abs[len(d.abs)-1])
	h.Count = d.count
	h.Sum = math.Float64frombits(d.sum)
	h.PositiveSpans = append(h.PositiveSpans[:0], d.pos...)
	h.NegativeSpans = append(h.NegativeSpans[:0], d.neg...)
	h.PositiveBuckets = appendDeltas(h.PositiveBuckets[:0], d.abs[:d.np])
	h.NegativeBuckets = appendDeltas(h.NegativeBuckets[:0], d.abs[d.np:len(d.abs)-1])
	h.CustomValues = d.customValues()
	return h
}

// customValues returns the current custom values as a slice shared by all
// histograms of the same custom values (nil if there are none).
func (d *HistogramDecoder) customValues() []float64 {
	if len(d.custom) == 0 {
		return nil
	}
	if d.customOut == nil {
		d.customOut = slices.Clone(d.custom)
	}
	return d.customOut
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
