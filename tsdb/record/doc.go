// Package record encodes and decodes the records written to tandem's
// write-ahead log.
//
// One record holds one committed write request (a Commit): the series first
// created by that write, its float samples and any metric metadata. The WAL
// stores each record as a single checksummed frame, so a record is recovered
// whole or not at all.
//
// # Byte layout
//
// All integers are varints as produced by encoding/binary: "uvarint" is an
// unsigned LEB128 varint, "varint" is a zig-zag signed varint. Both must be
// minimal (no overlong encodings), so every Commit has exactly one encoding.
// "str" is a uvarint byte length followed by that many bytes (UTF-8 is not
// enforced).
//
//	record   := type series samples metadata [exemplars]   (no trailing bytes)
//	type     := 1 byte: 0x01 TypeCommit, 0x02 TypeCommitExemplars (with an
//	            exemplars section), 0x03 TypeCommitCompact and 0x04
//	            TypeCommitCompactExemplars (the same with the compact samples
//	            section, what Encode writes; 0x01 and 0x02 are still decoded,
//	            as WAL segments written before hold them). An unknown type is
//	            a decode error.
//
//	series   := uvarint count, then count times:
//	              uvarint ref
//	              uvarint nlabels, then nlabels times: str name, str value
//	            Label names must be strictly increasing (sorted, unique), as
//	            labels.Labels guarantees on encode.
//
//	samples  := uvarint count, then, if count > 0:
//	              first:  uvarint ref0, varint t0, 8 bytes value
//	              others: varint (ref - ref0), varint (t - t0), 8 bytes value
//	            Deltas are computed with two's-complement wrap-around, so any
//	            uint64 ref and int64 timestamp round-trips. A value is the
//	            IEEE-754 bit pattern (math.Float64bits) in little-endian byte
//	            order, so NaN payloads and signed zeros are preserved exactly.
//
//	compact samples (types 0x03, 0x04) := uvarint count, then count times:
//	              varint (ref - previous ref), varint (t - previous t)
//	                (the previous sample's; 0 before the first),
//	              uvarint value header h:
//	                h odd: the value is the integer m whose zig-zag form is
//	                  h >> 1; |m| < 2^53, so float64(m) is exact;
//	                h = 0: 8 bytes of IEEE-754 bits follow, little-endian;
//	                  never a value the odd form holds (an integer of
//	                  magnitude below 2^53 other than -0), so a commit has
//	                  one encoding; other even h are malformed.
//	            Counters, memory and byte gauges and constants are integers,
//	            and a request's samples come group by group: the benchmark's
//	            node_exporter-like samples take 4.3 bytes each, 11.3 in the
//	            previous encoding (its WAL 65 MB instead of 170).
//
//	metadata := uvarint count, then count times:
//	              str metric, str type, str help, str unit
//
// Every count is checked against the bytes left in the record before any
// memory is allocated (a series needs at least 2 bytes, a label 2, a sample
// 10, a compact sample 3 and a metadata entry 4), so decoding never allocates more than
// O(len(record)) memory, whatever the input.
package record
