package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/prometheus/prometheus/prompb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// This file holds a hand-written decoder for remote-write 1.0
// (prometheus.WriteRequest). The generated gogo Unmarshal allocates a string
// per label name and value of every series; this one walks the protobuf bytes
// once, keeps label strings pointing into the decoded body until the series'
// labels.Labels is built (one allocation per series), and writes samples into
// one arena per request. Native histograms are decoded into fresh memory
// (decode_histogram.go). FuzzDecodeV1 checks it against gogo.

var errProto = errors.New("malformed protobuf")

// wire types used by prometheus.WriteRequest.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// pbReader reads protobuf fields from a byte slice.
type pbReader struct {
	b   []byte
	off int
}

func (r *pbReader) done() bool { return r.off >= len(r.b) }

// uvarint reads a varint of at most 10 bytes; like the generated code, bits
// beyond 64 are dropped rather than refused.
func (r *pbReader) uvarint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if r.off >= len(r.b) {
			return 0, errProto
		}
		c := r.b[r.off]
		r.off++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, nil
		}
	}
	return 0, errProto
}

// key reads a field key.
func (r *pbReader) key() (field int, wire int, err error) {
	k, err := r.uvarint()
	if err != nil {
		return 0, 0, err
	}
	field, wire = int(int32(k>>3)), int(k&7)
	if field <= 0 || wire == 4 {
		return 0, 0, errProto
	}
	return field, wire, nil
}

// bytes reads a length-delimited field's payload.
func (r *pbReader) bytes() ([]byte, error) {
	n, err := r.uvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.b)-r.off) {
		return nil, errProto
	}
	b := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return b, nil
}

