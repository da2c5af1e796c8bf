package encoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// encodeTS encodes ts and returns a copy of the bytes.
func encodeTS(ts []int64) []byte {
	var e TSEncoder
	for _, t := range ts {
		e.Append(t)
	}
	return bytes.Clone(e.Bytes())
}

// decodeTS decodes n timestamps from b.
func decodeTS(b []byte, n int) ([]int64, error) {
	var d TSDecoder
	d.Reset(b, n)
	var out []int64
	for d.Next() {
		out = append(out, d.At())
	}
	return out, d.Err()
}

// checkTSRoundTrip fails the test unless ts survives encoding and every prefix decodes.
func checkTSRoundTrip(t *testing.T, ts []int64) {
	t.Helper()
	var e TSEncoder
	for _, v := range ts {
		e.Append(v)
	}
	if e.Count() != len(ts) {
		t.Fatalf("Count = %d, want %d", e.Count(), len(ts))
	}
	b := bytes.Clone(e.Bytes())
	got, err := decodeTS(b, len(ts))
	if err != nil {
		t.Fatalf("decode %v: %v", ts, err)
	}
	if !equalInt64s(got, ts) {
		t.Fatalf("round trip mismatch:\n got  %v\n want %v", got, ts)
	}
	if len(ts) > 0 {
		n := len(ts) / 2
		got, err := decodeTS(b, n)
		if err != nil || !equalInt64s(got, ts[:n]) {
			t.Fatalf("prefix %d: got %v, %v; want %v", n, got, err, ts[:n])
		}
	}
	// AppendAll, from the start and after some Next calls, appending to what dst holds.
	for _, k := range []int{0, 1, 2, len(ts) / 3} {
		var d TSDecoder
		d.Reset(b, len(ts))
		for range min(k, len(ts)) {
			d.Next()
		}
		got, err := d.AppendAll([]int64{7})
		if err != nil || len(got) != 1+len(ts)-min(k, len(ts)) || got[0] != 7 || !equalInt64s(got[1:], ts[min(k, len(ts)):]) {
			t.Fatalf("AppendAll after %d: got %v, %v; want %v", k, got, err, ts[min(k, len(ts)):])
		}
	}
}

