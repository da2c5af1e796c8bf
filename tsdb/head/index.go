package head

import (
	"math/bits"
	"slices"
	"sort"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/index"

	"github.com/tandem-tsdb/tandem/tsdb/internal/sorted"
)

// memIndex is the head's inverted index: label name → value → sorted series refs.
// It is written only when a series is created or removed, never per sample.
type memIndex struct {
	mu       sync.RWMutex
	postings map[string]map[string]*postingList
	all      postingList    // every series ref
	late     []*postingList // lists that may hold pending references (settle merges them)
}

func newMemIndex() *memIndex {
	return &memIndex{postings: map[string]map[string]*postingList{}}
}

func (ix *memIndex) add(ref uint64, lset labels.Labels) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.all.add(ref) {
		ix.late = append(ix.late, &ix.all)
	}
	lset.Range(func(l labels.Label) {
		vals := ix.postings[l.Name]
		if vals == nil {
			vals = map[string]*postingList{}
			ix.postings[l.Name] = vals
		}
		pl := vals[l.Value]
		if pl == nil {
			pl = &postingList{}
			vals[l.Value] = pl
		}
		if pl.add(ref) {
			ix.late = append(ix.late, pl)
		}
	})
}

// settle merges the pending references of every list into its data, so
// that queries seek through each list instead of decoding and sorting it;
// it returns the number of lists rewritten.
func (ix *memIndex) settle() int {
	ix.mu.RLock()
	n := len(ix.late)
	ix.mu.RUnlock()
	if n == 0 {
		return 0
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	n = 0
	for _, pl := range ix.late {
		if len(pl.pending) > 0 {
			pl.settle()
			n++
		}
	}
	ix.late = nil
	return n
}

// remove drops the series in removed (ref → labels) from the index, each
// list they are in rewritten once.
func (ix *memIndex) remove(removed map[uint64]labels.Labels) {
	if len(removed) == 0 {
		return
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	drop := func(ref uint64) bool { _, ok := removed[ref]; return ok }
	ix.all.removeIf(drop)
	type pair struct{ name, value string }
	lists := map[pair]bool{}
	for _, lset := range removed {
		lset.Range(func(l labels.Label) { lists[pair{l.Name, l.Value}] = true })
	}
	for p := range lists {
		vals := ix.postings[p.name]
		pl := vals[p.value]
		if pl == nil {
			continue
		}
		if pl.removeIf(drop); pl.n > 0 {
			continue
		}
		delete(vals, p.value)
		if len(vals) == 0 {
			delete(ix.postings, p.name)
		}
	}
}

// numSeries returns the number of indexed series.
func (ix *memIndex) numSeries() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.all.n
}

// valuesMatching returns the union of postings of name's values accepted by
// m, a new slice.
func (ix *memIndex) valuesMatching(m *labels.Matcher, accept bool) []uint64 {
	vals := ix.postings[m.Name]
	if len(vals) == 0 {
		return nil
	}
	if accept && m.Type == labels.MatchEqual {
		if pl := vals[m.Value]; pl != nil {
			return pl.appendTo(getRefs(pl.n))
		}
		return nil
	}
	var lists []*postingList
	if set := m.SetMatches(); accept && m.Type == labels.MatchRegexp && len(set) > 0 {
		for _, v := range set {
			if pl := vals[v]; pl != nil {
				lists = append(lists, pl)
			}
		}
	} else {
		for v, pl := range vals {
			if m.Matches(v) == accept {
				lists = append(lists, pl)
			}
		}
	}
	return mergeLists(lists)
}

// postingsFor returns the sorted refs of series matching all matchers, with
// Prometheus's semantics: a missing label equals the empty string.
func (ix *memIndex) postingsFor(ms ...*labels.Matcher) []uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	// Matchers that do not match "" select series; those that do only
	// exclude. The selecting ones are intersected smallest first, and an
	// equality matcher's list is sought through, never decoded whole: one
	// target's series of a metric cost its series, not the metric's.
	type candidate struct {
		pl   *postingList // an equality matcher's list
		refs []uint64     // the other matchers' union of lists
		n    int
	}
	var cands []candidate
	for _, m := range ms {
		if m.Matches("") {
			continue
		}
		c := candidate{}
		if m.Type == labels.MatchEqual {
			if c.pl = ix.postings[m.Name][m.Value]; c.pl == nil {
				return nil
			}
			c.n = c.pl.n
		} else {
			if c.refs = ix.valuesMatching(m, true); len(c.refs) == 0 {
				return nil
			}
			c.n = len(c.refs)
		}
		cands = append(cands, c)
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return a.n - b.n })
	var result []uint64
	have := len(cands) > 0
	for i, c := range cands {
		switch {
		case i == 0 && c.refs != nil:
			result = c.refs
		case i == 0:
			result = c.pl.appendTo(getRefs(c.pl.n))
		case c.refs != nil:
			result = sorted.Intersect(result[:0], result, c.refs) // in place: result is ours
			putRefs(c.refs)
		default:
			result = c.pl.filter(result)
		}
		if len(result) == 0 {
			putRefs(result)
			return nil
		}
	}
	if !have {
		result = ix.all.appendTo(getRefs(ix.all.n))
	}
	for _, m := range ms {
		if !m.Matches("") {
			continue
		}
		// Remove series that carry the label with a value the matcher
		// rejects: seeking through those values' lists when the matcher
		// names them (!="v", !~"a|b"), else subtracting their union.
		if lists, ok := ix.rejectedLists(m); ok {
			for _, pl := range lists {
				rejected := pl.filter(append(getRefs(len(result)), result...))
				result = subtract(result, rejected)
				putRefs(rejected)
			}
		} else {
			rejected := ix.valuesMatching(m, false)
			result = subtract(result, rejected)
			putRefs(rejected)
		}
		if len(result) == 0 {
			return nil
		}
	}
	return result
}