func (r *pbReader) fixed64() (uint64, error) {
	if len(r.b)-r.off < 8 {
		return 0, errProto
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v, nil
}

// skip skips a field of the given wire type.
func (r *pbReader) skip(wire int) error {
	switch wire {
	case wireVarint:
		_, err := r.uvarint()
		return err
	case wireFixed64:
		_, err := r.fixed64()
		return err
	case wireBytes:
		_, err := r.bytes()
		return err
	case wireFixed32:
		if len(r.b)-r.off < 4 {
			return errProto
		}
		r.off += 4
		return nil
	case 3: // deprecated group: skip to its end, as the generated code does
		for depth := 1; depth > 0; {
			k, err := r.uvarint()
			if err != nil {
				return err
			}
			switch w := int(k & 7); w {
			case 3:
				depth++
			case 4:
				depth--
			default:
				if err := r.skip(w); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return errProto // invalid wire types
}

// str returns b as a string without copying; valid while the body buffer is.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// decodeV1 converts a serialized prometheus.WriteRequest into a batch.
// Series with invalid labels and native histograms Prometheus would refuse
// are left out and counted in d.stats.invalid, and so are exemplars with more
// labels than MaxLabelsPerSeries (not counted). A returned error fails the
// whole request.
func (d *decoder) decodeV1(data []byte) (*head.Batch, error) {
	d.stats = decodeStats{}
	b, err := d.walkV1(data)
	if err != nil {
		if _, ok := err.(*requestError); ok {
			return nil, err
		}
		return nil, reqErrorf(http.StatusBadRequest, "decoding 1.0 prometheus.WriteRequest: %v", err)
	}
	return b, nil
}

func (d *decoder) walkV1(data []byte) (*head.Batch, error) {
	// One pass: samples are appended to the decoder's reused arena. A series'
	// samples are sliced once it is read, so a growing arena never moves them
	// afterwards (earlier series keep pointing into the old array, unchanged).
	d.resetBatch()
	b := &d.batch
	d.resetArena(len(data))
	nSeries, nMeta, unknown := 0, 0, 0
	var prev head.SeriesRef // the series resolved last
	maxSeries := d.limits.MaxSeriesPerRequest
	r := pbReader{b: data}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return nil, err
		}
		if field != 1 && field != 3 {
			unknown++
			if err := r.skip(wire); err != nil {
				return nil, err
			}
			continue
		}
		if wire != wireBytes {
			return nil, fmt.Errorf("field %d has wire type %d: %w", field, wire, errProto)
		}
		msg, err := r.bytes()
		if err != nil {
			return nil, err
		}
		if nSeries+nMeta >= maxSeries {
			return nil, d.tooManySeries()
		}
		if field == 3 {
			nMeta++
			m, err := parseMetadataV1(msg)
			if err != nil {
				return nil, err
			}
			if m.Metric == "" || !utf8.ValidString(m.Metric) {
				continue
			}
			m.Metric = strings.Clone(m.Metric)
			m.Help = strings.ToValidUTF8(m.Help, "\uFFFD")
			m.Unit = strings.ToValidUTF8(m.Unit, "\uFFFD")
			if m.Help != "" {
				m.Help = strings.Clone(m.Help)
			}
			if m.Unit != "" {
				m.Unit = strings.Clone(m.Unit)
			}
			b.Metadata = append(b.Metadata, m)
			continue
		}
		nSeries++
		start, hstart := len(d.arena), len(d.harena)
		n, err := d.parseSeriesV1(msg)
		if err != nil {
			return nil, err
		}
		nh := len(d.harena) - hstart
		if n == 0 && len(d.exbuf) == 0 && nh == 0 && d.hBad == 0 {
			// Nothing to store, but a malformed label still fails the request.
			if err := d.parseLbuf(); err != nil {
				return nil, err
			}
			continue
		}
		samples := d.arena[start : start+n : start+n]
		var hists []head.HistogramSample
		if nh > 0 {
			hists = d.harena[hstart : hstart+nh : hstart+nh]
		}
		exemplars := slices.Clone(d.exbuf)
		// A series the storage already knows: no validation, no labels to
		// build, and (for the one that followed the previous series last
		// time, as most do) no hash either.
		tooMany := d.curLabels > d.limits.MaxLabelsPerSeries
		if d.resolver != nil && tooMany {
			prev = head.SeriesRef{}
		}
		if d.resolver != nil && !tooMany {
			ref, ok := d.resolver.ResolveNext(prev, d.match)
			if !ok {
				if err := d.parseLbuf(); err != nil {
					return nil, err
				}
				ref, ok = d.resolver.ResolveHash(prev, d.labelsHash(v1Labels(d.lbuf)), d.match)
			}
			prev = ref
			if ok {
				d.addHistogramsV1(nh)
				if n > 0 || len(exemplars) > 0 || nh > 0 {
					b.Series = append(b.Series, head.BatchSeries{Ref: ref, Samples: samples, Exemplars: exemplars, Histograms: hists})
				}
				continue
			}
		}
		if err := d.parseLbuf(); err != nil {
			return nil, err
		}
		if err := d.checkLabelsV1(); err != nil {
			d.stats.invalid.Reject(head.ErrInvalidLabels, n+nh+d.hBad, err.Error())
			continue
		}
		d.addHistogramsV1(nh)
		if n == 0 && len(exemplars) == 0 && nh == 0 {
			continue // only refused histograms
		}
		b.Series = append(b.Series, head.BatchSeries{Labels: seriesLabels(d, v1Labels(d.lbuf)), Samples: samples, Exemplars: exemplars, Histograms: hists})
	}
	if nSeries == 0 && nMeta == 0 && unknown > 0 {
		return nil, reqErrorf(http.StatusBadRequest, "1.0 prometheus.WriteRequest holds only unknown fields: "+
			"is this a 2.0 request sent without Content-Type proto=io.prometheus.write.v2.Request?")
	}
	return b, nil
}

// parseSeriesV1 reads one TimeSeries: samples appended to d.arena, valid
// histograms to d.harena (refused ones counted in d.hBad), the label
// fields' bytes into d.rawLabels when contiguous. The labels themselves are
// parsed into d.lbuf only when needed (parseLbuf): a known series is matched
// on its protobuf bytes. It returns the number of float samples.
func (d *decoder) parseSeriesV1(ts []byte) (int, error) {
	d.lbuf = d.lbuf[:0]
	d.lbufOK = false
	d.curTS = ts
	d.exbuf = d.exbuf[:0]
	d.rawLabels = nil
	d.curLabels = 0
	d.hBad = 0
	n, hist, ex := 0, 0, 0
	// The label fields' bytes, when contiguous (as every sender writes them),
	// are hashed in one call to find a known series.
	lstart, lend, contiguous := -1, -1, true
	r := pbReader{b: ts}
	for !r.done() {
		fieldStart := r.off
		field, wire, err := r.key()
		if err != nil {
			return 0, err
		}
		if field <= 4 && wire != wireBytes {
			return 0, fmt.Errorf("TimeSeries field %d has wire type %d: %w", field, wire, errProto)
		}
		switch field {
		case 1:
			if _, err := r.bytes(); err != nil {
				return 0, err
			}
			d.curLabels++
			if lstart < 0 {
				lstart = fieldStart
			} else if lend != fieldStart {
				contiguous = false
			}
			// The labels that follow it, in the shape every sender writes
			// (tag, one-byte length), are stepped over without a key read.
			for r.off+1 < len(r.b) && r.b[r.off] == 1<<3|wireBytes && r.b[r.off+1] < 0x80 && 2+int(r.b[r.off+1]) <= len(r.b)-r.off {
				r.off += 2 + int(r.b[r.off+1])
				d.curLabels++
			}
			lend = r.off
		case 2:
			msg, err := r.bytes()
			if err != nil {
				return 0, err
			}
			s, _, err := parseSample(msg, false)
			if err != nil {
				return 0, err
			}
			if err := d.count(1); err != nil {
				return 0, err
			}
			d.appendSample(s)
			n++
		case 3, 4:
			msg, err := r.bytes()
			if err != nil {
				return 0, err
			}
			if err := d.count(1); err != nil {
				return 0, err
			}
			if field == 3 {
				e, ok, err := d.parseExemplarV1(msg)
				if err != nil {
					return 0, err
				}
				if ok {
					d.exbuf = append(d.exbuf, e)
				}
				ex++
			} else {
				if err := d.readHistogram(msg, histogramFieldsV1); err != nil {
					return 0, err
				}
				hist++
			}
		default:
			if err := r.skip(wire); err != nil {
				return 0, err
			}
		}
	}
	if contiguous && lstart >= 0 {
		d.rawLabels = ts[lstart:lend]
	}
	if hist > 0 || ex > 0 {
		if err := d.parseLbuf(); err != nil {
			return 0, err
		}
	}
	d.stats.samples += n
	d.stats.histograms += hist
	if ex > 0 {
		d.stats.exemplars += ex
		if d.stats.exemplarSeries == "" {
			d.stats.exemplarSeries = formatSeries(v1Labels(d.lbuf))
		}
	}
	return n, nil
}

// parseLbuf parses the labels of the series parseSeriesV1 read into d.lbuf,
// once.
func (d *decoder) parseLbuf() error {
	if d.lbufOK {
		return nil
	}
	d.lbuf, d.lbufN = d.lbuf[:0], 0
	keep := d.labelsKept()
	r := pbReader{b: d.curTS}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return err
		}
		if field != 1 {
			if err := r.skip(wire); err != nil {
				return err
			}
			continue
		}
		msg, err := r.bytes()
		if err != nil {
			return err
		}
		l, err := parseLabel(msg)
		if err != nil {
			return err
		}
		if d.lbufN++; d.lbufN <= keep {
			d.lbuf = append(d.lbuf, l)
		}
	}
	d.lbufOK = true
	return nil
}

