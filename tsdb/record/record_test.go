package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"
)

func sampleCommit() *Commit {
	return &Commit{
		Series: []RefSeries{
			{Ref: 1, Labels: labels.FromStrings("__name__", "up", "job", "node", "instance", "a:9100")},
			{Ref: math.MaxUint64, Labels: labels.FromStrings("__name__", "x", "empty", "")},
			{Ref: 0, Labels: labels.EmptyLabels()},
		},
		Samples: []RefSample{
			{Ref: 1000, T: 1700000000000, V: 1},
			{Ref: 1, T: math.MinInt64, V: math.Inf(1)},
			{Ref: math.MaxUint64, T: math.MaxInt64, V: math.Inf(-1)},
			{Ref: 1001, T: 1700000000000, V: math.Float64frombits(0x7ff0000000000002)}, // signalling NaN payload
			{Ref: 1002, T: -5, V: math.Copysign(0, -1)},
			{Ref: 0, T: 0, V: math.Float64frombits(0x7ff8000000000001)}, // Prometheus StaleNaN
			{Ref: 1000, T: 1700000015000, V: math.SmallestNonzeroFloat64},
		},
		Metadata: []Metadata{
			{Metric: "up", Type: "gauge", Help: "1 if the target is up.", Unit: ""},
			{Metric: "http_request_duration_seconds", Type: "histogram", Help: "ünïcode help", Unit: "seconds"},
		},
	}
}

func assertEqualCommit(t *testing.T, want, got *Commit) {
	t.Helper()
	if len(got.Series) != len(want.Series) {
		t.Fatalf("series: got %d, want %d", len(got.Series), len(want.Series))
	}
	for i := range want.Series {
		if got.Series[i].Ref != want.Series[i].Ref || !labels.Equal(got.Series[i].Labels, want.Series[i].Labels) {
			t.Fatalf("series %d: got %d %s, want %d %s", i, got.Series[i].Ref, got.Series[i].Labels, want.Series[i].Ref, want.Series[i].Labels)
		}
	}
	if len(got.Samples) != len(want.Samples) {
		t.Fatalf("samples: got %d, want %d", len(got.Samples), len(want.Samples))
	}
	for i, w := range want.Samples {
		g := got.Samples[i]
		if g.Ref != w.Ref || g.T != w.T || math.Float64bits(g.V) != math.Float64bits(w.V) {
			t.Fatalf("sample %d: got {%d %d %#x}, want {%d %d %#x}", i, g.Ref, g.T, math.Float64bits(g.V), w.Ref, w.T, math.Float64bits(w.V))
		}
	}
	if len(got.Metadata) != len(want.Metadata) {
		t.Fatalf("metadata: got %d, want %d", len(got.Metadata), len(want.Metadata))
	}
	for i := range want.Metadata {
		if got.Metadata[i] != want.Metadata[i] {
			t.Fatalf("metadata %d: got %+v, want %+v", i, got.Metadata[i], want.Metadata[i])
		}
	}
	if len(got.Exemplars) != len(want.Exemplars) {
		t.Fatalf("exemplars: got %d, want %d", len(got.Exemplars), len(want.Exemplars))
	}
	for i, w := range want.Exemplars {
		g := got.Exemplars[i]
		if g.Ref != w.Ref || g.T != w.T || math.Float64bits(g.V) != math.Float64bits(w.V) || !labels.Equal(g.Labels, w.Labels) {
			t.Fatalf("exemplar %d: got %+v, want %+v", i, g, w)
		}
	}
	assertEqualHistograms(t, want.Histograms, got.Histograms)
	if len(got.Starts) != len(want.Starts) {
		t.Fatalf("starts: got %d, want %d", len(got.Starts), len(want.Starts))
	}
	for i := range want.Starts {
		if got.Starts[i] != want.Starts[i] {
			t.Fatalf("start %d: got %+v, want %+v", i, got.Starts[i], want.Starts[i])
		}
	}
}

