package remote

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// histogramDiff describes how two histogram samples differ ("" if they do
// not): floats are compared bit for bit (NaN, StaleNaN), empty and nil spans
// and buckets are equal, custom bounds must agree on nil-ness too (Validate
// tells them apart).
func histogramDiff(a, b *head.HistogramSample) string {
	if a.T != b.T {
		return fmt.Sprintf("timestamp %d vs %d", a.T, b.T)
	}
	switch {
	case (a.H == nil) != (b.H == nil) || (a.FH == nil) != (b.FH == nil):
		return fmt.Sprintf("kinds differ: H %v FH %v vs H %v FH %v", a.H != nil, a.FH != nil, b.H != nil, b.FH != nil)
	case a.H != nil:
		x, y := a.H, b.H
		if d := histogramHeaderDiff(x.CounterResetHint, y.CounterResetHint, x.Schema, y.Schema, x.ZeroThreshold, y.ZeroThreshold, x.Sum, y.Sum); d != "" {
			return d
		}
		if x.Count != y.Count || x.ZeroCount != y.ZeroCount {
			return fmt.Sprintf("counts %d/%d vs %d/%d", x.Count, x.ZeroCount, y.Count, y.ZeroCount)
		}
		return firstDiff(
			sliceDiff("positive spans", x.PositiveSpans, y.PositiveSpans),
			sliceDiff("negative spans", x.NegativeSpans, y.NegativeSpans),
			sliceDiff("positive buckets", x.PositiveBuckets, y.PositiveBuckets),
			sliceDiff("negative buckets", x.NegativeBuckets, y.NegativeBuckets),
			customDiff(x.CustomValues, y.CustomValues))
	case a.FH != nil:
		x, y := a.FH, b.FH
		if d := histogramHeaderDiff(x.CounterResetHint, y.CounterResetHint, x.Schema, y.Schema, x.ZeroThreshold, y.ZeroThreshold, x.Sum, y.Sum); d != "" {
			return d
		}
		if math.Float64bits(x.Count) != math.Float64bits(y.Count) || math.Float64bits(x.ZeroCount) != math.Float64bits(y.ZeroCount) {
			return fmt.Sprintf("counts %v/%v vs %v/%v", x.Count, x.ZeroCount, y.Count, y.ZeroCount)
		}
		return firstDiff(
			sliceDiff("positive spans", x.PositiveSpans, y.PositiveSpans),
			sliceDiff("negative spans", x.NegativeSpans, y.NegativeSpans),
			floatsDiff("positive buckets", x.PositiveBuckets, y.PositiveBuckets),
			floatsDiff("negative buckets", x.NegativeBuckets, y.NegativeBuckets),
			customDiff(x.CustomValues, y.CustomValues))
	}
	return ""
}

func histogramHeaderDiff(h1, h2 histogram.CounterResetHint, s1, s2 int32, z1, z2, sum1, sum2 float64) string {
	switch {
	case h1 != h2:
		return fmt.Sprintf("reset hint %d vs %d", h1, h2)
	case s1 != s2:
		return fmt.Sprintf("schema %d vs %d", s1, s2)
	case math.Float64bits(z1) != math.Float64bits(z2):
		return fmt.Sprintf("zero threshold %v vs %v", z1, z2)
	case math.Float64bits(sum1) != math.Float64bits(sum2):
		return fmt.Sprintf("sum %v (%x) vs %v (%x)", sum1, math.Float64bits(sum1), sum2, math.Float64bits(sum2))
	}
	return ""
}

func firstDiff(ds ...string) string {
	for _, d := range ds {
		if d != "" {
			return d
		}
	}
	return ""
}

func sliceDiff[E comparable](what string, a, b []E) string {
	if len(a) != len(b) || len(a) > 0 && !reflect.DeepEqual(a, b) {
		return fmt.Sprintf("%s %v vs %v", what, a, b)
	}
	return ""
}

func floatsDiff(what string, a, b []float64) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%s %v vs %v", what, a, b)
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return fmt.Sprintf("%s %v vs %v", what, a, b)
		}
	}
	return ""
}

func customDiff(a, b []float64) string {
	if (a == nil) != (b == nil) {
		return fmt.Sprintf("custom values %#v vs %#v", a, b)
	}
	return floatsDiff("custom values", a, b)
}

