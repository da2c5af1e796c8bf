package remote

import (
	"fmt"
	"math"
	"net/http"
	"unicode/utf8"

	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// This file holds a hand-written decoder for remote-write 2.0
// (io.prometheus.write.v2.Request). The generated Unmarshal builds the whole
// request as Go structs before anything can be checked, 176 bytes for a
// series and 280 for a histogram however small they are on the wire (2 bytes
// when empty): 3 MiB of snappy took tandem's RSS to 16.6 GB. This one counts
// the symbols and series first, reads the symbols table (strings pointing
// into the decoded body), then one series at a time into reused buffers,
// counting samples, histograms and exemplars against the limits as it goes.
// Native histograms are decoded into fresh memory, each bounded before it is
// allocated (decode_histogram.go). FuzzDecodeV2 checks it against the
// generated code (decodeV2Gogo).

// refStat describes the labels_refs of one series or exemplar: all are
// counted and checked against the symbols table, the first few stored.
type refStat struct {
	n    int    // refs read
	badJ int    // index of the first ref outside the symbols table, or -1
	badR uint32 // that ref
}

// v2Series is what the decoder read of one 2.0 TimeSeries.
type v2Series struct {
	refs       refStat // the first refs are in decoder.refs
	samples    int     // float samples, appended to the arena
	histograms int     // histogram samples: the valid ones appended to the histogram arena
	meta       writev2.Metadata
}

// v2Exemplar is one exemplar of the 2.0 series being decoded.
type v2Exemplar struct {
	off, kept int // its first refs are decoder.exRefs[off : off+kept]
	refs      refStat
	t         int64
	v         float64
}

// readRefs reads one labels_refs field, packed or not as the generated code
// accepts it (a packed varint may run past the field's end, as there),
// appending to buf until it holds keep refs from start.
func (r *pbReader) readRefs(wire int, buf []uint32, start, keep int, st *refStat, nsyms int) ([]uint32, error) {
	add := func(v uint64) {
		ref := uint32(v)
		if st.badJ < 0 && int64(ref) >= int64(nsyms) {
			st.badJ, st.badR = st.n, ref
		}
		if len(buf)-start < keep {
			buf = append(buf, ref)
		}
		st.n++
	}
	switch wire {
	case wireVarint:
		v, err := r.uvarint()
		if err != nil {
			return buf, err
		}
		add(v)
	case wireBytes:
		n, err := r.uvarint()
		if err != nil {
			return buf, err
		}
		if n > uint64(len(r.b)-r.off) {
			return buf, errProto
		}
		for end := r.off + int(n); r.off < end; {
			v, err := r.uvarint()
			if err != nil {
				return buf, err
			}
			add(v)
		}
	default:
		return buf, fmt.Errorf("labels_refs has wire type %d: %w", wire, errProto)
	}
	return buf, nil
}

// decodeV2 converts a serialized io.prometheus.write.v2.Request into a batch.
// Symbol-table violations (symbols[0] not empty, refs out of range, odd labels_refs)
// fail the whole request; series with invalid labels and native histograms
// Prometheus would refuse are left out and counted in d.stats.invalid, and so
// are exemplars with more labels than MaxLabelsPerSeries (not counted).
func (d *decoder) decodeV2(data []byte) (*head.Batch, error) {
	d.stats = decodeStats{}
	clear(d.seen)
	b, err := d.walkV2(data)
	if err != nil {
		if _, ok := err.(*requestError); ok {
			return nil, err
		}
		return nil, reqErrorf(http.StatusBadRequest, "decoding 2.0 io.prometheus.write.v2.Request: %v", err)
	}
	return b, nil
}

func (d *decoder) walkV2(data []byte) (*head.Batch, error) {
	// First pass: count the symbols and the series, refusing more than the
	// limits before anything is allocated for them.
	nSyms, nSeries, unknown := 0, 0, false
	r := pbReader{b: data}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		if field != 4 && field != 5 {
			unknown = true
			if err := r.skip(wire); err != nil {
				return nil, err
			}
			continue
		}
		if wire != wireBytes {
			return nil, fmt.Errorf("field %d has wire type %d: %w", field, wire, errProto)
		}
		if _, err := r.bytes(); err != nil {
			return nil, err
		}
		if field == 4 {
			nSyms++
		} else {
			nSeries++
		}
	}
	if nSeries > d.limits.MaxSeriesPerRequest {
		return nil, d.tooManySeries()
	}
	if nSyms > d.limits.MaxSymbolsPerRequest {
		return nil, reqErrorf(http.StatusRequestEntityTooLarge, "2.0 request holds %d symbols, more than the limit of %d", nSyms, d.limits.MaxSymbolsPerRequest)
	}

	// Second pass: the symbols table.
	clear(d.syms)
	if cap(d.syms) < nSyms {
		d.syms, d.utf8ok = make([]string, 0, nSyms), make([]bool, 0, nSyms)
	}
	syms, utf8ok := d.syms[:0], d.utf8ok[:0]
	for r = (pbReader{b: data}); !r.done(); {
		field, wire, _ := r.key() // checked above
		if field != 4 {
			_ = r.skip(wire)
			continue
		}
		msg, _ := r.bytes()
		s := str(msg)
		syms, utf8ok = append(syms, s), append(utf8ok, utf8.ValidString(s))
	}
	d.syms, d.utf8ok = syms, utf8ok
	d.resetBatch()
	b := &d.batch
	if len(syms) == 0 {
		switch {
		case nSeries == 0 && !unknown:
			return b, nil // empty request
		case nSeries == 0:
			return nil, reqErrorf(http.StatusBadRequest, "2.0 request holds only fields reserved in io.prometheus.write.v2.Request: "+
				"is this a 1.0 prometheus.WriteRequest sent with Content-Type proto=io.prometheus.write.v2.Request?")
		default:
			return nil, reqErrorf(http.StatusBadRequest, "2.0 request has an empty symbols table; symbols[0] must be the empty string")
		}
	}
	if syms[0] != "" {
		return nil, reqErrorf(http.StatusBadRequest, "2.0 request: symbols[0] must be the empty string, got %s", quoteTrunc(syms[0]))
	}

	// Third pass: the series, one at a time. A series' samples are sliced
	// once it is read, so a growing arena never moves them afterwards.
	d.resetArena(len(data))
	var prev head.SeriesRef // the series resolved last
	r = pbReader{b: data}
	for i := 0; !r.done(); {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		if field != 5 {
			if err := r.skip(wire); err != nil {
				return nil, err
			}
			continue
		}
		msg, err := r.bytes()
		if err != nil {
			return nil, err
		}
		start, hstart := len(d.arena), len(d.harena)
		if err := d.parseSeriesV2(msg, len(syms)); err != nil {
			return nil, err
		}
		if err := d.checkRefsV2(i, len(syms)); err != nil {
			return nil, err
		}
		i++
		var hs []head.HistogramSample
		if hend := len(d.harena); hend > hstart {
			hs = d.harena[hstart:hend:hend]
		}
		if prev, err = d.addSeriesV2(b, d.arena[start:len(d.arena):len(d.arena)], d.startsOf(start), hs, prev); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// parseSeriesV2 reads one TimeSeries into d.cur, d.refs and d.v2ex, its
// samples appended to the arena, its valid histograms to the histogram arena
// (refused ones counted in d.hBad).
func (d *decoder) parseSeriesV2(ts []byte, nsyms int) error {
	d.cur = v2Series{refs: refStat{badJ: -1}}
	d.hBad = 0
	d.refs, d.v2ex, d.exRefs = d.refs[:0], d.v2ex[:0], d.exRefs[:0]
	keep := 2 * d.labelsKept()
	r := pbReader{b: ts}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return err
		}
		if field >= 2 && field <= 5 && wire != wireBytes {
			return fmt.Errorf("TimeSeries field %d has wire type %d: %w", field, wire, errProto)
		}
		switch field {
		case 1:
			if d.refs, err = r.readRefs(wire, d.refs, 0, keep, &d.cur.refs, nsyms); err != nil {
				return err
			}
			continue
		case 2, 3, 4:
			msg, err := r.bytes()
			if err != nil {
				return err
			}
			if err := d.count(1); err != nil {
				return err
			}
			switch field {
			case 2:
				s, st, err := parseSample(msg, true)
				if err != nil {
					return err
				}
				d.appendSample(s)
				d.appendStart(st)
				d.cur.samples++
			case 3:
				if err := d.readHistogram(msg, histogramFieldsV2); err != nil {
					return err
				}
				d.cur.histograms++
			case 4:
				if err := d.parseExemplarV2(msg, nsyms); err != nil {
					return err
				}
			}
		case 5:
			msg, err := r.bytes()
			if err != nil {
				return err
			}
			if err := parseMetadataV2(msg, &d.cur.meta); err != nil {
				return err
			}
		default:
			if err := r.skip(wire); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseExemplarV2 reads one Exemplar into d.v2ex and d.exRefs.
func (d *decoder) parseExemplarV2(b []byte, nsyms int) error {
	e := v2Exemplar{off: len(d.exRefs), refs: refStat{badJ: -1}}
	keep := 2 * (d.limits.MaxLabelsPerSeries + 1)
	r := pbReader{b: b}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return err
		}
		switch {
		case field == 1:
			if d.exRefs, err = r.readRefs(wire, d.exRefs, e.off, keep, &e.refs, nsyms); err != nil {
				return err
			}
		case field == 2 && wire == wireFixed64:
			v, err := r.fixed64()
			if err != nil {
				return err
			}
			e.v = math.Float64frombits(v)
		case field == 3 && wire == wireVarint:
			v, err := r.uvarint()
			if err != nil {
				return err
			}
			e.t = int64(v)
		case field <= 3:
			return fmt.Errorf("Exemplar field %d has wire type %d: %w", field, wire, errProto)
		default:
			if err := r.skip(wire); err != nil {
				return err
			}
		}
	}
	e.kept = len(d.exRefs) - e.off
	d.v2ex = append(d.v2ex, e)
	return nil
}

// parseMetadataV2 reads a Metadata message into m; like the generated code it
// sets only the fields present, so repeated metadata fields merge.
func parseMetadataV2(b []byte, m *writev2.Metadata) error {
	r := pbReader{b: b}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return err
		}
		if field != 1 && field != 3 && field != 4 {
			if err := r.skip(wire); err != nil {
				return err
			}
			continue
		}
		if wire != wireVarint {
			return fmt.Errorf("Metadata field %d has wire type %d: %w", field, wire, errProto)
		}
		v, err := r.uvarint()
		if err != nil {
			return err
		}
		switch field {
		case 1:
			m.Type = writev2.Metadata_MetricType(int32(v))
		case 3:
			m.HelpRef = uint32(v)
		case 4:
			m.UnitRef = uint32(v)
		}
	}
	return nil
}

