package remote

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/golang/snappy"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/tandem-tsdb/tandem/tsdb"
)

// requestError fails a whole request: nothing of it is written.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func reqErrorf(status int, format string, args ...any) *requestError {
	return &requestError{status: status, msg: fmt.Sprintf(format, args...)}
}

// maxPooledBuffer is the largest buffer capacity a decoder keeps when it returns to the pool.
const maxPooledBuffer = 16 << 20

// maxSeriesText bounds the length of a series printed in an error message.
const maxSeriesText = 256

// decodeStats counts what one request carried and what decoding itself refused.
type decodeStats struct {
	samples    int // float samples in the request
	histograms int // native histogram samples in the request (never written)
	exemplars  int // exemplars in the request (never written)
	// invalid counts float samples refused before storage, by reason (tsdb.ErrInvalidLabels).
	invalid tsdb.AppendResult
	// histogramSeries and exemplarSeries name one series that carried histograms / exemplars.
	histogramSeries, exemplarSeries string
}

// decoder turns request bodies into batches. Decoders are pooled: the buffers and
// the protobuf request structs are reused across requests, while every Batch is
// freshly allocated so the Appender may keep it.
type decoder struct {
	limits Limits
	body   []byte // compressed body
	raw    []byte // snappy-decoded protobuf
	v1     prompb.WriteRequest
	v2     writev2.Request
	sb     labels.ScratchBuilder
	seen   map[string]struct{} // metric names whose metadata is already in the batch
	utf8ok []bool              // per 2.0 symbol: valid UTF-8 (each symbol is checked once)
	lbuf   []prompb.Label      // labels of the 1.0 series being decoded (strings point into raw)
	lbufOK bool                // lbuf holds curTS's labels (parseLbuf ran)
	curTS  []byte              // the 1.0 TimeSeries being decoded
	// rawLabels are the protobuf bytes of lbuf's label fields when contiguous.
	rawLabels []byte
	exbuf     []tsdb.Exemplar // exemplars of the 1.0 series being decoded

	resolver SeriesResolver           // finds known series by label hash; may be nil
	match    func(labels.Labels) bool // d.matchLbuf, bound once
	v2cur    v2Labels                 // labels of the 2.0 series being decoded
	hbuf     []byte                   // labels as hashed (labelsHash)
	matchV2  func(labels.Labels) bool // d.matchV2Labels, bound once
	stats    decodeStats

	// batch and arena are reused from request to request: the head copies
	// what it keeps, so the decoder's batch is free again once AppendBatch returns.
	batch tsdb.Batch
	arena []tsdb.Sample
}

func newDecoder(l Limits) *decoder {
	d := &decoder{limits: l.withDefaults(), sb: labels.NewScratchBuilder(16), seen: map[string]struct{}{}}
	d.match = d.matchLbuf
	d.matchV2 = d.matchV2Labels
	return d
}

// release drops references into the last request so the pooled decoder holds no garbage.
func (d *decoder) release() {
	clear(d.v1.Timeseries)
	clear(d.v1.Metadata)
	d.v1 = prompb.WriteRequest{Timeseries: d.v1.Timeseries[:0], Metadata: d.v1.Metadata[:0]}
	clear(d.v2.Symbols)
	clear(d.v2.Timeseries)
	d.v2 = writev2.Request{Symbols: d.v2.Symbols[:0], Timeseries: d.v2.Timeseries[:0]}
	clear(d.seen)
	d.utf8ok = d.utf8ok[:0]
	d.v2cur = v2Labels{}
	d.curTS, d.rawLabels, d.lbuf = nil, nil, d.lbuf[:0]
	d.sb.Reset()
	d.stats = decodeStats{}
	d.resetBatch()
	if cap(d.arena) > maxPooledBuffer/24 {
		d.arena = nil
	}
	if cap(d.batch.Series) > maxPooledBuffer/128 {
		d.batch.Series = nil
	}
	if cap(d.body) > maxPooledBuffer {
		d.body = nil
	}
	if cap(d.raw) > maxPooledBuffer {
		d.raw = nil
	}
}

