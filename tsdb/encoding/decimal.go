package encoding

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
)

// MaxDecimalScale is the largest number of decimal digits after the point that the decimal codec tries.
const MaxDecimalScale = 15

// maxExactInt is 2^53: every integer of smaller magnitude is exactly representable as a float64.
const maxExactInt = 1 << 53

// pow10 holds the exactly representable powers of ten used as decimal scales.
var pow10 = [MaxDecimalScale + 1]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// DecimalScale returns the smallest k <= maxScale such that every value v is
// exactly float64(m)/10^k for an integer m with |m| < 2^53 (bit-exact, so -0,
// NaN and ±Inf never qualify), and whether such a k exists. The mantissas are
// written to ms, which must have len(vals) capacity.
func DecimalScale(vals []float64, maxScale int, ms []int64) (int, bool) {
	maxScale = min(maxScale, MaxDecimalScale)
	ms = ms[:len(vals)]
scales:
	for k := 0; k <= maxScale; k++ {
		p := pow10[k]
		for i, v := range vals {
			m := math.Round(v * p)
			if !(m > -maxExactInt && m < maxExactInt) {
				return 0, false // NaN, ±Inf, or too large here and at every larger scale
			}
			mi := int64(m)
			if math.Float64bits(float64(mi)/p) != math.Float64bits(v) { // exactly what the decoder computes; rejects -0
				continue scales
			}
			ms[i] = mi
		}
		return k, true
	}
	return 0, false
}

// AppendDecimal appends the decimal encoding of the mantissas ms at scale k
// (values ms[i]/10^k) to dst, choosing the values themselves (order 0, for
// gauges that wander around a level), delta (order 1) or delta-of-delta
// (order 2) residuals, whichever is smallest; residuals that are all a
// multiple of one step apart (memory in pages, disk bytes in sectors) are
// stored divided by it. See the package documentation for the format.
func AppendDecimal(dst []byte, ms []int64, k int) []byte { return appendDecimal(dst, ms, k, false) }

// AppendDecimalRice is AppendDecimal, with residuals Rice-coded around
// their median when that is smaller (format version 4): about 8% smaller
// for noisy series, slower to write and to read; for blocks.
func AppendDecimalRice(dst []byte, ms []int64, k int) []byte { return appendDecimal(dst, ms, k, true) }

func appendDecimal(dst []byte, ms []int64, k int, tryRice bool) []byte {
	return appendDecimalFrame(dst, ms, k, tryRice, nil)
}

// appendDecimalFrame encodes ms; patches, when not nil, writes the list of
// values stored whole after the frame header (orderPatched).
func appendDecimalFrame(dst []byte, ms []int64, k int, tryRice bool, patches func(*bitWriter)) []byte {
	order, best := 0, residualBits(ms, 0)
	for o := 1; o <= 2; o++ {
		if b := residualBits(ms, o); b < best {
			order, best = o, b
		}
	}
	var base int64
	var width uint
	step := uint64(1)
	if len(ms) > order {
		base, width = residualRange(ms, order)
		if width > 1 {
			if step = residualStep(ms, order, base); step > 1 {
				width = uint(bits.Len64(maxOffset(ms, order, base) / step))
			}
		}
	}
	var (
		center int64
		riceK  uint
		rice   bool
	)
	if tryRice {
		center, riceK, rice = riceParams(ms, order, base, step, width)
	}
	w := bitWriter{b: dst, free: 0}
	w.writeBits(uint64(k), 8)
	flags := uint64(order)
	if step > 1 {
		flags |= orderStepped
	}
	if rice {
		flags |= orderRice
	}
	if patches != nil {
		flags |= orderPatched
	}
	w.writeBits(flags, 8)
	if order >= 1 && len(ms) > 0 {
		w.writeVarint(ms[0])
	}
	if order == 2 && len(ms) > 1 {
		w.writeVarint(ms[1] - ms[0])
	}
	if rice {
		w.writeVarint(center)
	} else {
		w.writeVarint(base)
	}
	if step > 1 {
		w.writeUvarint(step)
	}
	if !rice {
		w.writeBits(uint64(width), 8)
		if patches != nil {
			patches(&w)
		}
		for i := order; i < len(ms); i++ {
			w.writeBits((uint64(residual(ms, i, order))-uint64(base))/step, width)
		}
		return w.b
	}
	w.writeBits(uint64(riceK), 8)
	if patches != nil {
		patches(&w)
	}
	for i := order; i < len(ms); i++ {
		zz := riceField(residual(ms, i, order), center, step)
		if q := zz >> riceK; q < riceEscape {
			w.writeBits((1<<q-1)<<1, uint(q)+1) // q ones and a zero
			w.writeBits(zz, riceK)
		} else {
			w.writeBits(lowMask(riceEscape), riceEscape)
			w.writeBits(zz, 64)
		}
	}
	return w.b
}

