package block

import (
	"fmt"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// Iterator iterates one series' samples (floats and native histograms) in a
// time window, merging the series' tables in time order.
type Iterator struct {
	b          *Block
	mint, maxt int64
	member     int
	curs       []tableCursor
	chunkBuf   []chunkMeta
	tables     []memberTable
	cur        int // cursor holding the current sample, -1 if none
	started    bool
	vt         chunkenc.ValueType // the current sample's type
	t          int64
	v          float64
	hbuf       *histogram.Histogram // AtFloatHistogram's integer histogram
	err        error
	hasST      bool          // the series has start timestamp runs
	stc        starts.Cursor // over the series' runs
	lb         labels.ScratchBuilder
}

// tableCursor walks the series' column through the chunks of one table.
type tableCursor struct {
	lo, hi int // range of Iterator.chunkBuf
	ci     int // next chunk to load
	in     bool
	ok     bool // t, v hold a sample
	off    uint64
	cc     colCursor
	t      int64
	v      float64
}

var _ chunkenc.Iterator = (*Iterator)(nil)

// Iterator returns the series' samples in [mint, maxt] in time order, with
// their start timestamps (AtST) from the block's starts file; reuse may be an
// iterator previously returned by any Block, to be reset. Chunks outside the
// window are skipped using the index, without reading them.
func (b *Block) Iterator(id uint32, mint, maxt int64, reuse chunkenc.Iterator) chunkenc.Iterator {
	it := reusable(reuse)
	it.reset(b, id, mint, maxt, nil, b.stSeries > 0)
	return it
}

// IteratorWithStarts is Iterator for a caller that has looked up the series'
// start timestamp runs already (Starts, nil for none).
func (b *Block) IteratorWithStarts(id uint32, runs starts.Runs, mint, maxt int64, reuse chunkenc.Iterator) chunkenc.Iterator {
	it := reusable(reuse)
	it.reset(b, id, mint, maxt, runs, false)
	return it
}

func reusable(reuse chunkenc.Iterator) *Iterator {
	if it, ok := reuse.(*Iterator); ok && it != nil {
		return it
	}
	return &Iterator{}
}

// reset points the iterator at series id with runs, or with the runs the
// starts file holds for the series if lookup is set.
func (it *Iterator) reset(b *Block, id uint32, mint, maxt int64, runs starts.Runs, lookup bool) {
	it.b, it.mint, it.maxt = b, mint, maxt
	it.curs, it.chunkBuf = it.curs[:0], it.chunkBuf[:0]
	it.cur, it.started, it.err = -1, false, nil
	it.stc.Reset(nil)
	it.hasST = false
	var lb *labels.ScratchBuilder
	if lookup {
		lb = &it.lb
		lb.Reset()
	}
	si, err := b.series(id, lb, it.tables)
	it.tables = si.tables
	if err != nil {
		it.err = err
		return
	}
	if lookup {
		if err := b.StartsErr(); err != nil {
			it.err = err
			return
		}
		runs = b.Starts(lb.Labels())
	}
	if len(runs) > 0 {
		it.stc.Reset(runs)
		it.hasST = true
	}
	it.member = si.member
	for _, mt := range si.tables {
		lo := len(it.chunkBuf)
		if it.chunkBuf, err = b.groupChunks(si.group, mt.table, mt.first, mt.last, it.chunkBuf); err != nil {
			it.err = err
			return
		}
		// Reuse the cursors' decoders: histogram decoders keep their buffers.
		n := len(it.curs)
		if n < cap(it.curs) {
			it.curs = it.curs[:n+1]
		} else {
			it.curs = append(it.curs, tableCursor{})
		}
		c := &it.curs[n]
		c.lo, c.hi, c.ci, c.in, c.ok, c.off = lo, len(it.chunkBuf), lo, false, false, 0
	}
}

// advance moves cursor c to its next sample at or after from (and within the window).
func (it *Iterator) advance(c *tableCursor, from int64) bool {
	from = max(from, it.mint)
	for {
		if c.in && c.cc.col.maxT < from {
			c.in = false
		}
		for c.in {
			if from > c.cc.t {
				c.cc.skipBefore(from)
			}
			ok, err := c.cc.next()
			if err != nil {
				it.err = fmt.Errorf("%s: chunk at %d: %w", it.b.chunksPath, c.off, err)
				return false
			}
			if !ok {
				c.in = false
				break
			}
			if c.cc.t < from {
				continue
			}
			if c.cc.t > it.maxt {
				c.ci = c.hi
				c.in = false
				return false
			}
			c.t, c.v = c.cc.t, c.cc.v
			return true
		}
		if !it.load(c, from) {
			return false
		}
	}
}

// load opens the cursor's next chunk that may hold samples at or after from; false when none remains or on error.
func (it *Iterator) load(c *tableCursor, from int64) bool {
	for c.ci < c.hi {
		cm := it.chunkBuf[c.ci]
		c.ci++
		if cm.minT > it.maxt {
			c.ci = c.hi
			return false
		}
		if cm.maxT < from {
			continue
		}
		body, _, err := it.b.checkedChunkBody(cm.off)
		if err != nil {
			it.err = err
			return false
		}
		ch, err := parseChunk(body)
		if err != nil {
			it.err = fmt.Errorf("%s: chunk at %d: %w", it.b.chunksPath, cm.off, err)
			return false
		}
		i := ch.find(it.member)
		if i < 0 {
			continue
		}
		col, err := ch.column(i)
		if err != nil {
			it.err = fmt.Errorf("%s: chunk at %d: %w", it.b.chunksPath, cm.off, err)
			return false
		}
		if col.maxT < from {
			continue
		}
		c.cc.reset(ch, col)
		c.off, c.in = cm.off, true
		return true
	}
	return false
}

// pick makes the cursor with the earliest sample current.
func (it *Iterator) pick() chunkenc.ValueType {
	it.cur, it.vt = -1, chunkenc.ValNone
	if it.err != nil {
		return chunkenc.ValNone
	}
	for i := range it.curs {
		c := &it.curs[i]
		if c.ok && (it.cur < 0 || c.t < it.t) {
			it.cur, it.t, it.v = i, c.t, c.v
		}
	}
	if it.cur < 0 {
		return chunkenc.ValNone
	}
	switch it.curs[it.cur].cc.col.kind {
	case KindHistogram:
		it.vt = chunkenc.ValHistogram
	case KindFloatHistogram:
		it.vt = chunkenc.ValFloatHistogram
	default:
		it.vt = chunkenc.ValFloat
	}
	return it.vt
}

// Next advances to the next sample.
func (it *Iterator) Next() chunkenc.ValueType {
	if it.err != nil {
		return chunkenc.ValNone
	}
	if !it.started {
		it.started = true
		for i := range it.curs {
			it.curs[i].ok = it.advance(&it.curs[i], it.mint)
		}
	} else if it.cur >= 0 {
		c := &it.curs[it.cur]
		c.ok = it.advance(c, it.mint)
	} else {
		return chunkenc.ValNone
	}
	return it.pick()
}

// Seek advances to the first sample at or after t; it never moves backwards.
func (it *Iterator) Seek(t int64) chunkenc.ValueType {
	if it.err != nil {
		return chunkenc.ValNone
	}
	if it.started {
		if it.cur < 0 {
			return chunkenc.ValNone
		}
		if it.t >= t {
			return it.vt
		}
	}
	for i := range it.curs {
		c := &it.curs[i]
		if !it.started || (c.ok && c.t < t) {
			c.ok = it.advance(c, t)
		}
	}
	it.started = true
	return it.pick()
}

// At returns the current float sample.
func (it *Iterator) At() (int64, float64) { return it.t, it.v }

// AtHistogram returns the current sample, an integer histogram (Next
// returned ValHistogram), written into h when h is not nil (reusing its
// slices), else into a new histogram; nil for other samples.
func (it *Iterator) AtHistogram(h *histogram.Histogram) (int64, *histogram.Histogram) {
	if it.vt != chunkenc.ValHistogram {
		return it.t, nil
	}
	return it.t, it.curs[it.cur].cc.hdec.At(h)
}

// AtFloatHistogram returns the current sample, a float histogram or an
// integer one converted (ValFloatHistogram or ValHistogram), written into fh
// when fh is not nil (reusing its slices), else into a new histogram; nil for
// float samples.
func (it *Iterator) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	switch it.vt {
	case chunkenc.ValFloatHistogram:
		return it.t, it.curs[it.cur].cc.fdec.At(fh)
	case chunkenc.ValHistogram:
		it.hbuf = it.curs[it.cur].cc.hdec.At(it.hbuf)
		return it.t, it.hbuf.ToFloat(fh)
	}
	return it.t, nil
}