// resetBatch empties the reused batch, dropping its references to the last request.
func (d *decoder) resetBatch() {
	clear(d.batch.Series)
	clear(d.batch.Metadata)
	d.batch = tsdb.Batch{Series: d.batch.Series[:0], Metadata: d.batch.Metadata[:0]}
}

// sampleArena returns the reused sample arena with room for n samples.
func (d *decoder) sampleArena(n int) []tsdb.Sample {
	if cap(d.arena) < n {
		d.arena = make([]tsdb.Sample, n)
	}
	return d.arena[:n]
}

// readBody reads the compressed request body, refusing bodies over MaxBodyBytes.
func (d *decoder) readBody(r *http.Request) ([]byte, error) {
	limit := d.limits.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, reqErrorf(http.StatusRequestEntityTooLarge, "request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)
	}
	buf := d.body[:0]
	if want := int(r.ContentLength) + 512; r.ContentLength > 0 && cap(buf) < want {
		buf = make([]byte, 0, want)
	}
	lr := io.LimitReader(r.Body, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			d.body = buf
			return nil, reqErrorf(http.StatusBadRequest, "reading request body: %v", err)
		}
	}
	d.body = buf
	if int64(len(buf)) > limit {
		return nil, reqErrorf(http.StatusRequestEntityTooLarge, "request body exceeds the limit of %d bytes", limit)
	}
	return buf, nil
}

// decompress snappy-decodes (block format) body, refusing outputs over MaxDecodedBytes.
func (d *decoder) decompress(body []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return nil, reqErrorf(http.StatusBadRequest, "decoding snappy body: %v", err)
	}
	if int64(n) > d.limits.MaxDecodedBytes {
		return nil, reqErrorf(http.StatusRequestEntityTooLarge, "decoded body of %d bytes exceeds the limit of %d bytes", n, d.limits.MaxDecodedBytes)
	}
	if cap(d.raw) < n {
		d.raw = make([]byte, n)
	}
	raw, err := snappy.Decode(d.raw[:cap(d.raw)], body)
	if err != nil {
		return nil, reqErrorf(http.StatusBadRequest, "decoding snappy body: %v", err)
	}
	return raw, nil
}

// decodeV1Gogo is the reference decoder for 1.0, built on the generated
// Unmarshal; decodeV1 (decode_v1.go) must behave identically (tests compare them).
func (d *decoder) decodeV1Gogo(data []byte) (*tsdb.Batch, error) {
	d.stats = decodeStats{}
	req := &d.v1
	clear(req.Timeseries)
	clear(req.Metadata)
	*req = prompb.WriteRequest{Timeseries: req.Timeseries[:0], Metadata: req.Metadata[:0]}
	if err := req.Unmarshal(data); err != nil {
		return nil, reqErrorf(http.StatusBadRequest, "decoding 1.0 prometheus.WriteRequest: %v", err)
	}
	if len(req.Timeseries) == 0 && len(req.Metadata) == 0 && len(req.XXX_unrecognized) > 0 {
		return nil, reqErrorf(http.StatusBadRequest, "1.0 prometheus.WriteRequest holds only unknown fields: "+
			"is this a 2.0 request sent without Content-Type proto=io.prometheus.write.v2.Request?")
	}
	if max := d.limits.MaxSeriesPerRequest; max > 0 && len(req.Timeseries) > max {
		return nil, reqErrorf(http.StatusRequestEntityTooLarge, "request holds %d series, more than the limit of %d", len(req.Timeseries), max)
	}

	total := 0
	for i := range req.Timeseries {
		total += len(req.Timeseries[i].Samples)
	}
	d.resetBatch()
	b := &d.batch
	arena := d.sampleArena(total)
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		d.stats.samples += len(ts.Samples)
		if len(ts.Histograms) > 0 {
			d.stats.histograms += len(ts.Histograms)
			if d.stats.histogramSeries == "" {
				d.stats.histogramSeries = formatSeries(v1Labels(ts.Labels))
			}
		}
		if len(ts.Exemplars) > 0 {
			d.stats.exemplars += len(ts.Exemplars)
			if d.stats.exemplarSeries == "" {
				d.stats.exemplarSeries = formatSeries(v1Labels(ts.Labels))
			}
		}
		if len(ts.Samples) == 0 && len(ts.Exemplars) == 0 {
			continue
		}
		if err := checkLabels(&d.limits, v1Labels(ts.Labels)); err != nil {
			d.stats.invalid.Reject(tsdb.ErrInvalidLabels, len(ts.Samples), err.Error())
			continue
		}
		d.sb.Reset()
		for _, l := range ts.Labels {
			d.sb.Add(l.Name, l.Value)
		}
		n := len(ts.Samples)
		ss := arena[:n:n]
		arena = arena[n:]
		for j, s := range ts.Samples {
			ss[j] = tsdb.Sample{T: s.Timestamp, V: s.Value}
		}
		var exs []tsdb.Exemplar
		for k := range ts.Exemplars {
			exs = append(exs, exemplarV1(&ts.Exemplars[k]))
		}
		b.Series = append(b.Series, tsdb.BatchSeries{Labels: d.sb.Labels(), Samples: ss, Exemplars: exs})
	}
	if len(req.Metadata) > 0 {
		b.Metadata = make([]tsdb.Metadata, 0, len(req.Metadata))
		for _, m := range req.Metadata {
			if m.MetricFamilyName == "" || !utf8.ValidString(m.MetricFamilyName) {
				continue
			}
			b.Metadata = append(b.Metadata, tsdb.Metadata{
				Metric: m.MetricFamilyName,
				Type:   metricTypeV1(m.Type),
				Help:   strings.ToValidUTF8(m.Help, "\uFFFD"),
				Unit:   strings.ToValidUTF8(m.Unit, "\uFFFD"),
			})
		}
	}
	return b, nil
}

