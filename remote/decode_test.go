package remote

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// checkBatch verifies invariants every decoded batch must satisfy.
func checkBatch(t *testing.T, d *decoder, b *head.Batch) {
	t.Helper()
	n := 0
	for _, s := range b.Series {
		if len(s.Samples) == 0 && len(s.Exemplars) == 0 && len(s.Histograms) == 0 {
			t.Fatalf("series %s without samples, histograms or exemplars in batch", s.Labels)
		}
		n += len(s.Samples) + len(s.Histograms)
		for _, h := range s.Histograms {
			if (h.H == nil) == (h.FH == nil) {
				t.Fatalf("series %s: histogram sample at %d with H %v and FH %v", s.Labels, h.T, h.H, h.FH)
			}
			if err := checkHistogram(&h); err != nil {
				t.Fatalf("series %s: invalid histogram in batch: %v", s.Labels, err)
			}
			if e := histogramElements(&h); e > d.limits.MaxBucketsPerHistogram {
				t.Fatalf("series %s: histogram of %d elements in batch, over the limit", s.Labels, e)
			}
		}
		if s.Labels.IsEmpty() {
			t.Fatal("series without labels in batch")
		}
		prev := ""
		s.Labels.Range(func(l labels.Label) {
			if l.Name == "" || l.Value == "" || l.Name <= prev && prev != "" {
				t.Fatalf("invalid labels passed validation: %s", s.Labels)
			}
			prev = l.Name
		})
	}
	if n+d.stats.invalid.RejectedTotal() != d.stats.samples+d.stats.histograms {
		t.Fatalf("batch holds %d samples and histograms + %d invalid, request had %d + %d", n, d.stats.invalid.RejectedTotal(), d.stats.samples, d.stats.histograms)
	}
}

// sameBatch reports whether two batches are equal (NaN-safe).
func sameBatch(a, b *head.Batch) bool {
	if len(a.Series) != len(b.Series) || len(a.Metadata) != len(b.Metadata) {
		return false
	}
	for i := range a.Series {
		if !labels.Equal(a.Series[i].Labels, b.Series[i].Labels) || len(a.Series[i].Samples) != len(b.Series[i].Samples) {
			return false
		}
		for j, s := range a.Series[i].Samples {
			o := b.Series[i].Samples[j]
			if s.T != o.T || (s.V != o.V && s.V == s.V) {
				return false
			}
		}
		if len(a.Series[i].Histograms) != len(b.Series[i].Histograms) {
			return false
		}
		for j := range a.Series[i].Histograms {
			if histogramDiff(&a.Series[i].Histograms[j], &b.Series[i].Histograms[j]) != "" {
				return false
			}
		}
		if len(a.Series[i].Exemplars) != len(b.Series[i].Exemplars) {
			return false
		}
		for j, e := range a.Series[i].Exemplars {
			o := b.Series[i].Exemplars[j]
			if e.T != o.T || math.Float64bits(e.V) != math.Float64bits(o.V) || !labels.Equal(e.Labels, o.Labels) {
				return false
			}
		}
	}
	for i := range a.Metadata {
		if a.Metadata[i] != b.Metadata[i] {
			return false
		}
	}
	return true
}

// fuzzDecode decodes data twice through one decoder (exercising reuse) and checks the results agree.
func fuzzDecode(t *testing.T, data []byte, decode func(d *decoder, data []byte) (*head.Batch, error)) {
	d := newDecoder(Limits{MaxLabelsPerSeries: 8, MaxLabelNameLength: 64, MaxLabelValueLength: 64})
	b1, err1 := decode(d, data)
	if err1 != nil {
		var re *requestError
		if !errors.As(err1, &re) || re.status/100 != 4 {
			t.Fatalf("decode error %v is not a 4xx requestError", err1)
		}
	} else {
		checkBatch(t, d, b1)
	}
	d.release()
	b2, err2 := decode(d, data)
	if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
		t.Fatalf("second decode differs: %v vs %v", err1, err2)
	}
	if err1 == nil && !sameBatch(b1, b2) {
		t.Fatal("decoder reuse changed the result")
	}
}