// addHistogramsV1 reports the refused histograms of the series parseSeriesV1
// read, whose labels are valid, and names it in the stats if nh of its
// histograms go to the batch.
func (d *decoder) addHistogramsV1(nh int) {
	if d.hBad > 0 {
		d.rejectBadHistograms(func() string { return formatSeries(v1Labels(d.lbuf)) })
	}
	if nh > 0 && d.stats.histogramSeries == "" {
		d.stats.histogramSeries = formatSeries(v1Labels(d.lbuf))
	}
}

// checkLabelsV1 validates the labels parseLbuf read (checkLabels), also
// when lbuf holds only the first of them.
func (d *decoder) checkLabelsV1() error {
	if max := d.limits.MaxLabelsPerSeries; d.lbufN > max {
		return seriesError(v1Labels(d.lbuf), fmt.Sprintf("%d labels, more than the limit of %d", d.lbufN, max))
	}
	return checkLabels(&d.limits, v1Labels(d.lbuf))
}

// parseExemplarV1 reads a 1.0 Exemplar as the generated code would; ok is
// false when it has more labels than MaxLabelsPerSeries: it is not written.
func (d *decoder) parseExemplarV1(b []byte) (e head.Exemplar, ok bool, err error) {
	d.exlbuf = d.exlbuf[:0]
	n, max := 0, d.limits.MaxLabelsPerSeries
	r := pbReader{b: b}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return e, false, err
		}
		switch {
		case field == 1 && wire == wireBytes:
			msg, err := r.bytes()
			if err != nil {
				return e, false, err
			}
			l, err := parseLabel(msg)
			if err != nil {
				return e, false, err
			}
			if n++; n <= max {
				d.exlbuf = append(d.exlbuf, l)
			}
		case field == 2 && wire == wireFixed64:
			v, err := r.fixed64()
			if err != nil {
				return e, false, err
			}
			e.V = math.Float64frombits(v)
		case field == 3 && wire == wireVarint:
			v, err := r.uvarint()
			if err != nil {
				return e, false, err
			}
			e.T = int64(v)
		case field <= 3:
			return e, false, fmt.Errorf("Exemplar field %d has wire type %d: %w", field, wire, errProto)
		default:
			if err := r.skip(wire); err != nil {
				return e, false, err
			}
		}
	}
	if n > max {
		return e, false, nil
	}
	d.esb.Reset()
	for _, l := range d.exlbuf {
		d.esb.Add(l.Name, l.Value)
	}
	d.esb.Sort()
	e.Labels = d.esb.Labels()
	return e, true, nil
}

