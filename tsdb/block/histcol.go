package block

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Native histogram columns (version 5). After the type byte (colHistogram or
// colFloatHistogram) come the presence, as for float columns; the first and
// the last histograms' Count (a uvarint for integer histograms, an f64 for
// float ones) and Sum (f64); then the uvarint length and bytes of the
// tsdb/encoding histogram stream of the column's histograms.

// encodeHistColumn appends histogram column c (of kind k) of a chunk with
// timestamps ts to dst; on error it appends nothing.
func (e *chunkEncoder) encodeHistColumn(dst []byte, ts []int64, c colInput, k Kind) ([]byte, error) {
	if k == KindHistogram {
		e.hist.Reset()
		for i, h := range c.hs {
			if err := e.hist.Append(h); err != nil {
				return dst, fmt.Errorf("member %d histogram %d: %w", c.member, i, err)
			}
		}
		f, l := c.hs[0], c.hs[len(c.hs)-1]
		dst = appendPresence(append(dst, colHistogram), ts, c.rows)
		dst = binary.LittleEndian.AppendUint64(binary.AppendUvarint(dst, f.Count), math.Float64bits(f.Sum))
		dst = binary.LittleEndian.AppendUint64(binary.AppendUvarint(dst, l.Count), math.Float64bits(l.Sum))
		dst = binary.AppendUvarint(dst, uint64(len(e.hist.Bytes())))
		return append(dst, e.hist.Bytes()...), nil
	}
	e.fhist.Reset()
	for i, h := range c.fhs {
		if err := e.fhist.Append(h); err != nil {
			return dst, fmt.Errorf("member %d float histogram %d: %w", c.member, i, err)
		}
	}
	f, l := c.fhs[0], c.fhs[len(c.fhs)-1]
	dst = appendPresence(append(dst, colFloatHistogram), ts, c.rows)
	for _, x := range [...]float64{f.Count, f.Sum, l.Count, l.Sum} {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(x))
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.fhist.Bytes())))
	return append(dst, e.fhist.Bytes()...), nil
}

// histColumn parses the rest of the header of column i, a histogram column
// of type t whose header d is at (start bytes before its end).
func (c *chunkView) histColumn(i int, t byte, d decbuf, start int, v colView) (colView, error) {
	v.kind, v.enc = KindHistogram, encNone
	if t == colFloatHistogram {
		v.kind = KindFloatHistogram
	}
	if err := c.presence(i, &d, &v); err != nil {
		return v, err
	}
	for _, st := range []*HistStat{&v.hFirst, &v.hLast} {
		if v.kind == KindHistogram {
			st.Count = float64(d.uvarint())
		} else {
			st.Count = d.f64()
		}
		st.Sum = d.f64()
	}
	nan := math.NaN()
	v.first, v.min, v.max, v.sum, v.last = nan, nan, nan, nan, nan
	v.data = d.bytes(d.uvarintInt(len(c.area)))
	if d.err != nil {
		return v, fmt.Errorf("column %d header: %w: %w", i, d.err, ErrCorrupt)
	}
	v.size = start - len(d.b)
	return v, nil
}

// colName names a column's encoding: its value encoding, or its kind for histogram columns.
func colName(col *colView) string {
	if col.kind != KindFloat {
		return col.kind.String()
	}
	return encName(col.enc)
}

// appendHistograms appends the histograms of col (a histogram column) to c's
// Histograms or FloatHistograms, decoding into the histograms that the
// slice's capacity beyond its length holds (they must not be among the
// slice's elements), allocating the others.
func (d *colDecoder) appendHistograms(col colView, c *Column) (err error) {
	if col.kind == KindHistogram {
		c.Histograms, err = appendDecoded(c.Histograms, &d.hdec, col, "histograms")
		return err
	}
	c.FloatHistograms, err = appendDecoded(c.FloatHistograms, &d.fdec, col, "float histograms")
	return err
}

// histDecoder is what appendDecoded needs of the histogram column decoders.
type histDecoder[H any] interface {
	Reset(b []byte, n int)
	Next() bool
	At(h H) H
	Err() error
}

// appendDecoded decodes col's histograms with dec onto hs, reusing the
// histograms in hs's capacity beyond its length.
func appendDecoded[H any](hs []H, dec histDecoder[H], col colView, what string) ([]H, error) {
	dec.Reset(col.data, col.count)
	for range col.count {
		if !dec.Next() {
			return hs, fmt.Errorf("member %d: %s: %w: %w", col.member, what, errOr(dec.Err()), ErrCorrupt)
		}
		hs = slices.Grow(hs, 1)
		hs = hs[:len(hs)+1]
		hs[len(hs)-1] = dec.At(hs[len(hs)-1])
	}
	return hs, nil
}
