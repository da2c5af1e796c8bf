// Package record encodes and decodes the records written to tandem's
// write-ahead log.
//
// One record holds one committed write request (a Commit): the series first
// created by that write, its float samples, any metric metadata, exemplars,
// native histogram samples and start timestamps. The WAL
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
//	record   := type series samples metadata [exemplars [histograms [starts]]]
//	            (no trailing bytes)
//	type     := 1 byte: 0x01 TypeCommit, 0x02 TypeCommitExemplars (with an
//	            exemplars section), 0x03 TypeCommitCompact and 0x04
//	            TypeCommitCompactExemplars (the same with the compact samples
//	            section, what Encode writes without histograms; 0x01 and 0x02
//	            are still decoded, as WAL segments written before hold them),
//	            0x05 TypeCommitHistograms (compact samples, then an exemplars
//	            section whose count may be 0 and a histograms section: what
//	            Encode writes when there are histograms, so a commit without
//	            them has the bytes it had before histograms existed),
//	            0x06 TypeCommitStarts (compact samples, exemplars and
//	            histograms sections whose counts may be 0, then a starts
//	            section: what Encode writes when there are start
//	            timestamps, so a commit without them keeps its bytes). An
//	            unknown type is a decode error.
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
//	compact samples (types 0x03 to 0x05) := uvarint count, then count times:
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
//	exemplars := uvarint count (at least 1 in types 0x02 and 0x04), then
//	            count times: uvarint ref, varint t, 8 bytes value,
//	            uvarint nlabels, then nlabels times: str name, str value
//
//	histograms (types 0x05, 0x06) := uvarint count (at least 1 in type
//	            0x05, may be 0 in 0x06), then count times:
//	              varint (ref - previous ref), varint (t - previous t)
//	                (the previous histogram's; 0 before the first),
//	              uvarint header, bits:
//	                0: float histogram (FH); else integer (H)
//	                1: a zero threshold follows; set exactly when its bit
//	                   pattern is not 0 (so -0 is stored)
//	                2: a custom values list follows
//	                3: the custom values are the record's last list (the
//	                   one the latest histogram with bit 2 stored; bits 2
//	                   and 3 exclusive; neither: no custom values)
//	                4-11: counter reset hint, as is (Prometheus uses 0-3)
//	                every other bit 0;
//	              varint schema (an int32),
//	              [f64 zero threshold]                    (if bit 1),
//	              int:   uvarint count, uvarint zero count, f64 sum,
//	              float: f64 count, f64 zero count, f64 sum,
//	              spans positive, spans negative,
//	              int:   buckets positive, buckets negative: each a uvarint
//	                     n and n varints, the deltas as Histogram holds them,
//	              float: each a uvarint n and n f64 absolute counts,
//	              [custom]                                (if bit 2)
//	            spans  := uvarint n, then n times: varint offset (an int32),
//	                      uvarint length (a uint32)
//	            custom := uvarint n (at least 1), then n f64 bounds; never
//	                      bit-identical to the record's last list (bit 3
//	                      is used instead), so a commit has one encoding
//	            "f64" is 8 bytes of IEEE-754 bits, little-endian: NaN sums
//	            (StaleNaN), -0 and infinities round-trip bit-exactly. A
//	            histogram's custom values are stored whatever its schema
//	            (a valid one has them only with schema -53); runs of the
//	            same bounds, as classic histograms converted to custom
//	            buckets give, are stored once and decoded into one shared
//	            array (custom values are immutable, as Prometheus treats
//	            them). Empty lists (spans, buckets, custom values) decode as
//	            nil; nil and empty encode alike. Decode allocates every
//	            histogram and its lists afresh, so the caller may keep them.
//
//	starts (type 0x06) := uvarint count (at least 1), then count times:
//	              varint (ref - previous ref), varint (t - previous t),
//	              varint (st - previous st)
//	                (the previous entry's; 0 before the first; deltas with
//	                two's-complement wrap-around, as in the samples)
//	            Each entry is the start timestamp st of the sample or
//	            histogram of series ref at t in this record, in the order
//	            Encode was given them; st is never 0 (a sample without a
//	            start timestamp has no entry), so a commit has one encoding.
//	            Decode does not check that a matching sample exists.
//
// Every count is checked against the bytes left in the record before any
// memory is allocated (a series needs at least 2 bytes, a label 2, a sample
// 10, a compact sample 3, a metadata entry 4, an exemplar 11, a histogram
// 18, a span 2, an integer bucket 1, a float bucket or custom value 8, a
// start 3), so
// decoding never allocates more than O(len(record)) memory, whatever the
// input.
package record