// decodeV2 converts a serialized io.prometheus.write.v2.Request into a batch.
// Symbol-table violations (symbols[0] not empty, refs out of range, odd labels_refs)
// fail the whole request; series with invalid labels are left out and counted in
// d.stats.invalid; native histograms and exemplars are counted and left out.
// decode decodes a snappy-decoded request body of protocol version ver.
func (d *decoder) decode(ver protoVersion, raw []byte) (*tsdb.Batch, error) {
	if ver == protoV2 {
		return d.decodeV2(raw)
	}
	return d.decodeV1(raw)
}

func (d *decoder) decodeV2(data []byte) (*tsdb.Batch, error) {
	d.stats = decodeStats{}
	clear(d.seen)
	req := &d.v2
	clear(req.Symbols)
	clear(req.Timeseries)
	*req = writev2.Request{Symbols: req.Symbols[:0], Timeseries: req.Timeseries[:0]}
	if err := req.Unmarshal(data); err != nil {
		return nil, reqErrorf(http.StatusBadRequest, "decoding 2.0 io.prometheus.write.v2.Request: %v", err)
	}
	syms := req.Symbols
	if len(syms) == 0 {
		switch {
		case len(req.Timeseries) == 0 && len(req.XXX_unrecognized) == 0:
			return &tsdb.Batch{}, nil // empty request
		case len(req.Timeseries) == 0:
			return nil, reqErrorf(http.StatusBadRequest, "2.0 request holds only fields reserved in io.prometheus.write.v2.Request: "+
				"is this a 1.0 prometheus.WriteRequest sent with Content-Type proto=io.prometheus.write.v2.Request?")
		default:
			return nil, reqErrorf(http.StatusBadRequest, "2.0 request has an empty symbols table; symbols[0] must be the empty string")
		}
	}
	if syms[0] != "" {
		return nil, reqErrorf(http.StatusBadRequest, "2.0 request: symbols[0] must be the empty string, got %s", quoteTrunc(syms[0]))
	}
	if max := d.limits.MaxSeriesPerRequest; max > 0 && len(req.Timeseries) > max {
		return nil, reqErrorf(http.StatusRequestEntityTooLarge, "request holds %d series, more than the limit of %d", len(req.Timeseries), max)
	}

	d.utf8ok = d.utf8ok[:0]
	for _, s := range syms {
		d.utf8ok = append(d.utf8ok, utf8.ValidString(s))
	}
	total := 0
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		if err := checkRefsV2(i, ts, len(syms)); err != nil {
			return nil, err
		}
		total += len(ts.Samples)
	}

	d.resetBatch()
	b := &d.batch
	arena := d.sampleArena(total)
	var prev tsdb.SeriesRef // the series resolved last
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		ls := v2Labels{refs: ts.LabelsRefs, syms: syms, utf8ok: d.utf8ok}
		d.stats.samples += len(ts.Samples)
		if len(ts.Histograms) > 0 {
			d.stats.histograms += len(ts.Histograms)
			if d.stats.histogramSeries == "" {
				d.stats.histogramSeries = formatSeries(ls)
			}
		}
		if len(ts.Exemplars) > 0 {
			d.stats.exemplars += len(ts.Exemplars)
			if d.stats.exemplarSeries == "" {
				d.stats.exemplarSeries = formatSeries(ls)
			}
		}
		// A series the storage already knows: no validation, no labels to build.
		var (
			ref   tsdb.SeriesRef
			known bool
		)
		if d.resolver != nil && (len(ts.Samples) > 0 || len(ts.Exemplars) > 0) {
			d.v2cur = ls
			if ref, known = d.resolver.ResolveNext(prev, d.matchV2); !known {
				ref, known = d.resolver.ResolveHash(prev, d.labelsHash(ls), d.matchV2)
			}
			prev = ref
		}
		if !known {
			if err := checkLabels(&d.limits, ls); err != nil {
				d.stats.invalid.Reject(tsdb.ErrInvalidLabels, len(ts.Samples), err.Error())
				continue
			}
		}
		d.addMetadataV2(b, ls, &ts.Metadata)
		if len(ts.Samples) == 0 && len(ts.Exemplars) == 0 {
			continue
		}
		var exs []tsdb.Exemplar
		for k := range ts.Exemplars {
			e := &ts.Exemplars[k]
			esb := labels.NewScratchBuilder(len(e.LabelsRefs) / 2)
			for j := 0; j+1 < len(e.LabelsRefs); j += 2 {
				esb.Add(syms[e.LabelsRefs[j]], syms[e.LabelsRefs[j+1]])
			}
			esb.Sort()
			exs = append(exs, tsdb.Exemplar{Labels: esb.Labels(), T: e.Timestamp, V: e.Value})
		}
		n := len(ts.Samples)
		ss := arena[:n:n]
		arena = arena[n:]
		for j, s := range ts.Samples {
			ss[j] = tsdb.Sample{T: s.Timestamp, V: s.Value}
		}
		if known {
			b.Series = append(b.Series, tsdb.BatchSeries{Ref: ref, Samples: ss, Exemplars: exs})
			continue
		}
		d.sb.Reset()
		for j := 0; j < len(ts.LabelsRefs); j += 2 {
			d.sb.Add(syms[ts.LabelsRefs[j]], syms[ts.LabelsRefs[j+1]])
		}
		b.Series = append(b.Series, tsdb.BatchSeries{Labels: d.sb.Labels(), Samples: ss, Exemplars: exs})
	}
	return b, nil
}

