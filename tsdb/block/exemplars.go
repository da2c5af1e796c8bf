package block

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/prometheus/prometheus/model/labels"
)

// The exemplars file holds the exemplars of a block's time range, series by
// series in label order; series are named by their label sets, so a series
// may have exemplars without samples in the block. A block without
// exemplars has no such file (neither do blocks written before it existed).
// The byte format is described in docs/format/block.md.

// ExemplarsFilename is the name of the optional exemplars file of a block.
const ExemplarsFilename = "exemplars"

const (
	exemplarsMagic     = 0x544E4445 // "TNDE"
	exemplarsHeaderLen = seriesFileHeaderLen
	exemplarsTOCLen    = seriesFileTOCLen
)

// Exemplar is one exemplar of a series: its own labels (e.g. a trace id), timestamp and value.
type Exemplar struct {
	Labels labels.Labels
	T      int64
	V      float64 // every bit pattern round-trips
}

// SeriesExemplars are the exemplars of one series, in strictly increasing timestamp order.
type SeriesExemplars struct {
	Labels    labels.Labels
	Exemplars []Exemplar
}

// ExemplarSource yields the exemplars of a block series by series, in strictly
// ascending label order (labels.Compare); it stops and returns yield's error if
// yield fails. The *SeriesExemplars may be reused by the source after yield returns.
type ExemplarSource func(yield func(*SeriesExemplars) error) error

// writeExemplars writes the exemplars file at path from src and counts the
// exemplars in meta; no file is created when src yields no exemplar.
func writeExemplars(path string, src ExemplarSource, mint, maxt int64, meta *Meta) (err error) {
	w := seriesFileWriter{path: path, magic: exemplarsMagic}
	defer func() {
		if err != nil {
			w.abort()
		}
	}()
	var (
		prev labels.Labels
		body []byte
	)
	err = src(func(se *SeriesExemplars) error {
		if len(se.Exemplars) == 0 {
			return nil
		}
		if w.n > 0 && labels.Compare(prev, se.Labels) >= 0 {
			return fmt.Errorf("%s: series %s after %s: not in ascending label order", path, se.Labels, prev)
		}
		if err := validLabels(se.Labels); err != nil {
			return fmt.Errorf("%s: series %s: %w", path, se.Labels, err)
		}
		for i, e := range se.Exemplars {
			if e.T < mint || e.T >= maxt {
				return fmt.Errorf("%s: series %s: exemplar timestamp %d outside [%d, %d)", path, se.Labels, e.T, mint, maxt)
			}
			if i > 0 && e.T <= se.Exemplars[i-1].T {
				return fmt.Errorf("%s: series %s: exemplar timestamps not strictly increasing at %d", path, se.Labels, i)
			}
			if err := validLabels(e.Labels); err != nil {
				return fmt.Errorf("%s: series %s: exemplar at %d: %w", path, se.Labels, e.T, err)
			}
		}
		body = appendSeriesExemplars(body[:0], se)
		if err := w.add(body); err != nil {
			return err
		}
		meta.Stats.NumExemplars += uint64(len(se.Exemplars))
		prev = se.Labels.Copy()
		return nil
	})
	if err != nil {
		return err
	}
	return w.finish(meta.Stats.NumExemplars)
}

// validLabels checks that label names are non-empty and strictly ascending.
func validLabels(ls labels.Labels) error {
	prev, first := "", true
	var err error
	ls.Range(func(l labels.Label) {
		if err == nil && (l.Name == "" || (!first && l.Name <= prev)) {
			err = fmt.Errorf("label names empty, unsorted or repeated at %q", l.Name)
		}
		prev, first = l.Name, false
	})
	return err
}

