package block

import (
	"fmt"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// Iterator iterates one series' float samples in a time window, merging the series' tables in time order.
type Iterator struct {
	b          *Block
	mint, maxt int64
	member     int
	curs       []tableCursor
	chunkBuf   []chunkMeta
	tables     []memberTable
	cur        int // cursor holding the current sample, -1 if none
	started    bool
	t          int64
	v          float64
	err        error
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

// Iterator returns the series' samples in [mint, maxt] in time order; reuse may be an iterator previously returned by any Block, to be reset.
// Chunks outside the window are skipped using the index, without reading them.
func (b *Block) Iterator(id uint32, mint, maxt int64, reuse chunkenc.Iterator) chunkenc.Iterator {
	it, ok := reuse.(*Iterator)
	if !ok || it == nil {
		it = &Iterator{}
	}
	it.reset(b, id, mint, maxt)
	return it
}

func (it *Iterator) reset(b *Block, id uint32, mint, maxt int64) {
	it.b, it.mint, it.maxt = b, mint, maxt
	it.curs, it.chunkBuf = it.curs[:0], it.chunkBuf[:0]
	it.cur, it.started, it.err = -1, false, nil
	si, err := b.series(id, nil, it.tables)
	it.tables = si.tables
	if err != nil {
		it.err = err
		return
	}
	it.member = si.member
	for _, mt := range si.tables {
		lo := len(it.chunkBuf)
		if it.chunkBuf, err = b.groupChunks(si.group, mt.table, mt.first, mt.last, it.chunkBuf); err != nil {
			it.err = err
			return
		}
		it.curs = append(it.curs, tableCursor{lo: lo, hi: len(it.chunkBuf), ci: lo})
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
	it.cur = -1
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
	return chunkenc.ValFloat
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
			return chunkenc.ValFloat
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

// At returns the current sample.
func (it *Iterator) At() (int64, float64) { return it.t, it.v }

// AtHistogram is not supported: blocks hold floats only.
func (it *Iterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.t, nil
}

// AtFloatHistogram is not supported: blocks hold floats only.
func (it *Iterator) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return it.t, nil
}

// AtT returns the current timestamp.
func (it *Iterator) AtT() int64 { return it.t }

// AtST returns 0: blocks do not store start timestamps.
func (it *Iterator) AtST() int64 { return 0 }

// Err returns the error that stopped iteration, naming the file.
func (it *Iterator) Err() error { return it.err }

// AppendFloats appends the remaining samples of a fresh iterator to ts and vs:
// a series with one table is read cursor by cursor without merging.
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
			ts, vs = append(ts, c.t), append(vs, c.v)
		}
		it.cur = -1
		return ts, vs, it.err
	}
	for it.Next() != chunkenc.ValNone {
		ts, vs = append(ts, it.t), append(vs, it.v)
	}
	return ts, vs, it.err
}
