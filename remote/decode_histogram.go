package remote

import (
	"fmt"
	"math"
	"net/http"
	"unsafe"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// This file decodes the native histograms of both protocol versions: 1.0's
// prometheus.Histogram and 2.0's io.prometheus.write.v2.Histogram share
// fields 1-16 (2.0 adds 17, start_timestamp, kept in HistogramSample.ST).
//
// A histogram is read twice: a first pass checks the wire format as the
// generated code would and counts the spans, buckets and custom bounds, so
// that the limits are checked before anything is allocated; a second pass
// fills a fresh histogram.Histogram (integer counts) or
// histogram.FloatHistogram (float counts), which the Appender keeps. Then
// it is checked as Prometheus's receiver does: schemas 9…52 (reserved for
// higher resolutions) are reduced to 8, and Validate must accept it.

// Highest Histogram field number of each version (2.0 adds start_timestamp).
const (
	histogramFieldsV1 = 16
	histogramFieldsV2 = 17
)

// errInvalidHistogram is the rejection reason of native histograms that
// Prometheus would not accept (histogram.Histogram.Validate) or that exceed
// MaxBucketsPerHistogram: the head's reason, so both count alike.
var errInvalidHistogram = head.ErrInvalidHistogram

// histHeaderBytes is what one decoded histogram costs besides its spans,
// buckets and custom bounds (8 bytes each): the histogram and its
// HistogramSample in the batch.
const histHeaderBytes = int64(max(unsafe.Sizeof(histogram.Histogram{}), unsafe.Sizeof(histogram.FloatHistogram{})) +
	unsafe.Sizeof(head.HistogramSample{}))

// histShape is what the first pass learned of a histogram message.
type histShape struct {
	float              bool // count_float came last: a FloatHistogram
	posSpans, negSpans int
	posDeltas          int
	negDeltas          int
	posCounts          int
	negCounts          int
	custom             int
	st                 bool // a start_timestamp field (2.0)
}

// buckets returns the number of buckets the histogram keeps (deltas for
// integer histograms, counts for float ones; the others are ignored, as
// Prometheus's conversion ignores them).
func (s *histShape) buckets() (pos, neg int) {
	if s.float {
		return s.posCounts, s.negCounts
	}
	return s.posDeltas, s.negDeltas
}

// elements returns the spans, buckets and custom bounds of the histogram,
// what MaxBucketsPerHistogram bounds.
func (s *histShape) elements() int {
	pos, neg := s.buckets()
	return s.posSpans + s.negSpans + pos + neg + s.custom
}

// scanHistogram checks a Histogram message as the generated code would decode
// it, without decoding it, and counts its repeated fields.
func scanHistogram(b []byte, maxField int) (histShape, error) {
	var s histShape
	r := pbReader{b: b}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return s, err
		}
		if field > maxField {
			if err := r.skip(wire); err != nil {
				return s, err
			}
			continue
		}
		n := 0
		switch field {
		case 1, 4, 6, 14, 15, 17: // count_int, schema, zero_count_int, reset_hint, timestamp, start_timestamp
			err = r.scalar(wire, wireVarint)
			if field == 1 && err == nil {
				s.float = false
			}
			s.st = s.st || field == 17
		case 2, 3, 5, 7: // count_float, sum, zero_threshold, zero_count_float
			err = r.scalar(wire, wireFixed64)
			if field == 2 && err == nil {
				s.float = true
			}
		case 8, 11: // negative_spans, positive_spans
			if wire != wireBytes {
				return s, fmt.Errorf("Histogram field %d has wire type %d: %w", field, wire, errProto)
			}
			var msg []byte
			if msg, err = r.bytes(); err == nil {
				_, err = parseBucketSpan(msg)
			}
			if field == 8 {
				s.negSpans++
			} else {
				s.posSpans++
			}
		case 9, 12: // negative_deltas, positive_deltas
			n, err = r.repeated(wire, wireVarint)
			if field == 9 {
				s.negDeltas += n
			} else {
				s.posDeltas += n
			}
		case 10, 13, 16: // negative_counts, positive_counts, custom_values
			n, err = r.repeated(wire, wireFixed64)
			switch field {
			case 10:
				s.negCounts += n
			case 13:
				s.posCounts += n
			default:
				s.custom += n
			}
		default:
			err = r.skip(wire)
		}
		if err != nil {
			return s, fmt.Errorf("Histogram field %d: %w", field, err)
		}
	}
	return s, nil
}

