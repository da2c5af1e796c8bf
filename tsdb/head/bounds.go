package head

import "math"

// Time bounds. A sample is accepted from acceptFloor (now minus
// Options.MaxSampleAge) to now plus the future skew: no scraper makes older or
// newer timestamps, and the head's span (and the block ranges a flush walks)
// stays bounded. Whatever the options, a timestamp must be one a block range
// can hold (minPlaceable..maxPlaceable); WAL replay drops only those that
// are not.

// minPlaceable and maxPlaceable bound the timestamps a block range can hold
// without overflowing range arithmetic (about ±146 million years).
const (
	minPlaceable = math.MinInt64 / 2
	maxPlaceable = math.MaxInt64 / 2
)

// acceptFloor returns the oldest timestamp an append accepts at wall clock now.
func (o *Options) acceptFloor(now int64) int64 {
	if o.MaxSampleAge <= 0 {
		return minPlaceable
	}
	return max(minPlaceable, subSat(now, o.MaxSampleAge.Milliseconds()))
}

// acceptCeiling returns the newest timestamp an append accepts at wall clock now.
func (o *Options) acceptCeiling(now int64) int64 {
	return min(maxPlaceable, addSat(now, o.MaxFutureSkew.Milliseconds()))
}

// addSat returns a+d (d >= 0), saturating at math.MaxInt64.
func addSat(a, d int64) int64 {
	if a > math.MaxInt64-d {
		return math.MaxInt64
	}
	return a + d
}

// subSat returns a-d (d >= 0), saturating at math.MinInt64.
func subSat(a, d int64) int64 {
	if a < math.MinInt64+d {
		return math.MinInt64
	}
	return a - d
}

// rangeStart returns the start of the block range of length rng holding t
// (a multiple of rng), for placeable t.
func rangeStart(t, rng int64) int64 {
	return t - ((t%rng)+rng)%rng
}

// spanExceeds reports whether hi-lo > d without overflowing (lo <= hi).
func spanExceeds(lo, hi, d int64) bool {
	return uint64(hi)-uint64(lo) > uint64(d)
}

// minTime returns the oldest timestamp in the table; math.MaxInt64 if empty.
// Called with the owning group's lock held.
func (tb *table) minTime() int64 {
	m := int64(math.MaxInt64)
	if len(tb.chunks) > 0 {
		m = tb.chunks[0].minT
	}
	if b := tb.building; b != nil && b.rows > 0 {
		m = min(m, b.minT)
	}
	if len(tb.open) > 0 {
		m = min(m, tb.open[0].t)
	}
	return m
}

// resetMinT sets the head's lower time bound to the oldest timestamp it holds
// at or after from for a range flush (chunks, open rows, late samples not
// older than from; math.MaxInt64 if none) and returns it, so that a flush
// skips empty block ranges. It holds gcMu exclusively: no append lowers the
// bound meanwhile.
func (h *Head) resetMinT(from int64) int64 {
	h.gcMu.Lock()
	defer h.gcMu.Unlock()
	m := int64(math.MaxInt64)
	h.forEachGroup(func(g *group) {
		g.mu.Lock()
		defer g.mu.Unlock()
		m = min(m, g.aligned.minTime())
		for _, s := range g.members {
			if s == nil {
				continue
			}
			if own := s.own(); own != nil {
				m = min(m, own.minTime())
			}
			for _, smp := range s.late() { // rare: only flushes of empty ranges get here
				if smp.T >= from {
					m = min(m, smp.T)
				}
			}
		}
	})
	h.minT.Store(m)
	return m
}
