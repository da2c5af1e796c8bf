// Package sorted holds set operations on ascending lists of series ids, as
// the head's index and the blocks' postings store them.
package sorted

import "cmp"

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
