package head

import (
	"cmp"
	"slices"
	"sync/atomic"
)

// A series' late samples (accepted out of order, kept beside its tables) are
// x.late, sorted, plus x.lateRuns: sorted runs not merged into it yet, each
// at most half as long as the one before it (x.late before the first), so
// there are at most log2(n) of them. A new sample opens a run of one (or
// extends the newest run when it is newer than all of it), and a run longer
// than half the one before it is merged into that one, as carries ripple in
// a binary counter: a sample's run grows 1.5-fold each time it is moved, so
// it is moved O(log n) times, and found by a binary search per run: a flood
// of n samples in any order (newest first is the worst for one sorted list)
// costs O(n log n), not O(n²). Readers see one sorted list: memSeries.late
// merges the runs first. All of it is guarded by the group's lock.

// lateMoved counts samples copied by merges of late runs (tests bound it).
var lateMoved atomic.Int64

func searchSamples(ss []Sample, t int64) (int, bool) {
	return slices.BinarySearchFunc(ss, t, func(a Sample, t int64) int { return cmp.Compare(a.T, t) })
}

// findLate returns the late sample's value at t, if there is one.
func (x *seriesExtra) findLate(t int64) (float64, bool) {
	if i, ok := searchSamples(x.late, t); ok {
		return x.late[i].V, true
	}
	for _, r := range x.lateRuns {
		if t < r[0].T || t > r[len(r)-1].T {
			continue // a flood newest first is below every run
		}
		if i, ok := searchSamples(r, t); ok {
			return r[i].V, true
		}
	}
	return 0, false
}

// insertLate adds a late sample at t, which the caller made sure is absent.
func (x *seriesExtra) insertLate(t int64, v float64) {
	smp := Sample{T: t, V: v}
	n := len(x.lateRuns)
	switch {
	case n == 0 && (len(x.late) == 0 || x.late[len(x.late)-1].T < t):
		x.late = append(x.late, smp) // in order: the common case
		return
	case n > 0 && x.lateRuns[n-1][len(x.lateRuns[n-1])-1].T < t:
		x.lateRuns[n-1] = append(x.lateRuns[n-1], smp)
	default:
		x.lateRuns = append(x.lateRuns, []Sample{smp})
	}
	for {
		n := len(x.lateRuns)
		if n == 0 {
			return
		}
		last := x.lateRuns[n-1]
		above := &x.late
		if n > 1 {
			above = &x.lateRuns[n-2]
		}
		if 2*len(last) <= len(*above) {
			return
		}
		*above = mergeSamples(*above, last)
		x.lateRuns[n-1] = nil
		x.lateRuns = x.lateRuns[:n-1]
	}
}

// sortedLate merges the runs into x.late and returns it.
func (x *seriesExtra) sortedLate() []Sample {
	for n := len(x.lateRuns); n > 0; n-- {
		above := &x.late
		if n > 1 {
			above = &x.lateRuns[n-2]
		}
		*above = mergeSamples(*above, x.lateRuns[n-1])
	}
	x.lateRuns = nil
	return x.late
}

// mergeSamples returns the samples of a and b, sorted lists without a
// timestamp in common, as one sorted list; it may append to a in place.
func mergeSamples(a, b []Sample) []Sample {
	lateMoved.Add(int64(len(b)))
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0 || a[len(a)-1].T < b[0].T:
		return append(a, b...)
	}
	lateMoved.Add(int64(len(a)))
	out := make([]Sample, 0, len(a)+len(b))
	if b[len(b)-1].T < a[0].T {
		return append(append(out, b...), a...)
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if a[i].T < b[j].T {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// lateIn returns the late samples in [mint, maxt] (a sub-slice, not a copy).
func lateIn(late []Sample, mint, maxt int64) []Sample {
	i, _ := searchSamples(late, mint)
	j, found := searchSamples(late, maxt)
	if found {
		j++
	}
	if i >= j {
		return nil
	}
	return late[i:j]
}