// AtT returns the current timestamp.
func (it *Iterator) AtT() int64 { return it.t }

// AtST returns the current sample's start timestamp, 0 if it has none.
func (it *Iterator) AtST() int64 {
	if !it.hasST || it.cur < 0 {
		return 0
	}
	return it.stc.At(it.t)
}

// Err returns the error that stopped iteration, naming the file.
func (it *Iterator) Err() error { return it.err }

// AppendFloats appends the remaining samples of a fresh iterator to ts and vs:
// a series with one table is read cursor by cursor without merging. It
// returns fastread.ErrHistogram (wrapped) when it meets a native histogram
// sample, having appended the float samples before it.
func (it *Iterator) AppendFloats(ts []int64, vs []float64) ([]int64, []float64, error) {
	if it.err == nil && !it.started && len(it.curs) == 1 {
		it.started = true
		c := &it.curs[0]
		for {
			if !c.in && !it.load(c, it.mint) {
				break
			}
			if c.cc.n == 0 && c.cc.bulk() {
				// The whole chunk's rows in range at once.
				var past bool
				var err error
				ts, vs, past, err = c.cc.appendRange(ts, vs, it.mint, it.maxt)
				c.in = false
				if err != nil {
					it.err = fmt.Errorf("%s: chunk at %d: %w", it.b.chunksPath, c.off, err)
					break
				}
				if past {
					c.ci = c.hi
					break
				}
				continue
			}
			if !it.advance(c, it.mint) {
				break
			}
			if c.cc.col.kind != KindFloat {
				it.cur = -1
				return ts, vs, fmt.Errorf("%s: sample at %d: %w", it.b.dir, c.t, fastread.ErrHistogram)
			}
			ts, vs = append(ts, c.t), append(vs, c.v)
		}
		it.cur = -1
		return ts, vs, it.err
	}
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		if vt != chunkenc.ValFloat {
			return ts, vs, fmt.Errorf("%s: sample at %d: %w", it.b.dir, it.t, fastread.ErrHistogram)
		}
		ts, vs = append(ts, it.t), append(vs, it.v)
	}
	return ts, vs, it.err
}