// parseBucketSpan reads a BucketSpan message (offset: sint32, length: uint32).
func parseBucketSpan(b []byte) (histogram.Span, error) {
	var sp histogram.Span
	r := pbReader{b: b}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return sp, err
		}
		if field != 1 && field != 2 {
			if err := r.skip(wire); err != nil {
				return sp, err
			}
			continue
		}
		if wire != wireVarint {
			return sp, fmt.Errorf("BucketSpan field %d has wire type %d: %w", field, wire, errProto)
		}
		v, err := r.uvarint()
		if err != nil {
			return sp, err
		}
		if field == 1 {
			sp.Offset = zigzag32(v)
		} else {
			sp.Length = uint32(v)
		}
	}
	return sp, nil
}

// zigzag32 decodes a sint32 from its varint, keeping the low 32 bits as the generated code does.
func zigzag32(v uint64) int32 {
	u := uint32(v)
	return int32(u>>1) ^ -int32(u&1)
}

// zigzag64 decodes a sint64 from its varint.
func zigzag64(v uint64) int64 { return int64(v>>1) ^ -int64(v&1) }

// scalar skips a scalar field of wire type want, refusing other wire types.
func (r *pbReader) scalar(wire, want int) error {
	if wire != want {
		return fmt.Errorf("wire type %d, want %d: %w", wire, want, errProto)
	}
	var err error
	if want == wireVarint {
		_, err = r.uvarint()
	} else {
		_, err = r.fixed64()
	}
	return err
}

// repeated skips a repeated scalar field of element wire type elem, packed
// or not, returning the number of elements; like the generated code, the
// last packed element may run past the packed field's end.
func (r *pbReader) repeated(wire, elem int) (int, error) {
	if wire != wireBytes {
		return 1, r.scalar(wire, elem)
	}
	n, err := r.uvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(len(r.b)-r.off) {
		return 0, errProto
	}
	k := 0
	for end := r.off + int(n); r.off < end; k++ {
		if err := r.scalar(elem, elem); err != nil {
			return k, err
		}
	}
	return k, nil
}

// each calls fn for every element of a repeated scalar field the first
// pass accepted (packed or not), as repeated reads them; it stops at the
// first malformed element (not reached for a field the first pass accepted).
func (r *pbReader) each(wire, elem int, fn func(uint64)) {
	read := func() bool {
		var v uint64
		var err error
		if elem == wireVarint {
			v, err = r.uvarint()
		} else {
			v, err = r.fixed64()
		}
		if err != nil {
			return false
		}
		fn(v)
		return true
	}
	if wire != wireBytes {
		read()
		return
	}
	n, err := r.uvarint()
	if err != nil || n > uint64(len(r.b)-r.off) {
		return
	}
	for end := r.off + int(n); r.off < end && read(); {
	}
}

// histogramTooBig is the problem of a histogram over MaxBucketsPerHistogram.
func (d *decoder) histogramTooBig(n int) string {
	return fmt.Sprintf("%d spans, buckets and custom bounds, more than the limit of %d (max-buckets-per-histogram)", n, d.limits.MaxBucketsPerHistogram)
}

// histogramBudget counts a histogram of n spans, buckets and custom bounds
// against MaxHistogramBytesPerRequest, failing the request beyond it.
func (d *decoder) histogramBudget(n int) error {
	if d.histBytes += histHeaderBytes + 8*int64(n); d.histBytes > d.limits.MaxHistogramBytesPerRequest {
		return reqErrorf(http.StatusRequestEntityTooLarge, "the native histograms of the request would take more than %d bytes decoded, the limit (max-histogram-bytes-per-request)", d.limits.MaxHistogramBytesPerRequest)
	}
	return nil
}

