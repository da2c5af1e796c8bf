package pushdown

import "unsafe"

// ratePlan is what the rate windows of a series take from its sample times
// alone: at every step the window's ends in the loaded samples and its
// extrapolation (an index in memos, which repeat while the samples are
// regular). The members of an aligned group share their sample times and
// are loaded one after the other by one worker, so the plan of one member
// serves the next ones: only their values are read again.
type ratePlan struct {
	key   planKey
	ts    []int64 // the sample times the plan is for, in a buffer of its own
	steps []planStep
	memos []rateMemo
}

// planKey is what a plan depends on besides the sample times.
type planKey struct {
	start, step, rng, offset int64
	steps                    int
	isRate                   bool
}

// planStep is one step's window: samples lo..hi-1 (none when hi-lo < 2)
// and its extrapolation, memos[memo].
type planStep struct {
	lo, hi, memo int
}

// ratePlan returns the plan of the loaded series' sample times (w.ts) for
// the worker's node and grid, made again only when they or the sample
// times differ from the last series'.
func (w *worker) ratePlan(isRate bool) *ratePlan {
	p, ts := &w.plan, w.ts
	key := planKey{start: w.g.start, step: w.g.step, rng: w.n.rng, offset: w.n.offset, steps: w.steps, isRate: isRate}
	if p.key == key && sameTimes(p.ts, ts) {
		return p
	}
	// The plan keeps the loaded timestamps (the worker reads them no more
	// once this series is evaluated) and the worker loads the next series
	// into the plan's previous buffer: no copy.
	old := p.ts
	p.key, p.ts, w.ts = key, ts, old[:0]
	if cap(old) > 0 && cap(ts) > 0 && &old[:1][0] == &ts[:1][0] {
		w.ts = nil // one buffer (set from outside): the next load must not write the plan's
	}
	p.steps, p.memos = p.steps[:0], p.memos[:0]
	var (
		lo, hi     int
		rng, step  = w.n.rng, w.g.step
		rngSeconds = float64(rng) / 1000
		right      = w.g.start - w.n.offset
		m          rateMemo
		dlo, dhi   int // how far lo and hi moved at the last step
	)
	for k := 0; k < w.steps; k, right = k+1, right+step {
		rangeStart := right - rng
		// Regular samples move the window's ends by the same count at
		// every step: that guess is checked before the ends are scanned for.
		prev := lo
		if q := lo + dlo; dlo > 0 && q < len(ts) && ts[q] > rangeStart && ts[q-1] <= rangeStart {
			lo = q
		} else {
			for lo < len(ts) && ts[lo] <= rangeStart {
				lo++
			}
		}
		dlo, prev = lo-prev, max(hi, lo)
		hi = prev
		if q := hi + dhi; dhi > 0 && q < len(ts) && ts[q] > right && ts[q-1] <= right {
			hi = q
		} else {
			for hi < len(ts) && ts[hi] <= right {
				hi++
			}
		}
		dhi = hi - prev
		st := planStep{lo: lo, hi: hi, memo: -1}
		if hi-lo >= 2 {
			// The window's durations and factor depend on its sample times
			// alone, which repeat from window to window when the samples
			// are regular: they are computed again only when those change.
			last := hi - 1
			firstT, lastT := ts[lo], ts[last]
			if len(p.memos) == 0 || m.toStart != firstT-rangeStart || m.toEnd != right-lastT || m.sampled != lastT-firstT || m.n != last-lo {
				m.set(firstT-rangeStart, right-lastT, lastT-firstT, last-lo, isRate, rngSeconds)
				p.memos = append(p.memos, m)
			}
			st.memo = len(p.memos) - 1
		}
		p.steps = append(p.steps, st)
	}
	return p
}

// sameTimes reports whether a and b hold the same sample times, comparing
// their bytes at once (a string comparison, vectorised by the runtime)
// rather than element by element.
func sameTimes(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true
	}
	return unsafe.String((*byte)(unsafe.Pointer(&a[0])), len(a)*8) == unsafe.String((*byte)(unsafe.Pointer(&b[0])), len(b)*8)
}
