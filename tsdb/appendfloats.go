package tsdb

import (
	"cmp"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// FloatAppender is implemented by the series tandem's queriers return: it
// appends the series' samples in [mint, maxt] (within the range the series
// was selected for) to ts and vs, in time order, decoding column by column
// instead of sample by sample through an iterator. Query code that reads
// whole series (package promql/pushdown) uses it when present.
type FloatAppender interface {
	AppendFloats(ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error)
}

// AppendFloats implements FloatAppender.
func (s *headSeries) AppendFloats(ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	if s.d == nil {
		if t := s.one.T; t >= max(mint, s.mint) && t <= min(maxt, s.maxt) {
			ts, vs = append(ts, t), append(vs, s.one.V)
		}
		return ts, vs, nil
	}
	d := s.d
	mint, maxt = max(mint, d.mint), min(maxt, d.maxt)
	if len(d.own) > 0 || len(d.late) > 0 {
		// Several streams to merge: the iterator does that.
		return appendIter(newSeriesIterator(d), ts, vs, mint, maxt)
	}
	var err error
	var dec valDecoder
	for i := range d.parts {
		if ts, vs, err = d.parts[i].appendFloats(&dec, ts, vs, mint, maxt); err != nil {
			return ts, vs, err
		}
	}
	return ts, vs, nil
}

// appendFloats appends the part's samples in [mint, maxt].
func (p *part) appendFloats(dec *valDecoder, ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	if p.c == nil {
		for _, s := range p.samples {
			if s.T >= mint && s.T <= maxt {
				ts, vs = append(ts, s.T), append(vs, s.V)
			}
		}
		return ts, vs, nil
	}
	c := p.c
	if c.maxT < mint || c.minT > maxt {
		return ts, vs, nil
	}
	col := c.col(p.col)
	if col == nil {
		return ts, vs, nil
	}
	tss := p.tss
	if tss == nil {
		if tss = decodeTimestamps(c.ts, c.rows); tss == nil {
			return ts, vs, errCorruptPresence
		}
	}
	bm := c.presence(col)
	if bm == nil {
		return appendRun(dec, c, col, tss, ts, vs, mint, maxt)
	}
	dec.reset(c, col)
	r := int(col.first)
	for k := 0; k < int(col.n); k++ {
		if bm != nil {
			if r = nextPresent(bm, r); r < 0 {
				return ts, vs, errCorruptPresence
			}
		}
		if r >= len(tss) || !dec.next() {
			if err := dec.error(); err != nil {
				return ts, vs, err
			}
			return ts, vs, errCorruptPresence
		}
		t := tss[r]
		r++
		if t < mint {
			continue
		}
		if t > maxt {
			break
		}
		ts, vs = append(ts, t), append(vs, dec.at())
	}
	return ts, vs, dec.error()
}

// appendRun appends the samples in [mint, maxt] of column col, whose values
// fill the rows first..first+n-1: the rows in range are found by binary
// search, values before them are decoded and skipped, none after them is
// decoded, and a constant column decodes nothing.
func appendRun(dec *valDecoder, c *chunk, col *colData, tss []int64, ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	first, n := int(col.first), int(col.n)
	if first < 0 || first+n > len(tss) {
		return ts, vs, errCorruptPresence
	}
	rows := tss[first : first+n]
	a, _ := slices.BinarySearch(rows, mint)
	b, found := slices.BinarySearch(rows, maxt)
	if found {
		b++
	}
	if a >= b {
		return ts, vs, nil
	}
	dec.reset(c, col)
	if dec.kind == colConst {
		if err := dec.error(); err != nil {
			return ts, vs, err
		}
		ts = append(ts, rows[a:b]...)
		for range b - a {
			vs = append(vs, dec.cv)
		}
		return ts, vs, nil
	}
	if dec.kind == colDecimal {
		// One loop: the a values before the range skipped, the range's appended.
		start := len(vs)
		if vs = dec.dec.AppendNext(vs, a, b-a); len(vs)-start != b-a {
			return ts, vs[:start], cmp.Or(dec.dec.Err(), errCorruptPresence)
		}
		return append(ts, rows[a:b]...), vs, nil
	}
	for range a {
		if !dec.next() {
			return ts, vs, cmp.Or(dec.error(), errCorruptPresence)
		}
	}
	ts = append(ts, rows[a:b]...)
	for range b - a {
		if !dec.next() {
			return ts, vs, cmp.Or(dec.error(), errCorruptPresence)
		}
		vs = append(vs, dec.at())
	}
	return ts, vs, nil
}

// AppendFloats implements FloatAppender.
func (s *blockSeries) AppendFloats(ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	reuse, _ := blockIterators.Get().(*block.Iterator)
	it := s.b.Iterator(s.id, max(mint, s.mint), min(maxt, s.maxt), reuse).(*block.Iterator)
	ts, vs, err := it.AppendFloats(ts, vs)
	blockIterators.Put(it)
	return ts, vs, err
}

// blockIterators recycles the block iterators of AppendFloats.
var blockIterators sync.Pool

// appendIter appends what it yields in [mint, maxt].
func appendIter(it chunkenc.Iterator, ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	for vt := it.Seek(mint); vt != chunkenc.ValNone; vt = it.Next() {
		t, v := it.At()
		if t > maxt {
			break
		}
		ts, vs = append(ts, t), append(vs, v)
	}
	return ts, vs, it.Err()
}

// mergedSeries is one series found in several blocks and the head, in time
// order of its sources: the DB querier's vertical merge.
type mergedSeries struct {
	lset  labels.Labels
	parts []storage.Series
}

// mergeSeries is the DB querier's storage.VerticalSeriesMergeFunc: Prometheus's
// chained merge, keeping FloatAppender.
func mergeSeries(ss ...storage.Series) storage.Series {
	if len(ss) == 1 {
		return ss[0]
	}
	return &mergedSeries{lset: ss[0].Labels(), parts: ss}
}

func (s *mergedSeries) Labels() labels.Labels { return s.lset }

func (s *mergedSeries) Iterator(reuse chunkenc.Iterator) chunkenc.Iterator {
	return storage.ChainedSeriesMerge(s.parts...).Iterator(reuse)
}

// AppendFloats implements FloatAppender: the sources one after the other
// while they do not overlap in time, else through the chained merge.
func (s *mergedSeries) AppendFloats(ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	start := len(ts)
	for _, p := range s.parts {
		fa, ok := p.(FloatAppender)
		if !ok {
			return appendIter(s.Iterator(nil), ts[:start], vs[:start], mint, maxt)
		}
		from := len(ts)
		var err error
		if ts, vs, err = fa.AppendFloats(ts, vs, mint, maxt); err != nil {
			return ts, vs, err
		}
		if from > start && len(ts) > from && ts[from] <= ts[from-1] {
			// Overlapping sources (an out-of-order block): merge properly.
			return appendIter(s.Iterator(nil), ts[:start], vs[:start], mint, maxt)
		}
	}
	return ts, vs, nil
}
