package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"
)

// sameF64s: bit-identical floats, nil and empty equal.
func sameF64s(a, b []float64) bool {
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

func sameSpans(a, b []histogram.Span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// exactHistogram reports how a and b differ field by field (floats by bit
// pattern, nil and empty slices equal); "" when they do not.
func exactHistogram(a, b *histogram.Histogram) string {
	switch {
	case a.CounterResetHint != b.CounterResetHint:
		return "hint"
	case a.Schema != b.Schema:
		return "schema"
	case math.Float64bits(a.ZeroThreshold) != math.Float64bits(b.ZeroThreshold):
		return "zero threshold"
	case a.ZeroCount != b.ZeroCount || a.Count != b.Count:
		return "counts"
	case math.Float64bits(a.Sum) != math.Float64bits(b.Sum):
		return "sum"
	case !sameSpans(a.PositiveSpans, b.PositiveSpans) || !sameSpans(a.NegativeSpans, b.NegativeSpans):
		return "spans"
	case !sameInts(a.PositiveBuckets, b.PositiveBuckets) || !sameInts(a.NegativeBuckets, b.NegativeBuckets):
		return "buckets"
	case !sameF64s(a.CustomValues, b.CustomValues):
		return "custom values"
	}
	return ""
}

func exactFloatHistogram(a, b *histogram.FloatHistogram) string {
	switch {
	case a.CounterResetHint != b.CounterResetHint:
		return "hint"
	case a.Schema != b.Schema:
		return "schema"
	case !sameF64s([]float64{a.ZeroThreshold, a.ZeroCount, a.Count, a.Sum}, []float64{b.ZeroThreshold, b.ZeroCount, b.Count, b.Sum}):
		return "threshold, counts or sum"
	case !sameSpans(a.PositiveSpans, b.PositiveSpans) || !sameSpans(a.NegativeSpans, b.NegativeSpans):
		return "spans"
	case !sameF64s(a.PositiveBuckets, b.PositiveBuckets) || !sameF64s(a.NegativeBuckets, b.NegativeBuckets):
		return "buckets"
	case !sameF64s(a.CustomValues, b.CustomValues):
		return "custom values"
	}
	return ""
}

func assertEqualHistograms(t *testing.T, want, got []RefHistogram) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("histograms: got %d, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Ref != w.Ref || g.T != w.T || (g.H == nil) != (w.H == nil) || (g.FH == nil) != (w.FH == nil) {
			t.Fatalf("histogram %d: got ref %d t %d int %v float %v, want ref %d t %d int %v float %v",
				i, g.Ref, g.T, g.H != nil, g.FH != nil, w.Ref, w.T, w.H != nil, w.FH != nil)
		}
		var diff string
		if w.H != nil {
			diff = exactHistogram(w.H, g.H)
		} else {
			diff = exactFloatHistogram(w.FH, g.FH)
		}
		if diff != "" {
			t.Fatalf("histogram %d differs in %s:\n got  %+v %+v\n want %+v %+v", i, diff, g.H, g.FH, w.H, w.FH)
		}
	}
}