func FuzzDecodeV1(f *testing.F) {
	f.Add(marshal(f, nodeRequestV1(f, 20, 1_700_000_000_000)))
	s := v1Series([]string{"__name__", "up", "job", "x"}, prompb.Sample{Timestamp: 1, Value: 1})
	s.Exemplars = []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "a"}}, Value: 1, Timestamp: 1}}
	h := v1Series([]string{"__name__", "lat", "job", "x"})
	h.Histograms = []prompb.Histogram{{Count: &prompb.Histogram_CountInt{CountInt: 1}, Timestamp: 1}}
	bad := v1Series([]string{"b", "1", "a", "2"}, prompb.Sample{Timestamp: 1, Value: 1})
	f.Add(marshal(f, &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{s, h, bad},
		Metadata:   []prompb.MetricMetadata{{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "up", Help: "h", Unit: "u"}},
	}))
	// Around the decoder's fast paths: 127- and 128-byte values, an empty
	// value, value 0 and timestamp 0 (omitted fields), a negative timestamp.
	long := func(n int) string { return strings.Repeat("x", n) }
	f.Add(marshal(f, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		v1Series([]string{"__name__", long(127), "a", long(128)}, prompb.Sample{Timestamp: -5, Value: 0}),
		v1Series([]string{"__name__", "m", "e", ""}, prompb.Sample{Timestamp: 0, Value: 1.5}),
		{Labels: []prompb.Label{{Value: "v", Name: ""}}, Samples: []prompb.Sample{{}}},
	}}))
	f.Add([]byte{})
	f.Add([]byte{0x2a, 0x00}) // unknown field 5
	// A histogram of every field, an exemplar over the label limit (8 in the tests).
	hs := v1Series([]string{"__name__", "h", "job", "x"}, prompb.Sample{Timestamp: 1, Value: 1})
	hs.Histograms = []prompb.Histogram{{
		Count: &prompb.Histogram_CountFloat{CountFloat: 3}, Sum: 1, Schema: 3, ZeroThreshold: 1e-9,
		ZeroCount: &prompb.Histogram_ZeroCountFloat{ZeroCountFloat: 1}, ResetHint: prompb.Histogram_GAUGE,
		NegativeSpans: []prompb.BucketSpan{{Offset: -1, Length: 2}}, NegativeCounts: []float64{1, 2},
		PositiveSpans: []prompb.BucketSpan{{Offset: 3, Length: 1}}, PositiveDeltas: []int64{4},
		CustomValues: []float64{1}, Timestamp: 1,
	}}
	var exl []prompb.Label
	for i := range 9 {
		exl = append(exl, prompb.Label{Name: fmt.Sprintf("l%d", i), Value: "v"})
	}
	hs.Exemplars = []prompb.Exemplar{{Labels: exl, Timestamp: 1}, {Labels: exl[:8], Timestamp: 2}}
	f.Add(marshal(f, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{hs}}))
	for _, seed := range histogramSeeds(f) {
		f.Add(seed.v1)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzDecode(t, data, (*decoder).decodeV1)
		compareWithGogo(t, data)
	})
}

func FuzzDecodeV2(f *testing.F) {
	f.Add(marshal(f, nodeRequestV2(f, 20, 1_700_000_000_000)))
	b := newV2Builder()
	ts := b.add([]string{"__name__", "up", "job", "x"}, writev2.Sample{Timestamp: 1, Value: 1})
	b.meta(ts, writev2.Metadata_METRIC_TYPE_GAUGE, "help", "unit")
	ts.Exemplars = []writev2.Exemplar{{LabelsRefs: b.refs([]string{"trace_id", "abc"}), Value: 1, Timestamp: 1}}
	h := b.add([]string{"__name__", "lat", "job", "x"})
	h.Histograms = []writev2.Histogram{{Count: &writev2.Histogram_CountInt{CountInt: 1}, Timestamp: 1}}
	b.add([]string{"z", "1", "a", "2"}, writev2.Sample{Timestamp: 1, Value: 1})
	f.Add(marshal(f, b.build()))
	f.Add(marshal(f, &writev2.Request{Symbols: []string{"x"}, Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{0, 0}}}}))
	f.Add(marshal(f, &writev2.Request{Symbols: []string{""}, Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{0, 7}}}}))
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x00}) // reserved field 1 (a 1.0 timeseries)
	// Histogram fields of every kind, exemplars over the label limit (8 in
	// the tests), a start timestamp, merged metadata, unpacked refs.
	b = newV2Builder()
	ts = b.add([]string{"__name__", "h", "job", "x"}, writev2.Sample{Timestamp: 5, Value: 2, StartTimestamp: 3})
	ts.Histograms = []writev2.Histogram{{
		Count: &writev2.Histogram_CountFloat{CountFloat: 3}, Sum: 1, Schema: -2, ZeroThreshold: 1e-9,
		ZeroCount: &writev2.Histogram_ZeroCountInt{ZeroCountInt: 1}, ResetHint: writev2.Histogram_RESET_HINT_GAUGE,
		NegativeSpans: []writev2.BucketSpan{{Offset: -1, Length: 2}}, NegativeDeltas: []int64{1, -1},
		PositiveSpans: []writev2.BucketSpan{{Offset: 3, Length: 1}}, PositiveCounts: []float64{1.5},
		CustomValues: []float64{1, 2}, Timestamp: 5, StartTimestamp: 4,
	}}
	var many []string
	for i := range 9 {
		many = append(many, fmt.Sprintf("l%d", i), "v")
	}
	ts.Exemplars = []writev2.Exemplar{{LabelsRefs: b.refs(many), Value: 1, Timestamp: 5}, {LabelsRefs: b.refs(many[:16]), Value: 2, Timestamp: 6}}
	withMeta := marshal(f, b.build())
	f.Add(withMeta)
	f.Add(append(withMeta, 0x2a, 0x08, 0x08, 0x01, 0x08, 0x02, 0x2a, 0x02, 0x18, 0x01)) // a series of unpacked refs and metadata in two parts
	for _, seed := range histogramSeeds(f) {
		f.Add(seed.v2)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzDecode(t, data, (*decoder).decodeV2)
		compareDecoders(t, data, (*decoder).decodeV2, (*decoder).decodeV2Gogo)
	})
}

