package head

// SealIdle seals the open rows of groups that received nothing for longer
// than the open window of wall-clock time, so idle targets do not keep
// uncompressed rows. It returns the number of rows sealed.
func (h *Head) SealIdle() int {
	now := h.opts.Now()
	window := h.opts.OpenWindow.Milliseconds()
	sealed := 0
	h.forEachGroup(func(g *group) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.aligned.open) == 0 || now-g.lastAppend < window {
			return
		}
		sealed += len(g.aligned.open)
		g.aligned.sealUpTo(g.aligned.maxT, h.cut(), func(r *row, prevHas func(int) bool) { g.onSeal(r, prevHas, &h.counters) })
	})
	return sealed
}

// SettleIndex merges the references that reached the index out of order
// (series created concurrently, a WAL replay) into their posting lists, so
// that queries seek through them; it returns the number of lists rewritten.
func (h *Head) SettleIndex() int { return h.index.settle() }
