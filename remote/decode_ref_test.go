package remote

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// The reference decoders: built on the generated Unmarshal, they apply the
// same rules and limits as the hand-written decoders (decode_v1.go,
// decode_v2.go), which must behave identically (the fuzz tests compare them).

// refLimits checks the request-wide limits on a decoded request.
func refLimits(d *decoder, entries, counted int) error {
	if entries > d.limits.MaxSeriesPerRequest {
		return d.tooManySeries()
	}
	if counted > d.limits.MaxSamplesPerRequest {
		return reqErrorf(http.StatusRequestEntityTooLarge, "request holds more than %d samples, the limit", d.limits.MaxSamplesPerRequest)
	}
	return nil
}

// decodeV1Gogo is the reference decoder for 1.0.
func (d *decoder) decodeV1Gogo(data []byte) (*head.Batch, error) {
	d.stats, d.histBytes = decodeStats{}, 0
	req := &prompb.WriteRequest{}
	if err := req.Unmarshal(data); err != nil {
		return nil, reqErrorf(http.StatusBadRequest, "decoding 1.0 prometheus.WriteRequest: %v", err)
	}
	if len(req.Timeseries) == 0 && len(req.Metadata) == 0 && len(req.XXX_unrecognized) > 0 {
		return nil, reqErrorf(http.StatusBadRequest, "1.0 prometheus.WriteRequest holds only unknown fields: "+
			"is this a 2.0 request sent without Content-Type proto=io.prometheus.write.v2.Request?")
	}
	total, counted := 0, 0
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		total += len(ts.Samples)
		counted += len(ts.Samples) + len(ts.Histograms) + len(ts.Exemplars)
	}
	if err := refLimits(d, len(req.Timeseries)+len(req.Metadata), counted); err != nil {
		return nil, err
	}
	d.resetBatch()
	b := &d.batch
	arena := make([]head.Sample, total)
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		d.stats.samples += len(ts.Samples)
		d.stats.histograms += len(ts.Histograms)
		hs, bad, err := d.refHistograms(histogramsOf(ts.Histograms))
		if err != nil {
			return nil, err
		}
		if len(ts.Exemplars) > 0 {
			d.stats.exemplars += len(ts.Exemplars)
			if d.stats.exemplarSeries == "" {
				d.stats.exemplarSeries = formatSeries(v1Labels(ts.Labels))
			}
		}
		var exs []head.Exemplar
		for k := range ts.Exemplars {
			if e := &ts.Exemplars[k]; len(e.Labels) <= d.limits.MaxLabelsPerSeries {
				exs = append(exs, exemplarV1(e))
			}
		}
		if len(ts.Samples) == 0 && len(exs) == 0 && len(ts.Histograms) == 0 {
			continue
		}
		if err := checkLabels(&d.limits, v1Labels(ts.Labels)); err != nil {
			d.stats.invalid.Reject(head.ErrInvalidLabels, len(ts.Samples)+len(ts.Histograms), err.Error())
			continue
		}
		bad.report(d, formatSeries(v1Labels(ts.Labels)))
		if len(hs) > 0 && d.stats.histogramSeries == "" {
			d.stats.histogramSeries = formatSeries(v1Labels(ts.Labels))
		}
		if len(ts.Samples) == 0 && len(exs) == 0 && len(hs) == 0 {
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
			ss[j] = head.Sample{T: s.Timestamp, V: s.Value}
		}
		b.Series = append(b.Series, head.BatchSeries{Labels: d.sb.Labels(), Samples: ss, Exemplars: exs, Histograms: hs})
	}
	for _, m := range req.Metadata {
		if m.MetricFamilyName == "" || !utf8.ValidString(m.MetricFamilyName) {
			continue
		}
		b.Metadata = append(b.Metadata, head.Metadata{
			Metric: m.MetricFamilyName,
			Type:   metricTypeV1(m.Type),
			Help:   strings.ToValidUTF8(m.Help, "\uFFFD"),
			Unit:   strings.ToValidUTF8(m.Unit, "\uFFFD"),
		})
	}
	return b, nil
}

// exemplarV1 converts a 1.0 exemplar (labels sorted, copied).
func exemplarV1(e *prompb.Exemplar) head.Exemplar {
	sb := labels.NewScratchBuilder(len(e.Labels))
	for _, l := range e.Labels {
		sb.Add(l.Name, l.Value)
	}
	sb.Sort()
	return head.Exemplar{Labels: sb.Labels(), T: e.Timestamp, V: e.Value}
}