// readHistogram decodes one Histogram message of a series into the
// histogram arena. A histogram Prometheus would refuse is counted in the
// series' refusals (d.hBad, d.hBadT, d.hBadMsg) and left out; a malformed
// message or a request over its histogram budget fails the request.
func (d *decoder) readHistogram(b []byte, maxField int) error {
	shape, err := scanHistogram(b, maxField)
	if err != nil {
		return err
	}
	n := shape.elements()
	if n > d.limits.MaxBucketsPerHistogram {
		d.badHistogram(histogramTimestamp(b), d.histogramTooBig(n))
		return nil
	}
	if err := d.histogramBudget(n); err != nil {
		return err
	}
	hs := decodeHistogram(b, &shape)
	if err := checkHistogram(&hs); err != nil {
		d.badHistogram(hs.T, err.Error())
		return nil
	}
	d.appendHistogram(hs)
	return nil
}

// badHistogram records a refused histogram of the series being decoded;
// the first one's problem is kept for the message.
func (d *decoder) badHistogram(t int64, problem string) {
	if d.hBad == 0 {
		d.hBadT, d.hBadMsg = t, problem
	}
	d.hBad++
}

// rejectBadHistograms reports the refused histograms of a series named
// by format, once its labels are known to be valid.
func (d *decoder) rejectBadHistograms(format func() string) {
	if d.hBad == 0 {
		return
	}
	detail := ""
	if _, ok := d.stats.invalid.Examples[errInvalidHistogram]; !ok {
		detail = fmt.Sprintf("series %s at %d: %s", format(), d.hBadT, d.hBadMsg)
	}
	d.stats.invalid.Reject(errInvalidHistogram, d.hBad, detail)
}

// histogramTimestamp returns the timestamp (field 15) of a Histogram message
// the first pass accepted, for messages about histograms not decoded.
func histogramTimestamp(b []byte) int64 {
	var t int64
	r := pbReader{b: b}
	for !r.done() {
		field, wire, _ := r.key()
		if field == 15 && wire == wireVarint {
			v, _ := r.uvarint()
			t = int64(v)
			continue
		}
		_ = r.skip(wire)
	}
	return t
}

// split returns buf cut into slices of lengths a and b (nil when empty),
// each capped so that appending to one never overwrites the other.
func split[E any](buf []E, a, b int) ([]E, []E) {
	var x, y []E
	if a > 0 {
		x = buf[:0:a]
	}
	if b > 0 {
		y = buf[a : a : a+b]
	}
	return x, y
}

