package compact

import (
	"cmp"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// mergeExemplars returns the union of the sources' exemplars (nil if none has
// any): the sources' files are read side by side in label order, a series'
// exemplars from every source are merged in time order and, at one
// timestamp, the exemplar of the source listed last is kept. Memory holds one
// series of each source.
func mergeExemplars(srcs []*block.Block) block.ExemplarSource {
	var with []*block.Block
	for _, b := range srcs {
		if b.NumExemplars() > 0 {
			with = append(with, b)
		}
	}
	if len(with) == 0 {
		return nil
	}
	return func(yield func(*block.SeriesExemplars) error) error {
		its := make([]*block.ExemplarIterator, len(with))
		ok := make([]bool, len(with))
		for i, b := range with {
			its[i] = b.Exemplars(math.MinInt64, math.MaxInt64, nil)
			if ok[i] = its[i].Next(); !ok[i] && its[i].Err() != nil {
				return its[i].Err()
			}
		}
		var out block.SeriesExemplars
		for {
			var next labels.Labels
			found := false
			for i, it := range its {
				if ok[i] && (!found || labels.Compare(it.At().Labels, next) < 0) {
					next, found = it.At().Labels, true
				}
			}
			if !found {
				return nil
			}
			out.Labels = next
			out.Exemplars = out.Exemplars[:0]
			for i, it := range its { // listed order: later sources come later at equal timestamps
				if !ok[i] || !labels.Equal(it.At().Labels, next) {
					continue
				}
				out.Exemplars = append(out.Exemplars, it.At().Exemplars...)
				if ok[i] = it.Next(); !ok[i] && it.Err() != nil {
					return it.Err()
				}
			}
			slices.SortStableFunc(out.Exemplars, func(a, b block.Exemplar) int { return cmp.Compare(a.T, b.T) })
			w := 0
			for k := range out.Exemplars {
				if k+1 < len(out.Exemplars) && out.Exemplars[k+1].T == out.Exemplars[k].T {
					continue
				}
				out.Exemplars[w] = out.Exemplars[k]
				w++
			}
			out.Exemplars = out.Exemplars[:w]
			if err := yield(&out); err != nil {
				return err
			}
		}
	}
}
