package head

import (
	"math"

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
	return bucketsGrow(prev.PositiveBucketIterator(), h.PositiveBucketIterator()) &&
		bucketsGrow(prev.NegativeBucketIterator(), h.NegativeBucketIterator())
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
	return bucketsGrow(prev.PositiveBucketIterator(), h.PositiveBucketIterator()) &&
		bucketsGrow(prev.NegativeBucketIterator(), h.NegativeBucketIterator())
}

// bucketsGrow reports whether every populated bucket of prev is in cur with
// at least its count (the iterators yield buckets by increasing index).
func bucketsGrow[BC histogram.BucketCount](prev, cur histogram.BucketIterator[BC]) bool {
	have := cur.Next()
	for prev.Next() {
		p := prev.At()
		if p.Count == 0 {
			continue
		}
		for have && cur.At().Index < p.Index {
			have = cur.Next()
		}
		if !have || cur.At().Index != p.Index || cur.At().Count < p.Count {
			return false
		}
	}
	return true
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
