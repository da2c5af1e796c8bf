package block

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/internal/sorted"
)

// plist is one posting list of the index: n ids at postings offset off; in a
// dense selection, the run of ids first..first+n-1.
type plist struct {
	off   uint32
	n     int
	first uint32
}

// selection is the posting lists of the values one matcher picks: those it
// matches when it does not match "" (its series are their union), else those
// it does not match (its series are all the others).
type selection struct {
	lists []plist
	size  int  // ids in all the lists
	dense bool // lists of the block's leading label name: runs, sorted by first
}

// postingsScratch holds the buffers one Postings call reuses.
type postingsScratch struct {
	ids   []uint32   // decoded lists, one after the other
	ends  []int      // where each list ends in ids
	parts [][]uint32 // the lists in ids
	union []uint32   // their union
}

// allPostings returns 0..NumSeries-1.
func (b *Block) allPostings() []uint32 {
	p := make([]uint32, b.nseries)
	for i := range p {
		p[i] = uint32(i)
	}
	return p
}

// Postings returns the sorted ids of the series matching all matchers, with
// Prometheus semantics (a missing label matches as ""); no matchers select every series.
//
// Like Prometheus's PostingsForMatchers, the matchers that do not match ""
// are intersected smallest list first (lengths are known from the lists'
// counts without decoding them), stopping when nothing is left, and the lists
// of the values that the others do not match are subtracted from the result;
// only without any of the first kind does it start from every series.
func (b *Block) Postings(ms ...*labels.Matcher) ([]uint32, error) {
	if len(ms) == 0 {
		return b.allPostings(), nil
	}
	var pos, neg []selection
	for _, m := range ms {
		matchesEmpty := m.Matches("")
		s, err := b.selectLists(m, !matchesEmpty)
		if err != nil {
			return nil, err
		}
		switch {
		case !matchesEmpty && s.size == 0:
			return []uint32{}, nil
		case !matchesEmpty:
			pos = append(pos, s)
		case s.size > 0:
			neg = append(neg, s)
		}
	}
	slices.SortStableFunc(pos, func(a, b selection) int { return cmp.Compare(a.size, b.size) })
	var sc postingsScratch
	var res []uint32
	if len(pos) == 0 {
		res = b.allPostings()
	} else {
		var err error
		if res, err = b.union(&pos[0], &sc); err != nil {
			return nil, err
		}
		pos = pos[1:]
	}
	var err error
	for i := range pos {
		if res, err = b.filter(res, &pos[i], true, &sc); err != nil {
			return nil, err
		}
	}
	for i := range neg {
		if res, err = b.filter(res, &neg[i], false, &sc); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// selectLists returns the lists of the values of m's label that m matches
// (want) or does not match (!want).
func (b *Block) selectLists(m *labels.Matcher, want bool) (selection, error) {
	e, ok := b.findName(m.Name)
	if !ok || m.Value == ".*" && (m.Type == labels.MatchRegexp || m.Type == labels.MatchNotRegexp) {
		return selection{}, nil // no value, or every value matches =~".*" (and none !~".*")
	}
	s := selection{dense: e == b.leadingName()}
	add := func(off uint32) error {
		l, err := b.plistAt(off, s.dense)
		s.lists = append(s.lists, l)
		s.size += l.n
		return err
	}
	var exact []string
	switch {
	case m.Type == labels.MatchEqual && want, m.Type == labels.MatchNotEqual && !want:
		exact = []string{m.Value}
	case m.Type == labels.MatchRegexp && want, m.Type == labels.MatchNotRegexp && !want:
		exact = m.SetMatches()
	}
	if exact != nil {
		if len(exact) > 1 {
			exact = slices.Compact(slices.Sorted(slices.Values(exact))) // a copy: the matcher's own stays as it is
		}
		for _, v := range exact {
			off, found, err := b.findValue(e, v)
			if err == nil && found {
				err = add(off)
			}
			if err != nil {
				return s, err
			}
		}
		if s.dense {
			slices.SortFunc(s.lists, func(a, b plist) int { return cmp.Compare(a.first, b.first) })
		}
		return s, nil
	}
	var err error
	if ferr := b.forValues(e, func(v []byte, off uint32) bool {
		if m.Matches(string(v)) == want {
			err = add(off)
		}
		return err == nil
	}); ferr != nil {
		return s, ferr
	}
	return s, err
}

// union returns the ids of the selection's lists.
func (b *Block) union(s *selection, sc *postingsScratch) ([]uint32, error) {
	res := make([]uint32, 0, s.size)
	switch {
	case s.dense:
		for _, l := range s.lists {
			for id := l.first; id < l.first+uint32(l.n); id++ {
				res = append(res, id)
			}
		}
		return res, nil
	case len(s.lists) == 1:
		return b.postingsAt(s.lists[0].off, math.MaxUint32, res)
	}
	if err := b.decodeLists(s, math.MaxUint32, sc); err != nil {
		return nil, err
	}
	return sorted.Merge(res, sc.parts...), nil
}

// filter keeps the ids of res that are in the selection's lists (keep) or
// that are not (!keep), in place.
func (b *Block) filter(res []uint32, s *selection, keep bool, sc *postingsScratch) ([]uint32, error) {
	if len(res) == 0 {
		return res, nil
	}
	var other []uint32
	switch {
	case s.dense:
		return filterRuns(res, s.lists, keep), nil
	case len(s.lists) == 1:
		// No id beyond res's last is needed: the list is decoded up to it.
		var err error
		if sc.union, err = b.postingsAt(s.lists[0].off, res[len(res)-1], sc.union[:0]); err != nil {
			return nil, err
		}
		other = sc.union
	default:
		if err := b.decodeLists(s, res[len(res)-1], sc); err != nil {
			return nil, err
		}
		sc.union = sorted.Merge(sc.union[:0], sc.parts...)
		other = sc.union
	}
	if keep {
		return sorted.Intersect(res[:0], res, other), nil
	}
	return sorted.Subtract(res[:0], res, other), nil
}

// decodeLists decodes the ids up to limit of the selection's lists into sc.parts.
func (b *Block) decodeLists(s *selection, limit uint32, sc *postingsScratch) error {
	sc.ids, sc.ends, sc.parts = sc.ids[:0], sc.ends[:0], sc.parts[:0]
	for _, l := range s.lists {
		var err error
		if sc.ids, err = b.postingsAt(l.off, limit, sc.ids); err != nil {
			return err
		}
		sc.ends = append(sc.ends, len(sc.ids))
	}
	start := 0
	for _, end := range sc.ends {
		sc.parts = append(sc.parts, sc.ids[start:end])
		start = end
	}
	return nil
}

// filterRuns keeps the ids of res within the sorted, disjoint runs (keep) or
// outside all of them (!keep), in place.
func filterRuns(res []uint32, runs []plist, keep bool) []uint32 {
	out, i := res[:0], 0
	for _, r := range runs {
		lo, _ := slices.BinarySearch(res[i:], r.first)
		lo += i
		hi, _ := slices.BinarySearch(res[lo:], r.first+uint32(r.n))
		hi += lo
		if keep {
			out = append(out, res[lo:hi]...)
		} else {
			out = append(out, res[i:lo]...)
		}
		if i = hi; i == len(res) {
			break
		}
	}
	if !keep {
		out = append(out, res[i:]...)
	}
	return out
}

// leadingName returns the block's first label name when every series has
// it, else nil. Series ids are in label order, so the ids of each of its
// values are then a run, and the runs of its values in order follow each
// other.
func (b *Block) leadingName() *nameEntry {
	b.leadOnce.Do(func() {
		if len(b.names) == 0 {
			return
		}
		// The runs must tile 0..NumSeries-1 in value order; a block that
		// breaks the order has its lists decoded like any others.
		e, total := &b.names[0], 0
		for i := 4; i < len(e.values); i += 8 {
			l, err := b.plistAt(binary.BigEndian.Uint32(e.values[i:]), true)
			if err != nil || l.n > 0 && int(l.first) != total {
				return // the lists are read as any others, which reports it
			}
			total += l.n
		}
		if total == b.nseries {
			b.lead = e
		}
	})
	return b.lead
}

// plistAt reads the count of the list at off and, with first, its first id.
func (b *Block) plistAt(off uint32, first bool) (plist, error) {
	p := b.sec[secPostings]
	if uint64(off) >= uint64(len(p)) {
		return plist{}, fmt.Errorf("%s: postings offset %d out of range: %w", b.indexPath, off, ErrCorrupt)
	}
	d := decbuf{b: p[off:]}
	n, _ := b.listHead(d.uvarint())
	if d.err == nil && n > uint64(b.nseries) {
		d.err = errBadVarint
	}
	l := plist{off: off, n: int(n)}
	// A run's first id and a list's first delta are both the first id.
	if first && l.n > 0 {
		id := d.uvarint()
		if id+uint64(l.n) > uint64(b.nseries) {
			return plist{}, fmt.Errorf("%s: postings at %d: run of %d from %d past %d series: %w", b.indexPath, off, l.n, id, b.nseries, ErrCorrupt)
		}
		l.first = uint32(id)
	}
	if d.err != nil {
		return plist{}, fmt.Errorf("%s: postings at %d: %w: %w", b.indexPath, off, d.err, ErrCorrupt)
	}
	return l, nil
}

// listHead returns the count of a postings list and whether it is a run
// (version 7) from the list's first varint.
func (b *Block) listHead(h uint64) (n uint64, run bool) {
	if b.compact {
		return h >> 1, h&1 == 1
	}
	return h, false
}

// postingsAt decodes the ids up to limit of the postings list at off,
// appending to dst. It reads the varints from a local slice: through a
// decbuf, each step would store a pointer with a write barrier.
func (b *Block) postingsAt(off uint32, limit uint32, dst []uint32) ([]uint32, error) {
	p := b.sec[secPostings]
	if uint64(off) >= uint64(len(p)) {
		return dst, fmt.Errorf("%s: postings offset %d out of range: %w", b.indexPath, off, ErrCorrupt)
	}
	q := p[off:]
	h, k := binary.Uvarint(q)
	n, run := b.listHead(h)
	if k <= 0 || n > uint64(b.nseries) {
		return dst, fmt.Errorf("%s: postings at %d: bad count: %w", b.indexPath, off, ErrCorrupt)
	}
	q = q[k:]
	if run {
		first, k := binary.Uvarint(q)
		if k <= 0 || n > uint64(b.nseries)-min(first, uint64(b.nseries)) {
			return dst, fmt.Errorf("%s: postings at %d: run of %d from %d past %d series: %w", b.indexPath, off, n, first, b.nseries, ErrCorrupt)
		}
		for id := first; id < first+n && id <= uint64(limit); id++ {
			dst = append(dst, uint32(id))
		}
		return dst, nil
	}
	var id uint64
	for i := uint64(0); i < n; i++ {
		var delta uint64
		if len(q) > 0 && q[0] < 0x80 {
			delta, q = uint64(q[0]), q[1:]
		} else if len(q) > 1 && q[1] < 0x80 {
			delta, q = uint64(q[0]&0x7f)|uint64(q[1])<<7, q[2:]
		} else {
			if delta, k = binary.Uvarint(q); k <= 0 {
				return dst, fmt.Errorf("%s: postings at %d: %w: %w", b.indexPath, off, errBadVarint, ErrCorrupt)
			}
			q = q[k:]
		}
		if i > 0 && delta == 0 {
			return dst, fmt.Errorf("%s: postings at %d not increasing: %w", b.indexPath, off, ErrCorrupt)
		}
		if id += delta; id >= uint64(b.nseries) || delta >= uint64(b.nseries) {
			return dst, fmt.Errorf("%s: postings at %d: series %d out of range: %w", b.indexPath, off, id, ErrCorrupt)
		}
		if id > uint64(limit) {
			break
		}
		dst = append(dst, uint32(id))
	}
	return dst, nil
}