// histogramCase is a 2.0 histogram message of the tests; v1 converts it.
type histogramCase struct {
	name string
	h    writev2.Histogram
	// valid says whether Prometheus stores it (checked against Prometheus's
	// own receiver by TestHistogramValidationMatchesPrometheus).
	valid bool
}

// histogramCases returns generated histograms (tsdbutil) and hand-made
// edge cases, valid and not.
func histogramCases() []histogramCase {
	var cs []histogramCase
	add := func(name string, valid bool, h writev2.Histogram) {
		cs = append(cs, histogramCase{name: name, h: h, valid: valid})
	}
	for i, h := range tsdbutil.GenerateTestHistograms(4) {
		add(fmt.Sprintf("generated int %d", i), true, writev2.FromIntHistogram(0, int64(1000+i), h))
	}
	for i, h := range tsdbutil.GenerateTestFloatHistograms(4) {
		add(fmt.Sprintf("generated float %d", i), true, writev2.FromFloatHistogram(0, int64(1000+i), h))
	}
	for i, h := range tsdbutil.GenerateTestCustomBucketsHistograms(2) {
		add(fmt.Sprintf("generated custom int %d", i), true, writev2.FromIntHistogram(0, int64(1000+i), h))
	}
	for i, h := range tsdbutil.GenerateTestCustomBucketsFloatHistograms(2) {
		add(fmt.Sprintf("generated custom float %d", i), true, writev2.FromFloatHistogram(0, int64(1000+i), h))
	}
	add("generated gauge int", true, writev2.FromIntHistogram(0, 7, tsdbutil.GenerateTestGaugeHistogram(3)))
	add("generated gauge float", true, writev2.FromFloatHistogram(0, 7, tsdbutil.GenerateTestGaugeFloatHistogram(3)))

	ci := func(n uint64) *writev2.Histogram_CountInt { return &writev2.Histogram_CountInt{CountInt: n} }
	cf := func(v float64) *writev2.Histogram_CountFloat { return &writev2.Histogram_CountFloat{CountFloat: v} }
	zi := func(n uint64) *writev2.Histogram_ZeroCountInt {
		return &writev2.Histogram_ZeroCountInt{ZeroCountInt: n}
	}
	zf := func(v float64) *writev2.Histogram_ZeroCountFloat {
		return &writev2.Histogram_ZeroCountFloat{ZeroCountFloat: v}
	}
	sp := func(pairs ...int) []writev2.BucketSpan {
		var out []writev2.BucketSpan
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, writev2.BucketSpan{Offset: int32(pairs[i]), Length: uint32(pairs[i+1])})
		}
		return out
	}
	add("empty", true, writev2.Histogram{Timestamp: 1})
	add("empty float", true, writev2.Histogram{Count: cf(0), Timestamp: 1})
	add("zero bucket only", true, writev2.Histogram{Count: ci(5), ZeroCount: zi(5), ZeroThreshold: 1e-128, Sum: 0, Timestamp: 2})
	add("zero bucket only float", true, writev2.Histogram{Count: cf(2.5), ZeroCount: zf(2.5), ZeroThreshold: 0.001, Timestamp: 2})
	add("zero-length spans", true, writev2.Histogram{Count: ci(3), Sum: 3, PositiveSpans: sp(0, 0, 2, 2, 0, 0), PositiveDeltas: []int64{1, 1}, Timestamp: 3})
	add("negative buckets", true, writev2.Histogram{Count: ci(6), Sum: -10, NegativeSpans: sp(-3, 2, 1, 1), NegativeDeltas: []int64{1, 1, 1}, Timestamp: 4})
	add("negative and positive float", true, writev2.Histogram{Count: cf(4.5), Sum: 1, Schema: -4,
		NegativeSpans: sp(1, 1), NegativeCounts: []float64{1.5}, PositiveSpans: sp(-2, 2), PositiveCounts: []float64{1, 2}, Timestamp: 5})
	for _, hint := range []writev2.Histogram_ResetHint{0, 1, 2, 3, 7, 259} {
		add(fmt.Sprintf("reset hint %d", hint), true, writev2.Histogram{Count: ci(1), ZeroCount: zi(1), ResetHint: hint, Timestamp: 6})
	}
	add("NaN sum", true, writev2.Histogram{Count: ci(2), Sum: math.NaN(), PositiveSpans: sp(0, 1), PositiveDeltas: []int64{1}, Timestamp: 7})
	add("StaleNaN sum", true, writev2.Histogram{Count: ci(0), Sum: math.Float64frombits(value.StaleNaN), Timestamp: 7})
	add("StaleNaN sum float", true, writev2.Histogram{Count: cf(0), Sum: math.Float64frombits(value.StaleNaN), Timestamp: 7})
	add("float with an integer zero count", true, writev2.Histogram{Count: cf(1), ZeroCount: zi(1), PositiveSpans: sp(0, 1), PositiveCounts: []float64{1}, Timestamp: 8})
	add("integer with a float zero count", false, writev2.Histogram{Count: ci(2), ZeroCount: zf(1), PositiveSpans: sp(0, 1), PositiveDeltas: []int64{1}, Sum: 1, Timestamp: 8})
	add("custom buckets -Inf first bound", true, writev2.Histogram{Count: ci(3), Sum: 1, Schema: -53,
		PositiveSpans: sp(0, 3), PositiveDeltas: []int64{1, 0, 0}, CustomValues: []float64{math.Inf(-1), 1, 2}, Timestamp: 9})
	add("custom buckets +Inf last bound", false, writev2.Histogram{Count: ci(1), Schema: -53,
		PositiveSpans: sp(0, 1), PositiveDeltas: []int64{1}, CustomValues: []float64{1, math.Inf(1)}, Timestamp: 9})
	add("custom buckets NaN bound", false, writev2.Histogram{Count: ci(1), Schema: -53,
		PositiveSpans: sp(0, 1), PositiveDeltas: []int64{1}, CustomValues: []float64{math.NaN()}, Timestamp: 9})
	add("custom buckets unsorted bounds", false, writev2.Histogram{Count: cf(1), Schema: -53,
		PositiveSpans: sp(0, 1), PositiveCounts: []float64{1}, CustomValues: []float64{2, 1}, Timestamp: 9})
	add("custom buckets without custom values", false, writev2.Histogram{Count: ci(2), Schema: -53,
		PositiveSpans: sp(0, 2), PositiveDeltas: []int64{1, 0}, Timestamp: 9})
	add("custom buckets with a zero count", false, writev2.Histogram{Count: ci(1), ZeroCount: zi(1), Schema: -53, CustomValues: []float64{1}, Timestamp: 9})
	add("custom values of an exponential schema", false, writev2.Histogram{Count: ci(1), ZeroCount: zi(1), Schema: 2, CustomValues: []float64{1}, Timestamp: 9})
	for _, schema := range []int32{-10, -9, -5, -4, 0, 8, 9, 12, 52, 53} {
		valid := schema >= -4 && schema <= 52
		add(fmt.Sprintf("schema %d", schema), valid, writev2.Histogram{Count: ci(11), Sum: 5, Schema: schema, ZeroCount: zi(1),
			PositiveSpans: sp(-5, 3, 4, 2), PositiveDeltas: []int64{1, 1, -1, 2, -2}, NegativeSpans: sp(7, 1), NegativeDeltas: []int64{2}, Timestamp: 10})
		add(fmt.Sprintf("schema %d float", schema), valid, writev2.Histogram{Count: cf(10), Sum: 5, Schema: schema, ZeroCount: zf(1),
			PositiveSpans: sp(-5, 3, 4, 2), PositiveCounts: []float64{1, 2, 1, 3, 1}, NegativeSpans: sp(7, 1), NegativeCounts: []float64{1}, Timestamp: 10})
	}
	add("schema 12 with too few buckets", false, writev2.Histogram{Count: ci(2), Schema: 12, PositiveSpans: sp(0, 3), PositiveDeltas: []int64{1, 0}, Timestamp: 11})
	add("spans need more buckets", false, writev2.Histogram{Count: ci(1), PositiveSpans: sp(0, 2), PositiveDeltas: []int64{1}, Timestamp: 11})
	add("more buckets than spans", false, writev2.Histogram{Count: cf(3), NegativeSpans: sp(0, 1), NegativeCounts: []float64{1, 2}, Timestamp: 11})
	add("negative span offset", false, writev2.Histogram{Count: ci(2), PositiveSpans: sp(0, 1, -2, 1), PositiveDeltas: []int64{1, 0}, Timestamp: 11})
	add("negative bucket count", false, writev2.Histogram{Count: ci(0), PositiveSpans: sp(0, 2), PositiveDeltas: []int64{1, -2}, Timestamp: 11})
	add("negative float bucket", false, writev2.Histogram{Count: cf(1), PositiveSpans: sp(0, 1), PositiveCounts: []float64{-1}, Timestamp: 11})
	add("negative float count", false, writev2.Histogram{Count: cf(-1), Timestamp: 11})
	add("count too small", false, writev2.Histogram{Count: ci(1), Sum: 2, PositiveSpans: sp(0, 2), PositiveDeltas: []int64{1, 0}, Timestamp: 11})
	add("count too small, NaN sum", false, writev2.Histogram{Count: ci(1), Sum: math.NaN(), PositiveSpans: sp(0, 2), PositiveDeltas: []int64{1, 0}, Timestamp: 11})
	add("count larger, NaN sum", true, writev2.Histogram{Count: ci(5), Sum: math.NaN(), PositiveSpans: sp(0, 2), PositiveDeltas: []int64{1, 0}, Timestamp: 11})
	add("integer with float buckets only", false, writev2.Histogram{Count: ci(1), PositiveSpans: sp(0, 1), PositiveCounts: []float64{1}, Timestamp: 12})
	add("float with integer buckets only", false, writev2.Histogram{Count: cf(1), PositiveSpans: sp(0, 1), PositiveDeltas: []int64{1}, Timestamp: 12})
	add("no count field, float buckets", false, writev2.Histogram{PositiveSpans: sp(0, 1), PositiveCounts: []float64{1}, Timestamp: 12})
	add("span at the lowest index", false, writev2.Histogram{Count: ci(1), PositiveSpans: sp(math.MinInt32, 1), PositiveDeltas: []int64{1}, Timestamp: 12})
	add("span past the highest index", false, writev2.Histogram{Count: ci(2), PositiveSpans: sp(math.MaxInt32, 1, 1, 1), PositiveDeltas: []int64{1, 0}, Timestamp: 12})
	add("start timestamp", true, writev2.Histogram{Count: ci(1), ZeroCount: zi(1), Timestamp: 13, StartTimestamp: 5})
	add("negative timestamp", true, writev2.Histogram{Count: ci(1), ZeroCount: zi(1), Timestamp: -13})
	return cs
}

