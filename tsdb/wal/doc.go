// Package wal implements tandem's segmented write-ahead log.
//
// The log is a directory of segment files named by their zero-padded, 8-digit
// decimal sequence number ("00000000", "00000001", ...). Other files in the
// directory are ignored. Each segment holds a sequence of frames, one per
// record; a record never spans segments. A segment is closed (and fsynced)
// once the next frame would take it past Options.SegmentSize; a record larger
// than SegmentSize is written to an otherwise empty segment of its own.
// Segments are only ever appended to by the process that created them: after
// a restart, writing always starts in a new segment.
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
// # Recovery
//
// Replay reads every segment in order. A frame is bad when fewer than 8
// header bytes remain, when its length runs past the end of the file, or when
// its checksum does not match. In the last segment, a bad frame is treated as
// a torn write: the file is truncated to the end of the last good frame and
// replay succeeds. Anywhere else a bad frame is reported as a
// *CorruptionError.
//
// # Durability
//
// Log hands each frame to the kernel with a single write(2) before returning,
// so a logged record survives the process being killed. With
// Options.SyncInterval zero, Log also fsyncs (concurrent writers share one
// fsync); otherwise a background goroutine fsyncs every SyncInterval, which
// bounds the loss on power failure or kernel crash.
package wal
