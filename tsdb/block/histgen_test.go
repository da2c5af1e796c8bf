package block

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// genHistograms returns n integer histograms of a counter: buckets grow,
// the layout changes now and then (new buckets, a schema reduction), the
// counter resets, sums are sometimes NaN (staleness markers), spans may be
// of zero length, and custom-bucket histograms appear.
func genHistograms(rng *rand.Rand, n int) []*histogram.Histogram {
	custom := rng.IntN(4) == 0
	schema := int32(rng.IntN(6)) - 1
	if custom {
		schema = histogram.CustomBucketsSchema
	}
	layout := func() ([]histogram.Span, []histogram.Span, int, int) {
		np := 1 + rng.IntN(6)
		pos := []histogram.Span{{Offset: int32(rng.IntN(5)) - 2, Length: uint32(np)}}
		if rng.IntN(3) == 0 {
			pos = append(pos, histogram.Span{Offset: int32(rng.IntN(3)), Length: 0}, histogram.Span{Offset: 1 + int32(rng.IntN(3)), Length: 2})
			np += 2
		}
		if custom {
			return pos, nil, np, 0
		}
		nn := rng.IntN(3)
		var neg []histogram.Span
		if nn > 0 {
			neg = []histogram.Span{{Offset: int32(rng.IntN(4)), Length: uint32(nn)}}
		}
		return pos, neg, np, nn
	}
	pos, neg, np, nn := layout()
	var cvs []float64
	if custom {
		for i := range 12 {
			cvs = append(cvs, 0.25*float64(i+1))
		}
	}
	abs := make([]int64, np+nn)
	var zero uint64
	sum := 0.0
	out := make([]*histogram.Histogram, n)
	for i := range out {
		hint := histogram.UnknownCounterReset
		switch rng.IntN(12) {
		case 0: // reset
			for j := range abs {
				abs[j] = int64(rng.IntN(3))
			}
			zero, sum, hint = 0, 0, histogram.CounterReset
		case 1: // new layout
			pos, neg, np, nn = layout()
			abs = make([]int64, np+nn)
			for j := range abs {
				abs[j] = int64(rng.IntN(100))
			}
		case 2:
			hint = []histogram.CounterResetHint{histogram.NotCounterReset, histogram.GaugeType}[rng.IntN(2)]
		}
		h := &histogram.Histogram{CounterResetHint: hint, Schema: schema, PositiveSpans: slices.Clone(pos),
			NegativeSpans: slices.Clone(neg), CustomValues: cvs}
		if !custom {
			h.ZeroThreshold = 0.001
			zero += uint64(rng.IntN(4))
			h.ZeroCount = zero
		}
		var total uint64
		var prev int64
		for j := range abs {
			abs[j] += int64(rng.IntN(40))
			total += uint64(abs[j])
			if j == np {
				prev = 0
			}
			if j < np {
				h.PositiveBuckets = append(h.PositiveBuckets, abs[j]-prev)
			} else {
				h.NegativeBuckets = append(h.NegativeBuckets, abs[j]-prev)
			}
			prev = abs[j]
		}
		h.Count = total + h.ZeroCount
		sum += rng.Float64() * 100
		h.Sum = sum
		if rng.IntN(15) == 0 {
			h.Sum = math.Float64frombits(staleNaN)
		}
		out[i] = h
	}
	return out
}

// genFloatHistograms returns n float histograms: integer ones converted,
// with fractional counts for gauges, NaN and -0 counts now and then.
func genFloatHistograms(rng *rand.Rand, n int) []*histogram.FloatHistogram {
	hs := genHistograms(rng, n)
	out := make([]*histogram.FloatHistogram, n)
	gauge := rng.IntN(2) == 0
	for i, h := range hs {
		fh := h.ToFloat(nil)
		if gauge {
			fh.CounterResetHint = histogram.GaugeType
			for j := range fh.PositiveBuckets {
				fh.PositiveBuckets[j] *= rng.Float64()
			}
			fh.Count *= 0.75
		}
		if rng.IntN(20) == 0 && len(fh.PositiveBuckets) > 0 {
			fh.PositiveBuckets[0] = []float64{math.NaN(), math.Copysign(0, -1), math.Inf(1)}[rng.IntN(3)]
		}
		out[i] = fh
	}
	return out
}

