package encoding

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

const (
	maxLeading  = 31   // largest leading-zero count storable in the 5-bit field
	noWindow    = 0xff // sentinel: no leading/trailing window established yet
	newWindowOH = 13   // control bits of a new window: '11' + 5 + 6
	reuseOH     = 2    // control bits of a reused window: '10'
)

// XOREncoder appends float64 values with Gorilla XOR encoding; every bit
// pattern (NaN payloads, ±0, ±Inf) round-trips exactly. While every value
// repeats the first (most of a node_exporter's series), the stream is held
// without bytes: Constant reports it, and the bytes are written when another
// value arrives or Bytes is called.
type XOREncoder struct {
	b []byte
	a XORAppender
}

// Append adds v to the stream.
func (e *XOREncoder) Append(v float64) { e.b = e.a.Append(e.b, v) }

// Bytes returns the encoded stream; it aliases internal storage and its last
// byte may change on the next Append. A stream that is still constant is
// written into a new slice on each call.
func (e *XOREncoder) Bytes() []byte { return e.a.Bytes(e.b) }

// Constant returns the value of a stream whose values all repeat the first
// one, held without bytes so far; ok is false once another value was
// appended, and for an empty stream.
func (e *XOREncoder) Constant() (v float64, ok bool) { return e.a.Constant(e.b) }

// Count returns the number of appended values.
func (e *XOREncoder) Count() int { return int(e.a.n) }

// Reset empties the encoder, keeping the capacity of its buffer.
func (e *XOREncoder) Reset() {
	e.b = e.b[:0]
	e.a = XORAppender{}
}

// XORAppender is XOREncoder's state without its bytes, for callers that keep
// many streams (the head's chunk being built holds one per member, and keeps
// the bytes only of the members whose values changed). Its methods take the
// stream's bytes so far (empty while constant) and return them.
type XORAppender struct {
	prev     uint64 // bits of the last value
	n        int32
	free     uint8 // unused low bits of the stream's last byte
	leading  uint8 // leading zeros of the current window, or noWindow
	trailing uint8 // trailing zeros of the current window
}

// Append adds v to the stream b and returns the stream.
func (a *XORAppender) Append(b []byte, v float64) []byte {
	vb := math.Float64bits(v)
	x := vb ^ a.prev
	if x == 0 && a.n > 0 { // a repeat: one 0 bit (unused bits are zero already)
		a.n++
		if len(b) == 0 {
			return b // still constant: no bytes yet
		}
		if a.free == 0 {
			b = append(b, 0)
			a.free = 8
		}
		a.free--
		return b
	}
	if a.n == 0 {
		a.prev, a.leading, a.n = vb, noWindow, 1
		return b[:0]
	}
	free := uint(a.free)
	if len(b) == 0 {
		b, free = a.appendConstant(b)
	}
	b, free = a.appendXOR(b, free, x)
	a.free, a.prev = uint8(free), vb
	a.n++
	return b
}

// Count returns the number of appended values.
func (a *XORAppender) Count() int { return int(a.n) }

// Bytes returns the stream b, or the stream of a constant appender (b empty)
// in a new slice.
func (a *XORAppender) Bytes(b []byte) []byte {
	if len(b) == 0 && a.n > 0 {
		b, _ = a.appendConstant(nil)
	}
	return b
}

// Constant returns the value of the stream b when its values all repeat the
// first one, held without bytes so far (b empty); ok is false once another
// value was appended, and for an empty stream.
func (a *XORAppender) Constant(b []byte) (v float64, ok bool) {
	if a.n == 0 || len(b) > 0 {
		return 0, false
	}
	return math.Float64frombits(a.prev), true
}

// appendConstant appends the stream of a constant appender to b (empty): the
// first value and a zero bit per repeat.
func (a *XORAppender) appendConstant(b []byte) ([]byte, uint) {
	repeats := uint(a.n - 1)
	b = slices.Grow(b, 16+int(repeats+7)/8)
	b, _ = appendBits(b, 0, a.prev, 64)
	b = append(b, make([]byte, (repeats+7)/8)...)
	return b, (8 - repeats%8) % 8
}

