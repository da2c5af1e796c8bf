package encoding

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
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
	// AppendNext yields the same values, in runs of any length, mixed with Next.
	for _, step := range []int{1, 2, 3, 7, 64, len(vals) + 1} {
		d.Reset(b, len(vals))
		var got []float64
		for i := 0; len(got) < len(vals); i++ {
			if i%3 == 2 {
				if !d.Next() {
					t.Fatalf("step %d: Next after %d values: %v", step, len(got), d.Err())
				}
				got = append(got, d.At())
				continue
			}
			n := len(got)
			got = d.AppendNext(got, 0, step)
			if len(got) == n || d.Err() != nil || math.Float64bits(d.At()) != math.Float64bits(got[len(got)-1]) {
				t.Fatalf("step %d: AppendNext after %d values: %d more, At %v, err %v", step, n, len(got)-n, d.At(), d.Err())
			}
		}
		for i, v := range vals {
			if math.Float64bits(got[i]) != math.Float64bits(v) {
				t.Fatalf("step %d: value %d: got %v, want %v", step, i, got[i], v)
			}
		}
		if len(d.AppendNext(nil, 0, 5)) != 0 || d.Next() {
			t.Fatalf("step %d: values past the end", step)
		}
	}
	// Skipped values are decoded but not appended, from any position.
	for _, skip := range []int{0, 1, 2, 3, len(vals) / 2, len(vals)} {
		for _, from := range []int{0, 1, 2} {
			if from+skip > len(vals) {
				continue
			}
			d.Reset(b, len(vals))
			for range from {
				d.Next()
			}
			got := d.AppendNext(nil, skip, len(vals))
			want := vals[from+skip:]
			if len(got) != len(want) || d.Err() != nil {
				t.Fatalf("skip %d from %d: %d values, want %d (%v)", skip, from, len(got), len(want), d.Err())
			}
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("skip %d from %d: value %d: got %v, want %v", skip, from, i, got[i], want[i])
				}
			}
		}
	}
	// A truncated stream ends AppendNext early, with an error.
	if len(vals) > 8 {
		d.Reset(b[:len(b)/2], len(vals))
		if got := d.AppendNext(nil, 0, len(vals)); len(got) == len(vals) || d.Err() == nil {
			t.Fatalf("truncated stream: %d values, err %v", len(got), d.Err())
		}
	}
	return true, len(b)
}

func TestDecimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gauge := make([]float64, 240)
	counter := make([]float64, 240)
	c := 1e9
	linear := make([]float64, 240)
	pages := make([]float64, 240)   // memory in 4 KiB pages, around a level
	sectors := make([]float64, 240) // a byte counter growing in 512-byte sectors, from an odd start
	mixed := make([]float64, 240)   // 3 decimals, moving in steps of 0.25
	sec := 1e9 + 7.0
	for i := range gauge {
		gauge[i] = float64(rng.IntN(100000)) / 100
		c += 1500 + float64(rng.IntN(200))
		counter[i] = c
		linear[i] = 7.5 + 0.25*float64(i*i) + float64(rng.IntN(3))
		pages[i] = float64(4096 * (5_000_000 + rng.IntN(100000)))
		sec += float64(512 * rng.IntN(2000))
		sectors[i] = sec
		mixed[i] = 1.125 + 0.25*float64(rng.IntN(1000))
	}
	for name, tc := range map[string]struct {
		vals    []float64
		ok      bool
		maxSize int
	}{
		"gauge 2 decimals": {gauge, true, 240*18/8 + 16},
		"counter":          {counter, true, 240 + 16},
		"accelerating":     {linear, true, 320},
		"pages":            {pages, true, 240*17/8 + 16}, // 17 bits, not the 29 of the bytes
		"sectors":          {sectors, true, 240*11/8 + 24},
		"quarter steps":    {mixed, true, 240*10/8 + 16},
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
	f.Add(AppendDecimal(nil, []int64{4096, 8192, 4096 * 7, 0}, 0), 4) // stepped
	f.Add(AppendDecimalRice(nil, []int64{9, 10, 11, 10, 9, 10, 11, 12, 10, 300, 10, 9}, 0), 12)
	pv := []float64{1.5, math.NaN(), 1.75, 2.25, 2.5 + 1e-9, 3, 3.25, 3.5, 4, 4.25, 4.5, math.Inf(-1)}
	pm := make([]int64, len(pv))
	if k, exc, ok := DecimalScalePatched(pv, MaxDecimalScale, pm, nil); ok && len(exc) == 3 {
		f.Add(AppendDecimalRicePatched(nil, pm, k, pv, exc), len(pv))
	} else {
		f.Fatalf("patched seed: scale %d, %v, %v", k, exc, ok)
	}
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		n %= 1000
		var d DecimalDecoder
		d.Reset(b, n)
		var want []float64
		for d.Next() {
			want = append(want, d.At())
		}
		// AppendNext, in uneven slices with skips, yields the same values
		// up to the same error.
		a := checkAppendNextSlices(t, b, n, want, func(take int) int { return take%150 + 7 })
		if (a.Err() == nil) != (d.Err() == nil) {
			t.Fatalf("AppendNext error %v, Next error %v", a.Err(), d.Err())
		}
	})
}