// appendSeriesExemplars appends the body of a series record.
func appendSeriesExemplars(b []byte, se *SeriesExemplars) []byte {
	es := se.Exemplars
	minT, maxT := es[0].T, es[len(es)-1].T
	b = binary.AppendVarint(b, minT)
	b = binary.AppendUvarint(b, uint64(maxT-minT))
	b = binary.AppendUvarint(b, uint64(len(es)))
	b = appendLabels(b, se.Labels)
	prev := minT
	for _, e := range es {
		b = binary.AppendUvarint(b, uint64(e.T-prev))
		prev = e.T
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.V))
		b = appendLabels(b, e.Labels)
	}
	return b
}

func appendLabels(b []byte, ls labels.Labels) []byte {
	b = binary.AppendUvarint(b, uint64(ls.Len()))
	ls.Range(func(l labels.Label) {
		b = binary.AppendUvarint(b, uint64(len(l.Name)))
		b = append(b, l.Name...)
		b = binary.AppendUvarint(b, uint64(len(l.Value)))
		b = append(b, l.Value...)
	})
	return b
}

// decodeLabels reads a label set written by appendLabels; names must be non-empty and strictly ascending.
func decodeLabels(d *decbuf, lb *labels.ScratchBuilder) (labels.Labels, error) {
	lb.Reset()
	n := d.uvarintInt(len(d.b) / 2)
	var prev []byte
	for i := 0; i < n && d.err == nil; i++ {
		name := d.bytes(d.uvarintInt(len(d.b)))
		value := d.bytes(d.uvarintInt(len(d.b)))
		if d.err != nil {
			break
		}
		if len(name) == 0 || (i > 0 && string(name) <= string(prev)) {
			return labels.EmptyLabels(), fmt.Errorf("label names empty, unsorted or repeated: %w", ErrCorrupt)
		}
		prev = name
		lb.Add(string(name), string(value))
	}
	if d.err != nil {
		return labels.EmptyLabels(), fmt.Errorf("labels: %w: %w", d.err, ErrCorrupt)
	}
	return lb.Labels(), nil
}

// openExemplars checks the exemplars file's header and TOC.
func (b *Block) openExemplars() error {
	x := b.exemplars
	if len(x) < exemplarsHeaderLen+exemplarsTOCLen {
		return fmt.Errorf("file of %d bytes too short: %w", len(x), ErrCorrupt)
	}
	if m := binary.BigEndian.Uint32(x); m != exemplarsMagic {
		return fmt.Errorf("bad magic %#x: %w", m, ErrCorrupt)
	}
	if !readableVersion(int(x[4])) || x[5]|x[6]|x[7] != 0 {
		return fmt.Errorf("unsupported version %d or flags %x: %w", x[4], x[5:8], ErrCorrupt)
	}
	toc := x[len(x)-exemplarsTOCLen:]
	if crc32.Checksum(toc[:24], castagnoli) != binary.BigEndian.Uint32(toc[24:]) && !b.opts.skipIndexCRC {
		return fmt.Errorf("TOC checksum mismatch: %w", ErrCorrupt)
	}
	if end := binary.BigEndian.Uint64(toc); end != uint64(len(x)-exemplarsTOCLen) {
		return fmt.Errorf("TOC says records end at %d, file has %d bytes: %w", end, len(x), ErrCorrupt)
	}
	ns, ne := binary.BigEndian.Uint64(toc[8:]), binary.BigEndian.Uint64(toc[16:])
	if ns == 0 || ns > ne || ne > uint64(len(x)) {
		return fmt.Errorf("TOC counts %d series and %d exemplars: %w", ns, ne, ErrCorrupt)
	}
	b.exSeries, b.exCount = ns, ne
	return nil
}

// openExemplarsBytes parses an exemplars file held in memory, for fuzzing;
// with skipCRC, checksums are not checked.
func openExemplarsBytes(data []byte, skipCRC bool) (*Block, error) {
	b := &Block{exemplarsPath: ExemplarsFilename, exemplars: data, opts: OpenOptions{skipIndexCRC: skipCRC}}
	b.meta.MinTime, b.meta.MaxTime = math.MinInt64, math.MaxInt64
	if err := b.openExemplars(); err != nil {
		return nil, fmt.Errorf("%s: %w", ExemplarsFilename, err)
	}
	return b, nil
}

