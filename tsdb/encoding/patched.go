package encoding

import (
	"fmt"
	"math"
	"math/bits"
)

// Patched decimal streams (format version 7 blocks) hold a column of which
// a few values are not decimals at the scale that fits the rest: a counter
// whose exporter adds floats now and then (186.79500000000002 among values
// of two decimals), a staleness marker (NaN) at the end of a series. The
// mantissa stream carries a stand-in for each of them, and the values
// themselves follow the frame header whole, as in ALP's exceptions.

// orderPatched flags, in the order byte, a list of values stored whole.
const orderPatched = 0x20

// DecimalScalePatched is DecimalScale for values of which some are not
// decimals at the scale that fits the others: it returns the scale that
// makes the stream smallest (a value stored whole costs about 9 bytes, a
// digit of scale about 3.3 bits a value), the ascending indices of the
// values that are not float64(m)/10^k at it (appended to exc[:0]), and
// mantissas for every value in ms: exact ones, and a stand-in (the value
// rounded, else its neighbour's) where a value is kept whole. ok is false
// when more than a quarter of the values would be kept whole, or none.
func DecimalScalePatched(vals []float64, maxScale int, ms []int64, exc []int32) (int, []int32, bool) {
	maxScale = min(maxScale, MaxDecimalScale)
	n := len(vals)
	if maxScale < 0 || n == 0 {
		return 0, exc, false
	}
	ms = ms[:n]
	// Columns of arbitrary floats (most values not decimals) are common:
	// the first values decide for them.
	if head := vals[:min(n, 16)]; len(head) == 16 {
		none := 0
		for _, v := range head {
			if smallestScale(v, maxScale) > maxScale {
				none++
			}
		}
		if 4*none > len(head) {
			return 0, exc, false
		}
	}
	var hist [MaxDecimalScale + 2]int // values whose smallest scale is s; hist[maxScale+1]: none
	for _, v := range vals {
		s := smallestScale(v, maxScale)
		if hist[s]++; s > maxScale && 4*hist[s] > n {
			return 0, exc, false
		}
	}
	if hist[maxScale+1] == n {
		return 0, exc, false
	}
	idxBits := float64(bits.Len(uint(n)))
	best, bestCost, fit := -1, math.Inf(1), 0
	for k := 0; k <= maxScale; k++ {
		if fit += hist[k]; fit == 0 {
			continue
		}
		whole := n - fit
		if 4*whole > n {
			continue
		}
		if cost := float64(whole)*(64+idxBits) + float64(n*k)*math.Log2(10); cost < bestCost {
			best, bestCost = k, cost
		}
	}
	if best < 0 {
		return 0, exc, false
	}
	p := pow10[best]
	exact := func(v float64) (int64, bool) {
		m := math.Round(v * p)
		return int64(m), m > -maxExactInt && m < maxExactInt && math.Float64bits(float64(int64(m))/p) == math.Float64bits(v)
	}
	// A stand-in that cannot be the value rounded (NaN, ±Inf, too large)
	// repeats the mantissa before it, or the first exact one.
	var last int64
	for _, v := range vals {
		if m, ok := exact(v); ok {
			last = m
			break
		}
	}
	exc = exc[:0]
	for i, v := range vals {
		if m, ok := exact(v); ok {
			ms[i], last = m, m
			continue
		}
		exc = append(exc, int32(i))
		if m := math.Round(v * p); m > -maxExactInt && m < maxExactInt {
			ms[i] = int64(m) // near the value: the residuals stay small
		} else {
			ms[i] = last
		}
	}
	return best, exc, true
}

// smallestScale returns the smallest k <= maxScale at which v is
// float64(m)/10^k for an integer |m| < 2^53, or maxScale+1.
func smallestScale(v float64, maxScale int) int {
	for k := 0; k <= maxScale; k++ {
		m := math.Round(v * pow10[k])
		if !(m > -maxExactInt && m < maxExactInt) {
			return maxScale + 1 // NaN, ±Inf, or too large here and at every larger scale
		}
		if math.Float64bits(float64(int64(m))/pow10[k]) == math.Float64bits(v) {
			return k
		}
	}
	return maxScale + 1
}

// AppendDecimalRicePatched is AppendDecimalRice for the mantissas ms and
// scale k of DecimalScalePatched, with the values vals[i] for i in exc
// (ascending, non-empty) stored whole: decoders return them instead of
// their stand-ins.
func AppendDecimalRicePatched(dst []byte, ms []int64, k int, vals []float64, exc []int32) []byte {
	return appendDecimalFrame(dst, ms, k, true, func(w *bitWriter) {
		iw := uint(bits.Len(uint(len(ms) - 1)))
		w.writeUvarint(uint64(len(exc)))
		w.writeBits(uint64(iw), 8)
		for _, i := range exc {
			w.writeBits(uint64(i), iw)
			w.writeBits(math.Float64bits(vals[i]), 64)
		}
	})
}

// patches is a decoder's list of values stored whole.
type patches struct {
	r    bitReader // at the next entry
	left int       // entries after the next
	iw   uint      // bits of an index
	at   int       // index+1 of the next entry; 0 when there is none (the zero value)
	val  float64   // its value
	hit  bool      // the value decoded last is a patch: At returns cur
	cur  float64
}

// readPatches reads the list that follows the frame header (orderPatched)
// and checks it: indices ascending and below n, and the data long enough.
func (d *DecimalDecoder) readPatches() error {
	c, err := d.r.readUvarint()
	if err != nil {
		return fmt.Errorf("decimal patches: %w", err)
	}
	iw, ok := d.r.readBits(8)
	if !ok {
		return fmt.Errorf("decimal patches: %w", ErrTruncated)
	}
	if c == 0 || c > uint64(d.n) || iw > 32 {
		return fmt.Errorf("decimal patches: %d of %d values, %d-bit indices: %w", c, d.n, iw, ErrMalformed)
	}
	d.x = patches{r: d.r, left: int(c), iw: uint(iw)}
	prev := -1
	for range c {
		i, ok := d.r.readBits(uint(iw))
		if _, ok2 := d.r.readBits(64); !ok || !ok2 {
			return fmt.Errorf("decimal patches: %w", ErrTruncated)
		}
		if int(i) <= prev || i >= uint64(d.n) {
			return fmt.Errorf("decimal patch at %d after %d of %d values: %w", i, prev, d.n, ErrMalformed)
		}
		prev = int(i)
	}
	d.x.advance()
	return nil
}

// advance loads the next entry (checked by readPatches).
func (x *patches) advance() {
	if x.left == 0 {
		x.at = 0
		return
	}
	i, _ := x.r.readBits(x.iw)
	v, _ := x.r.readBits(64)
	x.at, x.val, x.left = int(i)+1, math.Float64frombits(v), x.left-1
}

// patch writes the patches of stream indices below to into vals, which
// holds the values of indices [to-len(vals), to), and notes whether the
// last one (to-1) is a patch.
func (x *patches) patch(vals []float64, to int) {
	x.hit = false
	first := to - len(vals)
	for x.at > 0 && x.at <= to {
		if x.at > first {
			vals[x.at-1-first] = x.val
		}
		if x.at == to {
			x.hit, x.cur = true, x.val
		}
		x.advance()
	}
}
