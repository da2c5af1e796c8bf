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
// structure after the labels otherwise. A reference a little older than the
// newest (series created concurrently take their references in one order
// and reach the index in another) is inserted into one of the list's last two
// blocks of skipEvery references; one older than that (a WAL replay, whose checkpoint
// lists series group by group) waits in a small unsorted buffer that is
// merged in once it holds a sixteenth of the list, or when the index
// settles, so building a list in any order costs O(n log n), not O(n²).
//
// Every skipEvery-th reference of data has a skip entry, so that filter can
// seek in a long list (a metric name's) instead of decoding all of it.
type postingList struct {
	data    []byte
	last    uint64 // the largest reference in data; 0 when empty (references start at 1)
	n       int    // references in data and pending
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

// appendData appends ref, larger than p.last, to data, which holds inData
// references.
func (p *postingList) appendData(ref uint64, inData int) {
	if inData > 0 && inData%skipEvery == 0 {
		p.skips = append(p.skips, postingSkip{off: uint32(len(p.data)), base: p.last})
	}
	p.data = binary.AppendUvarint(p.data, ref-p.last)
	p.last = ref
}

// add inserts ref, which the list does not hold. It reports whether ref
// made the pending buffer non-empty (the index then settles the list later).
func (p *postingList) add(ref uint64) bool {
	if ref > p.last {
		p.appendData(ref, p.n-len(p.pending))
		p.n++
		return false
	}
	if p.insertTail(ref) {
		return false
	}
	p.n++
	p.pending = append(p.pending, ref)
	if len(p.pending) > max(32, p.n/16) {
		p.set(p.appendTo(nil))
		return false
	}
	return len(p.pending) == 1
}

// insertTail inserts ref, smaller than p.last, into one of the last two
// blocks of data when it falls there, re-encoding data from that block on
// (at most 2·skipEvery references). Two, because a late reference may
// belong before a block boundary that a newer one crossed.
func (p *postingList) insertTail(ref uint64) bool {
	k := len(p.skips)
	j := k // the block ref falls in: block j > 0 starts at p.skips[j-1]
	for j > 0 && p.skips[j-1].base >= ref {
		if j--; j < k-1 {
			return false
		}
	}
	off, base := 0, uint64(0)
	if j > 0 {
		off, base = int(p.skips[j-1].off), p.skips[j-1].base
	}
	var buf [2*skipEvery + 1]uint64
	refs, cur := buf[:0], base
	for i := off; i < len(p.data); {
		gap, n := binary.Uvarint(p.data[i:])
		if n <= 0 || len(refs) == 2*skipEvery {
			return false // cannot happen: written only by appendData
		}
		i, cur = i+n, cur+gap
		refs = append(refs, cur)
	}
	at, found := slices.BinarySearch(refs, ref)
	if found {
		return true // held already: nothing to insert
	}
	refs = slices.Insert(refs, at, ref)
	p.skips = p.skips[:max(j-1, 0)] // appendData writes the entries again
	p.data, p.last = p.data[:off], base
	for i, r := range refs {
		p.appendData(r, j*skipEvery+i)
	}
	p.n++
	return true
}

// settle merges the pending buffer into data.
func (p *postingList) settle() {
	if len(p.pending) > 0 {
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
	*p = postingList{data: make([]byte, 0, len(refs)+len(refs)/4)}
	if len(refs) > skipEvery {
		p.skips = make([]postingSkip, 0, len(refs)/skipEvery)
	}
	for i, r := range refs {
		p.appendData(r, i)
	}
	p.n = len(refs)
}

// filter keeps, in place, the references of refs (sorted, distinct) that p
// holds. It walks p by its skip entries and decodes only the blocks of
// skipEvery references that some element of refs falls into: one target's
// references against a metric's list decode a block or two of it.
func (p *postingList) filter(refs []uint64) []uint64 {
	if len(p.pending) > 0 { // rare: until the index settles after a replay
		late := slices.Sorted(slices.Values(p.pending))
		late = sorted.Intersect(late[:0], late, refs)
		return sorted.Merge(make([]uint64, 0, len(refs)), p.filterData(refs), late)
	}
	return p.filterData(refs)
}

// filterData is filter of the references in data.
func (p *postingList) filterData(refs []uint64) []uint64 {
	out := refs[:0]
	// Block b starts at p.skips[b-1], block 0 at the start of data.
	start := func(b int) (int, uint64) {
		if b == 0 {
			return 0, 0
		}
		return int(p.skips[b-1].off), p.skips[b-1].base
	}
	j, b := 0, 0
	for b <= len(p.skips) && j < len(refs) && refs[j] <= p.last {
		end, endOff := p.last, len(p.data) // the block's last reference, and where it ends
		if b < len(p.skips) {
			end, endOff = p.skips[b].base, int(p.skips[b].off)
		}
		if refs[j] > end { // to the block refs[j] would be in: after the last skip below it
			next := b
			b = next + 1 + sort.Search(len(p.skips)-next, func(k int) bool { return p.skips[next+k].base >= refs[j] }) - 1
			continue
		}
		for i, cur := start(b); i < endOff && j < len(refs) && refs[j] <= end; {
			gap, n := binary.Uvarint(p.data[i:])
			i, cur = i+n, cur+gap
			for j < len(refs) && refs[j] < cur {
				j++
			}
			if j < len(refs) && refs[j] == cur {
				out = append(out, cur)
				j++
			}
		}
		for j < len(refs) && refs[j] <= end { // in the block, not in the list
			j++
		}
		b++
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
