package tsdb

import (
	"slices"
	"sort"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/index"

	"github.com/tandem-tsdb/tandem/tsdb/internal/sorted"
)

// memIndex is the head's inverted index: label name → value → sorted series refs.
// It is written only when a series is created, never per sample.
type memIndex struct {
	mu       sync.RWMutex
	postings map[string]map[string][]uint64
	all      []uint64 // every series ref, sorted
}

func newMemIndex() *memIndex {
	return &memIndex{postings: map[string]map[string][]uint64{}}
}

// insertSorted adds ref to a sorted list; refs mostly arrive in increasing order.
func insertSorted(list []uint64, ref uint64) []uint64 {
	n := len(list)
	if n == 0 || list[n-1] < ref {
		return append(list, ref)
	}
	i := sort.Search(n, func(i int) bool { return list[i] >= ref })
	if i < n && list[i] == ref {
		return list
	}
	return slices.Insert(list, i, ref)
}

func (ix *memIndex) add(ref uint64, lset labels.Labels) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.all = insertSorted(ix.all, ref)
	lset.Range(func(l labels.Label) {
		vals := ix.postings[l.Name]
		if vals == nil {
			vals = map[string][]uint64{}
			ix.postings[l.Name] = vals
		}
		vals[l.Value] = insertSorted(vals[l.Value], ref)
	})
}

// remove drops ref, whose labels are lset, from the index.
func (ix *memIndex) remove(ref uint64, lset labels.Labels) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.all = removeSorted(ix.all, ref)
	lset.Range(func(l labels.Label) {
		vals := ix.postings[l.Name]
		if vals == nil {
			return
		}
		if list := removeSorted(vals[l.Value], ref); len(list) > 0 {
			vals[l.Value] = list
		} else {
			delete(vals, l.Value)
			if len(vals) == 0 {
				delete(ix.postings, l.Name)
			}
		}
	})
}

// removeSorted removes ref from a sorted list, in place: lists handed to
// queriers are copies or were cut before (postingsFor returns new slices).
func removeSorted(list []uint64, ref uint64) []uint64 {
	i, ok := slices.BinarySearch(list, ref)
	if !ok {
		return list
	}
	return slices.Delete(list, i, i+1)
}

// numSeries returns the number of indexed series.
func (ix *memIndex) numSeries() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.all)
}

// valuesMatching returns the union of postings of name's values accepted by m.
func (ix *memIndex) valuesMatching(m *labels.Matcher, accept bool) []uint64 {
	vals := ix.postings[m.Name]
	if len(vals) == 0 {
		return nil
	}
	var lists [][]uint64
	if accept && m.Type == labels.MatchEqual {
		return vals[m.Value]
	}
	if accept && m.Type == labels.MatchRegexp {
		if set := m.SetMatches(); len(set) > 0 {
			for _, v := range set {
				if l := vals[v]; len(l) > 0 {
					lists = append(lists, l)
				}
			}
			return mergeLists(lists)
		}
	}
	for v, l := range vals {
		if m.Matches(v) == accept {
			lists = append(lists, l)
		}
	}
	return mergeLists(lists)
}

// postingsFor returns the sorted refs of series matching all matchers, with
// Prometheus's semantics: a missing label equals the empty string.
func (ix *memIndex) postingsFor(ms ...*labels.Matcher) []uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	var (
		result []uint64
		have   bool
	)
	// Matchers that do not match "" select series; those that do only exclude.
	for _, m := range ms {
		if m.Matches("") {
			continue
		}
		l := ix.valuesMatching(m, true)
		if !have {
			result, have = l, true
		} else {
			result = sorted.Intersect(make([]uint64, 0, min(len(result), len(l))), result, l)
		}
		if len(result) == 0 {
			return nil
		}
	}
	if !have {
		result = ix.all
	}
	for _, m := range ms {
		if !m.Matches("") {
			continue
		}
		// Remove series that carry the label with a value the matcher rejects.
		result = subtract(result, ix.valuesMatching(m, false))
		if len(result) == 0 {
			return nil
		}
	}
	return slices.Clone(result)
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
		for v, l := range vals {
			numPairs++
			size += uint64(len(v)) * uint64(len(l))
			pairs = append(pairs, index.Stat{Name: name + "=" + v, Count: uint64(len(l))})
			if name == label {
				metrics = append(metrics, index.Stat{Name: v, Count: uint64(len(l))})
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
	out := make([]uint64, 0, len(a))
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

// mergeLists returns the sorted union of sorted lists.
func mergeLists(lists [][]uint64) []uint64 {
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]uint64, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
