package head

import (
	"slices"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// startSource returns, for a block writer, the start timestamps within
// [mint, maxt) of the series keep accepts (nil: all), in label order; nil
// when none has one there.
func (h *Head) startSource(mint, maxt int64, keep func(*memSeries) bool) block.StartSource {
	var out []block.SeriesStarts
	h.forEachGroup(func(g *group) {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, s := range g.members {
			if s == nil || s.x == nil || len(s.x.starts) == 0 || (keep != nil && !keep(s)) {
				continue
			}
			if rs := s.startRuns(mint, maxt-1); rs != nil {
				out = append(out, block.SeriesStarts{Labels: s.lset, Runs: rs})
			}
		}
	})
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b block.SeriesStarts) int { return labels.Compare(a.Labels, b.Labels) })
	return func(yield func(*block.SeriesStarts) error) error {
		for i := range out {
			if err := yield(&out[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// Starts returns the range's start timestamps for the block writer.
func (e *RangeExport) Starts() block.StartSource { return e.h.startSource(e.mint, e.maxt, nil) }

// Starts returns the start timestamps of the late samples' series in
// [mint, maxt) for the block writer.
func (l *LateExport) Starts(mint, maxt int64) block.StartSource {
	in := map[*memSeries]bool{}
	for _, ls := range l.samples {
		in[ls.s] = true
	}
	return l.h.startSource(mint, maxt, func(s *memSeries) bool { return in[s] })
}
