package encoding

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// capN limits a fuzzed value count to the number of bits in b: every encoded
// value after the first takes at least one bit, so larger counts only measure
// how fast the decoder hits the end.
func capN(n int, b []byte) int {
	if n < 0 {
		n = -n
	}
	return min(n, len(b)*8)
}

func FuzzTSDecoder(f *testing.F) {
	rng := newRand(20)
	f.Add([]byte{}, 0)
	f.Add([]byte{0x80}, 3)
	f.Add(bytes.Repeat([]byte{0xff}, 12), 4)
	f.Add(encodeTS(scrapeTimestamps(rng, 50, 3, 1000)), 50)
	f.Add(encodeTS(randomInt64s(rng, 30)), 30)
	f.Add(encodeTS([]int64{math.MinInt64, math.MaxInt64, 0}), 3)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		n = capN(n, b)
		var d TSDecoder
		d.Reset(b, n)
		got := 0
		for d.Next() {
			got++
		}
		if got > n || (got < n) != (d.Err() != nil) {
			t.Fatalf("n=%d: decoded %d, err %v", n, got, d.Err())
		}
	})
}

func FuzzXORDecoder(f *testing.F) {
	rng := newRand(21)
	f.Add([]byte{}, 0)
	f.Add(append(make([]byte, 8), 0b10_000000), 2)
	f.Add(append(make([]byte, 8), 0b11_11111_1, 0b01000_000, 0, 0, 0, 0, 0, 0), 2)
	f.Add(encodeXOR(counterValues(rng, 50)), 50)
	f.Add(encodeXOR(gaugeValues(rng, 50)), 50)
	f.Add(encodeXOR(specialFloats), len(specialFloats))
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		n = capN(n, b)
		var d XORDecoder
		d.Reset(b, n)
		got := 0
		for d.Next() {
			got++
		}
		if got > n || (got < n) != (d.Err() != nil) {
			t.Fatalf("n=%d: decoded %d, err %v", n, got, d.Err())
		}
	})
}

// FuzzRoundTrip interprets the input as 8-byte words: each word is appended as
// a timestamp (delta-encoded against the previous one when delta is set, to
// reach the small buckets) and as a float's bit pattern.
func FuzzRoundTrip(f *testing.F) {
	word := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		return b
	}
	f.Add(word(), false)
	f.Add(word(1_700_000_000_000, 15_000, 15_000, 15_003, 14_990), true)
	f.Add(word(math.MaxUint64, 0, 1<<63, 1<<63-1, 0x7ff0000000000002), false)
	f.Add(word(math.Float64bits(1.5), math.Float64bits(1.75), math.Float64bits(-0.0), math.Float64bits(math.Inf(1))), false)
	f.Fuzz(func(t *testing.T, in []byte, delta bool) {
		n := len(in) / 8
		ts := make([]int64, n)
		vs := make([]float64, n)
		var prev int64
		for i := range n {
			w := binary.LittleEndian.Uint64(in[i*8:])
			ts[i] = int64(w)
			if delta {
				ts[i] = prev + int64(int32(w)) // small, possibly negative steps
				prev = ts[i]
			}
			vs[i] = math.Float64frombits(w)
		}
		gotTS, err := decodeTS(encodeTS(ts), n)
		if err != nil || !equalInt64s(gotTS, ts) {
			t.Fatalf("timestamps: got %v, %v; want %v", gotTS, err, ts)
		}
		gotVS, err := decodeXOR(encodeXOR(vs), n)
		if err != nil || !equalBits(gotVS, vs) {
			t.Fatalf("values: got %v, %v; want %v", gotVS, err, vs)
		}
	})
}