// specialHistograms are edge cases of every field.
func specialHistograms() []RefHistogram {
	negZero := math.Copysign(0, -1)
	return []RefHistogram{
		{Ref: 1, T: 1000, H: &histogram.Histogram{}}, // all zero, nil slices
		{Ref: math.MaxUint64, T: math.MinInt64, H: &histogram.Histogram{
			CounterResetHint: histogram.GaugeType,
			Schema:           math.MinInt32,
			ZeroThreshold:    negZero,
			ZeroCount:        math.MaxUint64,
			Count:            math.MaxUint64,
			Sum:              math.Float64frombits(value.StaleNaN),
			PositiveSpans:    []histogram.Span{{Offset: math.MinInt32, Length: 0}, {Offset: math.MaxInt32, Length: math.MaxUint32}},
			NegativeSpans:    []histogram.Span{}, // empty, decodes nil
			PositiveBuckets:  []int64{math.MinInt64, math.MaxInt64, 0, -1},
			NegativeBuckets:  []int64{},   // empty, decodes nil
			CustomValues:     []float64{}, // empty, decodes nil
		}},
		{Ref: 0, T: math.MaxInt64, FH: &histogram.FloatHistogram{
			CounterResetHint: histogram.CounterReset,
			Schema:           math.MaxInt32,
			ZeroThreshold:    math.SmallestNonzeroFloat64,
			ZeroCount:        negZero,
			Count:            math.Inf(1),
			Sum:              negZero,
			NegativeSpans:    []histogram.Span{{Offset: -3, Length: 0}},
			NegativeBuckets:  []float64{math.NaN(), math.Float64frombits(0x7ff0000000000001), negZero, math.Inf(-1)},
		}},
		{Ref: 7, T: -1, H: &histogram.Histogram{
			CounterResetHint: histogram.NotCounterReset,
			Schema:           histogram.CustomBucketsSchema,
			Count:            3,
			Sum:              math.NaN(),
			PositiveSpans:    []histogram.Span{{Offset: 0, Length: 3}},
			PositiveBuckets:  []int64{1, 0, 0},
			CustomValues:     []float64{math.Inf(-1), negZero, 0, 1e-300, math.Inf(1)},
		}},
		// The same bounds again (written as a reference), then others, then the first again.
		{Ref: 7, T: 0, FH: &histogram.FloatHistogram{Schema: histogram.CustomBucketsSchema, CustomValues: []float64{math.Inf(-1), negZero, 0, 1e-300, math.Inf(1)}}},
		{Ref: 8, T: 0, FH: &histogram.FloatHistogram{Schema: histogram.CustomBucketsSchema, CustomValues: []float64{0, 1, math.Inf(1)}}},
		{Ref: 9, T: 0, H: &histogram.Histogram{Schema: 3, CustomValues: []float64{math.Inf(-1), negZero, 0, 1e-300, math.Inf(1)}}},
		// Counter reset hints outside Prometheus's four are kept too.
		{Ref: 10, T: 5, H: &histogram.Histogram{CounterResetHint: 7}},
		{Ref: 11, T: 5, FH: &histogram.FloatHistogram{CounterResetHint: 255}},
	}
}

// generatedHistograms: Prometheus's test histograms of every kind, n series.
func generatedHistograms(n int) []RefHistogram {
	var hs []RefHistogram
	for i := range n {
		ref, t := uint64(1000+i), int64(1_700_000_000_000+i%5*15000)
		switch i % 6 {
		case 0:
			hs = append(hs, RefHistogram{Ref: ref, T: t, H: tsdbutil.GenerateTestHistogram(int64(i))})
		case 1:
			hs = append(hs, RefHistogram{Ref: ref, T: t, FH: tsdbutil.GenerateTestFloatHistogram(int64(i))})
		case 2:
			hs = append(hs, RefHistogram{Ref: ref, T: t, H: tsdbutil.GenerateTestCustomBucketsHistogram(int64(i))})
		case 3:
			hs = append(hs, RefHistogram{Ref: ref, T: t, FH: tsdbutil.GenerateTestCustomBucketsFloatHistogram(int64(i))})
		case 4:
			hs = append(hs, RefHistogram{Ref: ref, T: t, H: tsdbutil.GenerateTestGaugeHistogram(int64(i))})
		case 5:
			hs = append(hs, RefHistogram{Ref: ref, T: t, FH: tsdbutil.GenerateTestGaugeFloatHistogram(int64(i))})
		}
	}
	for j, h := range tsdbutil.GenerateTestHistograms(20) {
		hs = append(hs, RefHistogram{Ref: 5, T: int64(j) * 15000, H: h})
	}
	for j, h := range tsdbutil.GenerateTestCustomBucketsFloatHistograms(20) {
		hs = append(hs, RefHistogram{Ref: 6, T: int64(j) * 15000, FH: h})
	}
	return hs
}

func histogramCommit() *Commit {
	c := exemplarCommit()
	c.Histograms = append(specialHistograms(), generatedHistograms(60)...)
	return c
}