const (
	// orderStepped flags, in the order byte, residuals stored divided by a step.
	orderStepped = 0x80
	// orderRice flags residuals Rice-coded around a center (format version 4).
	orderRice = 0x40
	// riceEscape is the longest unary quotient: that many ones with no zero
	// after them are followed by the field's 64 bits.
	riceEscape = 24
)

// riceField returns the zig-zagged distance d, in steps, of residual r from
// center (r - center is a multiple of step). d may wrap (step 1, distances
// of 2^63 or more): the decoder's center + d×step is exact modulo 2^64.
func riceField(r, center int64, step uint64) uint64 {
	var d int64
	if r >= center {
		d = int64((uint64(r) - uint64(center)) / step)
	} else {
		d = -int64((uint64(center) - uint64(r)) / step)
	}
	return uint64(d<<1) ^ uint64(d>>63)
}

// riceParams decides whether the residuals of ms (of the given order, with
// base, step and fixed width from AppendDecimal) take fewer bits Rice-coded
// around their median than in fixed-width fields: noise around a level or
// a rate is mostly near its center, which fixed width cannot exploit. It
// returns the center (a residual value) and the Rice parameter.
func riceParams(ms []int64, order int, base int64, step uint64, width uint) (int64, uint, bool) {
	n := len(ms) - order
	if n < 8 || width < 3 {
		return 0, 0, false
	}
	sc := riceScratch.Get().(*[]uint64)
	defer riceScratch.Put(sc)
	fields := slices.Grow((*sc)[:0], n+riceSample)[:n]
	for i := range fields {
		fields[i] = (uint64(residual(ms, i+order, order)) - uint64(base)) / step
	}
	// The center: the median of evenly spaced fields (sorting all of them
	// would cost more than the rest of the encoding).
	sample := fields[n : n+min(n, riceSample)]
	for i := range sample {
		sample[i] = fields[i*n/len(sample)]
	}
	slices.Sort(sample)
	mid := sample[len(sample)/2]
	center := int64(uint64(base) + mid*step)
	var sum float64
	for i, f := range fields {
		d := int64(f - mid)
		fields[i] = uint64(d<<1) ^ uint64(d>>63)
		sum += float64(fields[i])
	}
	*sc = fields
	k0 := bits.Len64(uint64(sum/float64(n))) - 1
	bestK, best := uint(0), int(width)*n
	for k := max(k0-1, 0); k <= min(k0+1, 63); k++ {
		cost := 0
		for _, zz := range fields {
			if q := zz >> uint(k); q < riceEscape {
				cost += int(q) + 1 + k
			} else {
				cost += riceEscape + 64
			}
		}
		if cost < best {
			bestK, best = uint(k), cost
		}
	}
	if best >= int(width)*n {
		return 0, 0, false
	}
	return center, bestK, true
}

// riceSample is how many fields riceParams takes the median of.
const riceSample = 63

var riceScratch = sync.Pool{New: func() any { return new([]uint64) }}

// residualStep returns the greatest common divisor of the residuals' offsets
// from base (1 as soon as it is 1, which is most often within a few values).
func residualStep(ms []int64, order int, base int64) uint64 {
	var g uint64
	for i := order; i < len(ms); i++ {
		if g = gcd(g, uint64(residual(ms, i, order))-uint64(base)); g == 1 {
			return 1
		}
	}
	return max(g, 1)
}

