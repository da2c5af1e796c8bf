package encoding

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// ErrTruncated reports that encoded data ended before the requested number of values was decoded.
var ErrTruncated = errors.New("encoding: unexpected end of data")

// ErrMalformed reports encoded data that no encoder of this package can produce.
var ErrMalformed = errors.New("encoding: malformed data")

// maxVarintBytes is the longest valid unsigned LEB128 varint of a uint64.
const maxVarintBytes = 10

// lowMask returns a mask of the k low bits; k may be 0..64.
func lowMask(k uint) uint64 {
	return uint64(1)<<k - 1 // Go defines 1<<64 == 0, so k == 64 yields all ones.
}

// bitWriter appends bits MSB-first to a byte slice. Unused low bits of the
// last byte are always zero, so b is at every moment a valid encoding of all
// bits written so far.
type bitWriter struct {
	b    []byte
	free uint // unused low bits in the last byte of b (0..7)
}

// reset empties the writer, keeping the capacity of its buffer.
func (w *bitWriter) reset() {
	w.b = w.b[:0]
	w.free = 0
}

// writeBit appends a single bit (the lowest bit of bit).
func (w *bitWriter) writeBit(bit uint64) { w.b, w.free = appendBit(w.b, w.free, bit) }

// writeBits appends the k low bits of v, most significant first; k may be 0..64.
func (w *bitWriter) writeBits(v uint64, k uint) { w.b, w.free = appendBits(w.b, w.free, v, k) }

// appendBit appends a single bit (the lowest bit of bit) to the stream b,
// whose last byte has free unused low bits, and returns the stream and its
// free bits: bitWriter's state passed by value, for encoders that keep it
// in their own fields.
func appendBit(b []byte, free uint, bit uint64) ([]byte, uint) {
	if free == 0 {
		b = append(b, 0)
		free = 8
	}
	free--
	b[len(b)-1] |= byte(bit&1) << free
	return b, free
}

// appendBits appends the k low bits of v (k may be 0..64), most significant
// first, as appendBit does one.
func appendBits(b []byte, free uint, v uint64, k uint) ([]byte, uint) {
	if k == 0 {
		return b, free
	}
	v <<= 64 - k // left-align; this also drops bits above k.
	if free > 0 {
		b[len(b)-1] |= byte(v >> (64 - free))
		if k <= free {
			return b, free - k
		}
		v <<= free
		k -= free
	}
	// k is 1..64 and v left-aligned: store all 8 bytes at once (the ones past
	// the k bits are zero, and those past the new length are scratch).
	n := len(b)
	if cap(b)-n < 8 {
		b = append(b, make([]byte, 8)...)[:n]
	}
	binary.BigEndian.PutUint64(b[n:n+8], v)
	nb := (k + 7) / 8
	return b[:n+int(nb)], nb*8 - k
}

// writeUvarint appends x as an unsigned LEB128 varint, 8 bits per byte.
func (w *bitWriter) writeUvarint(x uint64) {
	for x >= 0x80 {
		w.writeBits(x&0x7f|0x80, 8)
		x >>= 7
	}
	w.writeBits(x, 8)
}

// writeVarint appends x zig-zag encoded as an unsigned varint.
func (w *bitWriter) writeVarint(x int64) {
	w.writeUvarint(uint64(x<<1) ^ uint64(x>>63))
}

// bitReader reads bits MSB-first from a byte slice. It never reads past the
// end of the slice and never allocates.
type bitReader struct {
	b   []byte
	pos int    // next byte of b to load into buf
	buf uint64 // the n low bits are the next bits of the stream; higher bits are garbage
	n   uint   // number of valid bits in buf (0..64)
}

// reset starts reading b from its first bit.
func (r *bitReader) reset(b []byte) {
	*r = bitReader{b: b}
}

// fill loads as many whole bytes into buf as fit.
func (r *bitReader) fill() {
	if len(r.b)-r.pos >= 8 {
		word := binary.BigEndian.Uint64(r.b[r.pos:])
		nb := (64 - r.n) / 8 // bytes that fit: 8 when n == 0, else 0..7
		if nb == 0 {
			return
		}
		r.buf = r.buf<<(nb*8) | word>>(64-nb*8)
		r.n += nb * 8
		r.pos += int(nb)
		return
	}
	for r.n <= 56 && r.pos < len(r.b) {
		r.buf = r.buf<<8 | uint64(r.b[r.pos])
		r.n += 8
		r.pos++
	}
}

// riceRun decodes Rice-coded fields with parameter k (k < 64) into out, as
// zig-zagged distances, while each lies whole in the reader's word, and
// returns how many it decoded; it stops before an escape, a field longer than
// the word holds, or one past the data's last whole eight bytes.
//
// The loop keeps the bits left-aligned in a local word (left, refillLeft),
// refilled with one eight-byte load. Every shift is below 64, so none needs
// a check.
func (r *bitReader) riceRun(out []uint64, k uint) int {
	b, pos, buf, w := r.left()
	k &= 63
	i := 0
	for ; i < len(out); i++ {
		pos, buf, w = refillLeft(b, pos, buf, w)
		ones := uint(bits.LeadingZeros64(^buf))
		if ones >= riceEscape || ones+1+k > w {
			break
		}
		t := buf << ((ones + 1) & 63)
		out[i] = uint64(ones)<<k | t>>1>>((63-k)&63)
		buf = t << k
		w -= ones + 1 + k
	}
	r.setLeft(pos, buf, w)
	return i
}