// checkAppendNextSlices decodes the n values of enc with AppendNext in
// slices (take values from step, after take/3 skipped when take is a
// multiple of 3) until the end or an error, fails unless every value is
// want's at its index bit for bit and At is the last value appended, and
// returns the decoder for its error.
func checkAppendNextSlices(t *testing.T, enc []byte, n int, want []float64, step func(take int) int) *DecimalDecoder {
	t.Helper()
	var a DecimalDecoder
	a.Reset(enc, n)
	var got []float64
	for i, take := 0, 1; a.Err() == nil && i < n; take = step(take) {
		skip := 0
		if take%3 == 0 {
			skip = take / 3
		}
		before := len(got)
		got = a.AppendNext(got, skip, take)
		for j := before; j < len(got); j++ {
			k := i + skip + j - before
			if k >= len(want) || math.Float64bits(got[j]) != math.Float64bits(want[k]) {
				t.Fatalf("AppendNext value %d: %v, want %v", k, got[j], want)
			}
		}
		if len(got) > before && math.Float64bits(a.At()) != math.Float64bits(got[len(got)-1]) {
			t.Fatalf("At after AppendNext: %v, last appended %v", a.At(), got[len(got)-1])
		}
		i += skip + take
	}
	return &a
}

// FuzzDecimalRoundTrip encodes mantissas made of the input (in steps of q
// from a start, so that stepped residuals are exercised) and decodes them back.
func FuzzDecimalRoundTrip(f *testing.F) {
	f.Add([]byte{1, 2, 3, 250, 7, 0, 0, 9}, int64(4096), int64(17), uint8(0))
	f.Add([]byte{0, 0, 0, 0}, int64(512), int64(-3), uint8(2))
	f.Add([]byte{200, 1, 200, 1, 200}, int64(1)<<40, int64(1), uint8(5))
	f.Fuzz(func(t *testing.T, b []byte, q, start int64, k uint8) {
		ms := make([]int64, len(b))
		m := start
		for i, x := range b {
			if x&1 == 0 {
				m += q * int64(x>>1) // wrapping, as any int64 may be
			} else {
				m = start + q*int64(x>>1) // around a level
			}
			ms[i] = m
		}
		scale := int(k % (MaxDecimalScale + 1))
		for _, enc := range [][]byte{AppendDecimal(nil, ms, scale), AppendDecimalRice(nil, ms, scale)} {
			var d DecimalDecoder
			d.Reset(enc, len(ms))
			for i, want := range ms {
				if !d.Next() {
					t.Fatalf("value %d of %d: %v", i, len(ms), d.Err())
				}
				if d.m != want {
					t.Fatalf("value %d: mantissa %d, want %d", i, d.m, want)
				}
			}
			if d.Next() {
				t.Fatal("extra value")
			}
			checkAppendNext(t, enc, ms, scale)
		}
	})
}

func BenchmarkDecimalDecode(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	counter := make([]int64, 720) // a counter with a noisy rate: Rice-coded
	for i := 1; i < len(counter); i++ {
		counter[i] = counter[i-1] + 1500 + int64(rng.NormFloat64()*100)
	}
	for _, c := range []struct {
		name string
		enc  []byte
		n    int
	}{
		{"fixed", AppendDecimal(nil, counter, 2), len(counter)},
		{"rice-integers", AppendDecimalRice(nil, counter, 0), len(counter)}, // no division
		{"rice", AppendDecimalRice(nil, counter, 2), len(counter)},
	} {
		var d DecimalDecoder
		b.Run(c.name+"/next", func(b *testing.B) {
			b.ReportAllocs()
			sum := 0.0
			for b.Loop() {
				d.Reset(c.enc, c.n)
				for d.Next() {
					sum += d.At()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.n), "ns/sample")
			b.ReportMetric(float64(len(c.enc))/float64(c.n), "bytes/sample")
		})
		b.Run(c.name+"/append", func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]float64, 0, c.n)
			for b.Loop() {
				d.Reset(c.enc, c.n)
				dst = d.AppendNext(dst[:0], 0, c.n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.n), "ns/sample")
		})
	}
}