// decodeV2Gogo is the reference decoder for 2.0.
func (d *decoder) decodeV2Gogo(data []byte) (*head.Batch, error) {
	d.stats, d.histBytes = decodeStats{}, 0
	clear(d.seen)
	req := &writev2.Request{}
	if err := req.Unmarshal(data); err != nil {
		return nil, reqErrorf(http.StatusBadRequest, "decoding 2.0 io.prometheus.write.v2.Request: %v", err)
	}
	syms := req.Symbols
	if len(syms) > d.limits.MaxSymbolsPerRequest {
		return nil, reqErrorf(http.StatusRequestEntityTooLarge, "too many symbols")
	}
	d.resetBatch()
	b := &d.batch
	if len(syms) == 0 {
		switch {
		case len(req.Timeseries) == 0 && len(req.XXX_unrecognized) == 0:
			return b, nil // empty request
		case len(req.Timeseries) == 0:
			return nil, reqErrorf(http.StatusBadRequest, "2.0 request holds only fields reserved")
		default:
			return nil, reqErrorf(http.StatusBadRequest, "2.0 request has an empty symbols table")
		}
	}
	if syms[0] != "" {
		return nil, reqErrorf(http.StatusBadRequest, "2.0 request: symbols[0] must be the empty string, got %s", quoteTrunc(syms[0]))
	}
	total, counted := 0, 0
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		if err := checkRefsV2Gogo(i, ts, len(syms)); err != nil {
			return nil, err
		}
		total += len(ts.Samples)
		counted += len(ts.Samples) + len(ts.Histograms) + len(ts.Exemplars)
	}
	if err := refLimits(d, len(req.Timeseries), counted); err != nil {
		return nil, err
	}
	utf8ok := make([]bool, len(syms))
	for i, s := range syms {
		utf8ok[i] = utf8.ValidString(s)
	}
	arena := make([]head.Sample, total)
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		ls := v2Labels{refs: ts.LabelsRefs, syms: syms, utf8ok: utf8ok}
		d.stats.samples += len(ts.Samples)
		d.stats.histograms += len(ts.Histograms)
		hs, bad, err := d.refHistograms(histogramsOf(ts.Histograms))
		if err != nil {
			return nil, err
		}
		if len(ts.Exemplars) > 0 {
			d.stats.exemplars += len(ts.Exemplars)
			if d.stats.exemplarSeries == "" {
				d.stats.exemplarSeries = formatSeries(ls)
			}
		}
		if err := checkLabels(&d.limits, ls); err != nil {
			d.stats.invalid.Reject(head.ErrInvalidLabels, len(ts.Samples)+len(ts.Histograms), err.Error())
			continue
		}
		d.addMetadataV2(b, ls, &ts.Metadata)
		bad.report(d, formatSeries(ls))
		if len(hs) > 0 && d.stats.histogramSeries == "" {
			d.stats.histogramSeries = formatSeries(ls)
		}
		var exs []head.Exemplar
		for k := range ts.Exemplars {
			e := &ts.Exemplars[k]
			if len(e.LabelsRefs)/2 > d.limits.MaxLabelsPerSeries {
				continue
			}
			esb := labels.NewScratchBuilder(len(e.LabelsRefs) / 2)
			for j := 0; j+1 < len(e.LabelsRefs); j += 2 {
				esb.Add(syms[e.LabelsRefs[j]], syms[e.LabelsRefs[j+1]])
			}
			esb.Sort()
			exs = append(exs, head.Exemplar{Labels: esb.Labels(), T: e.Timestamp, V: e.Value})
		}
		if len(ts.Samples) == 0 && len(exs) == 0 && len(hs) == 0 {
			continue
		}
		n := len(ts.Samples)
		ss := arena[:n:n]
		arena = arena[n:]
		for j, s := range ts.Samples {
			ss[j] = head.Sample{T: s.Timestamp, V: s.Value}
		}
		d.sb.Reset()
		for j := 0; j < len(ts.LabelsRefs); j += 2 {
			d.sb.Add(syms[ts.LabelsRefs[j]], syms[ts.LabelsRefs[j+1]])
		}
		b.Series = append(b.Series, head.BatchSeries{Labels: d.sb.Labels(), Samples: ss, Exemplars: exs, Histograms: hs})
	}
	return b, nil
}

