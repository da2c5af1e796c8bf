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

// XOREncoder appends float64 values with Gorilla XOR encoding; every bit pattern (NaN payloads, ±0, ±Inf) round-trips exactly.
// It packs into 40 bytes (the bit writer's state is held unpadded here): the
// head keeps one per series in every chunk being built. While every value
// repeats the first (most of a node_exporter's series), the stream is held
// without bytes: Constant reports it, and the bytes are written when another
// value arrives or Bytes is called.
type XOREncoder struct {
	b        []byte // bitWriter.b
	prev     uint64 // bits of the last value
	n        int32
	free     uint8 // bitWriter.free
	leading  uint8 // leading zeros of the current window, or noWindow
	trailing uint8 // trailing zeros of the current window
}

// Append adds v to the stream.
func (e *XOREncoder) Append(v float64) {
	vb := math.Float64bits(v)
	x := vb ^ e.prev
	if x == 0 && e.n > 0 { // a repeat: one 0 bit (unused bits are zero already)
		if len(e.b) == 0 {
			e.n++ // still constant: no bytes yet
			return
		}
		if e.free == 0 {
			e.b = append(e.b, 0)
			e.free = 8
		}
		e.free--
		e.n++
		return
	}
	if e.n == 0 {
		e.prev, e.leading, e.n = vb, noWindow, 1
		return
	}
	b, free := e.b, uint(e.free)
	if len(b) == 0 {
		b, free = e.appendConstant(b)
	}
	b, free = e.appendXOR(b, free, x)
	e.b, e.free, e.prev = b, uint8(free), vb
	e.n++
}

// appendXOR appends x, the non-zero XOR of a value with the previous one.
func (e *XOREncoder) appendXOR(b []byte, free uint, x uint64) ([]byte, uint) {
	lead := uint8(bits.LeadingZeros64(x))
	trail := uint8(bits.TrailingZeros64(x))
	if lead > maxLeading {
		lead = maxLeading
	}
	sig := 64 - uint(lead) - uint(trail)
	if e.leading != noWindow && lead >= e.leading && trail >= e.trailing {
		// The value fits the current window. Reuse it unless a new, tighter
		// window is cheaper for this value (an encoder-only choice: the
		// decoder follows whatever control bits it reads).
		wsig := 64 - uint(e.leading) - uint(e.trailing)
		if reuseOH+wsig <= newWindowOH+sig {
			if wsig <= 64-reuseOH { // control bits and value in one write
				return appendBits(b, free, 0b10<<wsig|x>>e.trailing, reuseOH+wsig)
			}
			b, free = appendBits(b, free, 0b10, reuseOH)
			return appendBits(b, free, x>>e.trailing, wsig)
		}
	}
	e.leading, e.trailing = lead, trail
	// '11', 5 bits leading, 6 bits significant count (64 stored as 0).
	ctl := 0b11<<11 | uint64(lead)<<6 | uint64(sig&63)
	if sig <= 64-newWindowOH {
		return appendBits(b, free, ctl<<sig|x>>trail, newWindowOH+sig)
	}
	b, free = appendBits(b, free, ctl, newWindowOH)
	return appendBits(b, free, x>>trail, sig)
}

// Bytes returns the encoded stream; it aliases internal storage and its last
// byte may change on the next Append. A stream that is still constant is
// written into a new slice on each call.
func (e *XOREncoder) Bytes() []byte {
	if len(e.b) == 0 && e.n > 0 {
		b, _ := e.appendConstant(nil)
		return b
	}
	return e.b
}

// Constant returns the value of a stream whose values all repeat the first
// one, held without bytes so far; ok is false once another value was
// appended, and for an empty stream.
func (e *XOREncoder) Constant() (v float64, ok bool) {
	if e.n == 0 || len(e.b) > 0 {
		return 0, false
	}
	return math.Float64frombits(e.prev), true
}

// appendConstant appends the stream of a constant encoder to b (empty): the
// first value and a zero bit per repeat.
func (e *XOREncoder) appendConstant(b []byte) ([]byte, uint) {
	repeats := uint(e.n - 1)
	b = slices.Grow(b, 16+int(repeats+7)/8)
	b, _ = appendBits(b, 0, e.prev, 64)
	b = append(b, make([]byte, (repeats+7)/8)...)
	return b, (8 - repeats%8) % 8
}

// Count returns the number of appended values.
func (e *XOREncoder) Count() int { return int(e.n) }

// Reset empties the encoder, keeping the capacity of its buffer.
func (e *XOREncoder) Reset() {
	e.b, e.free = e.b[:0], 0
	e.n, e.prev, e.leading, e.trailing = 0, 0, noWindow, 0
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
func (e *XOREncoder) appendXORValue(b []byte, free uint, x uint64) ([]byte, uint) {
	if x == 0 {
		return appendBit(b, free, 0)
	}
	return e.appendXOR(b, free, x)
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