// NumExemplars returns the number of exemplars in the block (0 without an exemplars file).
func (b *Block) NumExemplars() int { return int(b.exCount) }

// exemplarRecord returns the body of the series record at off, checking its
// CRC, and the record's size.
func (b *Block) exemplarRecord(off uint64) ([]byte, uint64, error) {
	x := b.exemplars
	end := uint64(len(x)) - exemplarsTOCLen
	if off < exemplarsHeaderLen || off >= end {
		return nil, 0, fmt.Errorf("%s: record offset %d out of range: %w", b.exemplarsPath, off, ErrCorrupt)
	}
	n, k := binary.Uvarint(x[off:end])
	if k <= 0 || n > end-off-uint64(k) || end-off-uint64(k)-n < 4 {
		return nil, 0, fmt.Errorf("%s: record at %d: bad length: %w", b.exemplarsPath, off, ErrCorrupt)
	}
	body := x[off+uint64(k) : off+uint64(k)+n]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(x[off+uint64(k)+n:]) && !b.opts.skipIndexCRC {
		return nil, 0, fmt.Errorf("%s: record at %d: checksum mismatch: %w", b.exemplarsPath, off, ErrCorrupt)
	}
	return body, uint64(k) + n + 4, nil
}

// ExemplarIterator walks the series of a block's exemplars file in label
// order, yielding the exemplars in [mint, maxt] (inclusive, as Prometheus's
// exemplar queries) of the series accepted by a match function. Every
// record it reads has its checksum checked.
type ExemplarIterator struct {
	b          *Block
	off, end   uint64
	mint, maxt int64
	match      func(labels.Labels) bool
	lb         labels.ScratchBuilder
	cur        SeriesExemplars
	err        error
}

// Exemplars returns an iterator over the exemplars with timestamps in
// [mint, maxt] of the series for which match returns true (every series if
// match is nil). The block must stay open while it is used.
func (b *Block) Exemplars(mint, maxt int64, match func(labels.Labels) bool) *ExemplarIterator {
	it := &ExemplarIterator{b: b, mint: mint, maxt: maxt, match: match}
	if len(b.exemplars) >= exemplarsHeaderLen+exemplarsTOCLen {
		it.off, it.end = exemplarsHeaderLen, uint64(len(b.exemplars)-exemplarsTOCLen)
	}
	return it
}

// Next advances to the next series with exemplars to yield.
func (it *ExemplarIterator) Next() bool {
	for it.err == nil && it.off < it.end {
		off := it.off
		body, size, err := it.b.exemplarRecord(off)
		if err != nil {
			it.err = err
			return false
		}
		it.off += size
		ok, err := it.decode(body)
		if err != nil {
			it.err = fmt.Errorf("%s: record at %d: %w", it.b.exemplarsPath, off, err)
			return false
		}
		if ok {
			return true
		}
	}
	return false
}