func TestHistogramsRoundTrip(t *testing.T) {
	many := &Commit{}
	for i := range 3000 {
		ref := uint64(i * 3)
		many.Series = append(many.Series, RefSeries{Ref: ref, Labels: labels.FromStrings("__name__", fmt.Sprintf("h_%d", i%7), "instance", fmt.Sprintf("host-%d", i))})
		many.Samples = append(many.Samples, RefSample{Ref: ref + 1, T: int64(i), V: float64(i)})
		if i%2 == 0 {
			many.Histograms = append(many.Histograms, RefHistogram{Ref: ref, T: 1e12 + int64(i%11), H: tsdbutil.GenerateTestHistogram(int64(i))})
		} else {
			many.Histograms = append(many.Histograms, RefHistogram{Ref: ref, T: 1e12 - int64(i%13), FH: tsdbutil.GenerateTestCustomBucketsFloatHistogram(int64(i))})
		}
	}
	many.Metadata = []Metadata{{Metric: "h_0", Type: "histogram", Help: "h.", Unit: "seconds"}}
	cases := map[string]*Commit{
		"only histograms":      {Histograms: specialHistograms()},
		"with everything":      histogramCommit(),
		"without exemplars":    {Series: sampleCommit().Series, Samples: sampleCommit().Samples, Metadata: sampleCommit().Metadata, Histograms: generatedHistograms(30)},
		"single int":           {Histograms: []RefHistogram{{Ref: 3, T: 4, H: tsdbutil.GenerateTestHistogram(1)}}},
		"single float":         {Histograms: []RefHistogram{{Ref: 3, T: 4, FH: tsdbutil.GenerateTestFloatHistogram(1)}}},
		"single custom bucket": {Histograms: []RefHistogram{{Ref: 3, T: 4, H: tsdbutil.GenerateTestCustomBucketsHistogram(1)}}},
		"many series":          many,
	}
	var reuse Commit
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rec := c.Encode(nil)
			if rec[0] != TypeCommitHistograms {
				t.Fatalf("type byte %d", rec[0])
			}
			var got Commit
			if err := Decode(rec, &got); err != nil {
				t.Fatal(err)
			}
			assertEqualCommit(t, c, &got)
			if err := Decode(rec, &reuse); err != nil {
				t.Fatal(err)
			}
			assertEqualCommit(t, c, &reuse)
			// One encoding per commit.
			if again := got.Encode(nil); string(again) != string(rec) {
				t.Fatalf("re-encoding differs:\n %x\n %x", again, rec)
			}
			// The decoded commits alias neither rec nor each other.
			for i := range rec {
				rec[i] = 0xff
			}
			for i := range got.Histograms {
				if h := got.Histograms[i].H; h != nil && h == reuse.Histograms[i].H || got.Histograms[i].FH != nil && got.Histograms[i].FH == reuse.Histograms[i].FH {
					t.Fatalf("histogram %d shared by two decodes", i)
				}
			}
			assertEqualCommit(t, c, &got)
		})
	}
}

// TestHistogramsDecodedFresh: histograms from one Decode survive the next
// Decode into the same Commit (the head keeps the pointers).
func TestHistogramsDecodedFresh(t *testing.T) {
	first := &Commit{Histograms: generatedHistograms(12)}
	second := &Commit{Histograms: specialHistograms()}
	var c Commit
	if err := Decode(first.Encode(nil), &c); err != nil {
		t.Fatal(err)
	}
	kept := append([]RefHistogram(nil), c.Histograms...)
	if err := Decode(second.Encode(nil), &c); err != nil {
		t.Fatal(err)
	}
	assertEqualHistograms(t, first.Histograms, kept)
	assertEqualHistograms(t, second.Histograms, c.Histograms)
	c.Reset()
	if len(c.Histograms) != 0 || cap(c.Histograms) == 0 || c.Histograms[:1][0].H != nil || c.Histograms[:1][0].FH != nil {
		t.Fatal("Reset kept histogram references")
	}
}

// TestNoHistogramsNoNewType: an empty (not nil) Histograms slice still gives
// today's types and bytes.
func TestNoHistogramsNoNewType(t *testing.T) {
	for _, mk := range []func() *Commit{sampleCommit, exemplarCommit} {
		c := mk()
		want := c.Encode(nil)
		c.Histograms = []RefHistogram{}
		if got := c.Encode(nil); string(got) != string(want) || got[0] == TypeCommitHistograms {
			t.Fatalf("empty histograms changed the record: %x", got)
		}
	}
}

