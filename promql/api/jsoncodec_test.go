package api

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/stats"
	v1 "github.com/prometheus/prometheus/web/api/v1"
)

// randFloat draws the values whose formatting differs: integers around 2^53
// and 0, -0, NaN, infinities, the 'e' thresholds and arbitrary bit patterns.
func randFloat(r *rand.Rand) float64 {
	switch r.IntN(12) {
	case 0:
		return float64(r.Int64N(1<<54) - 1<<53)
	case 1:
		return float64(1<<53 + r.Int64N(64) - 32)
	case 2:
		return math.Copysign(0, -1)
	case 3:
		return [...]float64{0, math.NaN(), math.Inf(1), math.Inf(-1), 1e21, 1e-6, -1e21, 0.000001, 999999999999999999999.0}[r.IntN(9)]
	case 4:
		return math.Float64frombits(r.Uint64())
	case 5:
		return float64(r.IntN(1000)) / 1000
	case 6:
		return r.Float64() * 1e-5
	case 7:
		return -float64(r.Int64N(1 << 40))
	default:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(30)-10))
	}
}

func randString(r *rand.Rand) string {
	parts := []string{"a", "node", "é", "\"", "\\", "\n", "\x00", "\x1f", "<", ">", "&", "\u2028", "\xff", "日本", " ", "/", "\t"}
	var b []byte
	for range r.IntN(6) {
		if r.IntN(3) == 0 {
			b = append(b, parts[r.IntN(len(parts))]...)
		} else {
			b = append(b, "host-9"[:1+r.IntN(5)]...)
		}
	}
	return string(b)
}

func randLabels(r *rand.Rand) labels.Labels {
	b := labels.NewScratchBuilder(4)
	for i := range r.IntN(5) {
		b.Add(string(rune('a'+i))+randString(r), randString(r))
	}
	b.Sort()
	return b.Labels()
}

func randTime(r *rand.Rand) int64 {
	if r.IntN(8) == 0 {
		return -r.Int64N(1e12)
	}
	return r.Int64N(2e12)
}

func randResponse(r *rand.Rand) *v1.Response {
	resp := &v1.Response{Status: "success"}
	if r.IntN(4) == 0 {
		resp.Warnings = []string{randString(r), "PromQL warning: <a & b>"}
	}
	if r.IntN(4) == 0 {
		resp.Infos = []string{randString(r)}
	}
	switch r.IntN(5) {
	case 0:
		var m promql.Matrix
		if r.IntN(5) > 0 {
			m = promql.Matrix{}
		}
		for range r.IntN(4) {
			s := promql.Series{Metric: randLabels(r)}
			steps := r.IntN(2) == 0 // shared steps, repeated values
			for k := range r.IntN(8) {
				p := promql.FPoint{T: randTime(r), F: randFloat(r)}
				if steps {
					p.T = 1796344934000 + int64(k+r.IntN(2))*15500
					if k > 0 && r.IntN(2) == 0 {
						p.F = s.Floats[k-1].F
					}
				}
				s.Floats = append(s.Floats, p)
			}
			if r.IntN(10) == 0 {
				s.Histograms = []promql.HPoint{{T: 1, H: &histogram.FloatHistogram{Count: 1, Sum: 2}}}
			}
			m = append(m, s)
		}
		resp.Data = &v1.QueryData{ResultType: m.Type(), Result: m}
	case 1:
		var v promql.Vector
		if r.IntN(5) > 0 {
			v = promql.Vector{}
		}
		for range r.IntN(4) {
			s := promql.Sample{Metric: randLabels(r), T: randTime(r), F: randFloat(r)}
			if r.IntN(10) == 0 {
				s.H = &histogram.FloatHistogram{Count: 3}
			}
			v = append(v, s)
		}
		resp.Data = &v1.QueryData{ResultType: v.Type(), Result: v}
	case 2:
		var list []labels.Labels
		if r.IntN(5) > 0 {
			list = []labels.Labels{}
		}
		for range r.IntN(4) {
			list = append(list, randLabels(r))
		}
		resp.Data = list
	case 3:
		resp.Data = []string{randString(r), randString(r)}
	default:
		q := &v1.QueryData{ResultType: "scalar", Result: promql.Scalar{T: randTime(r), V: randFloat(r)}}
		if r.IntN(2) == 0 {
			q = &v1.QueryData{ResultType: "vector", Result: promql.Vector{}, Stats: stats.NewQueryStats(&stats.Statistics{Timers: stats.NewQueryTimers()})}
		}
		resp.Data = q
	}
	if r.IntN(10) == 0 {
		resp.Data = nil
	}
	return resp
}

// TestJSONCodecMatchesPrometheus encodes random responses with both codecs
// and wants the same bytes.
func TestJSONCodecMatchesPrometheus(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		resp := randResponse(r)
		want, err := v1.JSONCodec{}.Encode(resp)
		if err != nil {
			// NaN in a scalar etc.: the fallback must fail the same way.
			if _, err2 := (jsonCodec{}).Encode(resp); err2 == nil {
				t.Fatalf("case %d: upstream failed (%v), tandem did not", i, err)
			}
			continue
		}
		got, err := jsonCodec{}.Encode(resp)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestAppendPointFloats checks the float formatting alone on many values.
func TestAppendPointFloats(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 1_000_000 {
		f := randFloat(r)
		ts := randTime(r)
		want, err := v1.JSONCodec{}.Encode(&v1.Response{Status: "success", Data: &v1.QueryData{ResultType: "vector",
			Result: promql.Vector{{T: ts, F: f}}}})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := jsonCodec{}.Encode(&v1.Response{Status: "success", Data: &v1.QueryData{ResultType: "vector",
			Result: promql.Vector{{T: ts, F: f}}}})
		if !bytes.Equal(got, want) {
			t.Fatalf("%v (%x) at %d:\n got %s\nwant %s", f, math.Float64bits(f), ts, got, want)
		}
	}
}

func benchMatrix(series, points int, integral bool) *v1.Response {
	r := rand.New(rand.NewPCG(5, 6))
	m := make(promql.Matrix, series)
	for i := range m {
		m[i].Metric = labels.FromStrings("__name__", "node_memory_MemAvailable_bytes", "instance", "host-"+string(rune('a'+i%26))+":9100", "job", "node")
		for j := range points {
			f := r.Float64() * 10
			if integral {
				f = float64(8<<30 + r.Int64N(1<<30))
			}
			m[i].Floats = append(m[i].Floats, promql.FPoint{T: 1796344934000 + int64(j)*15000, F: f})
		}
	}
	return &v1.Response{Status: "success", Data: &v1.QueryData{ResultType: m.Type(), Result: m}}
}

// BenchmarkJSONCodec compares the codec with Prometheus's on a dashboard
// graph's answer (8 series × 241 rates) and a gauge's (200 × 181 integers).
func BenchmarkJSONCodec(b *testing.B) {
	for _, c := range []struct {
		name string
		resp *v1.Response
	}{{"rates-8x241", benchMatrix(8, 241, false)}, {"gauges-200x181", benchMatrix(200, 181, true)}} {
		for _, codec := range []v1.Codec{v1.JSONCodec{}, jsonCodec{}} {
			name := "prometheus"
			if _, ok := codec.(jsonCodec); ok {
				name = "tandem"
			}
			b.Run(c.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := codec.Encode(c.resp); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
