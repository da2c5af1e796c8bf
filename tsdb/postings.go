package tsdb

import (
	"encoding/binary"
	"slices"
)

// postingList is a sorted set of series references, stored as the uvarint
// gaps between them. References are handed out in increasing order, so
// lists grow at their end, and a gap takes one or two bytes where a
// reference takes eight: the head's postings are its largest per-series
// structure after the labels otherwise.
type postingList struct {
	data []byte
	last uint64 // the largest reference; 0 when empty (references start at 1)
	n    int
}

// add inserts ref.
func (p *postingList) add(ref uint64) {
	if ref > p.last {
		p.data = binary.AppendUvarint(p.data, ref-p.last)
		p.last = ref
		p.n++
		return
	}
	// Older than the newest (WAL replay of an older series): rare.
	refs := p.appendTo(nil)
	i, found := slices.BinarySearch(refs, ref)
	if found {
		return
	}
	p.set(slices.Insert(refs, i, ref))
}

// removeIf removes the references drop reports.
func (p *postingList) removeIf(drop func(ref uint64) bool) {
	refs := p.appendTo(nil)
	keep := refs[:0]
	for _, r := range refs {
		if !drop(r) {
			keep = append(keep, r)
		}
	}
	if len(keep) < len(refs) {
		p.set(keep)
	}
}

// set replaces the list with refs (sorted, distinct).
func (p *postingList) set(refs []uint64) {
	data := make([]byte, 0, len(refs)+len(refs)/4)
	prev := uint64(0)
	for _, r := range refs {
		data = binary.AppendUvarint(data, r-prev)
		prev = r
	}
	p.data, p.last, p.n = data, prev, len(refs)
}

// appendTo appends the references, in order, to dst.
func (p *postingList) appendTo(dst []uint64) []uint64 {
	dst = slices.Grow(dst, p.n)
	ref := uint64(0)
	for i := 0; i < len(p.data); {
		gap, k := binary.Uvarint(p.data[i:])
		if k <= 0 {
			break // cannot happen: written only by add and set
		}
		i += k
		ref += gap
		dst = append(dst, ref)
	}
	return dst
}
