package record

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/histogram"
)

// TypeCommitHistograms is the type byte of a Commit record with native
// histogram samples: the compact samples section, metadata, an exemplars
// section (whose count may be 0) and a histograms section (at least one).
const TypeCommitHistograms byte = 5

// Bits of a histogram's header (see doc.go).
const (
	histFloat       = 1 << 0 // float counts (FloatHistogram)
	histZeroThresh  = 1 << 1 // a non-zero zero threshold follows
	histCustom      = 1 << 2 // a custom values list follows
	histCustomPrev  = 1 << 3 // custom values are the last list of this record
	histHintShift   = 4      // counter reset hint in bits 4 to 11
	histHeaderLimit = 1 << 12
)

// Minimum encoded sizes of the histograms section's elements.
const (
	// two deltas, header, schema, count, zero count, 8-byte sum and four
	// empty lists (spans and buckets, positive and negative)
	minHistogramSize = 18
	minSpanSize      = 2 // varint offset + uvarint length
)

// appendHistograms writes the histograms section of c.
func (c *Commit) appendHistograms(buf []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(c.Histograms)))
	var prevRef uint64
	var prevT int64
	var lastCV []float64 // the last custom values list written
	for i := range c.Histograms {
		rh := &c.Histograms[i]
		buf = binary.AppendVarint(buf, int64(rh.Ref-prevRef))
		buf = binary.AppendVarint(buf, rh.T-prevT)
		prevRef, prevT = rh.Ref, rh.T
		switch h, fh := rh.H, rh.FH; {
		case h != nil && fh == nil:
			buf = appendHistHeader(buf, 0, h.CounterResetHint, h.Schema, h.ZeroThreshold, h.CustomValues, lastCV)
			buf = binary.AppendUvarint(buf, h.Count)
			buf = binary.AppendUvarint(buf, h.ZeroCount)
			buf = appendFloat(buf, h.Sum)
			buf = appendSpans(buf, h.PositiveSpans)
			buf = appendSpans(buf, h.NegativeSpans)
			buf = appendIntBuckets(buf, h.PositiveBuckets)
			buf = appendIntBuckets(buf, h.NegativeBuckets)
			buf = appendCustomValues(buf, h.CustomValues, &lastCV)
		case fh != nil && h == nil:
			buf = appendHistHeader(buf, histFloat, fh.CounterResetHint, fh.Schema, fh.ZeroThreshold, fh.CustomValues, lastCV)
			buf = appendFloat(buf, fh.Count)
			buf = appendFloat(buf, fh.ZeroCount)
			buf = appendFloat(buf, fh.Sum)
			buf = appendSpans(buf, fh.PositiveSpans)
			buf = appendSpans(buf, fh.NegativeSpans)
			buf = appendFloats(buf, fh.PositiveBuckets)
			buf = appendFloats(buf, fh.NegativeBuckets)
			buf = appendCustomValues(buf, fh.CustomValues, &lastCV)
		default:
			panic(fmt.Sprintf("record: histogram %d of ref %d must have exactly one of H and FH", i, rh.Ref))
		}
	}
	return buf
}

func appendHistHeader(buf []byte, kind uint64, hint histogram.CounterResetHint, schema int32, zt float64, cv, lastCV []float64) []byte {
	hdr := kind | uint64(hint)<<histHintShift
	if math.Float64bits(zt) != 0 {
		hdr |= histZeroThresh
	}
	if len(cv) > 0 {
		if sameFloats(cv, lastCV) {
			hdr |= histCustomPrev
		} else {
			hdr |= histCustom
		}
	}
	buf = binary.AppendUvarint(buf, hdr)
	buf = binary.AppendVarint(buf, int64(schema))
	if hdr&histZeroThresh != 0 {
		buf = appendFloat(buf, zt)
	}
	return buf
}

func appendFloat(buf []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
}

func appendFloats(buf []byte, vs []float64) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(vs)))
	for _, v := range vs {
		buf = appendFloat(buf, v)
	}
	return buf
}

func appendSpans(buf []byte, spans []histogram.Span) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(spans)))
	for _, s := range spans {
		buf = binary.AppendVarint(buf, int64(s.Offset))
		buf = binary.AppendUvarint(buf, uint64(s.Length))
	}
	return buf
}

func appendIntBuckets(buf []byte, deltas []int64) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(deltas)))
	for _, v := range deltas {
		buf = binary.AppendVarint(buf, v)
	}
	return buf
}

// appendCustomValues writes cv unless the header referred to *last, and
// makes it the last list.
func appendCustomValues(buf []byte, cv []float64, last *[]float64) []byte {
	if len(cv) == 0 || sameFloats(cv, *last) {
		return buf
	}
	*last = cv
	return appendFloats(buf, cv)
}

