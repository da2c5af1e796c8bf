package block

import (
	"encoding/binary"
	"errors"
	"math"
)

// errShort and errBadVarint are the sticky errors of decbuf; static so that decoding never allocates.
var (
	errShort     = errors.New("unexpected end of data")
	errBadVarint = errors.New("invalid varint")
)

// decbuf reads little pieces of a byte slice, remembering the first error; reads after an error return zero values.
type decbuf struct {
	b   []byte
	err error
}

func (d *decbuf) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		if n == 0 {
			d.err = errShort
		} else {
			d.err = errBadVarint
		}
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decbuf) varint() int64 {
	ux := d.uvarint()
	return int64(ux>>1) ^ -int64(ux&1)
}

// uvarintInt reads a uvarint that must be at most limit.
func (d *decbuf) uvarintInt(limit int) int {
	x := d.uvarint()
	if x > uint64(limit) {
		if d.err == nil {
			d.err = errBadVarint
		}
		return 0
	}
	return int(x)
}

func (d *decbuf) byte1() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.err = errShort
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decbuf) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.err = errShort
		d.b = nil
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

func (d *decbuf) f64() float64 {
	b := d.bytes(8)
	if b == nil {
		return 0
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b))
}

// beN decodes an n-byte (0..8) big-endian unsigned integer.
func beN(b []byte) uint64 {
	var x uint64
	for _, c := range b {
		x = x<<8 | uint64(c)
	}
	return x
}

// bytesFor returns the number of bytes needed to hold x big-endian (at least 1).
func bytesFor(x uint64) int {
	n := 1
	for x > 0xff {
		x >>= 8
		n++
	}
	return n
}

func putBE(dst []byte, x uint64, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(x>>(8*uint(i))))
	}
	return dst
}

// stat reads a column stat: a signed varint integer if asInt, else an f64.
func (d *decbuf) stat(asInt bool) float64 {
	if asInt {
		return float64(d.varint())
	}
	return d.f64()
}
