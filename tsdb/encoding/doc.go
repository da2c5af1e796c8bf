// Package encoding implements the column codecs of tandem's chunks: a
// delta-of-delta codec for the shared int64 timestamp column (TSEncoder,
// TSDecoder), a Gorilla XOR codec for float64 value columns (XOREncoder,
// XORDecoder), both appendable and used by the head, and a decimal codec for
// value columns whose values are exactly m/10^k for integers m
// (AppendDecimal, AppendDecimalRice, DecimalDecoder), written whole when a
// chunk is sealed or a block is written.
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
// # Decimal column
//
// Values v[i] = float64(m[i]) / 10^k for int64 mantissas m with |m| < 2^53
// (DecimalScale finds the smallest such k, bit-exact: -0, NaN and ±Inf never
// qualify). A decimal column is one bit stream, written whole, in the bit
// order above:
//
//	k          8-bit field, 0..15
//	order      8-bit field: low bits 0 (the mantissas themselves), 1 (their
//	           deltas) or 2 (their delta-of-deltas); bit 7 (0x80) stepped;
//	           bit 6 (0x40) Rice-coded (AppendDecimalRice only)
//	m[0]       signed varint, when order >= 1 and count > 0
//	m[1]-m[0]  signed varint, when order == 2 and count > 1
//	base       signed varint (Rice-coded: the center of the residuals)
//	step       varint >= 2, when stepped (else step = 1)
//	width      8-bit field: 0..64 (Rice-coded: the parameter p, 0..63)
//	residuals  count - order of them (order 0: count), one per value from
//	           index order on, each either
//	  fixed width: a width-bit unsigned field f; residual = base + f*step
//	  Rice-coded:  q one bits, a zero bit and the p low bits of z, where
//	               q = z >> p; or, when q >= 24, 24 one bits and the 64 bits
//	               of z; z is the zig-zag form of d and residual = base + d*step
//
// Arithmetic wraps as for timestamps. A residual of order 1 is m[i]-m[i-1],
// of order 2 (m[i]-m[i-1]) - (m[i-1]-m[i-2]). The encoder picks the order
// with the fewest bits, a step when every residual is base plus a multiple of
// it, and Rice coding when that is smaller (noisy values around a level),
// centred on the median with p near log2 of the mean zig-zagged distance;
// decoders do not depend on these choices. A k above 15, an order above 2, a
// step below 2 when stepped or a width above 64 (63 Rice-coded) is malformed.
//
// # Errors
//
// Decoders never panic and never allocate except to build an error. If the
// data ends before n values are decoded, Next returns false and Err wraps
// ErrTruncated; an impossible encoding (a varint longer than 10 bytes or
// overflowing 64 bits, or a bad value window as described above) wraps
// ErrMalformed.
package encoding
