package head

import "slices"

// snapSlab hands out the structures of one query's snapshots from blocks
// allocated a few hundred at a time, sized by the series left to snapshot:
// a selection of thousands of series takes a few allocations instead of
// three per series. Each block lives as long as one of its series is read.
//
// A stream (SelectStream) reuses one slab group after group: reset hands
// its blocks out again, and each block is sized for the whole group.
type snapSlab struct {
	left  int  // series of the selection (of the group, reusing) not snapshotted yet
	reuse bool // blocks are kept across reset and not bounded by slabBlock
	hs    []headSeries
	ds    []seriesData
	ps    []part
	oc    []oneColChunk // copies of the chunk being built
	bs    []byte        // their values' bytes
	ss    []Sample      // open rows' samples
	rr    []rawRun      // their runs
}

// slabBlock bounds the series in one block of a snapSlab that is not reused.
const slabBlock = 512

// blockLen is how many series the next block serves: the series left
// (the one being snapshotted included), at most slabBlock unless reused.
func (sl *snapSlab) blockLen() int {
	n := max(sl.left+1, 1)
	if sl.reuse {
		return n
	}
	return min(n, slabBlock)
}

// reset hands sl's blocks out again for a group of n series, zeroed: what
// was handed out before is no longer read. (Elements past a block's length
// are zero: they were cleared by an earlier reset or never used.)
func (sl *snapSlab) reset(n int) {
	clear(sl.hs)
	clear(sl.ds)
	clear(sl.ps)
	clear(sl.oc)
	clear(sl.rr)
	sl.hs, sl.ds, sl.ps, sl.oc, sl.rr = sl.hs[:0], sl.ds[:0], sl.ps[:0], sl.oc[:0], sl.rr[:0]
	sl.bs, sl.ss = sl.bs[:0], sl.ss[:0]
	sl.left, sl.reuse = n, true
}

// take returns n elements of *blk (zero, but for bytes and samples, which
// are overwritten), first replacing it with a new block of at least size
// elements when it has no room left; a reused slab's new block is at least
// twice the old one, so that its blocks soon fit the largest group.
func take[T any](sl *snapSlab, blk *[]T, n, size int) []T {
	b := *blk
	if cap(b)-len(b) < n {
		if sl.reuse {
			size = max(size, 2*cap(b))
		}
		b = make([]T, 0, max(size, n))
	}
	k := len(b)
	b = b[:k+n]
	*blk = b
	return b[k : k+n : k+n]
}

// series returns a zero headSeries.
func (sl *snapSlab) series() *headSeries { return &take(sl, &sl.hs, 1, sl.blockLen())[0] }

// data returns a zero seriesData, counting one series of the selection done.
func (sl *snapSlab) data() *seriesData {
	sl.left--
	return &take(sl, &sl.ds, 1, sl.blockLen())[0]
}

// unData takes back the seriesData data returned last, zeroed.
func (sl *snapSlab) unData() {
	sl.ds[len(sl.ds)-1] = seriesData{}
	sl.ds = sl.ds[:len(sl.ds)-1]
}

// parts returns an empty slice with room for n parts.
func (sl *snapSlab) parts(n int) []part { return take(sl, &sl.ps, n, sl.blockLen()*n)[:0] }

// oneCol returns a zero oneColChunk; sl may be nil.
func (sl *snapSlab) oneCol() *oneColChunk {
	if sl == nil {
		return new(oneColChunk)
	}
	return &take(sl, &sl.oc, 1, sl.blockLen())[0]
}

// samples returns an empty slice with room for n samples; sl may be nil.
func (sl *snapSlab) samples(n int) []Sample {
	if sl == nil {
		return make([]Sample, 0, n)
	}
	return take(sl, &sl.ss, n, sl.blockLen()*2)[:0]
}

// raw returns a rawRun holding samples; sl may be nil.
func (sl *snapSlab) raw(samples []Sample) *rawRun {
	if sl == nil {
		return &rawRun{samples: samples}
	}
	r := &take(sl, &sl.rr, 1, sl.blockLen())[0]
	r.samples = samples
	return r
}

// bytes returns a copy of b, its capacity its length; sl may be nil.
func (sl *snapSlab) bytes(b []byte) []byte {
	if sl == nil {
		return slices.Clone(b)
	}
	dst := take(sl, &sl.bs, len(b), sl.blockLen()*64)
	copy(dst, b)
	return dst
}
