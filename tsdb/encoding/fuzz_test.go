package encoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
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
		// AppendAll decodes the same timestamps and fails where Next does.
		var want []int64
		d.Reset(b, n)
		for d.Next() {
			want = append(want, d.At())
		}
		d.Reset(b, n)
		all, err := d.AppendAll(nil)
		if !equalInt64s(all, want) || (err != nil) != (len(want) < n) {
			t.Fatalf("n=%d: AppendAll %v, %v; Next %v", n, all, err, want)
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

func FuzzHistogramDecoder(f *testing.F) {
	f.Add([]byte{}, 0)
	f.Add([]byte{0x80}, 1)
	f.Add(bytes.Repeat([]byte{0xff}, 40), 3)
	for _, s := range histSeries(20) {
		f.Add(encodeHistograms(s.hs), 20)
	}
	f.Add(encodeHistograms(randomHistograms(newRand(22), 20)), 20)
	f.Add(encodeFloatHistograms(toFloats(histSeries(20)[2].hs, true)), 20)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		n = capN(n, b)
		var d HistogramDecoder
		d.Reset(b, n)
		var h *histogram.Histogram
		got := 0
		for d.Next() {
			h = d.At(h)
			got++
		}
		if got > n || (got < n) != (d.Err() != nil) {
			t.Fatalf("n=%d: decoded %d, err %v", n, got, d.Err())
		}
		if err := d.Err(); err != nil && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v wraps neither ErrTruncated nor ErrMalformed", err)
		}
		var fd FloatHistogramDecoder
		fd.Reset(b, n)
		var fh *histogram.FloatHistogram
		got = 0
		for fd.Next() {
			fh = fd.At(fh)
			got++
		}
		if got > n || (got < n) != (fd.Err() != nil) {
			t.Fatalf("float n=%d: decoded %d, err %v", n, got, fd.Err())
		}
		if err := fd.Err(); err != nil && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("float error %v wraps neither ErrTruncated nor ErrMalformed", err)
		}
	})
}

// histFromBytes derives histograms from fuzz input: each histogram takes a
// control byte and then as many bytes as the fields it picks from it.
func histFromBytes(in []byte) []*histogram.Histogram {
	take := func(n int) uint64 {
		var v uint64
		for i := 0; i < n && len(in) > 0; i++ {
			v = v<<8 | uint64(in[0])
			in = in[1:]
		}
		return v
	}
	var hs []*histogram.Histogram
	var prev *histogram.Histogram
	for len(in) > 0 && len(hs) < 200 {
		c := take(1)
		var h *histogram.Histogram
		if prev != nil && c&1 == 0 { // the previous layout with new counts
			h = prev.Copy()
			for j := range h.PositiveBuckets {
				h.PositiveBuckets[j] += int64(int8(take(1)))
			}
			for j := range h.NegativeBuckets {
				h.NegativeBuckets[j] += int64(int8(take(1)))
			}
			h.Count += take(1)
			h.ZeroCount += take(1) >> 4
		} else {
			h = &histogram.Histogram{Schema: int32(int8(take(1))), ZeroThreshold: math.Float64frombits(take(8)), ZeroCount: take(2), Count: take(int(c>>6&3) * 2)}
			if c&2 != 0 {
				h.Schema = -53
				for range take(1) & 3 {
					h.CustomValues = append(h.CustomValues, math.Float64frombits(take(8)))
				}
			}
			spans := func() ([]histogram.Span, []int64) {
				var ss []histogram.Span
				var bs []int64
				for range take(1) & 3 {
					s := histogram.Span{Offset: int32(take(2)) - 1<<15, Length: uint32(take(1) & 7)}
					ss = append(ss, s)
					for range s.Length {
						bs = append(bs, int64(int16(take(2))))
					}
				}
				return ss, bs
			}
			h.PositiveSpans, h.PositiveBuckets = spans()
			h.NegativeSpans, h.NegativeBuckets = spans()
		}
		h.CounterResetHint = histogram.CounterResetHint(c >> 2 & 3)
		if c&16 != 0 {
			h.Sum = math.Float64frombits(take(8))
		} else if prev != nil {
			h.Sum = prev.Sum + float64(take(1))
		}
		hs = append(hs, h)
		prev = h
	}
	return hs
}

func FuzzHistogramRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x01, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 1, 0x80, 0, 3, 0, 7, 0, 1, 0, 2, 0})
	f.Add(bytes.Repeat([]byte{0x13, 0xff, 0x80, 0x7f}, 30))
	f.Add(bytes.Repeat([]byte{0x02, 0x01, 0x10}, 40))
	f.Fuzz(func(t *testing.T, in []byte) {
		hs := histFromBytes(in)
		b := encodeHistograms(hs)
		var d HistogramDecoder
		d.Reset(b, len(hs))
		var h *histogram.Histogram
		for i := 0; d.Next(); i++ {
			h = d.At(h)
			if !exactlyEqual(h, hs[i]) {
				t.Fatalf("histogram %d:\n got %+v\nwant %+v", i, *h, *hs[i])
			}
		}
		if d.Err() != nil {
			t.Fatal(d.Err())
		}
		// The same histograms as floats, and with counts from the input's bits.
		fhs := toFloats(hs, len(in)%2 == 1)
		for i, fh := range fhs {
			if i < len(in) && in[i]&0x80 != 0 && len(fh.PositiveBuckets) > 0 {
				fh.PositiveBuckets[0] = math.Float64frombits(uint64(in[i]) * 0x0101010101010101)
			}
		}
		fb := encodeFloatHistograms(fhs)
		var fd FloatHistogramDecoder
		fd.Reset(fb, len(fhs))
		var fh *histogram.FloatHistogram
		for i := 0; fd.Next(); i++ {
			fh = fd.At(fh)
			if !floatExactlyEqual(fh, fhs[i]) {
				t.Fatalf("float histogram %d:\n got %+v\nwant %+v", i, *fh, *fhs[i])
			}
		}
		if fd.Err() != nil {
			t.Fatal(fd.Err())
		}
	})
}