// rejectedLists returns the lists of the values a matcher that matches ""
// rejects, when it names them: m is != or a !~ of alternatives.
func (ix *memIndex) rejectedLists(m *labels.Matcher) ([]*postingList, bool) {
	var values []string
	switch m.Type {
	case labels.MatchNotEqual:
		values = []string{m.Value}
	case labels.MatchNotRegexp:
		if values = m.SetMatches(); len(values) == 0 {
			return nil, false
		}
	default:
		return nil, false
	}
	vals := ix.postings[m.Name]
	lists := make([]*postingList, 0, len(values))
	for _, v := range values {
		if pl := vals[v]; pl != nil {
			lists = append(lists, pl)
		}
	}
	return lists, true
}

// labelNames returns all label names, sorted.
func (ix *memIndex) labelNames() []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	names := make([]string, 0, len(ix.postings))
	for n, vals := range ix.postings {
		if len(vals) > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// labelValues returns the values of a label name, sorted.
func (ix *memIndex) labelValues(name string) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	vals := ix.postings[name]
	out := make([]string, 0, len(vals))
	for v := range vals {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// stats computes cardinality statistics in Prometheus's format for /api/v1/status/tsdb.
func (ix *memIndex) stats(label string, limit int) *index.PostingsStats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	top := func(s []index.Stat) []index.Stat {
		sort.Slice(s, func(i, j int) bool {
			if s[i].Count != s[j].Count {
				return s[i].Count > s[j].Count
			}
			return s[i].Name < s[j].Name
		})
		if len(s) > limit {
			s = s[:limit]
		}
		return s
	}
	var metrics, labelsCard, sizes, pairs []index.Stat
	numPairs := 0
	for name, vals := range ix.postings {
		var size uint64
		for v, pl := range vals {
			numPairs++
			size += uint64(len(v)) * uint64(pl.n)
			pairs = append(pairs, index.Stat{Name: name + "=" + v, Count: uint64(pl.n)})
			if name == label {
				metrics = append(metrics, index.Stat{Name: v, Count: uint64(pl.n)})
			}
		}
		labelsCard = append(labelsCard, index.Stat{Name: name, Count: uint64(len(vals))})
		sizes = append(sizes, index.Stat{Name: name, Count: size})
	}
	return &index.PostingsStats{
		CardinalityMetricsStats: top(metrics),
		CardinalityLabelStats:   top(labelsCard),
		LabelValueStats:         top(sizes),
		LabelValuePairsStats:    top(pairs),
		NumLabelPairs:           numPairs,
	}
}

func subtract(a, b []uint64) []uint64 {
	if len(b) == 0 {
		return a
	}
	out := a[:0] // in place: each element is read before it can be written
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j < len(b) && b[j] == x {
			continue
		}
		out = append(out, x)
	}
	return out
}

// refsPool holds slices of references that postingsFor built and its callers
// gave back (putRefs): a selection of a million series otherwise leaves 8 MB
// behind for the collector.
var refsPool sync.Pool

// getRefs returns an empty slice with room for n references, a pooled one
// when it is large enough.
func getRefs(n int) []uint64 {
	if p, ok := refsPool.Get().(*[]uint64); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]uint64, 0, n)
}

// minPooledRefs is the smallest slice of references putRefs keeps.
const minPooledRefs = 1024

// putRefs gives refs (nothing refers to them any more) to a later getRefs.
func putRefs(refs []uint64) {
	if cap(refs) < minPooledRefs {
		return
	}
	refs = refs[:0]
	refsPool.Put(&refs)
}

// mergeLists returns the sorted union of posting lists, a slice of the
// caller's (see putRefs).
func mergeLists(lists []*postingList) []uint64 {
	n := 0
	for _, pl := range lists {
		n += pl.n
	}
	if n == 0 {
		return nil
	}
	out := getRefs(n)
	for _, pl := range lists {
		out = pl.appendTo(out)
	}
	if len(lists) > 1 {
		out = sortUnique(out)
	}
	return out
}

// sortUnique sorts refs in place and drops repeats. Head references are
// handed out in sequence, so the union of a regular expression's lists is
// usually dense: then one bit per reference in range and a scan of the words
// replace the sort (n log n comparisons for 10k series). Sparse refs are
// sorted.
func sortUnique(refs []uint64) []uint64 {
	lo, hi := refs[0], refs[0]
	for _, r := range refs {
		lo, hi = min(lo, r), max(hi, r)
	}
	words := (hi-lo)/64 + 1
	if words > uint64(len(refs)) {
		slices.Sort(refs)
		return slices.Compact(refs)
	}
	set := make([]uint64, words)
	for _, r := range refs {
		d := r - lo
		set[d/64] |= 1 << (d % 64)
	}
	out := refs[:0]
	for i, w := range set {
		base := lo + uint64(i)*64
		for w != 0 {
			out = append(out, base+uint64(bits.TrailingZeros64(w)))
			w &= w - 1
		}
	}
	return out
}