// checkRefsV2 verifies that every symbol reference of series i is inside the symbols table.
func checkRefsV2(i int, ts *writev2.TimeSeries, nsyms int) error {
	if len(ts.LabelsRefs)%2 != 0 {
		return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: labels_refs has odd length %d", i, len(ts.LabelsRefs))
	}
	for j, r := range ts.LabelsRefs {
		if int64(r) >= int64(nsyms) {
			return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: labels_refs[%d]=%d outside the symbols table (size %d)", i, j, r, nsyms)
		}
	}
	if int64(ts.Metadata.HelpRef) >= int64(nsyms) {
		return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: metadata help_ref %d outside the symbols table (size %d)", i, ts.Metadata.HelpRef, nsyms)
	}
	if int64(ts.Metadata.UnitRef) >= int64(nsyms) {
		return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: metadata unit_ref %d outside the symbols table (size %d)", i, ts.Metadata.UnitRef, nsyms)
	}
	for k := range ts.Exemplars {
		refs := ts.Exemplars[k].LabelsRefs
		if len(refs)%2 != 0 {
			return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: exemplars[%d]: labels_refs has odd length %d", i, k, len(refs))
		}
		for j, r := range refs {
			if int64(r) >= int64(nsyms) {
				return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: exemplars[%d]: labels_refs[%d]=%d outside the symbols table (size %d)", i, k, j, r, nsyms)
			}
		}
	}
	return nil
}

