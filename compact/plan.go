// Package compact merges tandem's immutable blocks into larger ones: Plan
// chooses which blocks to merge (aligned time windows growing exponentially,
// as Prometheus's leveled compactor does, plus any blocks that overlap in
// time), and Merge writes the merged block group by group.
package compact

import (
	"cmp"
	"slices"
	"time"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// ExponentialRanges returns steps block ranges in milliseconds growing by factor from base: ExponentialRanges(2h, 3, 5) = 2h, 6h, 18h, 54h, 162h.
func ExponentialRanges(base time.Duration, factor, steps int) []int64 {
	out := make([]int64, 0, max(steps, 0))
	r := base.Milliseconds()
	for range steps {
		out = append(out, r)
		r *= int64(factor)
	}
	return out
}

// Plan picks the sets of blocks to merge, oldest first; a block is in at most one set.
//
// Blocks whose time ranges overlap (late data written after its range was
// flushed) are merged together, transitively. Then, for each range R in
// ranges[1:], smallest first, the blocks lying entirely inside one window
// [k*R, (k+1)*R) (aligned to multiples of R since the epoch) are merged when
// there are several of them and the window is complete (its end <= safeBefore).
// A window that a set chosen earlier in the same call reaches into is left
// for a later call, so that data is rewritten once per level and not twice
// in one round (the set is merged first, then the window).
func Plan(metas []block.Meta, ranges []int64, safeBefore int64) [][]block.Meta {
	ms := slices.Clone(metas)
	slices.SortFunc(ms, func(a, b block.Meta) int {
		return cmp.Or(cmp.Compare(a.MinTime, b.MinTime), cmp.Compare(a.MaxTime, b.MaxTime), cmp.Compare(a.ULID, b.ULID))
	})
	used := make([]bool, len(ms))
	var plans [][]block.Meta
	for i := 0; i < len(ms); {
		j, end := i+1, ms[i].MaxTime
		for j < len(ms) && ms[j].MinTime < end {
			end = max(end, ms[j].MaxTime)
			j++
		}
		if j-i > 1 {
			plans = append(plans, slices.Clone(ms[i:j]))
			for k := i; k < j; k++ {
				used[k] = true
			}
		}
		i = j
	}
	if len(ranges) > 1 {
		for _, r := range ranges[1:] {
			if r <= 0 {
				continue
			}
			plans = planRange(ms, used, r, safeBefore, plans)
		}
	}
	slices.SortFunc(plans, func(a, b []block.Meta) int {
		return cmp.Or(cmp.Compare(a[0].MinTime, b[0].MinTime), cmp.Compare(a[0].ULID, b[0].ULID))
	})
	return plans
}

// planRange appends the plans of the complete windows of range r; ms is sorted by MinTime, used marks planned blocks.
func planRange(ms []block.Meta, used []bool, r, safeBefore int64, plans [][]block.Meta) [][]block.Meta {
	for i := 0; i < len(ms); {
		start := floorDiv(ms[i].MinTime, r) * r
		end := start + r
		// ms[i:j] start inside the window.
		j := i
		for j < len(ms) && ms[j].MinTime < end {
			j++
		}
		if end <= safeBefore && end > start && !reachedByUsed(ms, used, i, j, start) {
			var idx []int
			for k := i; k < j; k++ {
				if ms[k].MaxTime <= end {
					idx = append(idx, k)
				}
			}
			if len(idx) > 1 {
				p := make([]block.Meta, 0, len(idx))
				for _, k := range idx {
					p = append(p, ms[k])
					used[k] = true
				}
				plans = append(plans, p)
			}
		}
		i = j
	}
	return plans
}

// reachedByUsed reports whether a planned block intersects the window starting at start: one of ms[i:j], or an earlier block reaching past start.
func reachedByUsed(ms []block.Meta, used []bool, i, j int, start int64) bool {
	for k := 0; k < j; k++ {
		if used[k] && (k >= i || ms[k].MaxTime > start) {
			return true
		}
	}
	return false
}

// floorDiv divides rounding towards negative infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
