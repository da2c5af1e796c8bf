// Package sorted holds set operations on ascending lists of series ids, as
// the head's index and the blocks' postings store them, and on sorted sets of
// label names.
package sorted

import (
	"cmp"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
)

// AddNames adds lset's label names to the sorted set names and returns it.
// Both are sorted, so one walk of each does it without hashing: the series a
// matcher selects mostly share one set of names, found already in place.
func AddNames(names []string, lset labels.Labels) []string {
	i := 0
	lset.Range(func(l labels.Label) {
		for i < len(names) && names[i] < l.Name {
			i++
		}
		if i == len(names) || names[i] != l.Name {
			names = slices.Insert(names, i, l.Name)
		}
		i++
	})
	return names
}

// Intersect appends the values in both a and b to dst and returns it. dst
// may be a[:0]: every value is written at or before the one being read.
func Intersect[T cmp.Ordered](dst, a, b []T) []T {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			dst = append(dst, a[i])
			i++
			j++
		}
	}
	return dst
}

// Intersects reports whether a and b share a value.
func Intersects[T cmp.Ordered](a, b []T) bool {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			return true
		}
	}
	return false
}

// Subtract appends the values of a that are not in b to dst and returns it.
// dst may be a[:0]: every value is written at or before the one being read.
func Subtract[T cmp.Ordered](dst, a, b []T) []T {
	j := 0
	for i := 0; i < len(a); i++ {
		for j < len(b) && b[j] < a[i] {
			j++
		}
		if j == len(b) {
			return append(dst, a[i:]...)
		}
		if b[j] != a[i] {
			dst = append(dst, a[i])
		}
	}
	return dst
}

// Merge appends the union of the lists to dst, each value once, and returns
// it. dst must not share an array with a list.
func Merge[T cmp.Ordered](dst []T, lists ...[]T) []T {
	switch len(lists) {
	case 0:
		return dst
	case 1:
		return merge2(dst, len(dst), lists[0], nil)
	case 2:
		return merge2(dst, len(dst), lists[0], lists[1])
	}
	start := len(dst)
	// A min-heap of the lists' remaining parts, by their first value.
	h := make([][]T, 0, len(lists))
	for _, l := range lists {
		if len(l) > 0 {
			h = append(h, l)
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(h, i)
	}
	for len(h) > 2 {
		l := h[0]
		if v := l[0]; len(dst) == start || dst[len(dst)-1] != v {
			dst = append(dst, v)
		}
		if len(l) == 1 {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		} else {
			h[0] = l[1:]
		}
		down(h, 0)
	}
	h = append(h, nil, nil) // fewer than two lists left: pad with empty ones
	return merge2(dst, start, h[0], h[1])
}

// down restores the heap order of h below i.
func down[T cmp.Ordered](h [][]T, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1][0] < h[c][0] {
			c++
		}
		if h[i][0] <= h[c][0] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// merge2 appends the union of a and b to dst, each value once among those
// appended after dst[start-1].
func merge2[T cmp.Ordered](dst []T, start int, a, b []T) []T {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var v T
		if j == len(b) || i < len(a) && a[i] <= b[j] {
			v = a[i]
			i++
		} else {
			v = b[j]
			j++
		}
		if len(dst) == start || dst[len(dst)-1] != v {
			dst = append(dst, v)
		}
	}
	return dst
}