// addMetadataV2 adds the metadata of a series (keyed by its __name__) to b once per request.
func (d *decoder) addMetadataV2(b *tsdb.Batch, ls v2Labels, m *writev2.Metadata) {
	if m.Type == writev2.Metadata_METRIC_TYPE_UNSPECIFIED && m.HelpRef == 0 && m.UnitRef == 0 {
		return
	}
	name := ""
	for j := 0; j < len(ls.refs); j += 2 {
		if ls.syms[ls.refs[j]] == model.MetricNameLabel {
			name = ls.syms[ls.refs[j+1]]
			break
		}
	}
	if name == "" {
		return
	}
	if _, ok := d.seen[name]; ok {
		return
	}
	d.seen[name] = struct{}{}
	b.Metadata = append(b.Metadata, tsdb.Metadata{
		Metric: name,
		Type:   metricTypeV2(m.Type),
		Help:   strings.ToValidUTF8(ls.syms[m.HelpRef], "\uFFFD"),
		Unit:   strings.ToValidUTF8(ls.syms[m.UnitRef], "\uFFFD"),
	})
}

// metricTypeV1 returns the Prometheus type string of a 1.0 metadata type.
func metricTypeV1(t prompb.MetricMetadata_MetricType) string {
	switch t {
	case prompb.MetricMetadata_COUNTER:
		return string(model.MetricTypeCounter)
	case prompb.MetricMetadata_GAUGE:
		return string(model.MetricTypeGauge)
	case prompb.MetricMetadata_HISTOGRAM:
		return string(model.MetricTypeHistogram)
	case prompb.MetricMetadata_GAUGEHISTOGRAM:
		return string(model.MetricTypeGaugeHistogram)
	case prompb.MetricMetadata_SUMMARY:
		return string(model.MetricTypeSummary)
	case prompb.MetricMetadata_INFO:
		return string(model.MetricTypeInfo)
	case prompb.MetricMetadata_STATESET:
		return string(model.MetricTypeStateset)
	}
	return string(model.MetricTypeUnknown)
}

// metricTypeV2 returns the Prometheus type string of a 2.0 metadata type.
func metricTypeV2(t writev2.Metadata_MetricType) string {
	switch t {
	case writev2.Metadata_METRIC_TYPE_COUNTER:
		return string(model.MetricTypeCounter)
	case writev2.Metadata_METRIC_TYPE_GAUGE:
		return string(model.MetricTypeGauge)
	case writev2.Metadata_METRIC_TYPE_HISTOGRAM:
		return string(model.MetricTypeHistogram)
	case writev2.Metadata_METRIC_TYPE_GAUGEHISTOGRAM:
		return string(model.MetricTypeGaugeHistogram)
	case writev2.Metadata_METRIC_TYPE_SUMMARY:
		return string(model.MetricTypeSummary)
	case writev2.Metadata_METRIC_TYPE_INFO:
		return string(model.MetricTypeInfo)
	case writev2.Metadata_METRIC_TYPE_STATESET:
		return string(model.MetricTypeStateset)
	}
	return string(model.MetricTypeUnknown)
}

// labelSource gives indexed access to the label pairs of a series as sent.
type labelSource interface {
	Len() int
	At(i int) (name, value string)
	// ValidUTF8 reports whether the name and the value of pair i are valid UTF-8.
	ValidUTF8(i int) (name, value bool)
}

// v1Labels are the labels of a 1.0 series.
type v1Labels []prompb.Label