// appendXOR appends x, the non-zero XOR of a value with the previous one.
func (a *XORAppender) appendXOR(b []byte, free uint, x uint64) ([]byte, uint) {
	lead := uint8(bits.LeadingZeros64(x))
	trail := uint8(bits.TrailingZeros64(x))
	if lead > maxLeading {
		lead = maxLeading
	}
	sig := 64 - uint(lead) - uint(trail)
	if a.leading != noWindow && lead >= a.leading && trail >= a.trailing {
		// The value fits the current window. Reuse it unless a new, tighter
		// window is cheaper for this value (an encoder-only choice: the
		// decoder follows whatever control bits it reads).
		wsig := 64 - uint(a.leading) - uint(a.trailing)
		if reuseOH+wsig <= newWindowOH+sig {
			if wsig <= 64-reuseOH { // control bits and value in one write
				return appendBits(b, free, 0b10<<wsig|x>>a.trailing, reuseOH+wsig)
			}
			b, free = appendBits(b, free, 0b10, reuseOH)
			return appendBits(b, free, x>>a.trailing, wsig)
		}
	}
	a.leading, a.trailing = lead, trail
	// '11', 5 bits leading, 6 bits significant count (64 stored as 0).
	ctl := 0b11<<11 | uint64(lead)<<6 | uint64(sig&63)
	if sig <= 64-newWindowOH {
		return appendBits(b, free, ctl<<sig|x>>trail, newWindowOH+sig)
	}
	b, free = appendBits(b, free, ctl, newWindowOH)
	return appendBits(b, free, x>>trail, sig)
}

// XORDecoder decodes values produced by XOREncoder; the zero value is an empty decoder.
type XORDecoder struct {
	r   bitReader
	n   int // values to decode
	i   int // values decoded so far
	v   uint64
	w   xorWindow
	err error
}

// Reset prepares the decoder to read n values from b (a copy of XOREncoder.Bytes taken when Count was at least n).
func (d *XORDecoder) Reset(b []byte, n int) {
	d.r.reset(b)
	d.n, d.i = max(n, 0), 0
	d.v, d.w = 0, xorWindow{leading: noWindow}
	d.err = nil
}

// Next advances to the next value and reports whether there is one.
func (d *XORDecoder) Next() bool {
	if d.err != nil || d.i >= d.n {
		return false
	}
	if err := d.read(); err != nil {
		d.err = fmt.Errorf("decode value %d of %d: %w", d.i, d.n, err)
		return false
	}
	d.i++
	return true
}

// read decodes one value into d.v.
func (d *XORDecoder) read() error {
	if d.i == 0 {
		v, ok := d.r.readBits(64)
		if !ok {
			return ErrTruncated
		}
		d.v = v
		return nil
	}
	bit, ok := d.r.readBit()
	if !ok {
		return ErrTruncated
	}
	if bit == 0 {
		return nil // same value as before
	}
	x, err := d.r.readXORChange(&d.w)
	d.v ^= x
	return err
}

// At returns the current value.
func (d *XORDecoder) At() float64 { return math.Float64frombits(d.v) }

// Err returns the error that stopped decoding, if any.
func (d *XORDecoder) Err() error { return d.err }

// appendXORValue appends x, the XOR of a float's bits with its prediction, as
// a value column's vi: '0' when x == 0, else with the window kept in e.
func (a *XORAppender) appendXORValue(b []byte, free uint, x uint64) ([]byte, uint) {
	if x == 0 {
		return appendBit(b, free, 0)
	}
	return a.appendXOR(b, free, x)
}

// xorWindow is a value column decoder's window state.
type xorWindow struct{ leading, trailing uint8 }

// readXORValue reads a value written by appendXORValue and returns x.
func (r *bitReader) readXORValue(w *xorWindow) (uint64, error) {
	bit, ok := r.readBit()
	if !ok {
		return 0, ErrTruncated
	}
	if bit == 0 {
		return 0, nil
	}
	return r.readXORChange(w)
}

// readXORChange reads the rest of a non-zero x after its '1' bit: '0' and
// the bits of the window w, or '1', a new window and its bits.
func (r *bitReader) readXORChange(w *xorWindow) (uint64, error) {
	bit, ok := r.readBit()
	if !ok {
		return 0, ErrTruncated
	}
	if bit == 1 {
		hdr, ok := r.readBits(11)
		if !ok {
			return 0, ErrTruncated
		}
		lead, sig := uint(hdr>>6), uint(hdr&63)
		if sig == 0 {
			sig = 64
		}
		if lead+sig > 64 {
			return 0, fmt.Errorf("window of %d leading and %d significant bits: %w", lead, sig, ErrMalformed)
		}
		w.leading, w.trailing = uint8(lead), uint8(64-lead-sig)
	} else if w.leading == noWindow {
		return 0, fmt.Errorf("window reused before one was set: %w", ErrMalformed)
	}
	x, ok := r.readBits(64 - uint(w.leading) - uint(w.trailing))
	if !ok {
		return 0, ErrTruncated
	}
	return x << w.trailing, nil
}
