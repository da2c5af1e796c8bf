// Package encoding implements the column codecs of tandem's head chunks: a
// delta-of-delta codec for the shared int64 timestamp column (TSEncoder,
// TSDecoder) and a Gorilla XOR codec for float64 value columns (XOREncoder,
// XORDecoder).
//
// A column is a bit stream that is only ever appended to. Encoders expose the
// bytes written so far via Bytes; a copy of those bytes taken when Count()
// was c decodes correctly for any n <= c, even while the encoder keeps
// appending, because earlier bits never change. The number of values is not
// stored in the stream: the caller passes it to the decoder's Reset.
//
// # Bit stream
//
// Bits are written most significant bit first: the first bit of the stream is
// bit 7 (0x80) of byte 0, the ninth is bit 7 of byte 1, and so on. An n-bit
// field holding the unsigned integer v is written as the n bits of v from the
// most significant to the least significant. Unused low bits of the last byte
// are zero and carry no meaning; a decoder stops after the n values it was
// asked for and ignores whatever follows.
//
// A "varint" is an unsigned LEB128 integer as in encoding/binary.PutUvarint
// (7 bits per byte, least significant group first, high bit of each byte set
// on all but the last byte, at most 10 bytes), each byte written as an 8-bit
// field. A "signed varint" is the zig-zag mapping (x<<1) ^ (x>>63) of an int64
// x written as a varint, as in encoding/binary.PutVarint. In the timestamp
// codec both varints start at a byte boundary, so they are plain byte strings.
//
// # Timestamp column
//
// Let t0, t1, ... be the timestamps. All arithmetic is two's complement int64
// arithmetic that wraps on overflow, so any int64 sequence (decreasing,
// math.MinInt64, math.MaxInt64, ...) round-trips.
//
//	t0                 signed varint of t0
//	t1                 signed varint of d1 = t1 - t0
//	ti (i >= 2)        one bucket holding dod = di - d(i-1), where di = ti - t(i-1)
//
// Buckets (the field is dod in two's complement, sign-extended when read):
//
//	'0'                          dod == 0
//	'10'   + 14-bit field        -8192   <= dod < 8192
//	'110'  + 17-bit field        -65536  <= dod < 65536
//	'1110' + 20-bit field        -524288 <= dod < 524288
//	'1111' + 64-bit field        any other dod (the full 64 bits)
//
// The encoder always picks the first bucket that fits, but a decoder accepts
// any bucket whose field holds the value. A regular interval costs one bit per
// timestamp after the second.
//
// Decoding: t0 = varint; d = varint, t1 = t0 + d; then for each further
// timestamp read a bucket, d += dod, t += d.
//
// # Value column
//
// Let b0, b1, ... be the IEEE 754 bit patterns (math.Float64bits) of the
// values. The decoder keeps a "window" (leading, trailing) of zero counts,
// initially unset.
//
//	v0                 64-bit field b0
//	vi (i >= 1)        x = bi ^ b(i-1), then one of:
//	  '0'                           x == 0 (value repeats)
//	  '10' + field of m bits        reuse the window: m = 64 - leading - trailing,
//	                                x = field << trailing
//	  '11' + 5-bit L + 6-bit S      set a new window: leading = L, m = S (S == 0
//	       + field of m bits        means m = 64), trailing = 64 - L - m;
//	                                x = field << trailing
//
// It is malformed for '10' to appear before any window is set or for L + m to
// exceed 64. The encoder caps L at 31 (larger leading-zero counts are stored as
// 31 with the extra zeros counted in the field), reuses the window when x has
// at least as many leading and trailing zeros as the window unless a new
// window would encode this value in fewer bits, and otherwise sets a new
// window with L = min(leading zeros of x, 31) and trailing = trailing zeros of
// x. Decoders do not depend on these choices.
//
// # Errors
//
// Decoders never panic and never allocate except to build an error. If the
// data ends before n values are decoded, Next returns false and Err wraps
// ErrTruncated; an impossible encoding (a varint longer than 10 bytes or
// overflowing 64 bits, or a bad value window as described above) wraps
// ErrMalformed.
package encoding