// v1Histogram returns the 1.0 message of a 2.0 histogram (start_timestamp dropped).
func v1Histogram(h writev2.Histogram) prompb.Histogram {
	out := prompb.Histogram{
		Sum: h.Sum, Schema: h.Schema, ZeroThreshold: h.ZeroThreshold,
		NegativeDeltas: h.NegativeDeltas, NegativeCounts: h.NegativeCounts,
		PositiveDeltas: h.PositiveDeltas, PositiveCounts: h.PositiveCounts,
		ResetHint: prompb.Histogram_ResetHint(h.ResetHint), Timestamp: h.Timestamp, CustomValues: h.CustomValues,
	}
	switch c := h.Count.(type) {
	case *writev2.Histogram_CountInt:
		out.Count = &prompb.Histogram_CountInt{CountInt: c.CountInt}
	case *writev2.Histogram_CountFloat:
		out.Count = &prompb.Histogram_CountFloat{CountFloat: c.CountFloat}
	}
	switch z := h.ZeroCount.(type) {
	case *writev2.Histogram_ZeroCountInt:
		out.ZeroCount = &prompb.Histogram_ZeroCountInt{ZeroCountInt: z.ZeroCountInt}
	case *writev2.Histogram_ZeroCountFloat:
		out.ZeroCount = &prompb.Histogram_ZeroCountFloat{ZeroCountFloat: z.ZeroCountFloat}
	}
	for _, s := range h.NegativeSpans {
		out.NegativeSpans = append(out.NegativeSpans, prompb.BucketSpan{Offset: s.Offset, Length: s.Length})
	}
	for _, s := range h.PositiveSpans {
		out.PositiveSpans = append(out.PositiveSpans, prompb.BucketSpan{Offset: s.Offset, Length: s.Length})
	}
	return out
}