func TestCustomValuesWrittenOnce(t *testing.T) {
	one := &Commit{Histograms: []RefHistogram{{Ref: 1, T: 1, H: tsdbutil.GenerateTestCustomBucketsHistogram(0)}}}
	c := &Commit{}
	for i := range 100 {
		c.Histograms = append(c.Histograms, RefHistogram{Ref: 1, T: int64(i), H: tsdbutil.GenerateTestCustomBucketsHistogram(0)})
	}
	n1, n100 := len(one.Encode(nil)), len(c.Encode(nil))
	// The five bounds take 41 bytes once. Each further histogram: 2 deltas,
	// header, schema, count, zero count, sum, 1 + 2 x 2 spans, an empty
	// negative list, 1 + 4 buckets, another empty list.
	if per := (n100 - n1) / 99; per != 2+1+1+1+1+8+5+1+5+1 || (n100-n1)%99 != 0 {
		t.Fatalf("%d bytes per repeated custom-bucket histogram (one alone %d)", per, n1)
	}
	var got Commit
	if err := Decode(c.Encode(nil), &got); err != nil {
		t.Fatal(err)
	}
	assertEqualHistograms(t, c.Histograms, got.Histograms)
	if &got.Histograms[0].H.CustomValues[0] != &got.Histograms[99].H.CustomValues[0] {
		t.Fatal("repeated custom values decoded into separate arrays")
	}
}

func TestHistogramsSize(t *testing.T) {
	// An exponential histogram of Prometheus's tests, 2 x 2 spans of 4 buckets.
	c := &Commit{Histograms: []RefHistogram{{Ref: 1, T: 1, H: tsdbutil.GenerateTestHistogram(3)}}}
	// type, 4 empty sections (series to exemplars), count, 2 deltas, header, schema, threshold,
	// count, zero count, sum, 2 x (1 + 2 x 2) spans, 2 x (1 + 4) buckets
	if n, want := len(c.Encode(nil)), 1+4+1+2+1+1+8+1+1+8+10+10; n != want {
		t.Fatalf("histogram record %d bytes, want %d", n, want)
	}
}

func TestHistogramsTruncated(t *testing.T) {
	rec := histogramCommit().Encode(nil)
	var c Commit
	for i := range len(rec) {
		err := Decode(rec[:i], &c)
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("truncation to %d of %d bytes: got %v, want ErrMalformed", i, len(rec), err)
		}
	}
}

func TestEncodeBadRefHistogramPanics(t *testing.T) {
	for name, rh := range map[string]RefHistogram{
		"neither": {Ref: 1},
		"both":    {Ref: 1, H: &histogram.Histogram{}, FH: &histogram.FloatHistogram{}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			(&Commit{Histograms: []RefHistogram{rh}}).Encode(nil)
		})
	}
}

func TestEncodeHistogramsNoAlloc(t *testing.T) {
	c := histogramCommit()
	buf := make([]byte, 0, 1<<20)
	if allocs := testing.AllocsPerRun(20, func() { buf = c.Encode(buf[:0]) }); allocs != 0 {
		t.Fatalf("Encode allocated %v times", allocs)
	}
}

// histRec builds a type 5 record with no series, samples, metadata or
// exemplars, one histogram of ref delta 1 and time delta 0, then body.
func histRec(body ...byte) []byte {
	return append([]byte{TypeCommitHistograms, 0, 0, 0, 0, 1, 2, 0}, body...)
}

