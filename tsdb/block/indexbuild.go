package block

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// postingsBuilder collects one posting list while the index is written,
// already in the encoding of the postings section (a run of consecutive ids,
// every series of a metric name, as its count and first id; any other list
// as its count and the gaps between its ids, the first from 0), so a million
// series cost about a byte an id instead of four: ids come in ascending
// order, and while they are a run nothing but the run's ends is kept.
type postingsBuilder struct {
	n, first, last uint32
	deltas         []byte // uvarint gaps after the first id; nil while the ids are a run
}

// add appends id, larger than every id added before.
func (p *postingsBuilder) add(id uint32) {
	switch {
	case p.n == 0:
		p.first = id
	case p.deltas == nil && id == p.last+1:
	default:
		if p.deltas == nil {
			// The run ends: its gaps are ones.
			p.deltas = make([]byte, p.n-1, p.n+15)
			for i := range p.deltas {
				p.deltas[i] = 1
			}
		}
		p.deltas = binary.AppendUvarint(p.deltas, uint64(id-p.last))
	}
	p.last = id
	p.n++
}

// appendTo appends the encoded list to dst.
func (p *postingsBuilder) appendTo(dst []byte) []byte {
	n := uint64(p.n)
	if n > 1 && uint64(p.last-p.first) == n-1 {
		return binary.AppendUvarint(binary.AppendUvarint(dst, n<<1|1), uint64(p.first))
	}
	dst = binary.AppendUvarint(dst, n<<1)
	if n == 0 {
		return dst
	}
	dst = binary.AppendUvarint(dst, uint64(p.first))
	return append(dst, p.deltas...)
}

// sectionWriter writes the index's sections to its file one after the
// other, each as its length, its parts and their checksum, and keeps the
// table of contents: a section is written as soon as it is built and its
// buffers are reused for the next.
type sectionWriter struct {
	f   *countingWriter
	toc []byte
	err error
}

// write writes section sec, made of parts.
func (w *sectionWriter) write(sec int, parts ...[]byte) {
	if w.err != nil {
		return
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if uint64(n) > 1<<32-1 {
		w.err = fmt.Errorf("%s section of %d bytes exceeds 4 GiB", sectionNames[sec], n)
		return
	}
	w.toc = binary.BigEndian.AppendUint64(w.toc, w.f.off)
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	w.out(b[:])
	var crc uint32
	for _, p := range parts {
		crc = crc32.Update(crc, castagnoli, p)
		w.out(p)
	}
	binary.BigEndian.PutUint32(b[:], crc)
	w.out(b[:])
}

func (w *sectionWriter) out(p []byte) {
	if w.err == nil {
		_, w.err = w.f.Write(p)
	}
}