const benchSamples = 2000

func benchmarkDecode(b *testing.B, raw []byte, decode func(d *decoder, data []byte) (*head.Batch, error)) {
	body := snappy.Encode(nil, raw)
	d := newDecoder(Limits{})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		data, err := d.decompress(body)
		if err != nil {
			b.Fatal(err)
		}
		batch, err := decode(d, data)
		if err != nil {
			b.Fatal(err)
		}
		if len(batch.Series) != benchSamples {
			b.Fatalf("%d series decoded", len(batch.Series))
		}
		d.release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchSamples), "ns/sample")
}

// BenchmarkDecodeV1 measures snappy + unmarshal + conversion of a 2000-sample node_exporter 1.0 request.
func BenchmarkDecodeV1(b *testing.B) {
	benchmarkDecode(b, marshal(b, nodeRequestV1(b, benchSamples, 1_700_000_000_000)), (*decoder).decodeV1)
}

// BenchmarkParseSeriesV1 reads a node_exporter series' 1.0 TimeSeries (five
// labels, one sample), as every series of a request is read before its
// labels are checked.
func BenchmarkParseSeriesV1(b *testing.B) {
	ts := prompb.TimeSeries{Samples: []prompb.Sample{{Timestamp: 1_700_000_000_000, Value: 12345.67}}}
	labels.FromStrings("__name__", "node_cpu_seconds_total", "cpu", "3", "instance", "host-17:9100", "job", "node", "mode", "softirq").
		Range(func(l labels.Label) { ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value}) })
	enc, err := ts.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	d := newDecoder(Limits{})
	for b.Loop() {
		d.resetArena(16)
		if n, err := d.parseSeriesV1(enc); n != 1 || err != nil || len(d.rawLabels) == 0 {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkDecodeV2 measures snappy + unmarshal + conversion of a 2000-sample node_exporter 2.0 request.
func BenchmarkDecodeV2(b *testing.B) {
	benchmarkDecode(b, marshal(b, nodeRequestV2(b, benchSamples, 1_700_000_000_000)), (*decoder).decodeV2)
}

// BenchmarkWriteHandler measures the whole handler (pooling included) with a no-op appender.
func BenchmarkWriteHandler(b *testing.B) {
	for _, tc := range []struct {
		name, ct string
		raw      []byte
	}{
		{"v1", ctV1, marshal(b, nodeRequestV1(b, benchSamples, 1))},
		{"v2", ctV2, marshal(b, nodeRequestV2(b, benchSamples, 1))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := NewWriteHandler(nopAppender{}, WriteHandlerOptions{})
			body := snappy.Encode(nil, tc.raw)
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(body))
				req.Header.Set("Content-Type", tc.ct)
				req.Header.Set("Content-Encoding", "snappy")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusNoContent {
					b.Fatalf("status %d: %s", w.Code, strings.TrimSpace(w.Body.String()))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchSamples), "ns/sample")
		})
	}
}

type nopAppender struct{}

func (nopAppender) AppendBatch(_ context.Context, b *head.Batch) (head.AppendResult, error) {
	n := 0
	for _, s := range b.Series {
		n += len(s.Samples)
	}
	return head.AppendResult{SamplesWritten: n}, nil
}

