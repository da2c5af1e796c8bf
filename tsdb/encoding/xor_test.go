package encoding

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/value"
)

// encodeXOR encodes vs and returns a copy of the bytes.
func encodeXOR(vs []float64) []byte {
	var e XOREncoder
	for _, v := range vs {
		e.Append(v)
	}
	return bytes.Clone(e.Bytes())
}

// decodeXOR decodes n values from b.
func decodeXOR(b []byte, n int) ([]float64, error) {
	var d XORDecoder
	d.Reset(b, n)
	var out []float64
	for d.Next() {
		out = append(out, d.At())
	}
	return out, d.Err()
}

// equalBits compares float slices bit for bit.
func equalBits(a, b []float64) bool {
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

// checkXORRoundTrip fails the test unless vs survives encoding bit-exactly and a prefix decodes.
func checkXORRoundTrip(t *testing.T, vs []float64) {
	t.Helper()
	var e XOREncoder
	constant := true
	for i, v := range vs {
		e.Append(v)
		constant = constant && math.Float64bits(v) == math.Float64bits(vs[0])
		if c, ok := e.Constant(); ok != constant || ok && math.Float64bits(c) != math.Float64bits(v) {
			t.Fatalf("after %d values: Constant = %v, %v; the values so far are constant: %v", i+1, c, ok, constant)
		}
		if i < 40 { // every early prefix, held constant or not, decodes from Bytes
			got, err := decodeXOR(bytes.Clone(e.Bytes()), i+1)
			if err != nil || !equalBits(got, vs[:i+1]) {
				t.Fatalf("after %d values: got %v, %v", i+1, got, err)
			}
		}
	}
	if e.Count() != len(vs) {
		t.Fatalf("Count = %d, want %d", e.Count(), len(vs))
	}
	b := bytes.Clone(e.Bytes())
	got, err := decodeXOR(b, len(vs))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !equalBits(got, vs) {
		t.Fatalf("round trip mismatch:\n got  %v\n want %v", got, vs)
	}
	if len(vs) > 0 {
		n := len(vs) / 2
		got, err := decodeXOR(b, n)
		if err != nil || !equalBits(got, vs[:n]) {
			t.Fatalf("prefix %d: got %v, %v", n, got, err)
		}
	}
}

func TestXORRoundTrip(t *testing.T) {
	rng := newRand(10)
	t.Run("empty", func(t *testing.T) { checkXORRoundTrip(t, nil) })
	t.Run("single", func(t *testing.T) { checkXORRoundTrip(t, []float64{math.Float64frombits(0x7ff0000000000002)}) })
	t.Run("counter", func(t *testing.T) { checkXORRoundTrip(t, counterValues(rng, 1000)) })
	t.Run("gauge", func(t *testing.T) { checkXORRoundTrip(t, gaugeValues(rng, 1000)) })
	t.Run("constant", func(t *testing.T) {
		for _, c := range append([]float64{42, 0.5}, specialFloats...) {
			vs := make([]float64, 100)
			for i := range vs {
				vs[i] = c
			}
			checkXORRoundTrip(t, vs)
		}
	})
	t.Run("special", func(t *testing.T) {
		// Every ordered pair of special values, so each XOR pattern between them occurs.
		for _, a := range specialFloats {
			for _, b := range specialFloats {
				checkXORRoundTrip(t, []float64{a, b, a, 1, b, b, a})
			}
		}
	})
	t.Run("staleness", func(t *testing.T) {
		stale := math.Float64frombits(0x7ff0000000000002)
		vs := counterValues(rng, 50)
		vs[10], vs[11], vs[30] = stale, stale, stale
		checkXORRoundTrip(t, vs)
	})
	t.Run("constant then changing", func(t *testing.T) {
		// The bytes of a constant stream are written when a second value
		// arrives, after any number of repeats (whole bytes of them or not).
		for k := 1; k <= 20; k++ {
			vs := make([]float64, k, k+5)
			for i := range vs {
				vs[i] = 7.5
			}
			checkXORRoundTrip(t, append(vs, 7.75, 7.75, math.Float64frombits(value.StaleNaN), 7.5, 8))
		}
	})
	t.Run("single bits", func(t *testing.T) {
		// Windows at every position: leading zero counts above the 31 cap, full 64-bit XORs.
		var vs []float64
		for i := 0; i < 64; i++ {
			vs = append(vs, math.Float64frombits(1<<i), 0, math.Float64frombits(math.MaxUint64>>i), 0)
		}
		checkXORRoundTrip(t, vs)
	})
	t.Run("random", func(t *testing.T) {
		for iter := 0; iter < 2000; iter++ {
			checkXORRoundTrip(t, randomFloats(rng, rng.IntN(300)))
		}
	})
}

// bitLen returns the number of bits of the stream, written or (while
// constant) not yet.
func (e *XOREncoder) bitLen() int {
	if _, ok := e.Constant(); ok {
		return 64 + e.Count() - 1
	}
	return len(e.b)*8 - int(e.a.free)
}

func TestXORSizes(t *testing.T) {
	// A constant column costs 64 bits plus one bit per repeat.
	var e XOREncoder
	for i := 0; i < 1001; i++ {
		e.Append(3.25)
	}
	if got, want := e.bitLen(), 64+1000; got != want {
		t.Errorf("constant: %d bits, want %d", got, want)
	}
	if len(e.b) != 0 || len(e.Bytes()) != (64+1000+7)/8 {
		t.Errorf("constant: %d bytes held, Bytes gives %d", len(e.b), len(e.Bytes()))
	}
	// A change in a single bit position: first a new window (2+5+6+1 bits),
	// then reuses of it (2+1 bits). Bit 40 keeps leading zeros under the cap.
	e.Reset()
	e.Append(math.Float64frombits(0))
	e.Append(math.Float64frombits(1 << 40))
	if got, want := e.bitLen(), 64+14; got != want {
		t.Errorf("new window: %d bits, want %d", got, want)
	}
	e.Append(math.Float64frombits(0))
	if got, want := e.bitLen(), 64+14+3; got != want {
		t.Errorf("reused window: %d bits, want %d", got, want)
	}
	// A wide window is abandoned for a much narrower one.
	e.Reset()
	e.Append(math.Float64frombits(0))
	e.Append(math.Float64frombits(math.MaxUint64 >> 31)) // window of 33 bits
	base := e.bitLen()
	e.Append(math.Float64frombits(math.MaxUint64>>31 ^ 1<<32)) // XOR of 1 bit
	if got, want := e.bitLen()-base, 14; got != want {
		t.Errorf("narrower window: %d bits, want %d", got, want)
	}
}

func TestXORSnapshotWhileAppending(t *testing.T) {
	vs := randomFloats(newRand(11), 400)
	type snap struct {
		b []byte
		n int
	}
	var snaps []snap
	var e XOREncoder
	for _, v := range vs {
		e.Append(v)
		snaps = append(snaps, snap{bytes.Clone(e.Bytes()), e.Count()})
	}
	for _, s := range snaps {
		got, err := decodeXOR(s.b, s.n)
		if err != nil || !equalBits(got, vs[:s.n]) {
			t.Fatalf("snapshot at %d: got %v, %v", s.n, got, err)
		}
	}
}

func TestXORTruncated(t *testing.T) {
	rng := newRand(12)
	for iter := 0; iter < 50; iter++ {
		vs := randomFloats(rng, 1+rng.IntN(100))
		b := encodeXOR(vs)
		for cut := 0; cut < len(b); cut++ {
			got, err := decodeXOR(b[:cut], len(vs))
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("cut %d of %d: err = %v, want ErrTruncated", cut, len(b), err)
			}
			if len(got) >= len(vs) || !equalBits(got, vs[:len(got)]) {
				t.Fatalf("cut %d: decoded %v, not a proper prefix of %v", cut, got, vs)
			}
		}
	}
}

