package remote

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/golang/snappy"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/tandem-tsdb/tandem/tsdb/head"
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

// minBodyBuffer is the first capacity of a body buffer.
const minBodyBuffer = 32 << 10

// maxSeriesText bounds the length of a series printed in an error message.
const maxSeriesText = 256

// minLabelsKept is the fewest label pairs of a series the decoder stores
// when it has more than MaxLabelsPerSeries: enough for formatSeries to
// print as much as it would print of all of them (each pair takes at
// least 7 bytes of text, 37 pairs exceed maxSeriesText).
const minLabelsKept = 40

// decodeStats counts what one request carried and what decoding itself refused.
type decodeStats struct {
	samples    int // float samples in the request
	histograms int // native histogram samples in the request
	exemplars  int // exemplars in the request
	// invalid counts float and histogram samples refused before storage, by
	// reason (head.ErrInvalidLabels, errInvalidHistogram).
	invalid head.AppendResult
	// histogramSeries names the first series whose histograms are in the
	// batch; exemplarSeries one that carried exemplars.
	histogramSeries, exemplarSeries string
}

// decoder turns request bodies into batches. Decoders are pooled: the buffers
// are reused across requests, and so is the batch (the Appender copies what
// it keeps), but not the native histograms, which the Appender keeps.
type decoder struct {
	limits Limits
	body   []byte // compressed body
	raw    []byte // snappy-decoded protobuf
	sb     labels.ScratchBuilder
	esb    labels.ScratchBuilder // exemplar labels
	seen   map[string]struct{}   // metric names whose metadata is already in the batch
	// counted is the number of samples, histograms and exemplars decoded so
	// far in the request (MaxSamplesPerRequest).
	counted int

	// 1.0
	lbuf      []prompb.Label // labels of the 1.0 series being decoded (strings point into raw)
	lbufN     int            // labels the series has; lbuf holds the first labelsKept() of them
	lbufOK    bool           // lbuf holds curTS's labels (parseLbuf ran)
	curTS     []byte         // the 1.0 TimeSeries being decoded
	curLabels int            // label fields of curTS
	// rawLabels are the protobuf bytes of lbuf's label fields when contiguous.
	rawLabels []byte
	exbuf     []head.Exemplar // exemplars of the 1.0 series being decoded
	exlbuf    []prompb.Label  // labels of the 1.0 exemplar being decoded

	// 2.0
	syms   []string     // symbols table (strings point into raw)
	utf8ok []bool       // per symbol: valid UTF-8 (each symbol is checked once)
	cur    v2Series     // the 2.0 series being decoded
	refs   []uint32     // cur's first labels_refs
	v2ex   []v2Exemplar // cur's exemplars
	exRefs []uint32     // their first labels_refs

	resolver SeriesResolver           // finds known series by label hash; may be nil
	match    func(labels.Labels) bool // d.matchLbuf, bound once
	v2cur    v2Labels                 // labels of the 2.0 series being decoded
	hbuf     []byte                   // labels as hashed (labelsHash)
	matchV2  func(labels.Labels) bool // d.matchV2Labels, bound once
	stats    decodeStats

	// batch, arena and harena are reused from request to request: the head
	// copies what it keeps, so the decoder's batch is free again once
	// AppendBatch returns (the histograms harena points to are the head's).
	batch head.Batch
	arena []head.Sample
	// larena holds the packed labels of the request's new series (seriesLabels).
	larena []byte
	starts []int64 // start timestamps of arena's samples, once one has one (appendStart)
	harena []head.HistogramSample
	// histBytes is the memory the request's histograms were decoded into (MaxHistogramBytesPerRequest).
	histBytes int64
	// The histograms of the series being decoded that Prometheus would refuse:
	// how many, and the first one's timestamp and problem.
	hBad    int
	hBadT   int64
	hBadMsg string
}