// sameFloats reports whether a and b are non-empty and bit-identical.
func sameFloats(a, b []float64) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// decodeHistograms reads the histograms section into fresh histograms;
// only the starts type allows it to be empty.
func (c *Commit) decodeHistograms(d *decoder, mayBeEmpty bool) {
	n := d.count("histogram", minHistogramSize)
	if d.err != nil {
		return
	}
	if n == 0 {
		if !mayBeEmpty {
			d.fail("histograms record without histograms")
		}
		return
	}
	c.Histograms = grow(c.Histograms, n)
	var prevRef uint64
	var prevT int64
	var lastCV []float64
	for i := 0; i < n && d.err == nil; i++ {
		ref := prevRef + uint64(d.varint("histogram ref delta"))
		t := prevT + d.varint("histogram timestamp delta")
		prevRef, prevT = ref, t
		hdr := d.uvarint("histogram header")
		if d.err == nil && (hdr >= histHeaderLimit || hdr&histCustom != 0 && hdr&histCustomPrev != 0) {
			d.fail("bad histogram header")
		}
		hint := histogram.CounterResetHint(hdr >> histHintShift)
		schema := d.int32("histogram schema")
		var zt float64
		if hdr&histZeroThresh != 0 {
			if zt = d.f64("histogram zero threshold"); d.err == nil && math.Float64bits(zt) == 0 {
				d.fail("zero threshold of 0 stored") // one encoding per commit
			}
		}
		if d.err != nil {
			return
		}
		rh := RefHistogram{Ref: ref, T: t}
		if hdr&histFloat == 0 {
			h := &histogram.Histogram{CounterResetHint: hint, Schema: schema, ZeroThreshold: zt}
			h.Count = d.uvarint("histogram count")
			h.ZeroCount = d.uvarint("histogram zero count")
			h.Sum = d.f64("histogram sum")
			h.PositiveSpans = d.spans(&positiveSpan)
			h.NegativeSpans = d.spans(&negativeSpan)
			h.PositiveBuckets = d.intBuckets("positive bucket")
			h.NegativeBuckets = d.intBuckets("negative bucket")
			h.CustomValues = d.customValues(hdr, &lastCV)
			rh.H = h
		} else {
			fh := &histogram.FloatHistogram{CounterResetHint: hint, Schema: schema, ZeroThreshold: zt}
			fh.Count = d.f64("histogram count")
			fh.ZeroCount = d.f64("histogram zero count")
			fh.Sum = d.f64("histogram sum")
			fh.PositiveSpans = d.spans(&positiveSpan)
			fh.NegativeSpans = d.spans(&negativeSpan)
			fh.PositiveBuckets = d.floats("positive bucket")
			fh.NegativeBuckets = d.floats("negative bucket")
			fh.CustomValues = d.customValues(hdr, &lastCV)
			rh.FH = fh
		}
		c.Histograms[i] = rh
	}
}

func (d *decoder) int32(what string) int32 {
	v := d.varint(what)
	if v != int64(int32(v)) {
		d.fail(what + " out of range")
		return 0
	}
	return int32(v)
}

// spanNames name a span list's parts in errors (constants: building the
// strings while decoding would allocate).
type spanNames struct{ list, offset, length string }

var (
	positiveSpan = spanNames{"positive span", "positive span offset", "positive span length"}
	negativeSpan = spanNames{"negative span", "negative span offset", "negative span length"}
)

// spans reads a span list; an empty one is nil.
func (d *decoder) spans(what *spanNames) []histogram.Span {
	n := d.count(what.list, minSpanSize)
	if n == 0 || d.err != nil {
		return nil
	}
	spans := make([]histogram.Span, n)
	for i := range spans {
		off := d.int32(what.offset)
		l := d.uvarint(what.length)
		if l > math.MaxUint32 {
			d.fail(what.length + " out of range")
		}
		if d.err != nil {
			return nil
		}
		spans[i] = histogram.Span{Offset: off, Length: uint32(l)}
	}
	return spans
}

// intBuckets reads delta-encoded integer bucket counts; an empty list is nil.
func (d *decoder) intBuckets(what string) []int64 {
	n := d.count(what, 1)
	if n == 0 || d.err != nil {
		return nil
	}
	bs := make([]int64, n)
	for i := range bs {
		bs[i] = d.varint(what)
	}
	if d.err != nil {
		return nil
	}
	return bs
}

// floats reads a list of 8-byte floats; an empty list is nil.
func (d *decoder) floats(what string) []float64 {
	n := d.count(what, 8)
	if n == 0 || d.err != nil {
		return nil
	}
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = d.f64(what)
	}
	return vs
}

// customValues reads a histogram's custom values as its header says. A
// list repeating the record's last one shares its backing array (custom
// values are immutable, as in Prometheus).
func (d *decoder) customValues(hdr uint64, last *[]float64) []float64 {
	switch {
	case d.err != nil:
		return nil
	case hdr&histCustomPrev != 0:
		if *last == nil {
			d.fail("custom values refer to none before")
		}
		return *last
	case hdr&histCustom != 0:
		cv := d.floats("custom value")
		if d.err == nil && len(cv) == 0 {
			d.fail("empty custom values list")
		}
		if d.err == nil && sameFloats(cv, *last) {
			d.fail("custom values repeat the last list") // one encoding per commit
		}
		*last = cv
		return cv
	}
	return nil
}