func (l v1Labels) Len() int                  { return len(l) }
func (l v1Labels) At(i int) (string, string) { return l[i].Name, l[i].Value }
func (l v1Labels) ValidUTF8(i int) (bool, bool) {
	return utf8.ValidString(l[i].Name), utf8.ValidString(l[i].Value)
}

// v2Labels are the labels of a 2.0 series; refs are known to be in range.
// utf8ok, when as long as syms, caches the UTF-8 validity of each symbol.
type v2Labels struct {
	refs   []uint32
	syms   []string
	utf8ok []bool
}

func (l v2Labels) Len() int { return len(l.refs) / 2 }
func (l v2Labels) At(i int) (string, string) {
	return l.syms[l.refs[2*i]], l.syms[l.refs[2*i+1]]
}
func (l v2Labels) ValidUTF8(i int) (bool, bool) {
	n, v := l.refs[2*i], l.refs[2*i+1]
	if len(l.utf8ok) == len(l.syms) {
		return l.utf8ok[n], l.utf8ok[v]
	}
	return utf8.ValidString(l.syms[n]), utf8.ValidString(l.syms[v])
}

// checkLabels validates a label set as sent: non-empty, within the limits, UTF-8,
// no empty names or values, names strictly increasing (sorted, no duplicates).
// The error names the series.
func checkLabels[S labelSource](lim *Limits, s S) error {
	n := s.Len()
	if n == 0 {
		return seriesError(s, "empty label set")
	}
	if n > lim.MaxLabelsPerSeries {
		return seriesError(s, fmt.Sprintf("%d labels, more than the limit of %d", n, lim.MaxLabelsPerSeries))
	}
	prev := ""
	for i := range n {
		name, value := s.At(i)
		nameOK, valueOK := s.ValidUTF8(i)
		var problem string
		switch {
		case name == "":
			problem = "empty label name"
		case len(name) > lim.MaxLabelNameLength:
			problem = fmt.Sprintf("label name %s longer than the limit of %d bytes", quoteTrunc(name), lim.MaxLabelNameLength)
		case !nameOK:
			problem = fmt.Sprintf("label name %s is not valid UTF-8", quoteTrunc(name))
		case value == "":
			problem = fmt.Sprintf("empty value for label %s", quoteTrunc(name))
		case len(value) > lim.MaxLabelValueLength:
			problem = fmt.Sprintf("value of label %s longer than the limit of %d bytes", quoteTrunc(name), lim.MaxLabelValueLength)
		case !valueOK:
			problem = fmt.Sprintf("value of label %s is not valid UTF-8", quoteTrunc(name))
		case i > 0 && name == prev:
			problem = fmt.Sprintf("duplicate label name %s", quoteTrunc(name))
		case i > 0 && name < prev:
			problem = fmt.Sprintf("labels not sorted by name (%s after %s)", quoteTrunc(name), quoteTrunc(prev))
		}
		if problem != "" {
			return seriesError(s, problem)
		}
		prev = name
	}
	return nil
}

// invalidSeriesError is an invalid label set with the reason.
type invalidSeriesError struct {
	series  string
	problem string
}

func (e *invalidSeriesError) Error() string { return "series " + e.series + ": " + e.problem }

func seriesError[S labelSource](s S, problem string) error {
	return &invalidSeriesError{series: formatSeries(s), problem: problem}
}

// formatSeries prints a label set as sent, {name="value", ...}, quoting names that
// are not plain and cutting the text at about maxSeriesText bytes.
func formatSeries[S labelSource](s S) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i := range s.Len() {
		if sb.Len() > maxSeriesText {
			sb.WriteString(", ...")
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		name, value := s.At(i)
		if isPlainName(name) {
			sb.WriteString(name)
		} else {
			sb.WriteString(quoteTrunc(name))
		}
		sb.WriteByte('=')
		sb.WriteString(quoteTrunc(value))
	}
	sb.WriteByte('}')
	return sb.String()
}

// isPlainName reports whether name matches the legacy label-name syntax.
func isPlainName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// quoteTrunc quotes s for a message, cutting it at 64 bytes.
func quoteTrunc(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}