func newDecoder(l Limits) *decoder {
	d := &decoder{limits: l.withDefaults(), sb: labels.NewScratchBuilder(16), esb: labels.NewScratchBuilder(4), seen: map[string]struct{}{}}
	d.match = d.matchLbuf
	d.matchV2 = d.matchV2Labels
	return d
}

// labelsKept is how many label pairs of one series or exemplar the decoder stores.
func (d *decoder) labelsKept() int { return max(d.limits.MaxLabelsPerSeries+1, minLabelsKept) }

// count adds n samples, histograms or exemplars to the request's count and
// fails the request once they exceed MaxSamplesPerRequest.
func (d *decoder) count(n int) error {
	if d.counted += n; d.counted > d.limits.MaxSamplesPerRequest {
		return d.tooManySamples()
	}
	return nil
}

// tooManySamples is the error of a request with more than MaxSamplesPerRequest samples.
// (Not inlined, so that count is.)
//
//go:noinline
func (d *decoder) tooManySamples() error {
	return reqErrorf(http.StatusRequestEntityTooLarge, "request holds more than %d samples, histograms and exemplars, the limit", d.limits.MaxSamplesPerRequest)
}

// resetArena empties the sample arena for a request of size bytes. A new
// arena is sized from the body (a sample every 64 bytes) up to 64k samples:
// beyond that it grows with the samples actually read.
func (d *decoder) resetArena(size int) {
	if cap(d.arena) == 0 {
		d.arena = make([]head.Sample, 0, min(size/64+16, 64<<10, d.limits.MaxSamplesPerRequest))
	}
	d.arena = d.arena[:0]
	d.larena = d.larena[:0]
	d.starts = d.starts[:0]
	clear(d.harena)
	d.harena = d.harena[:0]
	d.counted, d.histBytes = 0, 0
}

// appendSample appends s to the arena, which grows no larger than
// MaxSamplesPerRequest (count refuses more). Series already read keep
// their samples in the old array.
func (d *decoder) appendSample(s head.Sample) {
	if len(d.arena) == cap(d.arena) {
		n := min(max(2*cap(d.arena), 1024), d.limits.MaxSamplesPerRequest)
		d.arena = append(make([]head.Sample, 0, max(n, len(d.arena)+1)), d.arena...)
	}
	d.arena = append(d.arena, s)
}

// appendStart records the start timestamp of the sample appended last:
// d.starts stays empty until a sample has one, then holds one per sample
// of the arena.
func (d *decoder) appendStart(st int64) {
	if st == 0 && len(d.starts) == 0 {
		return
	}
	if len(d.starts) == 0 {
		d.starts = slices.Grow(d.starts, len(d.arena))[:len(d.arena)-1]
		clear(d.starts)
	}
	d.starts = append(d.starts, st)
}

// startsOf returns the start timestamps of the arena's samples from start
// on (the series just read), nil when none has one.
func (d *decoder) startsOf(start int) []int64 {
	if len(d.starts) <= start {
		return nil
	}
	sts := d.starts[start:len(d.starts):len(d.starts)]
	for _, st := range sts {
		if st != 0 {
			return sts
		}
	}
	return nil
}

// tooManySeries is the error of a request with more than MaxSeriesPerRequest entries.
func (d *decoder) tooManySeries() error {
	return reqErrorf(http.StatusRequestEntityTooLarge, "request holds more than %d series, the limit", d.limits.MaxSeriesPerRequest)
}

