package pushdown

import "sync"

// pageAccs is the size of a pooled accumulator page, in accumulators (80 kB).
const pageAccs = 2048

type accPage [pageAccs]acc

var accPagePool = sync.Pool{New: func() any { return new(accPage) }}

// accPages holds a streamed node's accumulators, each group's steps side
// by side, in pages of whole groups: a worker that meets a new group adds a
// page at most and never copies the groups before it (one slice grown a
// group at a time was copied about five times over: 33 MB of garbage for a
// 2000-group hour of rates). Pages of pageAccs come from a pool.
type accPages struct {
	steps, per int // accumulators of a group, groups of a page
	groups     int // groups given accumulators
	pages      [][]acc
}

func newAccPages(steps int) accPages {
	return accPages{steps: steps, per: max(1, pageAccs/max(steps, 1))}
}

// group returns the accumulators of group gi, below p.groups.
func (p *accPages) group(gi int) []acc {
	o := gi % p.per * p.steps
	return p.pages[gi/p.per][o : o+p.steps : o+p.steps]
}

// grow gives the groups below n zeroed accumulators.
func (p *accPages) grow(n int) {
	for len(p.pages)*p.per < n {
		if p.steps <= pageAccs {
			p.pages = append(p.pages, accPagePool.Get().(*accPage)[:])
		} else {
			p.pages = append(p.pages, make([]acc, p.steps))
		}
	}
	for ; p.groups < n; p.groups++ {
		clear(p.group(p.groups))
	}
}

// release gives the pooled pages back; p is empty after it.
func (p *accPages) release() {
	for i, pg := range p.pages {
		if len(pg) == pageAccs {
			accPagePool.Put((*accPage)(pg))
		}
		p.pages[i] = nil
	}
	p.pages, p.groups = p.pages[:0], 0
}