// left returns the reader's state with its bits left-aligned: the w high
// bits of buf are the next bits of the stream, the others zero.
func (r *bitReader) left() (b []byte, pos int, buf uint64, w uint) {
	if r.n == 0 {
		return r.b, r.pos, 0, 0
	}
	return r.b, r.pos, r.buf << ((64 - r.n) & 63), r.n
}

// setLeft stores a left-aligned state (see left) back into the reader.
func (r *bitReader) setLeft(pos int, buf uint64, w uint) {
	r.pos, r.n, r.buf = pos, w, 0
	if w > 0 {
		r.buf = buf >> ((64 - w) & 63)
	}
}

// refillLeft loads the whole bytes that fit below the w valid bits of the
// left-aligned word buf from b at pos, while eight bytes remain to be read:
// the bits below the last whole byte are the stream's next bits, which the
// next refill ORs in again unchanged.
func refillLeft(b []byte, pos int, buf uint64, w uint) (int, uint64, uint) {
	if w <= 56 && pos+8 <= len(b) {
		buf |= binary.BigEndian.Uint64(b[pos:]) >> (w & 63)
		nb := (64 - w) >> 3
		return pos + int(nb), buf, w + nb<<3
	}
	return pos, buf, w
}

// fixedRun reads fields of k bits into out, and returns how many it read:
// it stops before a field that passes the end of the data, or whose
// eight-byte load would pass the end of its capacity (the bytes after a
// column's, in the same buffer, are loaded but never used); fields over 56
// bits are left to readBits.
//
// Field i starts at a bit position known in advance, so each is one load
// and two shifts that depend on no other field (no refilled word carried
// from field to field).
func (r *bitReader) fixedRun(out []uint64, k uint) int {
	if k == 0 {
		clear(out)
		return len(out)
	}
	if k > 56 {
		return 0
	}
	bit := r.pos*8 - int(r.n) // the stream's next bit
	b := r.b[:cap(r.b)]
	if len(b) < 8 {
		return 0
	}
	// The last field's first bit: its bits are in the data, and its byte
	// and the seven after it in the buffer.
	last := min((len(b)-8)*8+7, len(r.b)*8-int(k))
	n := 0
	if bit <= last {
		n = min(len(out), (last-bit)/int(k)+1)
	}
	if n == 0 {
		return 0
	}
	shift := (64 - k) & 63
	for i := range out[:n] {
		out[i] = binary.BigEndian.Uint64(b[bit>>3:]) << (uint(bit) & 7) >> shift
		bit += int(k)
	}
	// The reader resumes at bit: the rest of its byte is in buf.
	r.pos, r.n, r.buf = bit>>3, 0, 0
	if rem := uint(bit) & 7; rem != 0 {
		r.n, r.buf = 8-rem, uint64(b[r.pos])
		r.pos++
	}
	return n
}

// readBit returns the next bit; ok is false at the end of the data.
func (r *bitReader) readBit() (bit uint64, ok bool) {
	if r.n == 0 {
		r.fill()
		if r.n == 0 {
			return 0, false
		}
	}
	r.n--
	return (r.buf >> r.n) & 1, true
}

// readBits returns the next k bits (k may be 0..64) as the low bits of v; ok
// is false if fewer than k bits remain, in which case the reader's state is
// unspecified.
func (r *bitReader) readBits(k uint) (v uint64, ok bool) {
	if k > r.n {
		r.fill()
		if k > r.n {
			return r.readBitsSlow(k)
		}
	}
	r.n -= k
	return (r.buf >> r.n) & lowMask(k), true
}

// readUnary reads a run of one bits ended by a zero bit, or limit ones with
// no zero after them, and returns the number of ones; ok is false if the
// data ends first.
func (r *bitReader) readUnary(limit uint) (uint, bool) {
	q := uint(0)
	for {
		if r.n == 0 {
			r.fill()
			if r.n == 0 {
				return 0, false
			}
		}
		// The ones at the top of the n valid bits (at most n: the bits
		// shifted in below them become ones when inverted).
		ones := uint(bits.LeadingZeros64(^(r.buf << (64 - r.n))))
		if q+ones >= limit {
			r.n -= limit - q
			return limit, true
		}
		if ones < r.n {
			r.n -= ones + 1 // the ones and their zero
			return q + ones, true
		}
		q += ones
		r.n = 0
	}
}

// readBitsSlow handles a read that straddles a full buffer (k > 56) or the end of the data.
func (r *bitReader) readBitsSlow(k uint) (uint64, bool) {
	hiN := r.n
	hi := r.buf & lowMask(hiN)
	r.n = 0
	r.fill()
	loN := k - hiN
	if loN > r.n {
		return 0, false
	}
	r.n -= loN
	return hi<<loN | (r.buf>>r.n)&lowMask(loN), true
}

// readUvarint reads an unsigned LEB128 varint written by writeUvarint.
func (r *bitReader) readUvarint() (uint64, error) {
	var x uint64
	var s uint
	for i := 0; i < maxVarintBytes; i++ {
		b, ok := r.readBits(8)
		if !ok {
			return 0, ErrTruncated
		}
		if b < 0x80 {
			if i == maxVarintBytes-1 && b > 1 {
				return 0, ErrMalformed // overflows 64 bits
			}
			return x | b<<s, nil
		}
		x |= (b & 0x7f) << s
		s += 7
	}
	return 0, ErrMalformed // too many continuation bytes
}

// readVarint reads a zig-zag encoded signed varint written by writeVarint.
func (r *bitReader) readVarint() (int64, error) {
	ux, err := r.readUvarint()
	return int64(ux>>1) ^ -int64(ux&1), err
}