func parseLabel(b []byte) (prompb.Label, error) {
	// The shape every sender writes: name (field 1), then value (field 2),
	// each shorter than 128 bytes, nothing else.
	if len(b) >= 4 && b[0] == 1<<3|wireBytes {
		if n := int(b[1]); n < 0x80 && 4+n <= len(b) && b[2+n] == 2<<3|wireBytes {
			if m := int(b[3+n]); m < 0x80 && 4+n+m == len(b) {
				return prompb.Label{Name: str(b[2 : 2+n]), Value: str(b[4+n:])}, nil
			}
		}
	}
	var l prompb.Label
	r := pbReader{b: b}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return l, err
		}
		if (field == 1 || field == 2) && wire != wireBytes {
			return l, fmt.Errorf("Label field %d has wire type %d: %w", field, wire, errProto)
		}
		switch field {
		case 1, 2:
			v, err := r.bytes()
			if err != nil {
				return l, err
			}
			if field == 1 {
				l.Name = str(v)
			} else {
				l.Value = str(v)
			}
		default:
			if err := r.skip(wire); err != nil {
				return l, err
			}
		}
	}
	return l, nil
}

// parseSample reads a Sample; startTS: field 3 is the 2.0 start_timestamp
// (an int64, ignored), unknown to 1.0.
func parseSample(b []byte, startTS bool) (s head.Sample, st int64, err error) {
	// The shape every sender writes: value (field 1), then timestamp (field 2).
	if len(b) >= 11 && b[0] == 1<<3|wireFixed64 && b[9] == 2<<3|wireVarint {
		if t, k := binary.Uvarint(b[10:]); k > 0 && 10+k == len(b) {
			return head.Sample{T: int64(t), V: math.Float64frombits(binary.LittleEndian.Uint64(b[1:9]))}, 0, nil
		}
	}
	r := pbReader{b: b}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return s, st, err
		}
		switch {
		case field == 1 && wire == wireFixed64:
			v, err := r.fixed64()
			if err != nil {
				return s, st, err
			}
			s.V = math.Float64frombits(v)
		case field == 2 && wire == wireVarint:
			v, err := r.uvarint()
			if err != nil {
				return s, st, err
			}
			s.T = int64(v)
		case field == 3 && startTS && wire == wireVarint:
			v, err := r.uvarint()
			if err != nil {
				return s, st, err
			}
			st = int64(v)
		case field == 1 || field == 2 || field == 3 && startTS:
			return s, st, fmt.Errorf("Sample field %d has wire type %d: %w", field, wire, errProto)
		default:
			if err := r.skip(wire); err != nil {
				return s, st, err
			}
		}
	}
	return s, st, nil
}

func parseMetadataV1(b []byte) (head.Metadata, error) {
	var m head.Metadata
	var typ prompb.MetricMetadata_MetricType
	r := pbReader{b: b}
	for !r.done() {
		field, wire, err := r.key()
		if err != nil {
			return m, err
		}
		switch {
		case field == 1 && wire == wireVarint:
			v, err := r.uvarint()
			if err != nil {
				return m, err
			}
			typ = prompb.MetricMetadata_MetricType(int32(v))
		case (field == 2 || field == 4 || field == 5) && wire == wireBytes:
			v, err := r.bytes()
			if err != nil {
				return m, err
			}
			switch field {
			case 2:
				m.Metric = str(v)
			case 4:
				m.Help = str(v)
			case 5:
				m.Unit = str(v)
			}
		case field == 1 || field == 2 || field == 4 || field == 5:
			return m, fmt.Errorf("MetricMetadata field %d has wire type %d: %w", field, wire, errProto)
		default:
			if err := r.skip(wire); err != nil {
				return m, err
			}
		}
	}
	m.Type = metricTypeV1(typ)
	return m, nil
}