// decode decodes a record into it.cur; false if it has nothing to yield.
func (it *ExemplarIterator) decode(body []byte) (bool, error) {
	d := decbuf{b: body}
	minT := d.varint()
	span := d.uvarint()
	n := d.uvarintInt(len(body) / 10) // an exemplar takes at least 10 bytes
	if d.err != nil {
		return false, fmt.Errorf("header: %w: %w", d.err, ErrCorrupt)
	}
	maxT := minT + int64(span)
	if n == 0 || span > math.MaxInt64 || maxT < minT {
		return false, fmt.Errorf("bad header (%d exemplars, span %d): %w", n, span, ErrCorrupt)
	}
	if maxT < it.mint || minT > it.maxt {
		return false, nil
	}
	ls, err := decodeLabels(&d, &it.lb)
	if err != nil {
		return false, fmt.Errorf("series labels: %w", err)
	}
	if it.match != nil && !it.match(ls) {
		return false, nil
	}
	it.cur.Labels = ls
	it.cur.Exemplars = it.cur.Exemplars[:0]
	t := minT
	for i := 0; i < n; i++ {
		dt := d.uvarint()
		v := d.f64()
		if d.err != nil {
			return false, fmt.Errorf("exemplar %d: %w: %w", i, d.err, ErrCorrupt)
		}
		if (i == 0) != (dt == 0) || dt > uint64(maxT-t) {
			return false, fmt.Errorf("exemplar %d: bad timestamp delta %d: %w", i, dt, ErrCorrupt)
		}
		t += int64(dt)
		el, err := decodeLabels(&d, &it.lb)
		if err != nil {
			return false, fmt.Errorf("exemplar %d: %w", i, err)
		}
		if t >= it.mint && t <= it.maxt {
			it.cur.Exemplars = append(it.cur.Exemplars, Exemplar{Labels: el, T: t, V: v})
		}
	}
	if t != maxT {
		return false, fmt.Errorf("last exemplar at %d, header says %d: %w", t, maxT, ErrCorrupt)
	}
	if len(d.b) != 0 {
		return false, fmt.Errorf("%d trailing bytes: %w", len(d.b), ErrCorrupt)
	}
	return len(it.cur.Exemplars) > 0, nil
}

// At returns the current series and its exemplars, valid until the next call of Next.
func (it *ExemplarIterator) At() *SeriesExemplars { return &it.cur }

// Err returns the error that stopped the iteration, if any.
func (it *ExemplarIterator) Err() error { return it.err }

// ExemplarSource returns the exemplars of the block in [mint, maxt] as a
// source for Write (the series accepted by match, every series if nil).
func (b *Block) ExemplarSource(mint, maxt int64, match func(labels.Labels) bool) ExemplarSource {
	return func(yield func(*SeriesExemplars) error) error {
		it := b.Exemplars(mint, maxt, match)
		for it.Next() {
			if err := yield(it.At()); err != nil {
				return err
			}
		}
		return it.Err()
	}
}

// verifyExemplars checks the exemplars file completely: every checksum, the
// records' structure and order, the counts against the TOC and meta.json,
// and that every timestamp lies in the block's range.
func (b *Block) verifyExemplars() error {
	if b.exemplars == nil {
		if b.meta.Stats.NumExemplars > 0 {
			return fmt.Errorf("%s: missing, meta.json counts %d exemplars: %w", b.exemplarsPath, b.meta.Stats.NumExemplars, ErrCorrupt)
		}
		return nil
	}
	if err := b.openExemplars(); err != nil {
		return fmt.Errorf("%s: %w", b.exemplarsPath, err)
	}
	it := b.Exemplars(math.MinInt64, math.MaxInt64, nil)
	var prev labels.Labels
	var ns, ne uint64
	for it.Next() {
		se := it.At()
		if ns > 0 && labels.Compare(prev, se.Labels) >= 0 {
			return fmt.Errorf("%s: series %s not in ascending label order: %w", b.exemplarsPath, se.Labels, ErrCorrupt)
		}
		for _, e := range se.Exemplars {
			if e.T < b.meta.MinTime || e.T >= b.meta.MaxTime {
				return fmt.Errorf("%s: series %s: exemplar at %d outside the block's range: %w", b.exemplarsPath, se.Labels, e.T, ErrCorrupt)
			}
		}
		prev = se.Labels
		ns++
		ne += uint64(len(se.Exemplars))
	}
	if err := it.Err(); err != nil {
		return err
	}
	if ns != b.exSeries || ne != b.exCount {
		return fmt.Errorf("%s: TOC counts %d series and %d exemplars, file holds %d and %d: %w", b.exemplarsPath, b.exSeries, b.exCount, ns, ne, ErrCorrupt)
	}
	return nil
}