// checkRefsV2 verifies that every symbol reference of series i (d.cur) is inside the symbols table.
func (d *decoder) checkRefsV2(i, nsyms int) error {
	cur := &d.cur
	if cur.refs.n%2 != 0 {
		return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: labels_refs has odd length %d", i, cur.refs.n)
	}
	if cur.refs.badJ >= 0 {
		return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: labels_refs[%d]=%d outside the symbols table (size %d)", i, cur.refs.badJ, cur.refs.badR, nsyms)
	}
	if int64(cur.meta.HelpRef) >= int64(nsyms) {
		return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: metadata help_ref %d outside the symbols table (size %d)", i, cur.meta.HelpRef, nsyms)
	}
	if int64(cur.meta.UnitRef) >= int64(nsyms) {
		return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: metadata unit_ref %d outside the symbols table (size %d)", i, cur.meta.UnitRef, nsyms)
	}
	for k := range d.v2ex {
		st := &d.v2ex[k].refs
		if st.n%2 != 0 {
			return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: exemplars[%d]: labels_refs has odd length %d", i, k, st.n)
		}
		if st.badJ >= 0 {
			return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: exemplars[%d]: labels_refs[%d]=%d outside the symbols table (size %d)", i, k, st.badJ, st.badR, nsyms)
		}
	}
	return nil
}