func equalInt64s(a, b []int64) bool {
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

func TestTSRoundTrip(t *testing.T) {
	rng := newRand(2)
	t.Run("empty", func(t *testing.T) { checkTSRoundTrip(t, nil) })
	t.Run("single", func(t *testing.T) { checkTSRoundTrip(t, []int64{-42}) })
	t.Run("regular", func(t *testing.T) { checkTSRoundTrip(t, scrapeTimestamps(rng, 1000, 0, 0)) })
	t.Run("jitter", func(t *testing.T) {
		for _, maxJ := range []int64{3, 500, 100_000, 1 << 40} {
			checkTSRoundTrip(t, scrapeTimestamps(rng, 500, 5, maxJ))
		}
	})
	t.Run("decreasing", func(t *testing.T) {
		ts := scrapeTimestamps(rng, 300, 3, 1000)
		for i, j := 0, len(ts)-1; i < j; i, j = i+1, j-1 {
			ts[i], ts[j] = ts[j], ts[i]
		}
		checkTSRoundTrip(t, ts)
	})
	t.Run("extremes", func(t *testing.T) {
		ext := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
		for _, a := range ext {
			for _, b := range ext {
				for _, c := range ext {
					checkTSRoundTrip(t, []int64{a, b, c, a, c, b})
				}
			}
		}
	})
	t.Run("random", func(t *testing.T) {
		for iter := 0; iter < 2000; iter++ {
			checkTSRoundTrip(t, randomInt64s(rng, rng.IntN(300)))
		}
	})
}

// bitLen returns the number of bits written so far.
func (w *bitWriter) bitLen() int { return len(w.b)*8 - int(w.free) }

func TestTSBuckets(t *testing.T) {
	cases := []struct {
		dod  int64
		bits int
	}{
		{0, 1},
		{1, 16}, {-1, 16}, {8191, 16}, {-8192, 16},
		{8192, 20}, {-8193, 20}, {65535, 20}, {-65536, 20},
		{65536, 24}, {-65537, 24}, {524287, 24}, {-524288, 24},
		{524288, 68}, {-524289, 68}, {math.MaxInt64, 68}, {math.MinInt64, 68},
	}
	for _, c := range cases {
		// t0 = 0, d1 = 0 (one varint byte each), then dod.
		var e TSEncoder
		e.Append(0)
		e.Append(0)
		e.Append(c.dod)
		if got := e.w.bitLen() - 16; got != c.bits {
			t.Errorf("dod %d: %d bits, want %d", c.dod, got, c.bits)
		}
		checkTSRoundTrip(t, []int64{0, 0, c.dod, c.dod - 1, 2 * c.dod})
	}
}

func TestTSRegularIntervalCostsOneBit(t *testing.T) {
	ts := scrapeTimestamps(newRand(3), 1000, 0, 0)
	b := encodeTS(ts)
	header := len(binary.AppendVarint(nil, ts[0])) + len(binary.AppendVarint(nil, 15_000))
	if want := header + (len(ts)-2+7)/8; len(b) != want {
		t.Fatalf("%d regular timestamps took %d bytes, want %d", len(ts), len(b), want)
	}
}

func TestTSSnapshotWhileAppending(t *testing.T) {
	rng := newRand(4)
	ts := randomInt64s(rng, 400)
	type snap struct {
		b []byte
		n int
	}
	var snaps []snap
	var e TSEncoder
	for _, v := range ts {
		e.Append(v)
		snaps = append(snaps, snap{bytes.Clone(e.Bytes()), e.Count()})
	}
	for _, s := range snaps {
		got, err := decodeTS(s.b, s.n)
		if err != nil || !equalInt64s(got, ts[:s.n]) {
			t.Fatalf("snapshot at %d: got %v, %v", s.n, got, err)
		}
	}
}

func TestTSTruncated(t *testing.T) {
	rng := newRand(5)
	for iter := 0; iter < 50; iter++ {
		ts := randomInt64s(rng, 1+rng.IntN(100))
		b := encodeTS(ts)
		for cut := 0; cut < len(b); cut++ {
			got, err := decodeTS(b[:cut], len(ts))
			if !errors.Is(err, ErrTruncated) {
				t.Fatalf("cut %d of %d: err = %v, want ErrTruncated", cut, len(b), err)
			}
			if len(got) >= len(ts) || !equalInt64s(got, ts[:len(got)]) {
				t.Fatalf("cut %d: decoded %v, not a proper prefix of %v", cut, got, ts)
			}
		}
	}
}

func TestTSMoreThanEncoded(t *testing.T) {
	// Asking for more values than were written reads padding and then runs out.
	ts := []int64{10, 20, 30}
	got, err := decodeTS(encodeTS(ts), 1000)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
	if len(got) < len(ts) || !equalInt64s(got[:len(ts)], ts) {
		t.Fatalf("decoded %v, want prefix %v", got, ts)
	}
}

func TestTSMalformedVarint(t *testing.T) {
	_, err := decodeTS(bytes.Repeat([]byte{0xff}, 20), 5)
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}

func TestTSGarbage(t *testing.T) {
	rng := newRand(6)
	var d TSDecoder
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

func TestTSReset(t *testing.T) {
	rng := newRand(7)
	a, b := randomInt64s(rng, 100), randomInt64s(rng, 50)
	var e TSEncoder
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
	if !bytes.Equal(e.Bytes(), encodeTS(b)) {
		t.Fatal("reused encoder differs from a fresh one")
	}

	var d TSDecoder
	d.Reset([]byte{0x80}, 3)
	if d.Next() || d.Err() == nil {
		t.Fatal("expected error on truncated input")
	}
	d.Reset(e.Bytes(), len(b))
	for i := 0; d.Next(); i++ {
		if d.At() != b[i] {
			t.Fatalf("value %d after decoder reuse: %d, want %d", i, d.At(), b[i])
		}
	}
	if d.Err() != nil {
		t.Fatalf("decoder reuse: %v", d.Err())
	}
	d.Reset(e.Bytes(), -5)
	if d.Next() || d.Err() != nil {
		t.Fatal("negative n must decode nothing without error")
	}
	var zero TSDecoder
	if zero.Next() || zero.Err() != nil {
		t.Fatal("zero decoder must be empty")
	}
}

func TestTSAllocs(t *testing.T) {
	ts := scrapeTimestamps(newRand(8), chunkRows, 10, 200)
	var e TSEncoder
	for _, v := range ts {
		e.Append(v)
	}
	if a := testing.AllocsPerRun(20, func() {
		e.Reset()
		for _, v := range ts {
			e.Append(v)
		}
	}); a != 0 {
		t.Errorf("encoder re-fill: %v allocs, want 0", a)
	}
	b := bytes.Clone(e.Bytes())
	var d TSDecoder
	var sink int64
	if a := testing.AllocsPerRun(20, func() {
		d.Reset(b, len(ts))
		for d.Next() {
			sink += d.At()
		}
	}); a != 0 {
		t.Errorf("decode: %v allocs, want 0", a)
	}
	_ = sink
}
