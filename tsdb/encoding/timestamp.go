package encoding

import (
	"fmt"
	"math/bits"
	"slices"
)

// Delta-of-delta buckets: a value that fits a signed field of the given width
// is written as prefix followed by the field in two's complement.
const (
	dodBits1 = 14 // prefix 10
	dodBits2 = 17 // prefix 110
	dodBits3 = 20 // prefix 1110
	// Anything else: prefix 1111 followed by all 64 bits.
)

// fitsSigned reports whether v is representable as a k-bit two's complement integer.
func fitsSigned(v int64, k uint) bool {
	lim := int64(1) << (k - 1)
	return v >= -lim && v < lim
}

// signExtend interprets the k low bits of v as a two's complement integer.
func signExtend(v uint64, k uint) int64 {
	return int64(v<<(64-k)) >> (64 - k)
}

// TSEncoder appends int64 timestamps with Gorilla-style delta-of-delta encoding; see the package documentation for the format.
type TSEncoder struct {
	w     bitWriter
	n     int
	t     int64 // last appended timestamp
	delta int64 // last delta (wrapping arithmetic)
}

// Append adds t to the stream; any int64 sequence is accepted.
func (e *TSEncoder) Append(t int64) {
	switch e.n {
	case 0:
		e.w.writeVarint(t)
	case 1:
		e.delta = t - e.t
		e.w.writeVarint(e.delta)
	default:
		d := t - e.t // wraps on overflow; the decoder wraps identically
		dod := d - e.delta
		switch {
		case dod == 0:
			e.w.writeBit(0)
		case fitsSigned(dod, dodBits1):
			e.w.writeBits(0b10<<dodBits1|uint64(dod)&lowMask(dodBits1), 2+dodBits1)
		case fitsSigned(dod, dodBits2):
			e.w.writeBits(0b110<<dodBits2|uint64(dod)&lowMask(dodBits2), 3+dodBits2)
		case fitsSigned(dod, dodBits3):
			e.w.writeBits(0b1110<<dodBits3|uint64(dod)&lowMask(dodBits3), 4+dodBits3)
		default:
			e.w.writeBits(0b1111, 4)
			e.w.writeBits(uint64(dod), 64)
		}
		e.delta = d
	}
	e.t = t
	e.n++
}

// Bytes returns the encoded stream; it aliases internal storage and its last byte may change on the next Append.
func (e *TSEncoder) Bytes() []byte { return e.w.b }

// Count returns the number of appended timestamps.
func (e *TSEncoder) Count() int { return e.n }

// Reset empties the encoder, keeping the capacity of its buffer.
func (e *TSEncoder) Reset() {
	e.w.reset()
	e.n, e.t, e.delta = 0, 0, 0
}

// TSDecoder decodes timestamps produced by TSEncoder; the zero value is an empty decoder.
type TSDecoder struct {
	r     bitReader
	n     int // timestamps to decode
	i     int // timestamps decoded so far
	t     int64
	delta int64
	err   error
}

// Reset prepares the decoder to read n timestamps from b (a copy of TSEncoder.Bytes taken when Count was at least n).
func (d *TSDecoder) Reset(b []byte, n int) {
	d.r.reset(b)
	d.n, d.i = max(n, 0), 0
	d.t, d.delta = 0, 0
	d.err = nil
}

// Next advances to the next timestamp and reports whether there is one.
func (d *TSDecoder) Next() bool {
	if d.err != nil || d.i >= d.n {
		return false
	}
	var err error
	switch d.i {
	case 0:
		d.t, err = d.r.readVarint()
	case 1:
		d.delta, err = d.r.readVarint()
		d.t += d.delta
	default:
		var dod int64
		dod, err = d.readDod()
		d.delta += dod
		d.t += d.delta
	}
	if err != nil {
		d.err = fmt.Errorf("decode timestamp %d of %d: %w", d.i, d.n, err)
		return false
	}
	d.i++
	return true
}

// AppendAll appends the timestamps not yet decoded to dst. A run of zero
// deltas-of-deltas (a steady scrape interval: one 0 bit per timestamp) is
// taken from the bit buffer at once, not bit by bit.
func (d *TSDecoder) AppendAll(dst []int64) ([]int64, error) {
	dst = slices.Grow(dst, d.n-d.i)
	for d.err == nil && d.i < d.n {
		if d.i < 2 {
			if d.Next() {
				dst = append(dst, d.t)
			}
			continue
		}
		r := &d.r
		if r.n == 0 {
			r.fill()
		}
		// The zero bits at the top of the n valid bits, at most n.
		z := min(uint(bits.LeadingZeros64(r.buf<<(64-r.n))), r.n, uint(d.n-d.i))
		if r.n == 0 || z == 0 {
			dod, err := d.readDod()
			if err != nil {
				d.err = fmt.Errorf("decode timestamp %d of %d: %w", d.i, d.n, err)
				break
			}
			d.delta += dod
			d.t += d.delta
			d.i++
			dst = append(dst, d.t)
			continue
		}
		r.n -= z
		d.i += int(z)
		for range z {
			d.t += d.delta
			dst = append(dst, d.t)
		}
	}
	return dst, d.err
}

// readDod reads one delta-of-delta bucket.
func (d *TSDecoder) readDod() (int64, error) {
	prefix, ok := d.r.readUnary(4)
	if !ok {
		return 0, ErrTruncated
	}
	var k uint
	switch prefix {
	case 0:
		return 0, nil
	case 1:
		k = dodBits1
	case 2:
		k = dodBits2
	case 3:
		k = dodBits3
	default:
		v, ok := d.r.readBits(64)
		if !ok {
			return 0, ErrTruncated
		}
		return int64(v), nil
	}
	v, ok := d.r.readBits(k)
	if !ok {
		return 0, ErrTruncated
	}
	return signExtend(v, k), nil
}

// At returns the current timestamp.
func (d *TSDecoder) At() int64 { return d.t }

// Err returns the error that stopped decoding, if any.
func (d *TSDecoder) Err() error { return d.err }