func TestXORMalformed(t *testing.T) {
	first := make([]byte, 8) // v0 = 0
	cases := map[string][]byte{
		// '10' before any window was set.
		"reuse without window": append(bytes.Clone(first), 0b10_000000),
		// '11', L = 31, S = 40: 31 + 40 > 64.
		"window too wide": append(bytes.Clone(first), 0b11_11111_1, 0b01000_000, 0, 0, 0, 0, 0, 0),
		// '11', L = 1, S = 0 (64 bits): one bit too wide.
		"window one bit too wide": append(bytes.Clone(first), 0b11_00001_0, 0b00000_000, 0, 0, 0, 0, 0, 0, 0, 0),
	}
	for name, b := range cases {
		if _, err := decodeXOR(b, 2); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestXORGarbage(t *testing.T) {
	rng := newRand(13)
	var d XORDecoder
	for iter := 0; iter < 5000; iter++ {
		b := make([]byte, rng.IntN(64))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		n := rng.IntN(len(b)*8 + 2)
		d.Reset(b, n)
		got := 0
		for d.Next() {
			got++
		}
		if got > n || (got < n && d.Err() == nil) || (got == n && d.Err() != nil) {
			t.Fatalf("garbage %x n=%d: decoded %d, err %v", b, n, got, d.Err())
		}
	}
}

func TestXORReset(t *testing.T) {
	rng := newRand(14)
	a, b := randomFloats(rng, 100), randomFloats(rng, 50)
	var e XOREncoder
	for _, v := range a {
		e.Append(v)
	}
	e.Reset()
	if e.Count() != 0 || len(e.Bytes()) != 0 {
		t.Fatalf("after Reset: Count %d, %d bytes", e.Count(), len(e.Bytes()))
	}
	for _, v := range b {
		e.Append(v)
	}
	if !bytes.Equal(e.Bytes(), encodeXOR(b)) {
		t.Fatal("reused encoder differs from a fresh one")
	}

	var d XORDecoder
	d.Reset(append(make([]byte, 8), 0b10_000000), 2) // malformed
	for d.Next() {
	}
	if d.Err() == nil {
		t.Fatal("expected error on malformed input")
	}
	d.Reset(e.Bytes(), len(b))
	var got []float64
	for d.Next() {
		got = append(got, d.At())
	}
	if d.Err() != nil || !equalBits(got, b) {
		t.Fatalf("decoder reuse: %v, %v", got, d.Err())
	}
	var zero XORDecoder
	if zero.Next() || zero.Err() != nil {
		t.Fatal("zero decoder must be empty")
	}
}

func TestXORAllocs(t *testing.T) {
	vs := counterValues(newRand(15), chunkRows)
	var e XOREncoder
	for _, v := range vs {
		e.Append(v)
	}
	if a := testing.AllocsPerRun(20, func() {
		e.Reset()
		for _, v := range vs {
			e.Append(v)
		}
	}); a != 0 {
		t.Errorf("encoder re-fill: %v allocs, want 0", a)
	}
	b := bytes.Clone(e.Bytes())
	var d XORDecoder
	var sink float64
	if a := testing.AllocsPerRun(20, func() {
		d.Reset(b, len(vs))
		for d.Next() {
			sink += d.At()
		}
	}); a != 0 {
		t.Errorf("decode: %v allocs, want 0", a)
	}
	_ = sink
}
