package encoding

import (
	"math"
	"math/rand/v2"
	"testing"
)

// checkPatched encodes vals with DecimalScalePatched and
// AppendDecimalRicePatched, decodes them with Next and with AppendNext in
// uneven slices with skips, and fails unless every value comes back bit for
// bit; it returns the encoding and the number of values stored whole, or
// ok false when DecimalScalePatched declines.
func checkPatched(t *testing.T, vals []float64) (enc []byte, whole int, ok bool) {
	t.Helper()
	ms := make([]int64, len(vals))
	k, exc, ok := DecimalScalePatched(vals, MaxDecimalScale, ms, nil)
	if !ok {
		return nil, 0, false
	}
	if len(exc) == 0 {
		enc = AppendDecimalRice(nil, ms, k)
	} else {
		enc = AppendDecimalRicePatched(nil, ms, k, vals, exc)
	}
	var d DecimalDecoder
	d.Reset(enc, len(vals))
	for i, want := range vals {
		if !d.Next() {
			t.Fatalf("value %d of %d: %v", i, len(vals), d.Err())
		}
		if got := d.At(); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("value %d: %v (%#x), want %v (%#x); scale %d, whole %v", i, got, math.Float64bits(got), want, math.Float64bits(want), k, exc)
		}
	}
	if d.Next() || d.Err() != nil {
		t.Fatalf("after %d values: another, or %v", len(vals), d.Err())
	}
	for _, stride := range []int{1, 5, 7, 130} {
		if a := checkAppendNextSlices(t, enc, len(vals), vals, func(take int) int { return take%stride + 1 }); a.Err() != nil {
			t.Fatalf("stride %d: %v", stride, a.Err())
		}
	}
	return enc, len(exc), true
}

// TestDecimalPatched: columns of two-decimal values with float artifacts,
// staleness markers, infinities, -0 and huge values here and there are
// stored as decimals with those values whole, round-trip bit for bit, and
// are smaller than XOR; columns where most values are not decimals are
// declined.
func TestDecimalPatched(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	patched := 0
	specials := []float64{math.NaN(), math.Float64frombits(0x7ff0000000000002), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1e300, 186.79500000000002}
	for round := range 200 {
		n := 1 + rng.IntN(800)
		vals := make([]float64, n)
		c := 100000 + rng.IntN(1000)
		for i := range vals {
			c += rng.IntN(300)
			vals[i] = float64(c) / 100
		}
		nwhole := rng.IntN(1 + n/8)
		for range nwhole {
			i := rng.IntN(n)
			if rng.IntN(2) == 0 {
				vals[i] = specials[rng.IntN(len(specials))]
			} else {
				vals[i] += 1e-9 // an artifact near the value
			}
		}
		if round%10 == 0 {
			vals[0], vals[n-1] = math.NaN(), math.NaN() // leading and trailing stand-ins
		}
		enc, whole, ok := checkPatched(t, vals)
		if whole > 0 {
			patched++
		}
		if !ok {
			if n >= 16 && nwhole < n/8 {
				t.Fatalf("round %d: declined %d values with at most %d not decimal", round, n, nwhole)
			}
			continue
		}
		var x XOREncoder
		for _, v := range vals {
			x.Append(v)
		}
		if n >= 100 && len(enc) >= len(x.Bytes()) {
			t.Fatalf("round %d: %d values (%d whole) in %d bytes, XOR %d", round, n, whole, len(enc), len(x.Bytes()))
		}
	}
	if patched < 100 {
		t.Fatalf("only %d of 200 columns had values stored whole", patched)
	}
	// Mostly not decimals: declined.
	vals := make([]float64, 100)
	for i := range vals {
		vals[i] = rng.Float64()
	}
	if _, _, ok := DecimalScalePatched(vals, MaxDecimalScale, make([]int64, 100), nil); ok {
		t.Fatal("random floats taken as decimals")
	}
	// All stand-ins (every value NaN): declined.
	for i := range vals {
		vals[i] = math.NaN()
	}
	if _, _, ok := DecimalScalePatched(vals, MaxDecimalScale, make([]int64, 100), nil); ok {
		t.Fatal("NaNs taken as decimals")
	}
}

// FuzzDecimalPatched round-trips values made of the input: two-decimal
// steps, with bytes of 0xff… turning into values that are not decimals.
func FuzzDecimalPatched(f *testing.F) {
	f.Add([]byte{1, 2, 3, 250, 7, 0, 0, 9, 255, 3, 4}, int64(18679))
	f.Add([]byte{255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 254}, int64(-5))
	f.Fuzz(func(t *testing.T, b []byte, start int64) {
		vals := make([]float64, len(b))
		m := start % (1 << 40)
		for i, x := range b {
			switch x {
			case 255:
				vals[i] = math.NaN()
			case 254:
				vals[i] = float64(m)/100 + 1e-7
			case 253:
				vals[i] = math.Inf(1)
			default:
				m += int64(x) - 100
				vals[i] = float64(m) / 100
			}
		}
		checkPatched(t, vals)
	})
}