// decodeHistogram reads a Histogram message the first pass accepted (shape)
// into fresh memory, as Prometheus's ToIntHistogram / ToFloatHistogram
// convert the generated struct: the last count field decides the kind, an
// integer histogram keeps the deltas and zero_count_int, a float one the
// counts and zero_count_float (the zero count of the other kind reads as 0),
// and the reset hint keeps the low byte of the enum value.
func decodeHistogram(b []byte, shape *histShape) head.HistogramSample {
	var (
		hs                  head.HistogramSample
		hint                uint64
		schema              int32
		zeroThreshold, sum  float64
		countInt, zeroInt   uint64
		countFloat, zeroFlt float64
		zeroIsFloat         bool
		posSpans, negSpans  []histogram.Span
		posD, negD          []int64
		posC, negC, custom  []float64
	)
	if ns := shape.posSpans + shape.negSpans; ns > 0 {
		posSpans, negSpans = split(make([]histogram.Span, ns), shape.posSpans, shape.negSpans)
	}
	pos, neg := shape.buckets()
	if pos+neg > 0 {
		if shape.float {
			posC, negC = split(make([]float64, pos+neg), pos, neg)
		} else {
			posD, negD = split(make([]int64, pos+neg), pos, neg)
		}
	}
	if shape.custom > 0 {
		custom = make([]float64, 0, shape.custom)
	}
	// The message was checked: the reads below cannot fail. Fields skipped
	// here are read as the first pass read them (a packed element may run
	// past its field's end), so both passes see the same fields.
	r := pbReader{b: b}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			break // not reached
		}
		switch field {
		case 1, 4, 6, 14, 15:
			v, _ := r.uvarint()
			switch field {
			case 1:
				countInt = v
			case 4:
				schema = zigzag32(v)
			case 6:
				zeroInt, zeroIsFloat = v, false
			case 14:
				hint = v
			case 15:
				hs.T = int64(v)
			}
		case 2, 3, 5, 7:
			u, _ := r.fixed64()
			v := math.Float64frombits(u)
			switch field {
			case 2:
				countFloat = v
			case 3:
				sum = v
			case 5:
				zeroThreshold = v
			case 7:
				zeroFlt, zeroIsFloat = v, true
			}
		case 8, 11:
			msg, _ := r.bytes()
			sp, _ := parseBucketSpan(msg)
			if field == 8 {
				negSpans = append(negSpans, sp)
			} else {
				posSpans = append(posSpans, sp)
			}
		case 9, 12:
			if shape.float {
				_, _ = r.repeated(wire, wireVarint)
				break
			}
			dst := &posD
			if field == 9 {
				dst = &negD
			}
			r.each(wire, wireVarint, func(v uint64) { *dst = append(*dst, zigzag64(v)) })
		case 10, 13, 16:
			var dst *[]float64
			switch {
			case field == 16:
				dst = &custom
			case !shape.float:
				_, _ = r.repeated(wire, wireFixed64)
				continue
			case field == 10:
				dst = &negC
			default:
				dst = &posC
			}
			r.each(wire, wireFixed64, func(v uint64) { *dst = append(*dst, math.Float64frombits(v)) })
		case 17:
			if !shape.st {
				_ = r.skip(wire) // a field 1.0 does not know
				break
			}
			v, _ := r.uvarint()
			hs.ST = int64(v)
		default: // unknown fields
			_ = r.skip(wire)
		}
	}
	if shape.float {
		if !zeroIsFloat {
			zeroFlt = 0
		}
		hs.FH = &histogram.FloatHistogram{
			CounterResetHint: histogram.CounterResetHint(hint),
			Schema:           schema,
			ZeroThreshold:    zeroThreshold,
			ZeroCount:        zeroFlt,
			Count:            countFloat,
			Sum:              sum,
			PositiveSpans:    posSpans,
			NegativeSpans:    negSpans,
			PositiveBuckets:  posC,
			NegativeBuckets:  negC,
			CustomValues:     custom,
		}
		return hs
	}
	if zeroIsFloat {
		zeroInt = 0
	}
	hs.H = &histogram.Histogram{
		CounterResetHint: histogram.CounterResetHint(hint),
		Schema:           schema,
		ZeroThreshold:    zeroThreshold,
		ZeroCount:        zeroInt,
		Count:            countInt,
		Sum:              sum,
		PositiveSpans:    posSpans,
		NegativeSpans:    negSpans,
		PositiveBuckets:  posD,
		NegativeBuckets:  negD,
		CustomValues:     custom,
	}
	return hs
}

// checkHistogram applies what Prometheus's receiver does to a histogram
// before storing it: a schema of 9…52 (reserved for resolutions above the
// highest, 8) is reduced to 8, then Validate must accept it. Schemas of
// -9…-5 (reserved below the lowest, -4) are not widened: Validate refuses
// them, as it refuses schemas outside -9…52 other than -53 (custom buckets).
func checkHistogram(hs *head.HistogramSample) error {
	if h := hs.H; h != nil {
		if h.Schema > histogram.ExponentialSchemaMax && histogram.IsExponentialSchemaReserved(h.Schema) {
			if err := h.ReduceResolution(histogram.ExponentialSchemaMax); err != nil {
				return err
			}
		}
		return h.Validate()
	}
	fh := hs.FH
	if fh.Schema > histogram.ExponentialSchemaMax && histogram.IsExponentialSchemaReserved(fh.Schema) {
		if err := fh.ReduceResolution(histogram.ExponentialSchemaMax); err != nil {
			return err
		}
	}
	return fh.Validate()
}

// appendHistogram appends hs to the histogram arena, which grows like the
// sample arena (series already read keep their histograms in the old array).
func (d *decoder) appendHistogram(hs head.HistogramSample) {
	if len(d.harena) == cap(d.harena) {
		n := min(max(2*cap(d.harena), 64), d.limits.MaxSamplesPerRequest)
		d.harena = append(make([]head.HistogramSample, 0, max(n, len(d.harena)+1)), d.harena...)
	}
	d.harena = append(d.harena, hs)
}