// checkRefsV2Gogo verifies that every symbol reference of series i is inside the symbols table.
func checkRefsV2Gogo(i int, ts *writev2.TimeSeries, nsyms int) error {
	bad := func(what string) error {
		return reqErrorf(http.StatusBadRequest, "2.0 request: timeseries[%d]: %s", i, what)
	}
	if len(ts.LabelsRefs)%2 != 0 {
		return bad("labels_refs has odd length")
	}
	for _, r := range ts.LabelsRefs {
		if int64(r) >= int64(nsyms) {
			return bad("labels_refs outside the symbols table")
		}
	}
	if int64(ts.Metadata.HelpRef) >= int64(nsyms) || int64(ts.Metadata.UnitRef) >= int64(nsyms) {
		return bad("metadata ref outside the symbols table")
	}
	for k := range ts.Exemplars {
		refs := ts.Exemplars[k].LabelsRefs
		if len(refs)%2 != 0 {
			return bad(fmt.Sprintf("exemplars[%d]: labels_refs has odd length", k))
		}
		for _, r := range refs {
			if int64(r) >= int64(nsyms) {
				return bad(fmt.Sprintf("exemplars[%d]: labels_refs outside the symbols table", k))
			}
		}
	}
	return nil
}

// pbHistogram is what the reference decoders use of the generated 1.0 and
// 2.0 Histogram types: Prometheus's own conversions.
type pbHistogram interface {
	IsFloatHistogram() bool
	ToIntHistogram() *histogram.Histogram
	ToFloatHistogram() *histogram.FloatHistogram
	GetTimestamp() int64
}

// histogramsOf returns pointers to the elements of hh as pbHistograms.
func histogramsOf[H any, P interface {
	*H
	pbHistogram
}](hh []H) []pbHistogram {
	out := make([]pbHistogram, len(hh))
	for i := range hh {
		out[i] = P(&hh[i])
	}
	return out
}

// refBad describes the refused histograms of one series.
type refBad struct {
	n       int
	t       int64
	problem string
}

// report counts the refused histograms of a series with valid labels.
func (b refBad) report(d *decoder, series string) {
	if b.n > 0 {
		d.stats.invalid.Reject(errInvalidHistogram, b.n, fmt.Sprintf("series %s at %d: %s", series, b.t, b.problem))
	}
}

// refHistograms converts the histograms of one series with Prometheus's
// conversion and applies tandem's limits and Prometheus's checks (schema
// reduction, Validate), the reference for readHistogram.
func (d *decoder) refHistograms(hh []pbHistogram) ([]head.HistogramSample, refBad, error) {
	var (
		out []head.HistogramSample
		bad refBad
	)
	refuse := func(t int64, problem string) {
		if bad.n == 0 {
			bad.t, bad.problem = t, problem
		}
		bad.n++
	}
	for _, hp := range hh {
		hs := head.HistogramSample{T: hp.GetTimestamp()}
		if hp.IsFloatHistogram() {
			hs.FH = hp.ToFloatHistogram()
		} else {
			hs.H = hp.ToIntHistogram()
		}
		n := histogramElements(&hs)
		if n > d.limits.MaxBucketsPerHistogram {
			refuse(hs.T, d.histogramTooBig(n))
			continue
		}
		if err := d.histogramBudget(n); err != nil {
			return nil, bad, err
		}
		if err := checkHistogram(&hs); err != nil {
			refuse(hs.T, err.Error())
			continue
		}
		out = append(out, hs)
	}
	return out, bad, nil
}

// histogramElements returns the spans, buckets and custom bounds of a decoded histogram.
func histogramElements(hs *head.HistogramSample) int {
	if h := hs.H; h != nil {
		return len(h.PositiveSpans) + len(h.NegativeSpans) + len(h.PositiveBuckets) + len(h.NegativeBuckets) + len(h.CustomValues)
	}
	fh := hs.FH
	return len(fh.PositiveSpans) + len(fh.NegativeSpans) + len(fh.PositiveBuckets) + len(fh.NegativeBuckets) + len(fh.CustomValues)
}