// caseLabels names the series of histogram case i.
func caseLabels(i int) []string { return []string{"__name__", "h", "case", fmt.Sprint(i)} }

// histogramRequests returns a 1.0 and a 2.0 request of one series per case, holding its histogram.
func histogramRequests(cs []histogramCase) (*prompb.WriteRequest, *writev2.Request) {
	v1 := &prompb.WriteRequest{}
	b := newV2Builder()
	for i, c := range cs {
		ts := v1Series(caseLabels(i))
		ts.Histograms = []prompb.Histogram{v1Histogram(c.h)}
		v1.Timeseries = append(v1.Timeseries, ts)
		b.add(caseLabels(i)).Histograms = []writev2.Histogram{c.h}
	}
	return v1, b.build()
}

// converted returns what Prometheus's conversion makes of h, as a sample
// with slices of its own (the conversion shares the message's, which a
// schema reduction would change).
func converted(h pbHistogram) head.HistogramSample {
	hs := head.HistogramSample{T: h.GetTimestamp()}
	if h.IsFloatHistogram() {
		fh := h.ToFloatHistogram()
		fh.PositiveSpans, fh.NegativeSpans = slices.Clone(fh.PositiveSpans), slices.Clone(fh.NegativeSpans)
		fh.PositiveBuckets, fh.NegativeBuckets = slices.Clone(fh.PositiveBuckets), slices.Clone(fh.NegativeBuckets)
		fh.CustomValues = slices.Clone(fh.CustomValues)
		hs.FH = fh
	} else {
		ih := h.ToIntHistogram()
		ih.PositiveSpans, ih.NegativeSpans = slices.Clone(ih.PositiveSpans), slices.Clone(ih.NegativeSpans)
		ih.PositiveBuckets, ih.NegativeBuckets = slices.Clone(ih.PositiveBuckets), slices.Clone(ih.NegativeBuckets)
		ih.CustomValues = slices.Clone(ih.CustomValues)
		hs.H = ih
	}
	return hs
}