// maxOffset returns the largest offset of a residual from base.
func maxOffset(ms []int64, order int, base int64) uint64 {
	var hi uint64
	for i := order; i < len(ms); i++ {
		hi = max(hi, uint64(residual(ms, i, order))-uint64(base))
	}
	return hi
}

// gcd is Stein's binary greatest common divisor; gcd(0, x) = x.
func gcd(a, b uint64) uint64 {
	if a == 0 {
		return b
	}
	if b == 0 {
		return a
	}
	shift := bits.TrailingZeros64(a | b)
	a >>= bits.TrailingZeros64(a)
	for b != 0 {
		b >>= bits.TrailingZeros64(b)
		if a > b {
			a, b = b, a
		}
		b -= a
	}
	return a << shift
}

// residual returns the i-th residual (i >= order) of ms of the given order.
func residual(ms []int64, i, order int) int64 {
	if order == 0 {
		return ms[i]
	}
	d := ms[i] - ms[i-1]
	if order == 1 {
		return d
	}
	return d - (ms[i-1] - ms[i-2])
}

// residualRange returns the minimum residual and the bit width of the largest offset from it.
func residualRange(ms []int64, order int) (int64, uint) {
	lo := residual(ms, order, order)
	hi := lo
	for i := order + 1; i < len(ms); i++ {
		r := residual(ms, i, order)
		lo, hi = min(lo, r), max(hi, r)
	}
	return lo, uint(bits.Len64(uint64(hi) - uint64(lo)))
}

// residualBits estimates the encoded size in bits of ms with residuals of the given order.
func residualBits(ms []int64, order int) int {
	if len(ms) <= order {
		return 64 * (order + 1)
	}
	lo, w := residualRange(ms, order)
	n := int(w)*(len(ms)-order) + 8*varintLen(lo)
	if order >= 1 {
		n += 8 * varintLen(ms[0])
	}
	if order == 2 {
		n += 8 * varintLen(ms[1]-ms[0])
	}
	return n
}

// varintLen returns the length in bytes of x as a signed varint.
func varintLen(x int64) int {
	ux := uint64(x<<1) ^ uint64(x>>63)
	return (bits.Len64(ux|1) + 6) / 7
}

// DecimalDecoder decodes values written by AppendDecimal; the zero value is an empty decoder.
type DecimalDecoder struct {
	r     bitReader
	n, i  int
	order int
	p     float64
	m, d  int64
	d1    int64
	base  int64
	step  uint64 // residual = base + field*step
	width uint
	rice  bool // residual = base + zigzag(field)*step, field Rice-coded with parameter width
	x     patches
	err   error
}

// Reset prepares the decoder to read n values from b.
func (d *DecimalDecoder) Reset(b []byte, n int) {
	*d = DecimalDecoder{n: max(n, 0)}
	d.r.reset(b)
	d.err = d.header()
}

// header reads the scale, order, leading values and residual frame.
func (d *DecimalDecoder) header() error {
	k, ok := d.r.readBits(8)
	if !ok {
		return fmt.Errorf("decimal header: %w", ErrTruncated)
	}
	order, ok := d.r.readBits(8)
	if !ok {
		return fmt.Errorf("decimal header: %w", ErrTruncated)
	}
	stepped := order&orderStepped != 0
	d.rice = order&orderRice != 0
	patched := order&orderPatched != 0
	order &^= orderStepped | orderRice | orderPatched
	if k > MaxDecimalScale || order > 2 {
		return fmt.Errorf("decimal scale %d order %d: %w", k, order, ErrMalformed)
	}
	d.p, d.order, d.step = pow10[k], int(order), 1
	var err error
	if d.order >= 1 && d.n > 0 {
		if d.m, err = d.r.readVarint(); err != nil {
			return fmt.Errorf("decimal first value: %w", err)
		}
	}
	if d.order == 2 && d.n > 1 {
		if d.d1, err = d.r.readVarint(); err != nil {
			return fmt.Errorf("decimal first delta: %w", err)
		}
	}
	if d.base, err = d.r.readVarint(); err != nil {
		return fmt.Errorf("decimal residual base: %w", err)
	}
	if stepped {
		if d.step, err = d.r.readUvarint(); err != nil {
			return fmt.Errorf("decimal residual step: %w", err)
		}
		if d.step < 2 {
			return fmt.Errorf("decimal residual step %d: %w", d.step, ErrMalformed)
		}
	}
	w, ok := d.r.readBits(8)
	if !ok {
		return fmt.Errorf("decimal residual width: %w", ErrTruncated)
	}
	if w > 64 || d.rice && w > 63 {
		return fmt.Errorf("decimal residual width %d: %w", w, ErrMalformed)
	}
	d.width = uint(w)
	if patched {
		return d.readPatches()
	}
	return nil
}

