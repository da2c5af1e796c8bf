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
//	record   := type series samples metadata        (no trailing bytes)
//	type     := 1 byte; TypeCommit (0x01) is the only kind defined so far.
//	            Later kinds (tombstones, exemplars, histograms, a v2 commit)
//	            get new type bytes; an unknown type is a decode error.
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
//	metadata := uvarint count, then count times:
//	              str metric, str type, str help, str unit
//
// Every count is checked against the bytes left in the record before any
// memory is allocated (a series needs at least 2 bytes, a label 2, a sample
// 10 and a metadata entry 4), so decoding never allocates more than
// O(len(record)) memory, whatever the input.
package record
