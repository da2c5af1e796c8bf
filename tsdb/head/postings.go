package head

import (
	"encoding/binary"
	"slices"
)

// postingList is a sorted set of series references, stored as the uvarint
// gaps between them. References are handed out in increasing order, so
// lists grow at their end, and a gap takes one or two bytes where a
// reference takes eight: the head's postings are its largest per-series
// structure after the labels otherwise. References older than the newest
// (a WAL replay, whose checkpoint lists series group by group) wait in a
// small unsorted buffer that is merged in once it holds a sixteenth of the
// list, so building a list in any order costs O(n log n), not O(n²).
type postingList struct {
	data    []byte
	last    uint64   // the largest reference in data; 0 when empty (references start at 1)
	n       int      // references in data and pending
	pending []uint64 // older than last, not in data, distinct
}

// add inserts ref, which the list does not hold.
func (p *postingList) add(ref uint64) {
	p.n++
	if ref > p.last {
		p.data = binary.AppendUvarint(p.data, ref-p.last)
		p.last = ref
		return
	}
	p.pending = append(p.pending, ref)
	if len(p.pending) > max(32, p.n/16) {
		p.set(p.appendTo(nil))
	}
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
	if len(keep) < len(refs) || len(p.pending) > 0 {
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
	p.data, p.last, p.n, p.pending = data, prev, len(refs), nil
}

// appendTo appends the references, in order, to dst.
func (p *postingList) appendTo(dst []uint64) []uint64 {
	dst = slices.Grow(dst, p.n)
	start := len(dst)
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
	if len(p.pending) > 0 {
		dst = append(dst, p.pending...)
		slices.Sort(dst[start:])
		dst = slices.Compact(dst) // (a repeated add would be held twice)
	}
	return dst
}
