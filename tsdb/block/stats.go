package block

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// Column statistics: a mask, first, then min, max, sum and last where they
// differ from first (see the Column section of docs/format/block.md).
// Version 7 adds two mask bits: the last value equal to the maximum (a
// counter's) is not stored again, and the stats may be stored relative to
// first (small varints for a counter's or a gauge's).
const (
	// statLastIsMax: last is not stored, it is max; set only with statMax
	// and statLast.
	statLastIsMax = 1 << 6
	// statRelative: with statInts, min, max and last are varints of their
	// difference from first, and sum of its difference from first × count
	// (int64 arithmetic, wrapping); without, a scale byte k follows the
	// mask, first is a varint mantissa m (first = m / 10^k), min, max and
	// last are varints of their mantissa's difference from m, and sum stays
	// an f64.
	statRelative = 1 << 7
)

// appendStats appends the mask and the stats of the float column vals
// (non-empty): first, and min, max, sum and last where they differ from it,
// relative to first when that is smaller.
func appendStats(dst []byte, vals []float64) []byte {
	count := len(vals)
	mn, mx, sum := colStats(vals)
	fv := vals[0]
	fb := math.Float64bits(fv)
	var mask byte
	stats := [4]float64{mn, mx, sum, vals[count-1]}
	for i, v := range stats {
		if math.Float64bits(v) != fb {
			mask |= 1 << uint(i)
		}
	}
	if mask&statSum != 0 && !math.IsNaN(fv) && math.Float64bits(fv*float64(count)) == math.Float64bits(sum) {
		mask = mask&^statSum | statSumIsFirstTimesCount // e.g. every constant column
	}
	ints := isInt(fv)
	for i, v := range stats {
		if mask&(1<<uint(i)) != 0 && !isInt(v) {
			ints = false
		}
	}
	if ints {
		mask |= statInts
	}
	if mask&statMax != 0 && mask&statLast != 0 && math.Float64bits(stats[3]) == math.Float64bits(stats[1]) {
		mask |= statLastIsMax
	}
	start := len(dst)
	dst = append(dst, mask)
	dst = appendStat(dst, fv, ints)
	for i, v := range stats {
		if mask&(1<<uint(i)) != 0 && !(i == 3 && mask&statLastIsMax != 0) {
			dst = appendStat(dst, v, ints)
		}
	}
	plain := len(dst) - start
	// The same relative to first, kept if smaller.
	rel := dst[len(dst):]
	rel = append(rel, mask|statRelative)
	var ms [4]int64
	switch {
	case ints:
		f := int64(fv)
		rel = binary.AppendVarint(rel, f)
		for i, v := range stats {
			if mask&(1<<uint(i)) == 0 || i == 3 && mask&statLastIsMax != 0 {
				continue
			}
			if i == 2 {
				rel = binary.AppendVarint(rel, int64(v)-f*int64(count))
			} else {
				rel = binary.AppendVarint(rel, int64(v)-f)
			}
		}
	default:
		sv := [4]float64{fv, stats[0], stats[1], stats[3]}
		k, ok := encoding.DecimalScale(sv[:], encoding.MaxDecimalScale, ms[:])
		if !ok {
			return dst
		}
		rel = append(rel, byte(k))
		rel = binary.AppendVarint(rel, ms[0])
		for i, v := range stats {
			switch {
			case mask&(1<<uint(i)) == 0 || i == 3 && mask&statLastIsMax != 0:
			case i == 2:
				rel = binary.LittleEndian.AppendUint64(rel, math.Float64bits(v))
			default:
				rel = binary.AppendVarint(rel, ms[[4]int{1, 2, 0, 3}[i]]-ms[0])
			}
		}
	}
	if len(rel) >= plain {
		return dst
	}
	return append(dst[:start], rel...)
}

// readStats reads the mask and stats of a float column of v.count values into v.
func (d *decbuf) readStats(i int, v *colView) error {
	mask := d.byte1()
	ints := mask&statInts != 0
	if d.err == nil && (mask&(statSum|statSumIsFirstTimesCount) == statSum|statSumIsFirstTimesCount ||
		mask&statLastIsMax != 0 && mask&(statMax|statLast) != statMax|statLast) {
		return fmt.Errorf("column %d: stat mask %#x: %w", i, mask, ErrCorrupt)
	}
	relative := mask&statRelative != 0
	var p float64 // the scale of relative decimal stats
	var m0 int64  // first's integer or mantissa
	// next reads a stat other than sum.
	next := func() float64 {
		switch {
		case !relative:
			return d.stat(ints)
		case ints:
			return float64(m0 + d.varint())
		default:
			return float64(m0+d.varint()) / p
		}
	}
	switch {
	case relative && !ints:
		k := int(d.byte1())
		if d.err == nil && k > encoding.MaxDecimalScale {
			return fmt.Errorf("column %d: stats scale %d: %w", i, k, ErrCorrupt)
		}
		p = math.Pow10(k)
		m0 = d.varint()
		v.first = float64(m0) / p
	case relative:
		m0 = d.varint()
		v.first = float64(m0)
	default:
		v.first = d.stat(ints)
	}
	v.min, v.max, v.sum, v.last = v.first, v.first, v.first, v.first
	if mask&statMin != 0 {
		v.min = next()
	}
	if mask&statMax != 0 {
		v.max = next()
	}
	switch {
	case mask&statSum == 0:
	case relative && ints:
		v.sum = float64(m0*int64(v.count) + d.varint())
	case relative:
		v.sum = d.f64()
	default:
		v.sum = d.stat(ints)
	}
	if mask&statSumIsFirstTimesCount != 0 {
		v.sum = v.first * float64(v.count)
	}
	switch {
	case mask&statLastIsMax != 0:
		v.last = v.max
	case mask&statLast != 0:
		v.last = next()
	}
	return nil
}