// TestHistogramDecodeMatchesPrometheus decodes every case with both
// versions' decoders and compares each histogram with Prometheus's own
// conversion (ToIntHistogram / ToFloatHistogram, then the schema reduction
// its receiver applies), the refused ones with the cases' expectations,
// and the whole batch and stats with the reference decoders.
func TestHistogramDecodeMatchesPrometheus(t *testing.T) {
	cs := histogramCases()
	v1, v2 := histogramRequests(cs)
	for _, tc := range []struct {
		name      string
		raw       []byte
		hand, ref func(*decoder, []byte) (*head.Batch, error)
		want      func(i int) pbHistogram
	}{
		{"v1", marshal(t, v1), (*decoder).decodeV1, (*decoder).decodeV1Gogo, func(i int) pbHistogram { return &v1.Timeseries[i].Histograms[0] }},
		{"v2", marshal(t, v2), (*decoder).decodeV2, (*decoder).decodeV2Gogo, func(i int) pbHistogram { return &v2.Timeseries[i].Histograms[0] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDecoder(Limits{})
			b, err := tc.hand(d, tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			checkBatch(t, d, b)
			got := map[string]head.HistogramSample{}
			for _, s := range b.Series {
				if len(s.Histograms) != 1 || len(s.Samples) != 0 {
					t.Fatalf("series %s: %d histograms, %d samples", s.Labels, len(s.Histograms), len(s.Samples))
				}
				got[s.Labels.Get("case")] = s.Histograms[0]
			}
			invalid := 0
			for i, c := range cs {
				hs, ok := got[fmt.Sprint(i)]
				if ok != c.valid {
					t.Errorf("%s: decoded %v, want valid %v", c.name, ok, c.valid)
					continue
				}
				if !ok {
					invalid++
					continue
				}
				want := converted(tc.want(i))
				if err := checkHistogram(&want); err != nil {
					t.Fatalf("%s: Prometheus's conversion is refused: %v", c.name, err)
				}
				if d := histogramDiff(&hs, &want); d != "" {
					t.Errorf("%s: decoded histogram differs from Prometheus's conversion: %s", c.name, d)
				}
				if s := c.h.Schema; s > 8 && s <= 52 && (hs.H != nil && hs.H.Schema != 8 || hs.FH != nil && hs.FH.Schema != 8) {
					t.Errorf("%s: schema not reduced to 8: %+v", c.name, hs)
				}
			}
			if n := d.stats.invalid.Rejected[errInvalidHistogram]; n != invalid {
				t.Errorf("%d histograms refused, want %d", n, invalid)
			}
			if ex := d.stats.invalid.Examples[errInvalidHistogram]; !strings.HasPrefix(ex, `series {__name__="h", case=`) {
				t.Errorf("example %q does not name the series", ex)
			}
			compareDecodersWith(t, Limits{}, tc.raw, tc.hand, tc.ref)
		})
	}
}

// TestHistogramUnreducedSchema: the conversion before reduction is what
// Prometheus's ToIntHistogram gives, schemas 9…52 included (a check that the
// test above does not only compare the reduction with itself).
func TestHistogramUnreducedSchema(t *testing.T) {
	for _, c := range histogramCases() {
		pb := marshal(t, &c.h)
		shape, err := scanHistogram(pb, histogramFieldsV2)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, want := decodeHistogram(pb, &shape), converted(&c.h)
		if d := histogramDiff(&got, &want); d != "" {
			t.Errorf("%s: %s", c.name, d)
		}
		if got.H != nil && len(got.H.PositiveSpans) > 0 && cap(got.H.PositiveSpans) != len(got.H.PositiveSpans) {
			t.Errorf("%s: positive spans not capped (%d of %d): appending would overwrite the negative ones", c.name, len(got.H.PositiveSpans), cap(got.H.PositiveSpans))
		}
	}
}

// TestHistogramSchemas says what happens to each schema, as Prometheus's
// receiver does it: -4…8 and -53 (custom buckets) are stored as sent, 9…52
// (reserved for higher resolutions) are reduced to 8, and -9…-5 (reserved
// below the lowest) are refused like any other schema: Prometheus does not
// widen them, and Validate refuses them.
func TestHistogramSchemas(t *testing.T) {
	for schema := int32(-60); schema <= 60; schema++ {
		h := writev2.Histogram{Count: &writev2.Histogram_CountInt{CountInt: 2}, Schema: schema, Sum: 1,
			PositiveSpans: []writev2.BucketSpan{{Offset: 1, Length: 2}}, PositiveDeltas: []int64{1, 0}, Timestamp: 1}
		if schema == histogram.CustomBucketsSchema {
			h.CustomValues = []float64{1, 2, 3}
		}
		pb := marshal(t, &h)
		shape, err := scanHistogram(pb, histogramFieldsV2)
		if err != nil {
			t.Fatal(err)
		}
		hs := decodeHistogram(pb, &shape)
		err = checkHistogram(&hs)
		switch {
		case schema >= -4 && schema <= 8 || schema == -53:
			if err != nil || hs.H.Schema != schema {
				t.Errorf("schema %d: %v, stored as %d", schema, err, hs.H.Schema)
			}
		case schema >= 9 && schema <= 52:
			if err != nil || hs.H.Schema != 8 {
				t.Errorf("schema %d: %v, stored as %d, want 8", schema, err, hs.H.Schema)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("invalid schema, which must be between -4 and 8 for exponential buckets, or -53 for custom buckets, got schema %d", schema)) {
				t.Errorf("schema %d: %v, want refused", schema, err)
			}
		}
	}
}

// BenchmarkDecodeHistogramsV2 measures a 2.0 request of 2000 series with one
// integer histogram each (4+4 buckets in 2+2 spans): each histogram costs
// three allocations (the histogram, its spans, its buckets).
func BenchmarkDecodeHistogramsV2(b *testing.B) {
	bld := newV2Builder()
	for i := range benchSamples {
		bld.add([]string{"__name__", "lat", "i", fmt.Sprint(i)}).Histograms =
			[]writev2.Histogram{writev2.FromIntHistogram(0, 1000, tsdbutil.GenerateTestHistogram(int64(i)))}
	}
	benchmarkDecode(b, marshal(b, bld.build()), (*decoder).decodeV2)
}