// compareWithGogo checks that the hand-written 1.0 decoder agrees with the
// generated gogo Unmarshal on acceptance, batch content and counts.
func compareWithGogo(t *testing.T, data []byte) {
	t.Helper()
	compareDecoders(t, data, (*decoder).decodeV1, (*decoder).decodeV1Gogo)
}

// compareDecoders checks that a hand-written decoder agrees with its
// reference on acceptance, batch content and counts.
func compareDecoders(t *testing.T, data []byte, hand, ref func(*decoder, []byte) (*head.Batch, error)) {
	t.Helper()
	lim := Limits{MaxLabelsPerSeries: 8, MaxLabelNameLength: 64, MaxLabelValueLength: 64, MaxSeriesPerRequest: 50, MaxSamplesPerRequest: 100, MaxSymbolsPerRequest: 100,
		MaxBucketsPerHistogram: 40, MaxHistogramBytesPerRequest: 4096}
	compareDecodersWith(t, lim, data, hand, ref)
}

// compareDecodersWith is compareDecoders with the given limits.
func compareDecodersWith(t *testing.T, lim Limits, data []byte, hand, ref func(*decoder, []byte) (*head.Batch, error)) {
	t.Helper()
	fast, slow := newDecoder(lim), newDecoder(lim)
	bf, errF := hand(fast, data)
	bs, errS := ref(slow, data)
	if (errF == nil) != (errS == nil) {
		t.Fatalf("hand-written decoder error %v, gogo error %v", errF, errS)
	}
	if errF != nil {
		return
	}
	if !sameBatch(bf, bs) {
		t.Fatalf("batches differ:\nhand-written %+v\ngogo         %+v", bf, bs)
	}
	sf, ss := fast.stats, slow.stats
	if sf.samples != ss.samples || sf.histograms != ss.histograms || sf.exemplars != ss.exemplars ||
		!maps.Equal(sf.invalid.Rejected, ss.invalid.Rejected) ||
		sf.invalid.Examples[errInvalidHistogram] != ss.invalid.Examples[errInvalidHistogram] ||
		sf.histogramSeries != ss.histogramSeries || sf.exemplarSeries != ss.exemplarSeries ||
		fast.histBytes != slow.histBytes {
		t.Fatalf("stats differ: hand-written %+v, gogo %+v", sf, ss)
	}
}

func TestDecodeV1MatchesGogo(t *testing.T) {
	for _, n := range []int{1, 20, 2000} {
		compareWithGogo(t, marshal(t, nodeRequestV1(t, n, 1_700_000_000_000)))
	}
}

func BenchmarkDecodeV1Gogo(b *testing.B) {
	benchmarkDecode(b, marshal(b, nodeRequestV1(b, benchSamples, 1_700_000_000_000)), (*decoder).decodeV1Gogo)
}

// TestDecodeV1ReusedBatch: one decoder decodes requests whose series hold
// many samples (the arena grows while a series is read) and then a smaller
// one; every batch matches gogo's, and the first batch's samples are intact
// until the decoder is used again.
func TestDecodeV1ReusedBatch(t *testing.T) {
	lim := Limits{MaxLabelsPerSeries: 8, MaxLabelNameLength: 64, MaxLabelValueLength: 64}
	big := &prompb.WriteRequest{}
	for i := 0; i < 40; i++ {
		var ss []prompb.Sample
		for j := 0; j <= i*13; j++ {
			ss = append(ss, prompb.Sample{Timestamp: int64(j) * 1000, Value: float64(i*1000 + j)})
		}
		big.Timeseries = append(big.Timeseries, v1Series([]string{"__name__", "m", "i", fmt.Sprint(i)}, ss...))
	}
	small := marshal(t, nodeRequestV1(t, 20, 1_700_000_000_000))
	d, gogo := newDecoder(lim), newDecoder(lim)
	for round, data := range [][]byte{marshal(t, big), small, marshal(t, big)} {
		got, err := d.decodeV1(data)
		if err != nil {
			t.Fatal(err)
		}
		want, err := gogo.decodeV1Gogo(data)
		if err != nil {
			t.Fatal(err)
		}
		if !sameBatch(got, want) {
			t.Fatalf("round %d: batches differ:\nhand-written %+v\ngogo         %+v", round, got, want)
		}
		if round != 1 {
			for i, s := range got.Series {
				if len(s.Samples) != i*13+1 || s.Samples[len(s.Samples)-1].V != float64(i*1000+i*13) {
					t.Fatalf("round %d series %d: %d samples, last %v", round, i, len(s.Samples), s.Samples[len(s.Samples)-1])
				}
			}
		}
		d.release()
	}
}

// histogramSeed is one fuzz seed request per protocol version.
type histogramSeed struct{ v1, v2 []byte }