// release drops references into the last request so the pooled decoder holds no garbage.
func (d *decoder) release() {
	clear(d.seen)
	clear(d.syms)
	d.syms, d.utf8ok = trim(d.syms[:0], maxPooledBuffer/16), trim(d.utf8ok[:0], maxPooledBuffer)
	d.refs, d.exRefs = trim(d.refs[:0], maxPooledBuffer/4), trim(d.exRefs[:0], maxPooledBuffer/4)
	d.v2ex = trim(d.v2ex[:0], maxPooledBuffer/64)
	d.cur = v2Series{}
	d.v2cur = v2Labels{}
	d.curTS, d.rawLabels = nil, nil
	clear(d.lbuf)
	clear(d.exlbuf)
	d.lbuf, d.exlbuf = d.lbuf[:0], d.exlbuf[:0]
	clear(d.exbuf)
	d.exbuf = trim(d.exbuf[:0], maxPooledBuffer/32)
	d.sb.Reset()
	d.esb.Reset()
	d.larena = trim(d.larena[:0], maxPooledBuffer)
	d.stats = decodeStats{}
	d.counted, d.histBytes = 0, 0
	d.hBad, d.hBadMsg = 0, ""
	d.resetBatch()
	d.arena = trim(d.arena, maxPooledBuffer/16)
	d.starts = trim(d.starts[:0], maxPooledBuffer/8)
	clear(d.harena)
	d.harena = trim(d.harena[:0], maxPooledBuffer/24)
	d.batch.Series = trim(d.batch.Series, maxPooledBuffer/128)
	d.body = trim(d.body, maxPooledBuffer)
	d.raw = trim(d.raw, maxPooledBuffer)
}

// trim returns s, or nil when its capacity exceeds max elements.
func trim[S ~[]E, E any](s S, max int) S {
	if cap(s) > max {
		return nil
	}
	return s
}

// resetBatch empties the reused batch, dropping its references to the last request.
func (d *decoder) resetBatch() {
	clear(d.batch.Series)
	clear(d.batch.Metadata)
	d.batch = head.Batch{Series: d.batch.Series[:0], Metadata: d.batch.Metadata[:0]}
}

// readBody reads the compressed request body into the decoder's pooled
// buffer, refusing bodies over MaxBodyBytes. The buffer grows as bytes
// arrive: a Content-Length caps the growth but allocates nothing, so a
// request claiming 32 MiB and sending a few bytes costs a few bytes.
func (d *decoder) readBody(r *http.Request) ([]byte, error) {
	limit := d.limits.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, reqErrorf(http.StatusRequestEntityTooLarge, "request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, limit)
	}
	// One byte more than the body may hold: room for the read that returns EOF.
	hint := limit + 1
	if r.ContentLength >= 0 {
		hint = r.ContentLength + 1
	}
	buf := d.body[:0]
	lr := io.LimitReader(r.Body, limit+1)
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			n := int64(max(2*cap(buf), minBodyBuffer))
			if c := int64(cap(buf)); c < hint && n > hint {
				n = hint // the body is no longer than its Content-Length
			}
			buf = append(make([]byte, 0, min(n, limit+1)), buf...)
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

// decodedLen returns the snappy-decoded length of body from its header,
// refusing lengths over MaxDecodedBytes before anything is allocated.
func (d *decoder) decodedLen(body []byte) (int, error) {
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return 0, reqErrorf(http.StatusBadRequest, "decoding snappy body: %v", err)
	}
	if int64(n) > d.limits.MaxDecodedBytes {
		return 0, reqErrorf(http.StatusRequestEntityTooLarge, "decoded body of %d bytes exceeds the limit of %d bytes", n, d.limits.MaxDecodedBytes)
	}
	return n, nil
}

// decompress snappy-decodes (block format) body, refusing outputs over MaxDecodedBytes.
func (d *decoder) decompress(body []byte) ([]byte, error) {
	n, err := d.decodedLen(body)
	if err != nil {
		return nil, err
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

// decode decodes a snappy-decoded request body of protocol version ver.
func (d *decoder) decode(ver protoVersion, raw []byte) (*head.Batch, error) {
	if ver == protoV2 {
		return d.decodeV2(raw)
	}
	return d.decodeV1(raw)
}

// addMetadataV2 adds the metadata of a series (keyed by its __name__) to b once per request.
func (d *decoder) addMetadataV2(b *head.Batch, ls v2Labels, m *writev2.Metadata) {
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
	b.Metadata = append(b.Metadata, head.Metadata{
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
