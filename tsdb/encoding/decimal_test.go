package encoding

import (
	"math"
	"math/rand/v2"
	"testing"
)

func roundTripDecimal(t *testing.T, vals []float64) (ok bool, size int) {
	t.Helper()
	ms := make([]int64, len(vals))
	k, ok := DecimalScale(vals, MaxDecimalScale, ms)
	if !ok {
		return false, 0
	}
	b := AppendDecimal(nil, ms, k)
	var d DecimalDecoder
	d.Reset(b, len(vals))
	for i, v := range vals {
		if !d.Next() {
			t.Fatalf("value %d: %v", i, d.Err())
		}
		if math.Float64bits(d.At()) != math.Float64bits(v) {
			t.Fatalf("value %d: got %v, want %v (scale %d)", i, d.At(), v, k)
		}
	}
	if d.Next() {
		t.Fatal("extra value")
	}
	return true, len(b)
}

func TestDecimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gauge := make([]float64, 240)
	counter := make([]float64, 240)
	c := 1e9
	for i := range gauge {
		gauge[i] = float64(rng.IntN(100000)) / 100
		c += 1500 + float64(rng.IntN(200))
		counter[i] = c
	}
	for name, tc := range map[string]struct {
		vals    []float64
		ok      bool
		maxSize int
	}{
		"gauge 2 decimals": {gauge, true, 240*18/8 + 16},
		"counter":          {counter, true, 240 + 16},
		"one":              {[]float64{0.1}, true, 8},
		"two":              {[]float64{3, -4.5}, true, 12},
		"negative zero":    {[]float64{1, math.Copysign(0, -1)}, false, 0},
		"nan":              {[]float64{1, math.NaN()}, false, 0},
		"inf":              {[]float64{math.Inf(1)}, false, 0},
		"huge":             {[]float64{1e300}, false, 0},
		"extremes":         {[]float64{-(1 << 53) + 1, (1 << 53) - 1, 0}, true, 64},
	} {
		ok, size := roundTripDecimal(t, tc.vals)
		if ok != tc.ok || size > tc.maxSize {
			t.Errorf("%s: ok %v size %d, want ok %v size <= %d", name, ok, size, tc.ok, tc.maxSize)
		}
	}
}

func TestDecimalMalformed(t *testing.T) {
	var d DecimalDecoder
	for _, b := range [][]byte{nil, {16, 1}, {2, 3}, {2, 1, 0, 0, 65}, {0, 1, 2, 0, 8}} {
		d.Reset(b, 3)
		for d.Next() {
		}
		if d.Err() == nil {
			t.Errorf("%x: no error", b)
		}
	}
}

func FuzzDecimal(f *testing.F) {
	f.Add([]byte{2, 1, 4, 0, 3, 0xff, 0x10}, 3)
	f.Add(AppendDecimal(nil, []int64{5, 7, 12, -3}, 2), 4)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		var d DecimalDecoder
		d.Reset(b, n%1000)
		for d.Next() {
			_ = d.At()
		}
	})
}

func BenchmarkDecimalDecode(b *testing.B) {
	vals := make([]int64, 240)
	for i := range vals {
		vals[i] = int64(i*1500 + i%7)
	}
	enc := AppendDecimal(nil, vals, 2)
	var d DecimalDecoder
	b.ReportAllocs()
	for b.Loop() {
		d.Reset(enc, len(vals))
		for d.Next() {
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/sample")
}
