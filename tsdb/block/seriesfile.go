package block

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// seriesFileWriter writes the layout the exemplars and starts files share:
// an 8-byte header (magic, format version), one record per series (uvarint
// body length, body, CRC-32C of the body) and a 28-byte TOC (end of the
// records, series count, item count, CRC-32C of those 24 bytes). The file
// is created with its first record: a file without records is never made.
type seriesFileWriter struct {
	path  string
	magic uint32
	f     *countingWriter
	n     uint64 // records written
	head  []byte
	crc   [4]byte
}

const (
	seriesFileHeaderLen = 8
	seriesFileTOCLen    = 28
)

// add writes one series' record.
func (w *seriesFileWriter) add(body []byte) error {
	if w.f == nil {
		f, err := createFile(w.path)
		if err != nil {
			return err
		}
		w.f = f
		var hdr [seriesFileHeaderLen]byte
		binary.BigEndian.PutUint32(hdr[:], w.magic)
		hdr[4] = FormatVersion
		if _, err := w.f.Write(hdr[:]); err != nil {
			return fmt.Errorf("%s: %w", w.path, err)
		}
	}
	w.head = binary.AppendUvarint(w.head[:0], uint64(len(body)))
	binary.BigEndian.PutUint32(w.crc[:], crc32.Checksum(body, castagnoli))
	for _, b := range [][]byte{w.head, body, w.crc[:]} {
		if _, err := w.f.Write(b); err != nil {
			return fmt.Errorf("%s: %w", w.path, err)
		}
	}
	w.n++
	return nil
}

// finish writes the TOC with items counted and syncs and closes the file;
// nothing when no record was written.
func (w *seriesFileWriter) finish(items uint64) error {
	if w.f == nil {
		return nil
	}
	var toc [seriesFileTOCLen]byte
	binary.BigEndian.PutUint64(toc[0:], w.f.off)
	binary.BigEndian.PutUint64(toc[8:], w.n)
	binary.BigEndian.PutUint64(toc[16:], items)
	binary.BigEndian.PutUint32(toc[24:], crc32.Checksum(toc[:24], castagnoli))
	if _, err := w.f.Write(toc[:]); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	err := w.f.finish()
	w.f = nil // closed by finish
	if err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	return nil
}

// abort closes a file left unfinished by an error.
func (w *seriesFileWriter) abort() {
	if w.f != nil {
		w.f.f.Close()
		w.f = nil
	}
}
