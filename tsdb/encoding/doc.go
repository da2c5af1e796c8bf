// Package encoding implements the column codecs of tandem's chunks: a
// delta-of-delta codec for the shared int64 timestamp column (TSEncoder,
// TSDecoder), a Gorilla XOR codec for float64 value columns (XOREncoder,
// XORDecoder), both appendable and used by the head, and a decimal codec for
// value columns whose values are exactly m/10^k for integers m
// (AppendDecimal, AppendDecimalRice, DecimalDecoder), written whole when a
// chunk is sealed or a block is written, and an appendable codec for columns
// of integer native histograms (HistogramEncoder, HistogramDecoder) that share
// the group's timestamp column.
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
//	           bit 6 (0x40) Rice-coded (AppendDecimalRice only);
//	           bit 5 (0x20) patched (AppendDecimalRicePatched only)
//	m[0]       signed varint, when order >= 1 and count > 0
//	m[1]-m[0]  signed varint, when order == 2 and count > 1
//	base       signed varint (Rice-coded: the center of the residuals)
//	step       varint >= 2, when stepped (else step = 1)
//	width      8-bit field: 0..64 (Rice-coded: the parameter p, 0..63)
//	patches    when patched: c, an unsigned varint (1..count); w, an 8-bit
//	           field (0..32); then c times a w-bit index i (ascending,
//	           below count) and a 64-bit field, the bits of value i, which
//	           the decoder returns instead of m[i]/10^k (m[i] is a stand-in:
//	           the value rounded at scale k, else the mantissa before it)
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
// step below 2 when stepped or a width above 64 (63 Rice-coded) is malformed,
// and so are patches out of order, at or past count, or more than count.
//
// Patched streams (DecimalScalePatched) hold columns of which a few values
// are not decimals at the scale of the others: float artifacts of an
// exporter's arithmetic (186.79500000000002 among values of two decimals)
// and staleness markers, which otherwise send the whole column to XOR.
//
// # Histogram column
//
// A histogram column holds n *histogram.Histogram values, one per row; the
// timestamps are the group's. Two codes are used besides those above:
//
//	gamma(v)     v >= 0 of bit length L (0..64): L one bits and a zero bit (no
//	             zero when L == 64), then the L-1 bits of v below its top bit;
//	             L == 0 means v == 0 and L == 1 means v == 1
//	rice(z, k)   q = z >> k; when q < 24: q one bits, a zero bit and the k low
//	             bits of z; otherwise 24 one bits and the 64-bit field z
//
// zigzag(x) is (x<<1) ^ (x>>63) on int64 and unzigzag its inverse. The decoder
// keeps, from row to row: the layout (schema, zero threshold bits, positive
// and negative spans, custom values), the counts c[0..m-1] of the last row
// (m = P+N+1 slots: the P positive buckets in span order, the N negative
// buckets, then the zero count; each an int64, bucket counts absolute), the
// last Count, z_n of the last row, the hint, the parameter K and the sum's
// XOR window. Initially everything is zero or empty and no window is set.
// Arithmetic on counts wraps as int64/uint64 arithmetic.
//
//	row        header [layout] [hint] [K] countdelta residuals sum
//	header     '0' (no flags) | '1' + 4-bit flags F, F != 0:
//	           8 layout follows, 4 hint follows, 2 K follows, 1 absolute
//	layout     schemazt spans(positive) spans(negative) custom
//	schemazt   '0' (schema and zero threshold unchanged) |
//	           '1' + gamma(zigzag(schema)) + 64-bit zero threshold bits
//	spans      gamma(count) then per span gamma(zigzag(offset)) gamma(length)
//	custom     '0' (custom values unchanged) | '1' + gamma(count) + count 64-bit fields
//	hint       2-bit CounterResetHint
//	K          5-bit field
//	countdelta rice(z_n, clamp(bitlen(z_n of the last row) - 1, 0, 31));
//	           delta = unzigzag(z_n), Count = base + delta
//	residuals  one rice(z_j, k_j) per slot j = 0..m-1, where
//	           k_j = clamp(bitlen(λ_j)/2 + K - 8, 0, 31) and
//	           c_j = p_j + λ_j - unzigzag(z_j). Slots are read in order, and
//	           a slot with k_j == 0 followed by one with k_(j+1) == 0 is read
//	           as a pair: '0' (both z are 0) | '1' + rice(z_j, 0) +
//	           rice(y, 0), where z_(j+1) = y+1 if z_j == 0, else y
//	sum        row 0: 64-bit field; later rows: as a value column's vi
//	           (with its own window) against the last row's sum bits
//
// Row 0 must carry a layout with schemazt '1'. A row is "absolute" when it is
// row 0 or flag 1 is set; then base = 0 and every prediction p_j is 0.
// Otherwise base is the last Count and the predictions are: without a layout,
// the last row's counts; with a layout, for the zero count slot the last zero
// count, and for the buckets the last row's buckets remapped: if the schema
// is unchanged shift = 0; else if it decreased from old <= 8 to new >= -4,
// shift = old - new; else every bucket prediction is 0. Bucket indices come
// from spans as in Prometheus (the first offset is the first index, each later
// one the gap after the previous span; int64 arithmetic). Walking the last
// row's buckets (index i, count c) in order with r(i) = ((i-1) >> shift) + 1,
// for each new bucket in order with index t: skip last-row buckets while
// r(i) < t, then p = the sum of the counts of the following ones while
// r(i) == t (positive and negative buckets separately). The predicted
// increments λ_j: T = the uint64 sum of the p_j > 0; if int64(delta) <= 0 or
// T == 0 every λ_j is 0; else λ_j = floor(delta * p_j / T) computed in 128
// bits for p_j > 0 whose 128-bit product has its high 64 bits below T, and 0
// for the others.
//
// The histogram's PositiveBuckets are c_0, c_1-c_0, ... over the positive
// slots (NegativeBuckets likewise), ZeroCount is the zero count slot, and
// spans, schema, zero threshold, hint and custom values are as stored (the
// decoder hands out one shared copy of each distinct set of custom values).
//
// The encoder writes a layout exactly when the schema, the zero threshold's
// bits, the spans or the custom values' bits differ from the last row's;
// sets "absolute" when the residuals against zero are smaller than against
// the predictions (a counter reset); and picks K among nearby values for the
// fewest bits. Decoders do not depend on these choices. A flag field of 0, a
// row 0 without layout or with schemazt '0', a schema or span offset outside
// int32, a span length above uint32 or a bad sum window is malformed; more
// spans than half the remaining bits, more buckets than remaining bits or
// more custom values than a 64th of them is truncated.
//
// # Float histogram column
//
// A float histogram column (*histogram.FloatHistogram) uses the rows of a
// histogram column with the same header (only flags 8 and 4 are allowed),
// layout and hint, and then, instead of countdelta, residuals and sum:
//
//	count      xor(Count, window m)
//	value{m}   xor(v_j, window j) for the m slots (positive buckets, negative
//	           buckets, zero count), v_j's bits XOR p_j's bits
//	sum        xor(Sum, window m+1)
//
// xor(·, window w) is a value column's vi ('0', '10' + field, or '11' +
// 5-bit L + 6-bit S + field) of the XOR of the value's bits with its
// prediction, using and updating window w; all m+2 windows are unset after
// every layout. Count and sum are predicted by the last row's (0 in row 0).
// p_j is the last row's value of the slot without a layout, and with one the
// remapped sum of float counts (float64 addition in walk order) or the last
// zero count as for integer histograms (0 in row 0); there is no absolute flag.
//
// # Errors
//
// Decoders never panic and never allocate except to build an error (the
// histogram decoder also grows its buffers to the largest layout it has seen,
// keeping them across Reset, copies each distinct set of custom values once
// and fills the histogram passed to At). If the
// data ends before n values are decoded, Next returns false and Err wraps
// ErrTruncated; an impossible encoding (a varint longer than 10 bytes or
// overflowing 64 bits, or a bad value window as described above) wraps
// ErrMalformed.
package encoding
