package head

import (
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
)

// Counter reset hints as read. Prometheus's histogram chunks yield
// NotCounterReset for every counter histogram but the first of a chunk, which
// yields UnknownCounterReset, and GaugeType throughout a gauge chunk; its
// head starts a chunk where a histogram does not continue the previous one
// (a reset, a layout it cannot extend, gauge to counter, a staleness
// marker). The head stores the hint a histogram is read with, decided the
// same way against the series' previous sample, so queries see the hints a
// Prometheus server would give them (they steer PromQL's reset detection and
// its annotations); tandem's own chunk boundaries do not change them.

// readHint returns the hint hs is read with after prev, the series' newest sample.
func readHint(prev sampleValue, hs HistogramSample) histogram.CounterResetHint {
	if hs.H != nil {
		switch {
		case value.IsStaleNaN(hs.H.Sum):
			return histogram.UnknownCounterReset // read as its sum alone
		case hs.H.CounterResetHint == histogram.GaugeType:
			return histogram.GaugeType
		case prev.h == nil || !continuesHistogram(prev.h, hs.H):
			return histogram.UnknownCounterReset
		}
		return histogram.NotCounterReset
	}
	switch {
	case value.IsStaleNaN(hs.FH.Sum):
		return histogram.UnknownCounterReset
	case hs.FH.CounterResetHint == histogram.GaugeType:
		return histogram.GaugeType
	case prev.fh == nil || !continuesFloatHistogram(prev.fh, hs.FH):
		return histogram.UnknownCounterReset
	}
	return histogram.NotCounterReset
}

// continuesHistogram reports whether counter histogram h extends prev's
// chunk in Prometheus: no explicit or detected reset, the same schema, zero
// threshold and custom bounds, no staleness marker in between.
func continuesHistogram(prev, h *histogram.Histogram) bool {
	switch {
	case prev.CounterResetHint == histogram.GaugeType, h.CounterResetHint == histogram.CounterReset:
		return false
	case value.IsStaleNaN(prev.Sum), h.Count < prev.Count, h.ZeroCount < prev.ZeroCount,
		h.Schema != prev.Schema, math.Float64bits(h.ZeroThreshold) != math.Float64bits(prev.ZeroThreshold),
		histogram.IsCustomBucketsSchema(h.Schema) && !histogram.CustomBucketBoundsMatch(h.CustomValues, prev.CustomValues):
		return false
	}
	return bucketsGrow(prev.PositiveSpans, prev.PositiveBuckets, h.PositiveSpans, h.PositiveBuckets, true) &&
		bucketsGrow(prev.NegativeSpans, prev.NegativeBuckets, h.NegativeSpans, h.NegativeBuckets, true)
}

// continuesFloatHistogram is continuesHistogram for float counts.
func continuesFloatHistogram(prev, h *histogram.FloatHistogram) bool {
	switch {
	case prev.CounterResetHint == histogram.GaugeType, h.CounterResetHint == histogram.CounterReset:
		return false
	case value.IsStaleNaN(prev.Sum), h.Count < prev.Count, h.ZeroCount < prev.ZeroCount,
		h.Schema != prev.Schema, math.Float64bits(h.ZeroThreshold) != math.Float64bits(prev.ZeroThreshold),
		histogram.IsCustomBucketsSchema(h.Schema) && !histogram.CustomBucketBoundsMatch(h.CustomValues, prev.CustomValues):
		return false
	}
	return bucketsGrow(prev.PositiveSpans, prev.PositiveBuckets, h.PositiveSpans, h.PositiveBuckets, false) &&
		bucketsGrow(prev.NegativeSpans, prev.NegativeBuckets, h.NegativeSpans, h.NegativeBuckets, false)
}