// addSeriesV2 adds the series d.cur, whose samples are ss (with start
// timestamps sts, nil when none has one) and valid histograms hs, to b; it
// returns the series resolved, for the next one.
func (d *decoder) addSeriesV2(b *head.Batch, ss []head.Sample, sts []int64, hs []head.HistogramSample, prev head.SeriesRef) (head.SeriesRef, error) {
	cur, syms := &d.cur, d.syms
	ls := v2Labels{refs: d.refs, syms: syms, utf8ok: d.utf8ok}
	nLabels := cur.refs.n / 2
	tooMany := nLabels > d.limits.MaxLabelsPerSeries
	d.stats.samples += cur.samples
	d.stats.histograms += cur.histograms
	if len(d.v2ex) > 0 {
		d.stats.exemplars += len(d.v2ex)
		if d.stats.exemplarSeries == "" {
			d.stats.exemplarSeries = formatSeries(ls)
		}
	}
	// A series the storage already knows: no validation, no labels to build.
	var (
		ref   head.SeriesRef
		known bool
	)
	if d.resolver != nil && (cur.samples > 0 || len(d.v2ex) > 0 || len(hs) > 0) {
		if !tooMany {
			d.v2cur = ls
			if ref, known = d.resolver.ResolveNext(prev, d.matchV2); !known {
				ref, known = d.resolver.ResolveHash(prev, d.labelsHash(ls), d.matchV2)
			}
		}
		prev = ref
	}
	if !known {
		var err error
		if tooMany {
			err = seriesError(ls, fmt.Sprintf("%d labels, more than the limit of %d", nLabels, d.limits.MaxLabelsPerSeries))
		} else {
			err = checkLabels(&d.limits, ls)
		}
		if err != nil {
			d.stats.invalid.Reject(head.ErrInvalidLabels, cur.samples+cur.histograms, err.Error())
			return prev, nil
		}
	}
	d.addMetadataV2(b, ls, &cur.meta)
	if d.hBad > 0 {
		d.rejectBadHistograms(func() string { return formatSeries(ls) })
	}
	if len(hs) > 0 && d.stats.histogramSeries == "" {
		d.stats.histogramSeries = formatSeries(ls)
	}
	if len(ss) == 0 && len(d.v2ex) == 0 && len(hs) == 0 {
		return prev, nil
	}
	var exs []head.Exemplar
	for k := range d.v2ex {
		e := &d.v2ex[k]
		if e.refs.n/2 > d.limits.MaxLabelsPerSeries {
			continue // not written
		}
		refs := d.exRefs[e.off : e.off+e.kept]
		d.esb.Reset()
		for j := 0; j+1 < len(refs); j += 2 {
			d.esb.Add(syms[refs[j]], syms[refs[j+1]])
		}
		d.esb.Sort()
		exs = append(exs, head.Exemplar{Labels: d.esb.Labels(), T: e.t, V: e.v})
	}
	if len(ss) == 0 && len(exs) == 0 && len(hs) == 0 {
		return prev, nil
	}
	if known {
		b.Series = append(b.Series, head.BatchSeries{Ref: ref, Samples: ss, Starts: sts, Exemplars: exs, Histograms: hs})
		return prev, nil
	}
	b.Series = append(b.Series, head.BatchSeries{Labels: seriesLabels(d, v2Labels{refs: d.refs, syms: syms}), Samples: ss, Starts: sts, Exemplars: exs, Histograms: hs})
	return prev, nil
}