func TestRoundTrip(t *testing.T) {
	many := &Commit{}
	for i := range 5000 {
		many.Series = append(many.Series, RefSeries{
			Ref:    uint64(i * 7),
			Labels: labels.FromStrings("__name__", fmt.Sprintf("metric_%d", i%13), "instance", fmt.Sprintf("host-%d:9100", i), "job", "node"),
		})
		many.Samples = append(many.Samples, RefSample{Ref: uint64(i * 7), T: 1e12 + int64(i%17)*15000 - 100000, V: float64(i) / 3})
	}
	cases := map[string]*Commit{
		"empty":          {},
		"special":        sampleCommit(),
		"only series":    {Series: sampleCommit().Series},
		"only samples":   {Samples: sampleCommit().Samples},
		"only metadata":  {Metadata: sampleCommit().Metadata},
		"single sample":  {Samples: []RefSample{{Ref: 42, T: -1, V: math.NaN()}}},
		"many series":    many,
		"empty metadata": {Metadata: []Metadata{{}}},
	}
	var reuse Commit
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rec := c.Encode(nil)
			if rec[0] != TypeCommitCompact {
				t.Fatalf("type byte %d", rec[0])
			}
			var got Commit
			if err := Decode(rec, &got); err != nil {
				t.Fatal(err)
			}
			assertEqualCommit(t, c, &got)
			// Decoding into a reused Commit gives the same result.
			if err := Decode(rec, &reuse); err != nil {
				t.Fatal(err)
			}
			assertEqualCommit(t, c, &reuse)
			// The decoded commit must not alias rec.
			for i := range rec {
				rec[i] = 0xff
			}
			assertEqualCommit(t, c, &got)
		})
	}
}

func TestEncodeAppends(t *testing.T) {
	c := sampleCommit()
	prefix := []byte("prefix")
	out := c.Encode(append([]byte(nil), prefix...))
	if string(out[:len(prefix)]) != string(prefix) {
		t.Fatalf("prefix clobbered: %q", out[:len(prefix)])
	}
	var got Commit
	if err := Decode(out[len(prefix):], &got); err != nil {
		t.Fatal(err)
	}
	assertEqualCommit(t, c, &got)
}

func TestSamplesCompact(t *testing.T) {
	// 1000 samples of nearby refs/timestamps need ~1+1+8 bytes each.
	c := &Commit{}
	for i := range 1000 {
		c.Samples = append(c.Samples, RefSample{Ref: 1 << 40, T: 1_700_000_000_000, V: float64(i)})
		c.Samples[i].Ref += uint64(i % 50)
	}
	rec := c.Encode(nil)
	if len(rec) > 1000*11+32 {
		t.Fatalf("encoding too large: %d bytes for 1000 samples", len(rec))
	}
}