// Next advances to the next value and reports whether there is one.
func (d *DecimalDecoder) Next() bool {
	if d.err != nil || d.i >= d.n {
		return false
	}
	switch {
	case d.order == 0:
		r, ok := d.residual()
		if !ok {
			d.err = fmt.Errorf("decode value %d of %d: %w", d.i, d.n, ErrTruncated)
			return false
		}
		d.m = r
	case d.i == 0:
	case d.order == 2 && d.i == 1:
		d.d = d.d1
		d.m += d.d
	default:
		r, ok := d.residual()
		if !ok {
			d.err = fmt.Errorf("decode value %d of %d: %w", d.i, d.n, ErrTruncated)
			return false
		}
		if d.order == 1 {
			d.m += r
		} else {
			d.d += r
			d.m += d.d
		}
	}
	if d.x.hit = d.i+1 == d.x.at; d.x.hit {
		d.x.cur = d.x.val
		d.x.advance()
	}
	d.i++
	return true
}

// residual reads the next residual field.
func (d *DecimalDecoder) residual() (int64, bool) {
	if !d.rice {
		f, ok := d.r.readBits(d.width)
		return int64(uint64(d.base) + f*d.step), ok
	}
	return riceNext(&d.r, d.width, uint64(d.base), d.step)
}

// readRice reads a Rice-coded field with parameter k bit by bit (escapes,
// fields across a buffer fill) into center + distance × step.
func readRice(r *bitReader, k uint, center, step uint64) (int64, bool) {
	zz, ok := readRiceField(r, k)
	return unRice(zz, center, step), ok
}

// readRiceField reads a Rice-coded field with parameter k bit by bit: the
// zig-zagged distance.
func readRiceField(r *bitReader, k uint) (uint64, bool) {
	q, ok := r.readUnary(riceEscape)
	if !ok {
		return 0, false
	}
	if q == riceEscape {
		return r.readBits(64)
	}
	lo, ok := r.readBits(k)
	return uint64(q)<<k | lo, ok
}

// riceFast decodes the Rice-coded field at the top of the n valid bits of
// buf when it is whole there, as most are (a few bits): the zig-zagged
// distance and the bits it took. ok is false for the others (an escape, a
// field past the buffer), which the caller reads after a fill or with
// readRice.
func riceFast(buf uint64, n, k uint) (zz uint64, used uint, ok bool) {
	ones := uint(bits.LeadingZeros64(^(buf << (64 - n)))) // at most n
	if ones >= riceEscape || ones+1+k > n {
		return 0, 0, false
	}
	used = ones + 1 + k
	return uint64(ones)<<k | (buf>>(n-used))&lowMask(k), used, true
}

// riceNext reads the next Rice-coded field with parameter k from r into
// center + distance × step.
func riceNext(r *bitReader, k uint, center, step uint64) (int64, bool) {
	zz, used, ok := riceFast(r.buf, r.n, k)
	if !ok {
		r.fill()
		if zz, used, ok = riceFast(r.buf, r.n, k); !ok {
			return readRice(r, k, center, step)
		}
	}
	r.n -= used
	return unRice(zz, center, step), true
}

// unRice returns center + d×step for the zig-zagged distance zz.
func unRice(zz, center, step uint64) int64 {
	return int64(center + uint64(int64(zz>>1)^-int64(zz&1))*step)
}

// At returns the current value.
func (d *DecimalDecoder) At() float64 {
	if d.x.hit {
		return d.x.cur
	}
	return float64(d.m) / d.p
}

