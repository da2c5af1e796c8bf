// Package wal implements tandem's segmented write-ahead log.
//
// The log is a directory of segment files named by their zero-padded, 8-digit
// decimal sequence number ("00000000", "00000001", ...). Other files in the
// directory are ignored, except checkpoint.N directories (written by the
// head, see tsdb/checkpoint.go): checkpoint.N replaces the segments below N,
// so next to it the log must start at or below N and reach N. Each segment
// holds a sequence of frames, one per record; a record never spans segments.
// A segment is closed (and fsynced) once the next frame would take it past
// Options.SegmentSize; a record larger than SegmentSize is written to an
// otherwise empty segment of its own. Segments are only ever appended to by
// the process that created them: after a restart, writing always starts in a
// new segment.
//
// # Frame layout
//
// Byte by byte, a frame at offset o of a segment is:
//
//	o+0 .. o+3   payload length n, uint32 little-endian
//	o+4 .. o+7   CRC-32C (Castagnoli) of bytes o+0..o+3 followed by the
//	             payload, uint32 little-endian
//	o+8 .. o+8+n-1  payload (the record, as given to Log)
//
// The next frame starts at o+8+n. There is no padding and no segment header.
// Because the checksum also covers the length field, a run of zero bytes
// (as a file system may leave after a crash) never parses as a valid frame.
//
// # Recovery from damage
//
// Replay reads every segment in order. A frame is bad when fewer than 8
// header bytes remain, when its length runs past the end of the file, or when
// its checksum does not match. From a bad frame the scanner searches for the
// next valid frame: first where the bad frame's own length points (only its
// payload was hit), then at every following byte offset. A frame found there
// is taken only if it is followed by another valid frame or ends the segment
// exactly, so a false match inside damaged bytes needs two CRC-32C collisions
// (a frame carried inside a record, as in a label value, is not taken either
// while its record's length is intact). The search's work is bounded: it
// checksums at most 16 bytes per byte of the segment, between 64 MiB and
// 1 GiB (under a second; Repair allows 64 times more).
//
// In the LAST segment the damaged bytes are dropped and replay goes on: a bad
// run with no valid frame after it (a torn write) is truncated; a bad run
// followed by valid frames is cut out by rewriting the segment (new file,
// fsynced, renamed over it), so the segment replays cleanly once it is no
// longer the last one. Each run is logged with its offset, its size and the
// records lost (1 when the damaged frame's length was intact, else unknown)
// and counted in tandem_wal_corruptions_total,
// tandem_wal_replay_dropped_bytes_total and
// tandem_wal_replay_dropped_records_total. If the search gave up, replay
// fails instead of dropping what it did not search.
//
// Damage in any other segment, or a missing segment (a gap in the numbers, or
// segments missing after the newest checkpoint), is a *CorruptionError:
// records before it were replayed, nothing was changed, and start-up stops,
// since those segments were fsynced and acknowledged. Repair (`tandem tsdb
// repair`) makes such a log readable: it rewrites each damaged segment
// without its damaged bytes (every valid frame is kept), puts an empty
// segment in place of each missing one, repairs the newest checkpoint's
// segments the same way, and reports per segment the bytes and records lost.
//
// # Durability
//
// Log hands each frame to the kernel with a single write(2) before returning,
// so a logged record survives the process being killed. With
// Options.SyncInterval zero, Log also fsyncs (concurrent writers share one
// fsync); otherwise a background goroutine fsyncs every SyncInterval, which
// bounds the loss on power failure or kernel crash.
//
// # Failed writes
//
// A write that fails (ENOSPC, EIO) fails its Log; the partial frame is
// truncated away and the next Log writes to the same segment. A failed fsync
// marks the segment as not to be trusted: the kernel may have dropped the
// pages it could not write, and a later fsync of the same file would not say
// so (fsyncs of a segment are serialised and a failure is final for it). The
// WAL keeps a copy of every byte written since the segment's last successful
// fsync (at most 4 MiB: a write fsyncs first past that; released at each
// segment rotation). The next Log, Sync,
// NextSegment or Close recovers: it writes that copy to a temporary file,
// fsyncs it, renames it into place as the next segment and continues there;
// the failed segment is cut back to what its last successful fsync covered
// (if that cut fails, its unsynced records are replayed twice, identically).
// Until a recovery succeeds nothing is left behind, so a full disk never
// fills the directory with empty segments. The same holds when the partial
// frame of a failed write cannot be truncated away. A record whose Log
// failed may still be replayed (it was written, and re-written on recovery);
// a record whose Log succeeded is re-written by the recovery (until then,
// after a failed fsync, it may exist only in the WAL's memory).
//
// Healthy returns the last failure until a write (with SyncInterval zero: an
// fsync) succeeds again; tandem_wal_failing is 1 meanwhile and
// tandem_wal_write_failures_total counts the failures. Recovery is logged
// once, when the WAL is writable again.
package wal