// bucketsGrow reports whether every populated bucket of the previous
// histogram (spans ps, buckets pb) is in the current one (cs, cb) with at
// least its count; buckets are deltas (integer histograms) or absolute
// counts. It walks the spans without computing bucket bounds, and the same
// layout, the common case, is one pass over both bucket lists.
func bucketsGrow[BC int64 | float64](ps []histogram.Span, pb []BC, cs []histogram.Span, cb []BC, deltas bool) bool {
	if len(pb) == len(cb) && slices.Equal(ps, cs) {
		var p, c BC
		for i := range pb {
			if deltas {
				p, c = p+pb[i], c+cb[i]
			} else {
				p, c = pb[i], cb[i]
			}
			if p != 0 && c < p {
				return false
			}
		}
		return true
	}
	var pw, cw spanWalk
	pw.spans, cw.spans = ps, cs
	var p, c BC
	ci, cIdx, have := -1, int32(0), false
	for pi := range pb {
		pIdx, ok := pw.next()
		if !ok {
			return true // buckets beyond the spans: not read by Prometheus either
		}
		if deltas {
			p += pb[pi]
		} else {
			p = pb[pi]
		}
		if p == 0 {
			continue
		}
		for !have || cIdx < pIdx {
			if ci+1 >= len(cb) {
				return false
			}
			if cIdx, have = cw.next(); !have {
				return false
			}
			ci++
			if deltas {
				c += cb[ci]
			} else {
				c = cb[ci]
			}
		}
		if cIdx != pIdx || c < p {
			return false
		}
	}
	return true
}

// spanWalk yields the bucket indices of a span list in order.
type spanWalk struct {
	spans   []histogram.Span
	si      int    // next span
	rem     uint32 // buckets left in the current span
	idx     int32  // index of the next bucket
	started bool
}

// next returns the next bucket's index; false after the last span.
func (w *spanWalk) next() (int32, bool) {
	for w.rem == 0 {
		if w.si >= len(w.spans) {
			return 0, false
		}
		sp := w.spans[w.si]
		w.si++
		if w.started {
			w.idx += sp.Offset
		} else {
			w.idx, w.started = sp.Offset, true
		}
		w.rem = sp.Length
	}
	w.rem--
	w.idx++
	return w.idx - 1, true
}

// withHint returns hs with its histogram's hint set to hint, copying the
// histogram's header (its slices are shared) when the hint differs.
func withHint(hs HistogramSample, hint histogram.CounterResetHint) HistogramSample {
	if hs.H != nil && hs.H.CounterResetHint != hint {
		h := *hs.H
		h.CounterResetHint = hint
		hs.H = &h
	}
	if hs.FH != nil && hs.FH.CounterResetHint != hint {
		fh := *hs.FH
		fh.CounterResetHint = hint
		hs.FH = &fh
	}
	return hs
}

// staleHistogram returns hs as Prometheus reads a staleness marker in a
// histogram series: its sum alone, the buckets dropped.
func staleHistogram(hs HistogramSample) HistogramSample {
	switch {
	case hs.H != nil && value.IsStaleNaN(hs.H.Sum) && (hs.H.Count != 0 || len(hs.H.PositiveSpans)+len(hs.H.NegativeSpans)+len(hs.H.CustomValues) != 0 || hs.H.Schema != 0 || hs.H.ZeroThreshold != 0 || hs.H.ZeroCount != 0 || hs.H.CounterResetHint != 0):
		hs.H = &histogram.Histogram{Sum: hs.H.Sum}
	case hs.FH != nil && value.IsStaleNaN(hs.FH.Sum) && (hs.FH.Count != 0 || len(hs.FH.PositiveSpans)+len(hs.FH.NegativeSpans)+len(hs.FH.CustomValues) != 0 || hs.FH.Schema != 0 || hs.FH.ZeroThreshold != 0 || hs.FH.ZeroCount != 0 || hs.FH.CounterResetHint != 0):
		hs.FH = &histogram.FloatHistogram{Sum: hs.FH.Sum}
	}
	return hs
}

// staleAsHistogram returns a float staleness marker of a series whose newest
// sample is a histogram as the histogram marker Prometheus's head turns it
// into; called with g.mu held.
func (s *memSeries) staleAsHistogram(smp Sample) (HistogramSample, bool) {
	x := s.x
	if x == nil || !value.IsStaleNaN(smp.V) || smp.T <= s.lastT {
		return HistogramSample{}, false
	}
	switch {
	case x.lastH != nil:
		return HistogramSample{T: smp.T, H: &histogram.Histogram{Sum: smp.V}}, true
	case x.lastFH != nil:
		return HistogramSample{T: smp.T, FH: &histogram.FloatHistogram{Sum: smp.V}}, true
	}
	return HistogramSample{}, false
}
