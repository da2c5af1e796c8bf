package head

import (
	"encoding/binary"
	"slices"
	"sort"

	"github.com/tandem-tsdb/tandem/tsdb/internal/sorted"
)

// postingList is a sorted set of series references, stored as the uvarint
// gaps between them. References are handed out in increasing order, so
// lists grow at their end, and a gap takes one or two bytes where a
// reference takes eight: the head's postings are its largest per-series
// structure after the labels otherwise. References older than the newest
// (a WAL replay, whose checkpoint lists series group by group) wait in a
// small unsorted buffer that is merged in once it holds a sixteenth of the
// list, so building a list in any order costs O(n log n), not O(n²).
//
// Every skipEvery-th reference of data has a skip entry, so that filter can
// seek in a long list (a metric name's) instead of decoding all of it.
type postingList struct {
	data    []byte
	last    uint64   // the largest reference in data; 0 when empty (references start at 1)
	n       int      // references in data and pending
	dn      int      // references in data
	skips   []postingSkip
	pending []uint64 // older than last, not in data, distinct
}

// skipEvery is how many references of a list one skip entry spans.
const skipEvery = 64

// postingSkip locates a reference in data: it starts at off, and its gap
// is counted from base (the reference before it).
type postingSkip struct {
	off  uint32
	base uint64
}

// appendData appends ref, larger than p.last, to data.
func (p *postingList) appendData(ref uint64) {
	if p.dn%skipEvery == 0 {
		p.skips = append(p.skips, postingSkip{off: uint32(len(p.data)), base: p.last})
	}
	p.data = binary.AppendUvarint(p.data, ref-p.last)
	p.last = ref
	p.dn++
}

// add inserts ref, which the list does not hold.
func (p *postingList) add(ref uint64) {
	p.n++
	if ref > p.last {
		p.appendData(ref)
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
	*p = postingList{data: make([]byte, 0, len(refs)+len(refs)/4), skips: make([]postingSkip, 0, len(refs)/skipEvery+1)}
	for _, r := range refs {
		p.appendData(r)
	}
	p.n = len(refs)
}

// filter keeps, in place, the references of refs (sorted, distinct) that p
// holds. It seeks through p with its skip entries: a short refs against a
// long list decodes a few references of the list per element of refs.
func (p *postingList) filter(refs []uint64) []uint64 {
	if len(p.pending) > 0 { // rare: a replay in progress
		return sorted.Intersect(refs[:0], refs, p.appendTo(nil))
	}
	out := refs[:0]
	i, cur, si := 0, uint64(0), 0 // position in data, the reference before it, the skip at or before it
	for _, r := range refs {
		if r > p.last {
			break
		}
		// The last skip before r, if it is ahead of the position.
		if k := si + sort.Search(len(p.skips)-si, func(k int) bool { return p.skips[si+k].base >= r }) - 1; k >= si && int(p.skips[k].off) > i {
			si, i, cur = k, int(p.skips[k].off), p.skips[k].base
		}
		for i < len(p.data) {
			gap, n := binary.Uvarint(p.data[i:])
			v := cur + gap
			if v > r {
				break
			}
			i, cur = i+n, v
			if v == r {
				out = append(out, r)
				break
			}
		}
	}
	return out
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