// checkAppendNext decodes enc with AppendNext in uneven slices (skipping
// some values) and checks every value against ms at scale k.
func checkAppendNext(t *testing.T, enc []byte, ms []int64, k int) {
	t.Helper()
	var d DecimalDecoder
	d.Reset(enc, len(ms))
	var got []float64
	for i, take := 0, 1; i < len(ms); take = take%7 + 1 {
		skip := 0
		if take == 3 {
			skip = 2
		}
		before := len(got)
		got = d.AppendNext(got, skip, take)
		for j := before; j < len(got); j++ {
			want := float64(ms[i+skip+j-before]) / pow10[k]
			if math.Float64bits(got[j]) != math.Float64bits(want) {
				t.Fatalf("AppendNext value %d: %v, want %v", i+skip+j-before, got[j], want)
			}
		}
		i += skip + take
		if d.Err() != nil {
			t.Fatal(d.Err())
		}
	}
}

// TestDecimalRice: residuals that are noise around a level or a rate are
// Rice-coded around their median (smaller than fixed-width fields), with
// steps, rare outliers (escapes) and distances that wrap int64, and decode
// exactly with Next and AppendNext.
func TestDecimalRice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(n int, level, sigma float64, step int64, outliers bool) []int64 {
		ms := make([]int64, n)
		for i := range ms {
			ms[i] = int64(level+rng.NormFloat64()*sigma) * step
			if outliers && i%97 == 13 {
				ms[i] = math.MaxInt64 / step * step
			}
		}
		return ms
	}
	counter := func(n int, rate, sigma float64) []int64 {
		ms := make([]int64, n)
		m := int64(1e12)
		for i := range ms {
			m += int64(rate + rng.NormFloat64()*sigma)
			ms[i] = m
		}
		return ms
	}
	wrapping := []int64{math.MinInt64, 0, math.MaxInt64, -5, 7, math.MinInt64 + 1, 3, 1, 2, 3, 4, 5}
	for _, c := range []struct {
		name string
		ms   []int64
		rice bool
	}{
		{"gauge", noise(720, 5000, 300, 1, false), true},
		{"gauge-pages", noise(720, 1e6, 50, 4096, false), true},
		{"gauge-outliers", noise(720, 5000, 300, 3, true), true},
		{"counter", counter(720, 1e6, 2e4), true},
		{"wrapping", wrapping, true}, // distances of 2^63 and more
		{"short", noise(5, 5000, 300, 1, false), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			enc := AppendDecimalRice(nil, c.ms, 2)
			if rice := enc[1]&orderRice != 0; rice != c.rice {
				t.Fatalf("rice %v, want %v", rice, c.rice)
			}
			var d DecimalDecoder
			d.Reset(enc, len(c.ms))
			for i, want := range c.ms {
				if !d.Next() || d.m != want {
					t.Fatalf("value %d: %d (%v), want %d", i, d.m, d.Err(), want)
				}
			}
			checkAppendNext(t, enc, c.ms, 2)
			// Every field in fixed width would be larger.
			if c.rice && c.name != "wrapping" {
				_, width := residualRange(c.ms, int(enc[1]&3))
				if fixed := int(width) * (len(c.ms) - int(enc[1]&3)) / 8; len(enc) >= fixed {
					t.Fatalf("%d bytes Rice-coded, fixed width about %d", len(enc), fixed)
				}
			}
		})
	}
	// Rice-coded fields on random noise of every width decode exactly.
	for w := 3; w <= 62; w++ {
		ms := noise(300, 0, math.Ldexp(1, w-3), 1, false)
		enc := AppendDecimalRice(nil, ms, 0)
		checkAppendNext(t, enc, ms, 0)
	}
}

// TestDecimalCapacity: a stream read from a slice whose capacity runs on
// into other bytes (a chunk's next column) decodes as one cut at its
// length: the bytes after it are loaded but never used, and a stream cut
// short still fails as truncated.
func TestDecimalCapacity(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, width := range []int64{1, 3, 10, 25, 50} {
		ms := make([]int64, 300)
		for i := 1; i < len(ms); i++ {
			ms[i] = ms[i-1] + rng.Int64N(1<<width)
		}
		enc := AppendDecimal(nil, ms, 2)
		for _, tail := range []byte{0x00, 0xff} {
			buf := append(slices.Clone(enc), bytes.Repeat([]byte{tail}, 16)...)
			var d DecimalDecoder
			d.Reset(buf[:len(enc)], len(ms))
			got := d.AppendNext(nil, 0, len(ms))
			if err := d.Err(); err != nil || len(got) != len(ms) {
				t.Fatalf("width %d, tail %#x: %d values, error %v", width, tail, len(got), err)
			}
			for i, m := range ms {
				if want := float64(m) / 100; got[i] != want {
					t.Fatalf("width %d, tail %#x: value %d is %v, want %v", width, tail, i, got[i], want)
				}
			}
			d.Reset(buf[:len(enc)-1], len(ms))
			if got := d.AppendNext(nil, 0, len(ms)); !errors.Is(d.Err(), ErrTruncated) {
				t.Fatalf("width %d, tail %#x: a stream one byte short decoded %d values, error %v", width, tail, len(got), d.Err())
			}
		}
	}
}