func TestHistogramDecodeErrors(t *testing.T) {
	f64 := func(v float64) []byte { return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	empty := []byte{0, 0, 0, 0}                 // spans and buckets
	intTail := cat([]byte{0, 0}, f64(0), empty) // count, zero count, sum, lists
	valid := histRec(cat([]byte{0, 0}, intTail)...)
	var c Commit
	if err := Decode(valid, &c); err != nil || len(c.Histograms) != 1 || c.Histograms[0].Ref != 1 {
		t.Fatalf("valid base record: %v %+v", err, c.Histograms)
	}
	cv := cat([]byte{1}, f64(1))
	cases := map[string][]byte{
		"no histograms":       {TypeCommitHistograms, 0, 0, 0, 0, 0},
		"huge histograms":     {TypeCommitHistograms, 0, 0, 0, 0, 2, 2, 0},
		"exemplars missing":   {TypeCommitHistograms, 0, 0, 0},
		"unknown header bits": histRec(cat([]byte{0x80, 0x20, 0}, intTail)...), // 1 << 12
		"both custom bits":    histRec(cat([]byte{histCustom | histCustomPrev, 0}, intTail, cv)...),
		"overlong header":     histRec(cat([]byte{0x80, 0x00, 0}, intTail)...),
		"zero threshold 0":    histRec(cat([]byte{histZeroThresh, 0}, f64(0), intTail)...),
		"schema too large":    histRec(cat([]byte{0, 0x80, 0x80, 0x80, 0x80, 0x10}, intTail)...), // 2^31
		"span length > 2^32":  histRec(cat([]byte{0, 0, 0, 0}, f64(0), []byte{1, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0})...),
		"span offset > 2^31":  histRec(cat([]byte{0, 0, 0, 0}, f64(0), []byte{1, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0})...),
		"huge spans":          histRec(cat([]byte{0, 0, 0, 0}, f64(0), []byte{100, 0, 0, 0})...),
		"huge buckets":        histRec(cat([]byte{0, 0, 0, 0}, f64(0), []byte{0, 0, 100, 0})...),
		"huge float buckets":  histRec(cat([]byte{histFloat, 0}, f64(0), f64(0), f64(0), []byte{0, 0, 2, 0}, f64(0))...),
		"empty custom values": histRec(cat([]byte{histCustom, 0}, intTail, []byte{0})...),
		"huge custom values":  histRec(cat([]byte{histCustom, 0}, intTail, []byte{2}, f64(1))...),
		"no last custom":      histRec(cat([]byte{histCustomPrev, 0}, intTail)...),
		"repeated custom": cat([]byte{TypeCommitHistograms, 0, 0, 0, 0, 2},
			[]byte{2, 0, histCustom, 0}, intTail, cv,
			[]byte{0, 0, histCustom, 0}, intTail, cv),
		"trailing bytes": append(append([]byte(nil), valid...), 0),
		"unknown type":   {TypeCommitStarts + 1, 0, 0, 0, 0, 0, 1, 2, 0, 2},
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			var c Commit
			if err := Decode(rec, &c); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
	// The repeated list is valid as a reference.
	ok := cat([]byte{TypeCommitHistograms, 0, 0, 0, 0, 2},
		[]byte{2, 0, histCustom, 0}, intTail, cv,
		[]byte{0, 0, histCustomPrev, 0}, intTail)
	if err := Decode(ok, &c); err != nil || len(c.Histograms) != 2 || len(c.Histograms[1].H.CustomValues) != 1 {
		t.Fatalf("custom values reference: %v", err)
	}
}

func BenchmarkDecodeHistograms(b *testing.B) {
	c := &Commit{Histograms: generatedHistograms(600)}
	rec := c.Encode(nil)
	var got Commit
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(rec, &got); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeHistogramsAllocs: a histogram costs its struct and one array per
// non-empty list, nothing more (the error texts are not built).
func TestDecodeHistogramsAllocs(t *testing.T) {
	c := &Commit{Samples: []RefSample{{Ref: 1, T: 1, V: 2}}}
	for i := range 50 {
		c.Histograms = append(c.Histograms, RefHistogram{Ref: uint64(i), T: 5, H: tsdbutil.GenerateTestHistogram(int64(i))})             // 2 spans, 2 bucket lists
		c.Histograms = append(c.Histograms, RefHistogram{Ref: uint64(i), T: 6, FH: tsdbutil.GenerateTestCustomBucketsFloatHistogram(1)}) // 1 + 1, bounds once
	}
	rec := c.Encode(nil)
	var got Commit
	if err := Decode(rec, &got); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if err := Decode(rec, &got); err != nil {
			t.Fatal(err)
		}
	})
	if want := float64(50*5 + 50*3 + 1); allocs != want {
		t.Fatalf("Decode allocated %v times, want %v", allocs, want)
	}
}