// hsample is a sample of any kind.
type hsample struct {
	t  int64
	v  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

func (s hsample) String() string {
	switch {
	case s.h != nil:
		return fmt.Sprintf("(%d, %v)", s.t, s.h)
	case s.fh != nil:
		return fmt.Sprintf("(%d, %v)", s.t, s.fh)
	}
	return fmt.Sprintf("(%d, %x)", s.t, math.Float64bits(s.v))
}

// sameFloatSlices reports whether a and b hold the same bit patterns.
func sameFloatSlices(a, b []float64) bool {
	return slices.EqualFunc(a, b, sameBits)
}

// sameHistogram compares every field of a and b bit for bit.
func sameHistogram(a, b *histogram.Histogram) bool {
	return a.CounterResetHint == b.CounterResetHint && a.Schema == b.Schema && sameBits(a.ZeroThreshold, b.ZeroThreshold) &&
		a.ZeroCount == b.ZeroCount && a.Count == b.Count && sameBits(a.Sum, b.Sum) &&
		slices.Equal(a.PositiveSpans, b.PositiveSpans) && slices.Equal(a.NegativeSpans, b.NegativeSpans) &&
		slices.Equal(a.PositiveBuckets, b.PositiveBuckets) && slices.Equal(a.NegativeBuckets, b.NegativeBuckets) &&
		sameFloatSlices(a.CustomValues, b.CustomValues)
}

// sameFloatHistogram compares every field of a and b bit for bit.
func sameFloatHistogram(a, b *histogram.FloatHistogram) bool {
	return a.CounterResetHint == b.CounterResetHint && a.Schema == b.Schema && sameBits(a.ZeroThreshold, b.ZeroThreshold) &&
		sameBits(a.ZeroCount, b.ZeroCount) && sameBits(a.Count, b.Count) && sameBits(a.Sum, b.Sum) &&
		slices.Equal(a.PositiveSpans, b.PositiveSpans) && slices.Equal(a.NegativeSpans, b.NegativeSpans) &&
		sameFloatSlices(a.PositiveBuckets, b.PositiveBuckets) && sameFloatSlices(a.NegativeBuckets, b.NegativeBuckets) &&
		sameFloatSlices(a.CustomValues, b.CustomValues)
}

func sameSample(a, b hsample) bool {
	switch {
	case a.t != b.t || (a.h == nil) != (b.h == nil) || (a.fh == nil) != (b.fh == nil):
		return false
	case a.h != nil:
		return sameHistogram(a.h, b.h)
	case a.fh != nil:
		return sameFloatHistogram(a.fh, b.fh)
	}
	return sameBits(a.v, b.v)
}

func equalHSamples(t *testing.T, what string, got, want []hsample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d samples, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !sameSample(got[i], want[i]) {
			t.Fatalf("%s: sample %d: got %v, want %v", what, i, got[i], want[i])
		}
	}
}

// collectAll reads every sample of it, copying histograms (AtHistogram and
// AtFloatHistogram are passed fresh ones, then reused ones alternately).
func collectAll(it chunkenc.Iterator) ([]hsample, error) {
	var out []hsample
	var hbuf *histogram.Histogram
	var fbuf *histogram.FloatHistogram
	for i := 0; ; i++ {
		vt := it.Next()
		s := hsample{t: it.AtT()}
		switch vt {
		case chunkenc.ValNone:
			return out, it.Err()
		case chunkenc.ValFloat:
			_, s.v = it.At()
		case chunkenc.ValHistogram:
			var h *histogram.Histogram
			if i%2 == 1 {
				h = hbuf
			}
			_, h = it.AtHistogram(h)
			hbuf, s.h = h, h.Copy()
		case chunkenc.ValFloatHistogram:
			var fh *histogram.FloatHistogram
			if i%2 == 1 {
				fh = fbuf
			}
			_, fh = it.AtFloatHistogram(fh)
			fbuf, s.fh = fh, fh.Copy()
		}
		out = append(out, s)
	}
}

// columnSamples returns c's samples in table tab.
func columnSamples(tab *Table, c *Column) []hsample {
	out := make([]hsample, len(c.Rows))
	for i, r := range c.Rows {
		s := hsample{t: tab.Timestamps[r]}
		switch c.Kind() {
		case KindHistogram:
			s.h = c.Histograms[i]
		case KindFloatHistogram:
			s.fh = c.FloatHistograms[i]
		default:
			s.v = c.Values[i]
		}
		out[i] = s
	}
	return out
}

// groupAllSamples returns member m's samples of any kind of g, merged over its tables in time order.
func groupAllSamples(g *Group, m int) []hsample {
	var out []hsample
	for ti := range g.Tables {
		tab := &g.Tables[ti]
		for ci := range tab.Columns {
			if c := &tab.Columns[ci]; c.Member == m {
				out = append(out, columnSamples(tab, c)...)
			}
		}
	}
	slices.SortFunc(out, func(a, b hsample) int { return int(a.t - b.t) })
	return out
}
