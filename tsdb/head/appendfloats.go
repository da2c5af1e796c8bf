package head

import (
	"cmp"
	"slices"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// AppendFloats implements fastread.FloatAppender.
func (s *headSeries) AppendFloats(ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	if s.d == nil {
		if t := s.one.T; t >= mint && t <= maxt { // (in the querier's range: lastSample)
			ts, vs = append(ts, t), append(vs, s.one.V)
		}
		return ts, vs, nil
	}
	d := s.d
	mint, maxt = max(mint, d.mint), min(maxt, d.maxt)
	if d.more() {
		// Several streams to merge: the iterator does that.
		return fastread.AppendIter(newSeriesIterator(d), ts, vs, mint, maxt)
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
		for _, s := range p.raw.samples {
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
	col := c.col(int(p.col))
	if col == nil {
		return ts, vs, nil
	}
	if col.kind.isHistogram() {
		return ts, vs, fastread.ErrHistogram
	}
	tss := p.tss
	if tss == nil {
		if p.frozen {
			tss = c.timestamps()
		} else {
			tss = decodeTimestamps(c.ts, c.rows)
		}
		if tss == nil {
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
		start := len(vs)
		vs = slices.Grow(vs, b-a)[:start+b-a]
		for j := range vs[start:] {
			vs[start+j] = dec.cv
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
