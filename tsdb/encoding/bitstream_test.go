package encoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func TestBitStreamRoundTrip(t *testing.T) {
	rng := newRand(1)
	type field struct {
		v uint64
		k uint
	}
	for iter := 0; iter < 200; iter++ {
		var w bitWriter
		var fields []field
		total := uint(0)
		for j := rng.IntN(300); j > 0; j-- {
			k := uint(rng.IntN(65))
			v := rng.Uint64() & lowMask(k)
			if rng.IntN(4) == 0 {
				k, v = 1, rng.Uint64()&1
				w.writeBit(v)
			} else {
				// Pass garbage above bit k to prove writeBits ignores it.
				w.writeBits(v|rng.Uint64()<<k, k) // k == 64 shifts to 0
			}
			fields = append(fields, field{v, k})
			total += k
		}
		if got, want := len(w.b), int((total+7)/8); got != want {
			t.Fatalf("iter %d: %d bytes for %d bits, want %d", iter, got, total, want)
		}
		if total%8 != 0 && w.b[len(w.b)-1]&byte(lowMask(8-total%8)) != 0 {
			t.Fatalf("iter %d: padding bits not zero: %08b", iter, w.b[len(w.b)-1])
		}
		var r bitReader
		r.reset(w.b)
		for i, f := range fields {
			var got uint64
			var ok bool
			if f.k == 1 && i%2 == 0 {
				got, ok = r.readBit()
			} else {
				got, ok = r.readBits(f.k)
			}
			if !ok || got != f.v {
				t.Fatalf("iter %d field %d (%d bits): got %x ok=%v, want %x", iter, i, f.k, got, ok, f.v)
			}
		}
		pad := uint(len(w.b))*8 - total
		if _, ok := r.readBits(pad + 1); ok {
			t.Fatalf("iter %d: read %d bits past the end", iter, pad+1)
		}
	}
}

func TestBitReaderEOF(t *testing.T) {
	for n := 0; n <= 17; n++ {
		b := bytes.Repeat([]byte{0xa5}, n)
		for k := uint(0); k <= 64; k++ {
			var r bitReader
			r.reset(b)
			read := uint(0)
			for {
				v, ok := r.readBits(k)
				if !ok {
					break
				}
				if k > 0 && v != expectedA5(read, k) {
					t.Fatalf("n=%d k=%d at bit %d: got %x want %x", n, k, read, v, expectedA5(read, k))
				}
				read += k
				if k == 0 {
					break
				}
			}
			if k > 0 && read != uint(n*8)/k*k {
				t.Fatalf("n=%d k=%d: read %d bits, want %d", n, k, read, uint(n*8)/k*k)
			}
		}
	}
}

// expectedA5 returns k bits starting at bit offset off of an endless 0xa5 stream.
func expectedA5(off, k uint) uint64 {
	var v uint64
	for i := uint(0); i < k; i++ {
		bit := uint64(0xa5>>(7-(off+i)%8)) & 1
		v = v<<1 | bit
	}
	return v
}

func TestVarintMatchesEncodingBinary(t *testing.T) {
	vals := []int64{0, 1, -1, 63, -64, 64, 1 << 40, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for _, v := range vals {
		var w bitWriter
		w.writeVarint(v)
		if want := binary.AppendVarint(nil, v); !bytes.Equal(w.b, want) {
			t.Fatalf("varint(%d) = %x, want %x", v, w.b, want)
		}
		var r bitReader
		r.reset(w.b)
		got, err := r.readVarint()
		if err != nil || got != v {
			t.Fatalf("readVarint = %d, %v; want %d", got, err, v)
		}
		// Unaligned: after 3 bits.
		w.reset()
		w.writeBits(0b101, 3)
		w.writeVarint(v)
		r.reset(w.b)
		if p, _ := r.readBits(3); p != 0b101 {
			t.Fatalf("prefix = %b", p)
		}
		if got, err := r.readVarint(); err != nil || got != v {
			t.Fatalf("unaligned readVarint = %d, %v; want %d", got, err, v)
		}
	}
}

func TestReadUvarintErrors(t *testing.T) {
	cases := []struct {
		b    []byte
		want error
	}{
		{nil, ErrTruncated},
		{[]byte{0x80}, ErrTruncated},
		{bytes.Repeat([]byte{0xff}, 9), ErrTruncated},
		{bytes.Repeat([]byte{0xff}, 11), ErrMalformed},
		{append(bytes.Repeat([]byte{0xff}, 9), 0x02), ErrMalformed},
	}
	for _, c := range cases {
		var r bitReader
		r.reset(c.b)
		if _, err := r.readUvarint(); !errors.Is(err, c.want) {
			t.Errorf("readUvarint(%x) error = %v, want %v", c.b, err, c.want)
		}
	}
	var r bitReader
	r.reset(append(bytes.Repeat([]byte{0xff}, 9), 0x01))
	if v, err := r.readUvarint(); err != nil || v != math.MaxUint64 {
		t.Errorf("max uvarint = %x, %v", v, err)
	}
}