func TestTruncationsError(t *testing.T) {
	rec := sampleCommit().Encode(nil)
	var c Commit
	for i := range len(rec) {
		err := Decode(rec[:i], &c)
		if err == nil {
			t.Fatalf("truncation to %d of %d bytes decoded without error", i, len(rec))
		}
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("truncation to %d: error %v does not wrap ErrMalformed", i, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	valid := sampleCommit().Encode(nil)
	cases := map[string][]byte{
		"unknown type":    {0x7f, 0, 0, 0},
		"trailing bytes":  append(append([]byte(nil), valid...), 0),
		"huge series":     {TypeCommit, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0},
		"huge samples":    {TypeCommit, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0},
		"huge metadata":   {TypeCommit, 0, 0, 100, 0, 0, 0, 0},
		"huge label":      {TypeCommit, 1, 1, 1, 0xff, 0xff, 0x03, 0},
		"long string":     {TypeCommit, 1, 1, 1, 10, 'a', 0, 0, 0},
		"overflow varint": {TypeCommit, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0, 0},
		"overlong varint": {TypeCommit, 0x80, 0x00, 0, 0},
		// Two labels named "b" then "a": not sorted.
		"unsorted labels": {TypeCommit, 1, 1, 2, 1, 'b', 0, 1, 'a', 0, 0, 0},
		"duplicate label": {TypeCommit, 1, 1, 2, 1, 'a', 0, 1, 'a', 0, 0, 0},
		// Compact samples: one sample (ref delta 1, t delta 0) then its value.
		"integer as float":  {TypeCommitCompact, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0}, // 1.0
		"bad value kind":    {TypeCommitCompact, 0, 1, 2, 0, 2, 0},
		"integer too large": {TypeCommitCompact, 0, 1, 2, 0, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0},
	}
	for name, rec := range cases {
		t.Run(name, func(t *testing.T) {
			var c Commit
			err := Decode(rec, &c)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func TestEncodeNoAlloc(t *testing.T) {
	c := benchCommit()
	buf := make([]byte, 0, 1<<20)
	allocs := testing.AllocsPerRun(20, func() {
		buf = c.Encode(buf[:0])
	})
	if allocs != 0 {
		t.Fatalf("Encode allocated %v times with a large enough buffer", allocs)
	}
}

func TestDecodeReuseAllocs(t *testing.T) {
	// Without series or metadata, decoding into a reused Commit allocates nothing.
	c := benchCommit()
	c.Series = nil
	c.Metadata = nil
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
	if allocs != 0 {
		t.Fatalf("Decode of samples into reused Commit allocated %v times", allocs)
	}
}

// encodeLegacy writes c as the previous version did (types 1 and 2: every
// value in 8 bytes, deltas from the first sample), as WAL segments written
// before the compact types hold it.
func encodeLegacy(c *Commit) []byte {
	rec := c.Encode(nil)
	var buf []byte
	if len(c.Exemplars) > 0 {
		buf = append(buf, TypeCommitExemplars)
	} else {
		buf = append(buf, TypeCommit)
	}
	// The series section is unchanged: copy it from the compact record.
	d := decoder{b: rec, off: 1}
	var tmp Commit
	if err := tmp.decodeSeries(&d); err != nil {
		panic(err)
	}
	buf = append(buf, rec[1:d.off]...)
	buf = binary.AppendUvarint(buf, uint64(len(c.Samples)))
	if len(c.Samples) > 0 {
		first := c.Samples[0]
		buf = binary.AppendUvarint(buf, first.Ref)
		buf = binary.AppendVarint(buf, first.T)
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(first.V))
		for _, s := range c.Samples[1:] {
			buf = binary.AppendVarint(buf, int64(s.Ref-first.Ref))
			buf = binary.AppendVarint(buf, s.T-first.T)
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(s.V))
		}
	}
	// Metadata and exemplars are unchanged too.
	tmp.decodeCompactSamples(&d)
	return append(buf, rec[d.off:]...)
}

// TestDecodesLegacy: records of the previous sample encoding (WAL segments
// and checkpoints written before it changed) decode to the same commits.
func TestDecodesLegacy(t *testing.T) {
	for name, c := range map[string]*Commit{
		"special":   sampleCommit(),
		"exemplars": {Samples: []RefSample{{Ref: 1, T: 5, V: 1}}, Exemplars: []RefExemplar{{Ref: 1, T: 5, V: 0.25, Labels: labels.FromStrings("trace_id", "abc")}}},
		"bench":     benchCommit(),
	} {
		t.Run(name, func(t *testing.T) {
			rec := encodeLegacy(c)
			var got Commit
			if err := Decode(rec, &got); err != nil {
				t.Fatal(err)
			}
			assertEqualCommit(t, c, &got)
			if compact := c.Encode(nil); len(compact) >= len(rec) && len(c.Samples) > 10 {
				t.Errorf("compact record %d bytes, legacy %d", len(compact), len(rec))
			}
		})
	}
}

// TestCompactSampleValues: every value kind round-trips, integers take few bytes.
func TestCompactSampleValues(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 1 << 52, -(1 << 52), 1<<53 - 1, 1 << 53, -(1 << 53), 0.5, 1e300, math.Inf(1), math.Inf(-1), math.NaN(), math.Float64frombits(0x7ff0000000000001), 4096 * 1e6}
	c := &Commit{}
	for i, v := range vals {
		c.Samples = append(c.Samples, RefSample{Ref: uint64(i) * 1000, T: int64(i) - 5, V: v})
	}
	var got Commit
	if err := Decode(c.Encode(nil), &got); err != nil {
		t.Fatal(err)
	}
	assertEqualCommit(t, c, &got)
	small := &Commit{Samples: []RefSample{{Ref: 1, T: 1000, V: 1}, {Ref: 2, T: 1000, V: 0}}}
	if n := len(small.Encode(nil)); n != 1+1+1+(2+1+1)+(1+1+1)+1 {
		t.Errorf("two small integer samples take %d bytes", n)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(sampleCommit().Encode(nil))
	f.Add((&Commit{}).Encode(nil))
	f.Add((&Commit{Samples: []RefSample{{Ref: 1, T: 2, V: 3}, {Ref: 0, T: 1, V: 4}}}).Encode(nil))
	f.Add([]byte{TypeCommit, 1, 1, 2, 1, 'b', 0, 1, 'a', 0, 0, 0})
	f.Add(encodeLegacy(sampleCommit()))
	f.Add((&Commit{Exemplars: []RefExemplar{{Ref: 3, T: 9, V: 1, Labels: labels.FromStrings("trace_id", "x")}}}).Encode(nil))
	f.Add([]byte{})
	small := exemplarCommit()
	small.Histograms = specialHistograms()[:4]
	f.Add(small.Encode(nil))
	f.Add((&Commit{Histograms: specialHistograms()}).Encode(nil))
	f.Add((&Commit{Histograms: generatedHistograms(8), Samples: []RefSample{{Ref: 1, T: 2, V: 0.5}}}).Encode(nil))
	f.Add((&Commit{Histograms: []RefHistogram{{Ref: 1, T: 1, FH: tsdbutil.GenerateTestCustomBucketsFloatHistogram(1)}, {Ref: 1, T: 2, H: tsdbutil.GenerateTestCustomBucketsHistogram(2)}}}).Encode(nil))
	f.Add(startsCommit().Encode(nil))
	f.Add(startsHistogramsCommit().Encode(nil))
	f.Add((&Commit{Samples: []RefSample{{Ref: 1, T: 2, V: 3}}, Starts: []RefStart{{Ref: 1, T: 2, ST: 1}}}).Encode(nil))
	f.Add([]byte{TypeCommitStarts, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, rec []byte) {
		var c Commit
		if err := Decode(rec, &c); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		out := c.Encode(nil)
		if rec[0] >= TypeCommitCompact && string(out) != string(rec) {
			// Whatever decodes must re-encode to the identical bytes.
			t.Fatalf("re-encode mismatch:\n in  %x\n out %x", rec, out)
		}
		// A legacy record re-encodes compact; every record to the same commit.
		var again Commit
		if err := Decode(out, &again); err != nil {
			t.Fatalf("re-encoded record: %v", err)
		}
		assertEqualCommit(t, &c, &again)
	})
}

func benchCommit() *Commit {
	c := &Commit{}
	for i := range 200 {
		c.Series = append(c.Series, RefSeries{
			Ref:    uint64(100000 + i),
			Labels: labels.FromStrings("__name__", fmt.Sprintf("node_metric_%d", i), "instance", "host-1:9100", "job", "node"),
		})
	}
	for i := range 2000 {
		c.Samples = append(c.Samples, RefSample{Ref: uint64(100000 + i), T: 1_700_000_000_000 + int64(i%3), V: float64(i) * 1.5})
	}
	c.Metadata = []Metadata{{Metric: "node_metric_0", Type: "gauge", Help: "A metric.", Unit: "bytes"}}
	return c
}

func BenchmarkEncode(b *testing.B) {
	c := benchCommit()
	buf := c.Encode(nil)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = c.Encode(buf[:0])
	}
}

func BenchmarkDecode(b *testing.B) {
	full := benchCommit()
	samplesOnly := &Commit{Samples: full.Samples}
	for _, bc := range []struct {
		name string
		c    *Commit
	}{{"2000samples_200series", full}, {"2000samples", samplesOnly}} {
		b.Run(bc.name, func(b *testing.B) {
			rec := bc.c.Encode(nil)
			var c Commit
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Decode(rec, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestExemplarsRoundTrip(t *testing.T) {
	c := Commit{
		Samples: []RefSample{{Ref: 1, T: 5, V: 1}},
		Exemplars: []RefExemplar{
			{Ref: 1, T: 5, V: 0.25, Labels: labels.FromStrings("trace_id", "abc")},
			{Ref: 7, T: -3, V: math.Inf(1)},
		},
	}
	rec := c.Encode(nil)
	if rec[0] != TypeCommitCompactExemplars {
		t.Fatalf("type %d", rec[0])
	}
	var got Commit
	if err := Decode(rec, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Exemplars) != 2 || got.Exemplars[0].Labels.Get("trace_id") != "abc" || got.Exemplars[1].T != -3 || !math.IsInf(got.Exemplars[1].V, 1) {
		t.Fatalf("got %+v", got.Exemplars)
	}
	for i := 1; i < len(rec); i++ {
		if err := Decode(rec[:i], &got); err == nil {
			t.Fatalf("prefix of %d bytes decoded", i)
		}
	}
}
