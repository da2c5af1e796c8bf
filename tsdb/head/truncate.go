package head

import (
	"math"
)

// raiseMinValid refuses samples older than mint from now on (a flush of the
// range before mint is starting).
func (h *Head) raiseMinValid(mint int64) {
	for {
		cur := h.minValid.Load()
		if mint <= cur || h.minValid.CompareAndSwap(cur, mint) {
			return
		}
	}
}

// truncate drops the head's chunks older than mint, which the caller has
// persisted in a block, and closes the range before mint to in-order samples.
// mint must be a block-range boundary, so no head chunk straddles it. Late
// samples are dropped separately (dropLate), once they are in a block.
func (h *Head) truncate(mint int64) {
	h.raiseMinValid(mint)
	h.forEachGroup(func(g *group) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.aligned.dropBefore(mint)
		for _, s := range g.members {
			if s == nil {
				continue
			}
			if s.own() != nil {
				s.own().dropBefore(mint)
			}
			switch {
			case s.lastT < mint:
				s.minT = math.MaxInt64 // nothing left in the head's chunks
			case s.minT < mint:
				s.minT = mint
			}
			if len(s.late()) > 0 && s.late()[0].T < s.minT {
				s.minT = s.late()[0].T // late samples wait for their block
			}
			if len(s.lateHist()) > 0 && s.lateHist()[0].T < s.minT {
				s.minT = s.lateHist()[0].T
			}
			s.dropStartsBefore(s.minT)
		}
	})
	for {
		cur := h.minT.Load()
		if cur >= mint || h.minT.CompareAndSwap(cur, mint) {
			break
		}
	}
}

// dropBefore removes chunks and rows entirely older than mint.
func (tb *table) dropBefore(mint int64) {
	k := 0
	for k < len(tb.chunks) && tb.chunks[k].maxT < mint {
		k++
	}
	if k > 0 {
		n := copy(tb.chunks, tb.chunks[k:])
		clear(tb.chunks[n:])
		tb.chunks = tb.chunks[:n]
	}
	if b := tb.building; b != nil && b.rows > 0 && b.maxT < mint {
		tb.building = nil
	}
	k = 0
	for k < len(tb.open) && tb.open[k].t < mint {
		tb.recycle(tb.open[k])
		k++
	}
	if k > 0 {
		n := copy(tb.open, tb.open[k:])
		clear(tb.open[n:])
		tb.open = tb.open[:n]
	}
	if tb.sealedMaxT < mint-1 {
		tb.sealedMaxT = mint - 1 // rows before mint can no longer be placed
	}
}