// AppendNext skips the next skip values, then decodes up to k more (fewer
// at the end of the stream or on an error, see Err) and appends them to dst:
// the values Next and At would yield, in one loop. At then returns the last
// value decoded.
func (d *DecimalDecoder) AppendNext(dst []float64, skip, k int) []float64 {
	skip = max(min(skip, d.n-d.i), 0)
	k = min(k, d.n-d.i-skip)
	// The first values of a delta stream are special cases: Next has them.
	for (skip > 0 || k > 0) && d.i < d.order {
		if !d.Next() {
			return dst
		}
		if skip > 0 {
			skip--
		} else {
			dst = append(dst, d.At())
			k--
		}
	}
	if skip+k <= 0 || d.err != nil {
		return dst
	}
	// Fields are decoded a batch at a time into a scratch array, then turned
	// into residuals and values in separate loops: each loop keeps its state
	// in registers.
	dst = slices.Grow(dst, k)
	var fields [fieldBatch]uint64
	for skip+k > 0 {
		c := min(skip+k, fieldBatch)
		got := d.fields(fields[:c])
		vals := fields[:got]
		d.residuals(vals)
		drop := min(skip, got)
		dst = d.accumulate(dst, vals, drop)
		skip, k = skip-drop, k-(got-drop)
		d.i += got
		if got > 0 && (d.x.at > 0 || d.x.hit) {
			d.x.patch(dst[len(dst)-(got-drop):], d.i)
		}
		if got < c {
			break // d.err is set
		}
	}
	return dst
}

// fieldBatch is how many fields AppendNext decodes before it turns them into values.
const fieldBatch = 128

// fields reads the next len(out) residual fields into out (Rice-coded ones
// as zig-zagged distances) and returns how many it read: fewer only on an
// error, which it records.
func (d *DecimalDecoder) fields(out []uint64) int {
	i := 0
	for {
		if d.rice {
			i += d.r.riceRun(out[i:], d.width)
		} else {
			i += d.r.fixedRun(out[i:], d.width)
		}
		if i == len(out) {
			return i
		}
		// A field the reader's word does not hold whole: an escape, a
		// wide field, the last bytes of the data.
		var f uint64
		var ok bool
		if d.rice {
			f, ok = readRiceField(&d.r, d.width)
		} else {
			f, ok = d.r.readBits(d.width)
		}
		if !ok {
			d.err = fmt.Errorf("decode value %d of %d: %w", d.i+i, d.n, ErrTruncated)
			return i
		}
		out[i] = f
		i++
	}
}

// residuals turns the fields in vals into residuals, in place.
func (d *DecimalDecoder) residuals(vals []uint64) {
	base, step := uint64(d.base), d.step
	if d.rice {
		for i, zz := range vals {
			vals[i] = uint64(unRice(zz, base, step))
		}
		return
	}
	for i, f := range vals {
		vals[i] = base + f*step
	}
}

// accumulate applies the residuals in vals to the decoder's mantissa (and
// delta) and appends the values after the first drop to dst, written by
// index into dst grown once.
func (d *DecimalDecoder) accumulate(dst []float64, vals []uint64, drop int) []float64 {
	m, dd, p := d.m, d.d, d.p
	integers := p == 1 // float64(m)/1 is float64(m): no division
	start := len(dst)
	dst = slices.Grow(dst, len(vals)-drop)[:start+len(vals)-drop]
	out := dst[start:]
	switch d.order {
	case 0:
		if len(vals) > 0 {
			m = int64(vals[len(vals)-1])
		}
		for j, f := range vals[drop:] {
			v := float64(int64(f))
			if !integers {
				v /= p // the decoder's one exact conversion
			}
			out[j] = v
		}
	case 1:
		for _, f := range vals[:drop] {
			m += int64(f)
		}
		for j, f := range vals[drop:] {
			m += int64(f)
			v := float64(m)
			if !integers {
				v /= p
			}
			out[j] = v
		}
	default:
		for _, f := range vals[:drop] {
			dd += int64(f)
			m += dd
		}
		for j, f := range vals[drop:] {
			dd += int64(f)
			m += dd
			v := float64(m)
			if !integers {
				v /= p
			}
			out[j] = v
		}
	}
	d.m, d.d = m, dd
	return dst
}

// Err returns the error that stopped decoding, if any.
func (d *DecimalDecoder) Err() error { return d.err }