// histogramSeeds returns requests of histograms for the fuzz targets: the
// histogram cases (valid and not) a few at a time, and messages the
// generated code merges: count_int then count_float (and zero counts the
// other way round), spans and buckets split over several fields, packed
// and unpacked, and histograms over the fuzz tests' MaxBucketsPerHistogram.
func histogramSeeds(t testing.TB) []histogramSeed {
	var seeds []histogramSeed
	cs := histogramCases()
	for i := 0; i < len(cs); i += 8 {
		v1, v2 := histogramRequests(cs[i:min(i+8, len(cs))])
		seeds = append(seeds, histogramSeed{marshal(t, v1), marshal(t, v2)})
	}
	// Messages written field by field (a Histogram is the same bytes in both versions).
	varint := func(field int, v uint64) []byte {
		return binary.AppendUvarint(binary.AppendUvarint(nil, uint64(field<<3|wireVarint)), v)
	}
	fixed := func(field int, v float64) []byte {
		return binary.LittleEndian.AppendUint64(binary.AppendUvarint(nil, uint64(field<<3|wireFixed64)), math.Float64bits(v))
	}
	span := func(field int, offset int32, length uint32) []byte {
		return pbBytes(nil, field, append(varint(1, uint64(uint32(offset<<1)^uint32(offset>>31))), varint(2, uint64(length))...))
	}
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	msgs := [][]byte{
		// count_int, then count_float: a float histogram; zero_count_float, then zero_count_int.
		join(varint(1, 3), fixed(2, 3), fixed(7, 1), varint(6, 1), span(11, 0, 1), span(11, 1, 1), fixed(13, 1), fixed(13, 1), varint(15, 5)),
		// count_float, then count_int; deltas unpacked (zigzag 2 = 1) and packed; negative spans in two fields.
		join(fixed(2, 1), varint(1, 5), span(8, -2, 1), span(8, 0, 1), varint(9, 2), pbBytes(nil, 9, []byte{2}),
			span(11, 3, 2), pbBytes(nil, 12, []byte{2, 0}), varint(4, 1), varint(14, 2), varint(15, 6)),
		// schema 12 (sint32 24), custom values on an exponential schema, an unknown field, reset hint 259.
		join(varint(1, 2), varint(4, 24), span(11, 0, 2), pbBytes(nil, 12, []byte{2, 0}), fixed(16, 1), varint(20, 9), varint(14, 259), varint(15, 7)),
		// 41 elements: over the fuzz tests' MaxBucketsPerHistogram (40).
		join(varint(1, 0), span(11, 0, 40), pbBytes(nil, 12, make([]byte, 40)), varint(15, 8)),
	}
	label := pbBytes(pbBytes(nil, 1, []byte("__name__")), 2, []byte("h"))
	for _, m := range msgs {
		v1 := pbBytes(nil, 1, join(pbBytes(nil, 1, label), pbBytes(nil, 4, m)))
		v2 := join(pbBytes(nil, 4, nil), pbBytes(nil, 4, []byte("__name__")), pbBytes(nil, 4, []byte("h")),
			pbBytes(nil, 5, join(pbBytes(nil, 1, []byte{1, 2}), pbBytes(nil, 3, m), pbBytes(nil, 3, varint(17, 3)))))
		seeds = append(seeds, histogramSeed{v1, v2})
	}
	return seeds
}

// TestHistogramSeedsMatchGogo runs the fuzz comparisons on the histogram seeds
// (they also run as part of FuzzDecodeV1/V2's seed corpus), checking that the
// seeds reach decoded histograms and refusals.
func TestHistogramSeedsMatchGogo(t *testing.T) {
	decoded, refused := 0, 0
	for _, seed := range histogramSeeds(t) {
		for _, v := range []struct {
			raw       []byte
			hand, ref func(*decoder, []byte) (*head.Batch, error)
		}{{seed.v1, (*decoder).decodeV1, (*decoder).decodeV1Gogo}, {seed.v2, (*decoder).decodeV2, (*decoder).decodeV2Gogo}} {
			compareDecoders(t, v.raw, v.hand, v.ref)
			fuzzDecode(t, v.raw, v.hand)
			d := newDecoder(Limits{MaxBucketsPerHistogram: 40})
			b, err := v.hand(d, v.raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Series {
				decoded += len(s.Histograms)
			}
			refused += d.stats.invalid.Rejected[errInvalidHistogram]
		}
	}
	if decoded < 50 || refused < 30 {
		t.Errorf("the seeds decode %d histograms and refuse %d", decoded, refused)
	}
}
