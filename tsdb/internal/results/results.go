// Package results holds what tandem's two storage.Querier implementations
// (the head's, in tsdb/head, and a block's, in tsdb) share: a SeriesSet over
// a slice and the truncation of label results to a hinted limit.
package results

import (
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// ErrLimitTruncated is the warning of a result cut to its hinted limit.
var ErrLimitTruncated = limitError("results truncated due to limit")

type limitError string

func (e limitError) Error() string { return string(e) }

// List is a storage.SeriesSet over a slice of series of one type, with warnings.
type List[S storage.Series] struct {
	list []S
	i    int
	warn annotations.Annotations
}

// NewList returns a SeriesSet yielding list in order, then warn.
func NewList[S storage.Series](list []S, warn annotations.Annotations) *List[S] {
	return &List[S]{list: list, i: -1, warn: warn}
}

// Len returns how many series the list yields in all (fastread.Sized).
func (s *List[S]) Len() int { return len(s.list) }

// Next advances to the next series.
func (s *List[S]) Next() bool {
	s.i++
	return s.i < len(s.list)
}

// At returns the current series.
func (s *List[S]) At() storage.Series { return s.list[s.i] }

// Err returns nil: a list cannot fail.
func (s *List[S]) Err() error { return nil }

// Warnings returns the list's warnings.
func (s *List[S]) Warnings() annotations.Annotations { return s.warn }

// ApplyLimit cuts sorted label names or values to hints.Limit, with a warning when it does.
func ApplyLimit(vals []string, hints *storage.LabelHints) ([]string, annotations.Annotations, error) {
	var warn annotations.Annotations
	if hints != nil && hints.Limit > 0 && len(vals) > hints.Limit {
		vals = vals[:hints.Limit]
		warn.Add(ErrLimitTruncated)
	}
	return vals, warn, nil
}
