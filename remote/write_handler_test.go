package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

func TestWriteV1Success(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	req := &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{
			v1Series([]string{"__name__", "up", "instance", "a:9100", "job", "node"}, prompb.Sample{Timestamp: 1000, Value: 1}, prompb.Sample{Timestamp: 2000, Value: 0}),
			v1Series([]string{"__name__", "stale", "job", "node"}, prompb.Sample{Timestamp: 1000, Value: math.Float64frombits(0x7ff0000000000002)}),
			v1Series([]string{"__name__", "no_samples", "job", "node"}),
		},
		Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: "up", Help: "Target up.", Unit: ""}},
	}
	r := postV1(t, srv.URL, req)
	expectStatus(t, r, http.StatusNoContent)
	if r.body != "" {
		t.Errorf("204 body = %q, want empty", r.body)
	}
	if got := r.header.Get(HeaderVersion); got != SupportedVersion {
		t.Errorf("%s = %q, want %q", HeaderVersion, got, SupportedVersion)
	}
	expectNoWritten(t, r)

	got := app.series()
	up := got[`{__name__="up", instance="a:9100", job="node"}`]
	if len(up) != 2 || up[0] != (head.Sample{T: 1000, V: 1}) || up[1] != (head.Sample{T: 2000, V: 0}) {
		t.Errorf("up samples = %v", up)
	}
	stale := got[`{__name__="stale", job="node"}`]
	if len(stale) != 1 || math.Float64bits(stale[0].V) != 0x7ff0000000000002 {
		t.Errorf("stale marker not kept bit-exact: %v", stale)
	}
	if len(got) != 2 {
		t.Errorf("got %d series, want 2 (series without samples ignored): %v", len(got), got)
	}
	if m := app.metadata()["up"]; m != (head.Metadata{Metric: "up", Type: "gauge", Help: "Target up."}) {
		t.Errorf("metadata = %+v", m)
	}
}

func TestWriteV2Success(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	b := newV2Builder()
	ts := b.add([]string{"__name__", "http_requests_total", "code", "200", "job", "api"},
		writev2.Sample{Timestamp: 1000, Value: 5, StartTimestamp: 500}, writev2.Sample{Timestamp: 2000, Value: 7})
	b.meta(ts, writev2.Metadata_METRIC_TYPE_COUNTER, "Requests.", "requests")
	ts = b.add([]string{"__name__", "temp", "job", "api"}, writev2.Sample{Timestamp: 1000, Value: -3.5})
	b.meta(ts, writev2.Metadata_METRIC_TYPE_GAUGEHISTOGRAM, "", "")
	b.add([]string{"__name__", "bare", "job", "api"}, writev2.Sample{Timestamp: 1000, Value: 1})

	r := postV2(t, srv.URL, b.build())
	expectStatus(t, r, http.StatusNoContent)
	if r.body != "" {
		t.Errorf("204 body = %q, want empty", r.body)
	}
	expectWritten(t, r, "4", "0", "0")

	got := app.series()
	if s := got[`{__name__="http_requests_total", code="200", job="api"}`]; len(s) != 2 || s[1] != (head.Sample{T: 2000, V: 7}) {
		t.Errorf("counter samples = %v", s)
	}
	md := app.metadata()
	if m := md["http_requests_total"]; m != (head.Metadata{Metric: "http_requests_total", Type: "counter", Help: "Requests.", Unit: "requests"}) {
		t.Errorf("counter metadata = %+v", m)
	}
	if m := md["temp"]; m.Type != "gaugehistogram" {
		t.Errorf("temp metadata = %+v", m)
	}
	if _, ok := md["bare"]; ok {
		t.Errorf("unspecified metadata was recorded: %+v", md["bare"])
	}
}

func TestWriteV2MetricTypes(t *testing.T) {
	want := map[writev2.Metadata_MetricType]string{
		writev2.Metadata_METRIC_TYPE_UNSPECIFIED:    "unknown",
		writev2.Metadata_METRIC_TYPE_COUNTER:        "counter",
		writev2.Metadata_METRIC_TYPE_GAUGE:          "gauge",
		writev2.Metadata_METRIC_TYPE_HISTOGRAM:      "histogram",
		writev2.Metadata_METRIC_TYPE_GAUGEHISTOGRAM: "gaugehistogram",
		writev2.Metadata_METRIC_TYPE_SUMMARY:        "summary",
		writev2.Metadata_METRIC_TYPE_INFO:           "info",
		writev2.Metadata_METRIC_TYPE_STATESET:       "stateset",
		writev2.Metadata_MetricType(99):             "unknown",
	}
	for typ, s := range want {
		if got := metricTypeV2(typ); got != s {
			t.Errorf("metricTypeV2(%v) = %q, want %q", typ, got, s)
		}
		if got := metricTypeV1(prompb.MetricMetadata_MetricType(typ)); got != s {
			t.Errorf("metricTypeV1(%v) = %q, want %q", typ, got, s)
		}
	}
}

// TestWriteV2ContentTypeWithSpace: RFC 9110 allows whitespace before parameters. The
// client_golang handler misreads such a header as 1.0, decodes the 2.0 body as an
// empty 1.0 message and answers 204 with nothing written; tandem must write it.
func TestWriteV2ContentTypeWithSpace(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	b := newV2Builder()
	b.add([]string{"__name__", "up", "job", "x"}, writev2.Sample{Timestamp: 1, Value: 1})
	body := snappy.Encode(nil, marshal(t, b.build()))
	for _, ct := range []string{
		"application/x-protobuf; proto=io.prometheus.write.v2.Request",
		"application/x-protobuf ;  proto=io.prometheus.write.v2.Request",
		`Application/X-Protobuf; Proto="io.prometheus.write.v2.Request"`,
	} {
		app.batches = nil
		r := post(t, srv.URL, ct, "snappy", body)
		expectStatus(t, r, http.StatusNoContent)
		expectWritten(t, r, "1", "0", "0")
		if n := app.samples(); n != 1 {
			t.Errorf("Content-Type %q: %d samples written, want 1", ct, n)
		}
	}
}

func TestWriteContentTypeNegotiation(t *testing.T) {
	v1Body := snappy.Encode(nil, marshal(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		v1Series([]string{"__name__", "up"}, prompb.Sample{Timestamp: 1, Value: 1}),
	}}))
	b := newV2Builder()
	b.add([]string{"__name__", "up"}, writev2.Sample{Timestamp: 1, Value: 1})
	v2Body := snappy.Encode(nil, marshal(t, b.build()))

	for _, tc := range []struct {
		ct       string
		body     []byte
		status   int
		v2Header bool
	}{
		{"", v1Body, http.StatusNoContent, false},
		{"application/x-protobuf", v1Body, http.StatusNoContent, false},
		{"application/x-protobuf;proto=prometheus.WriteRequest", v1Body, http.StatusNoContent, false},
		{"application/x-protobuf; proto=prometheus.WriteRequest", v1Body, http.StatusNoContent, false},
		{"application/x-protobuf;proto=io.prometheus.write.v2.Request", v2Body, http.StatusNoContent, true},
		{"application/x-protobuf;proto=io.prometheus.write.v3.Request", v2Body, http.StatusUnsupportedMediaType, false},
		{"application/x-protobuf;proto=", v1Body, http.StatusUnsupportedMediaType, false},
		{"application/json", v1Body, http.StatusUnsupportedMediaType, false},
		{"text/plain; version=0.0.4", v1Body, http.StatusUnsupportedMediaType, false},
		{"application/x-protobuf;proto", v1Body, http.StatusUnsupportedMediaType, false},
		{"application/x-protobuf;proto=a;proto=b", v1Body, http.StatusUnsupportedMediaType, false},
	} {
		t.Run(tc.ct, func(t *testing.T) {
			app := &recordingAppender{}
			srv := testServer(t, app, Limits{}, nil)
			r := post(t, srv.URL, tc.ct, "snappy", tc.body)
			expectStatus(t, r, tc.status)
			if tc.v2Header {
				expectWritten(t, r, "1", "0", "0")
			} else {
				expectNoWritten(t, r)
			}
			want := 0
			if tc.status == http.StatusNoContent {
				want = 1
			}
			if n := app.samples(); n != want {
				t.Errorf("%d samples written, want %d", n, want)
			}
		})
	}
}

func TestWriteUnknownProto(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	r := post(t, srv.URL, "application/x-protobuf;proto=io.prometheus.write.v3.Request", "snappy", snappy.Encode(nil, nil))
	expectStatus(t, r, http.StatusUnsupportedMediaType)
	if !strings.Contains(r.body, "io.prometheus.write.v3.Request") {
		t.Errorf("body does not name the proto: %q", r.body)
	}
}

func TestWriteBadContentEncoding(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	b := newV2Builder()
	b.add([]string{"__name__", "up"}, writev2.Sample{Timestamp: 1, Value: 1})
	body := snappy.Encode(nil, marshal(t, b.build()))
	for _, enc := range []string{"gzip", "zstd", "snappy, gzip", "x-snappy-framed"} {
		r := post(t, srv.URL, ctV2, enc, body)
		expectStatus(t, r, http.StatusUnsupportedMediaType)
		expectWritten(t, r, "0", "0", "0")
		r = post(t, srv.URL, ctV1, enc, body)
		expectStatus(t, r, http.StatusUnsupportedMediaType)
		expectNoWritten(t, r)
	}
	if n := app.samples(); n != 0 {
		t.Errorf("%d samples written", n)
	}
	// Like Prometheus, a missing Content-Encoding means snappy; the token is case-insensitive.
	for _, enc := range []string{"", "Snappy"} {
		r := post(t, srv.URL, ctV2, enc, body)
		expectStatus(t, r, http.StatusNoContent)
	}
	if n := app.samples(); n != 2 {
		t.Errorf("%d samples written, want 2", n)
	}
}

func TestWriteMethodNotAllowed(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, srv.URL+"/api/v1/write", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405", m, resp.StatusCode)
		}
		if got := resp.Header.Get("Allow"); got != http.MethodPost {
			t.Errorf("%s: Allow = %q", m, got)
		}
	}
}

func TestWriteBodyTooLarge(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{MaxBodyBytes: 1024}, nil)
	req := nodeRequestV1(t, 200, 1000)
	body := snappy.Encode(nil, marshal(t, req))
	if len(body) <= 1024 {
		t.Fatalf("test body too small: %d", len(body))
	}
	r := postV1(t, srv.URL, req) // with Content-Length
	expectStatus(t, r, http.StatusRequestEntityTooLarge)

	// Without Content-Length (chunked): the limit applies while reading.
	hreq, _ := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(bytes.NewReader(body)))
	hreq.ContentLength = -1
	hreq.Header.Set("Content-Type", ctV2)
	hreq.Header.Set("Content-Encoding", "snappy")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: status %d, want 413", resp.StatusCode)
	}
	if got := resp.Header.Get(HeaderSamplesWritten); got != "0" {
		t.Errorf("chunked 2.0: %s = %q, want 0", HeaderSamplesWritten, got)
	}
	if n := app.samples(); n != 0 {
		t.Errorf("%d samples written", n)
	}
}

func TestWriteDecodedTooLarge(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{MaxDecodedBytes: 4096}, nil)
	// Highly compressible: small body, large decoded size.
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		v1Series([]string{"__name__", "up", "pad", strings.Repeat("x", 4000)}, prompb.Sample{Timestamp: 1, Value: 1}),
		v1Series([]string{"__name__", "up", "pad", strings.Repeat("y", 4000)}, prompb.Sample{Timestamp: 1, Value: 1}),
	}}
	r := postV1(t, srv.URL, req)
	expectStatus(t, r, http.StatusRequestEntityTooLarge)
	// A crafted header claiming a huge decoded length is refused before allocating.
	r = post(t, srv.URL, ctV1, "snappy", []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x00})
	expectStatus(t, r, http.StatusRequestEntityTooLarge)
	if n := app.samples(); n != 0 {
		t.Errorf("%d samples written", n)
	}
}

func TestWriteTooManySeries(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{MaxSeriesPerRequest: 10}, nil)
	expectStatus(t, postV1(t, srv.URL, nodeRequestV1(t, 11, 1)), http.StatusRequestEntityTooLarge)
	r := postV2(t, srv.URL, nodeRequestV2(t, 11, 1))
	expectStatus(t, r, http.StatusRequestEntityTooLarge)
	expectWritten(t, r, "0", "0", "0")
	expectStatus(t, postV2(t, srv.URL, nodeRequestV2(t, 10, 1)), http.StatusNoContent)
	if n := app.samples(); n != 10 {
		t.Errorf("%d samples written, want 10", n)
	}
}

func TestWriteBadSnappy(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	raw := marshal(t, nodeRequestV1(t, 5, 1))
	framed := append([]byte("\xff\x06\x00\x00sNaPpY"), snappy.Encode(nil, raw)...) // framed format is not allowed
	for name, body := range map[string][]byte{
		"uncompressed": raw,
		"framed":       framed,
		"truncated":    snappy.Encode(nil, raw)[:20],
	} {
		r := post(t, srv.URL, ctV2, "snappy", body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400; body %q", name, r.status, r.body)
		}
		expectWritten(t, r, "0", "0", "0")
	}
	if n := app.samples(); n != 0 {
		t.Errorf("%d samples written", n)
	}
}

func TestWriteBadProtobuf(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	good := marshal(t, nodeRequestV1(t, 5, 1))
	for name, raw := range map[string][]byte{
		"truncated": good[:len(good)-3],
		"garbage":   []byte("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"),
		"wiretype":  []byte{0x0f},
	} {
		for _, ct := range []string{ctV1, ctV2} {
			r := post(t, srv.URL, ct, "snappy", snappy.Encode(nil, raw))
			if r.status != http.StatusBadRequest {
				t.Errorf("%s %s: status %d, want 400; body %q", name, ct, r.status, r.body)
			}
		}
	}
	if n := app.samples(); n != 0 {
		t.Errorf("%d samples written", n)
	}
}

// TestWriteWrongMessageForContentType: a body of one version labelled as the other decodes
// as an empty message; it must not be acknowledged as written.
func TestWriteWrongMessageForContentType(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	v1Body := snappy.Encode(nil, marshal(t, nodeRequestV1(t, 5, 1)))
	v2Body := snappy.Encode(nil, marshal(t, nodeRequestV2(t, 5, 1)))
	r := post(t, srv.URL, ctV2, "snappy", v1Body)
	expectStatus(t, r, http.StatusBadRequest)
	expectWritten(t, r, "0", "0", "0")
	r = post(t, srv.URL, ctV1, "snappy", v2Body)
	expectStatus(t, r, http.StatusBadRequest)
	if n := app.samples(); n != 0 {
		t.Errorf("%d samples written", n)
	}
	// An empty 2.0 request (empty body) writes nothing and says so.
	r = post(t, srv.URL, ctV2, "snappy", snappy.Encode(nil, nil))
	expectStatus(t, r, http.StatusNoContent)
	expectWritten(t, r, "0", "0", "0")
}

func TestWriteV2SymbolsZeroNotEmpty(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	req := &writev2.Request{
		Symbols:    []string{"__name__", "up", "job", "x"},
		Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{0, 1, 2, 3}, Samples: []writev2.Sample{{Timestamp: 1, Value: 1}}}},
	}
	r := postV2(t, srv.URL, req)
	expectStatus(t, r, http.StatusBadRequest)
	expectWritten(t, r, "0", "0", "0")
	if !strings.Contains(r.body, "symbols[0]") {
		t.Errorf("body = %q", r.body)
	}
	req.Symbols = nil
	r = postV2(t, srv.URL, req)
	expectStatus(t, r, http.StatusBadRequest)
	if n := app.samples(); n != 0 {
		t.Errorf("%d samples written", n)
	}
}

func TestWriteV2BadRef(t *testing.T) {
	syms := []string{"", "__name__", "up", "job", "x"}
	ok := func() writev2.TimeSeries {
		return writev2.TimeSeries{LabelsRefs: []uint32{1, 2, 3, 4}, Samples: []writev2.Sample{{Timestamp: 1, Value: 1}}}
	}
	for name, mutate := range map[string]func(ts *writev2.TimeSeries){
		"label name ref":  func(ts *writev2.TimeSeries) { ts.LabelsRefs[2] = 5 },
		"label value ref": func(ts *writev2.TimeSeries) { ts.LabelsRefs[3] = 1 << 31 },
		"odd labels_refs": func(ts *writev2.TimeSeries) { ts.LabelsRefs = ts.LabelsRefs[:3] },
		"help ref":        func(ts *writev2.TimeSeries) { ts.Metadata.HelpRef = 5 },
		"unit ref":        func(ts *writev2.TimeSeries) { ts.Metadata.UnitRef = 100 },
		"exemplar ref": func(ts *writev2.TimeSeries) {
			ts.Exemplars = []writev2.Exemplar{{LabelsRefs: []uint32{1, 9}, Value: 1, Timestamp: 1}}
		},
		"exemplar odd refs": func(ts *writev2.TimeSeries) {
			ts.Exemplars = []writev2.Exemplar{{LabelsRefs: []uint32{1}, Value: 1, Timestamp: 1}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			app := &recordingAppender{}
			srv := testServer(t, app, Limits{}, nil)
			bad := ok()
			mutate(&bad)
			req := &writev2.Request{Symbols: syms, Timeseries: []writev2.TimeSeries{ok(), bad}}
			r := postV2(t, srv.URL, req)
			expectStatus(t, r, http.StatusBadRequest)
			expectWritten(t, r, "0", "0", "0")
			if !strings.Contains(r.body, "timeseries[1]") {
				t.Errorf("body does not locate the series: %q", r.body)
			}
			if n := app.samples(); n != 0 {
				t.Errorf("%d samples written of a request with a broken symbol table", n)
			}
		})
	}
}

func TestWriteInvalidLabels(t *testing.T) {
	long := strings.Repeat("n", 33)
	for _, tc := range []struct {
		name  string
		pairs []string
		want  string // in the body
	}{
		{"empty name", []string{"", "v", "__name__", "m"}, "empty label name"},
		{"name not UTF-8", []string{"__name__", "m", "b\xff", "v"}, "not valid UTF-8"},
		{"value not UTF-8", []string{"__name__", "m", "b", "v\xc3\x28"}, "not valid UTF-8"},
		{"empty value", []string{"__name__", "m", "b", ""}, `empty value for label "b"`},
		{"duplicate name", []string{"__name__", "m", "b", "1", "b", "2"}, `duplicate label name "b"`},
		{"unsorted", []string{"__name__", "m", "z", "1", "a", "2"}, "not sorted"},
		{"too many labels", []string{"__name__", "m", "a", "1", "b", "2", "c", "3", "d", "4"}, "more than the limit of 4"},
		{"name too long", []string{"__name__", "m", long, "1"}, "longer than the limit of 32"},
		{"value too long", []string{"__name__", "m", "a", strings.Repeat("v", 65)}, "longer than the limit of 64"},
		{"no labels", nil, "empty label set"},
	} {
		lim := Limits{MaxLabelsPerSeries: 4, MaxLabelNameLength: 32, MaxLabelValueLength: 64}
		good := []string{"__name__", "ok", "job", "x"}
		t.Run("v1/"+tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			app := &recordingAppender{}
			srv := testServer(t, app, lim, reg)
			r := postV1(t, srv.URL, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
				v1Series(good, prompb.Sample{Timestamp: 1, Value: 1}),
				v1Series(tc.pairs, prompb.Sample{Timestamp: 1, Value: 1}, prompb.Sample{Timestamp: 2, Value: 2}),
			}})
			checkInvalid(t, r, app, tc.want)
			if v := counterValue(t, reg, "tandem_remote_write_samples_rejected_total", "invalid_labels"); v != 2 {
				t.Errorf("rejected{invalid_labels} = %v, want 2", v)
			}
		})
		t.Run("v2/"+tc.name, func(t *testing.T) {
			app := &recordingAppender{}
			srv := testServer(t, app, lim, nil)
			b := newV2Builder()
			b.add(good, writev2.Sample{Timestamp: 1, Value: 1})
			b.add(tc.pairs, writev2.Sample{Timestamp: 1, Value: 1}, writev2.Sample{Timestamp: 2, Value: 2})
			r := postV2(t, srv.URL, b.build())
			checkInvalid(t, r, app, tc.want)
			expectWritten(t, r, "1", "0", "0")
		})
	}
}

func checkInvalid(t *testing.T, r result, app *recordingAppender, want string) {
	t.Helper()
	expectStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.body, want) {
		t.Errorf("body %q does not contain %q", r.body, want)
	}
	if !strings.Contains(r.body, "series {") || !strings.Contains(r.body, "2 samples rejected: invalid labels") {
		t.Errorf("body does not name the series and count: %q", r.body)
	}
	if !strings.Contains(r.body, "1 of 3 samples written") {
		t.Errorf("body does not give the written count: %q", r.body)
	}
	got := app.series()
	if len(got) != 1 || len(got[`{__name__="ok", job="x"}`]) != 1 {
		t.Errorf("valid series not written alone: %v", got)
	}
}

// counterValue returns the value of the counter child of name whose single label has labelValue (0 if absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name, labelValue string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == labelValue {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestWriteAppenderError(t *testing.T) {
	app := &recordingAppender{err: fmt.Errorf("wal: %w", errors.New("disk full"))}
	srv := testServer(t, app, Limits{}, nil)
	r := postV1(t, srv.URL, nodeRequestV1(t, 5, 1))
	expectStatus(t, r, http.StatusInternalServerError)
	if !strings.Contains(r.body, "disk full") {
		t.Errorf("body = %q", r.body)
	}
	r = postV2(t, srv.URL, nodeRequestV2(t, 5, 1))
	expectStatus(t, r, http.StatusInternalServerError)
	expectWritten(t, r, "0", "0", "0")
}

func TestWriteAppenderRejection(t *testing.T) {
	reg := prometheus.NewRegistry()
	app := &recordingAppender{reject: func(ls labels.Labels, s head.Sample) error {
		if s.T < 100 {
			return head.ErrOutOfOrderSample
		}
		return nil
	}}
	srv := testServer(t, app, Limits{}, reg)
	b := newV2Builder()
	b.add([]string{"__name__", "up", "job", "x"}, writev2.Sample{Timestamp: 50, Value: 1}, writev2.Sample{Timestamp: 150, Value: 1})
	b.add([]string{"__name__", "up", "job", "y"}, writev2.Sample{Timestamp: 150, Value: 1})
	r := postV2(t, srv.URL, b.build())
	expectStatus(t, r, http.StatusBadRequest)
	expectWritten(t, r, "2", "0", "0")
	if !strings.Contains(r.body, `1 samples rejected: out of order sample (e.g. {__name__="up", job="x"})`) {
		t.Errorf("body = %q", r.body)
	}
	if v := counterValue(t, reg, "tandem_remote_write_samples_rejected_total", "out_of_order"); v != 1 {
		t.Errorf("rejected{out_of_order} = %v", v)
	}

	r = postV1(t, srv.URL, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		v1Series([]string{"__name__", "up", "job", "z"}, prompb.Sample{Timestamp: 10, Value: 1}),
	}})
	expectStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.body, "out of order sample") {
		t.Errorf("body = %q", r.body)
	}
}

func TestWriteMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, reg)
	expectStatus(t, postV1(t, srv.URL, nodeRequestV1(t, 7, 1)), http.StatusNoContent)
	expectStatus(t, postV2(t, srv.URL, nodeRequestV2(t, 5, 1)), http.StatusNoContent)
	expectStatus(t, post(t, srv.URL, "text/plain", "snappy", nil), http.StatusUnsupportedMediaType)

	want := `
# HELP tandem_remote_write_requests_total Remote-write requests handled, by protocol version and HTTP status code.
# TYPE tandem_remote_write_requests_total counter
tandem_remote_write_requests_total{code="204",version="1.0"} 1
tandem_remote_write_requests_total{code="204",version="2.0"} 1
tandem_remote_write_requests_total{code="415",version="unknown"} 1
# HELP tandem_remote_write_samples_received_total Float samples received in decoded remote-write requests, by protocol version.
# TYPE tandem_remote_write_samples_received_total counter
tandem_remote_write_samples_received_total{version="1.0"} 7
tandem_remote_write_samples_received_total{version="2.0"} 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"tandem_remote_write_requests_total", "tandem_remote_write_samples_received_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "tandem_remote_write_request_bytes", "tandem_remote_write_request_duration_seconds"); err != nil || n != 4 {
		t.Errorf("histogram series = %d, %v; want 4 (bytes + duration{1.0,2.0,unknown})", n, err)
	}
	// A second handler on the same registry reuses the collectors instead of panicking.
	_ = NewWriteHandler(app, WriteHandlerOptions{Registerer: reg})
}

func TestParseContentType(t *testing.T) {
	for ct, want := range map[string]protoVersion{
		"":                        protoV1,
		"  ":                      protoV1,
		"application/x-protobuf":  protoV1,
		"application/x-protobuf;": protoV1,
		"application/x-protobuf;proto=prometheus.WriteRequest":                        protoV1,
		"application/x-protobuf;proto=io.prometheus.write.v2.Request":                 protoV2,
		"application/x-protobuf; proto=io.prometheus.write.v2.Request; charset=utf-8": protoV2,
		"application/x-protobuf;proto=io.prometheus.write.v2.request":                 protoUnknown,
		"application/protobuf": protoUnknown,
		"application/x-protobuf;proto=io.prometheus.write.v2.Request;proto=prometheus.WriteRequest": protoUnknown,
	} {
		got, err := parseContentType(ct)
		if got != want || (err == nil) != (want != protoUnknown) {
			t.Errorf("parseContentType(%q) = %v, %v; want %v", ct, got, err, want)
		}
	}
}

func TestLogLimiter(t *testing.T) {
	l := logLimiter{every: 1 << 62}
	if ok, _ := l.allow(); !ok {
		t.Fatal("first line suppressed")
	}
	for range 3 {
		if ok, _ := l.allow(); ok {
			t.Fatal("line within the interval allowed")
		}
	}
	l.last = l.last.Add(-(1 << 62))
	if ok, n := l.allow(); !ok || n != 3 {
		t.Errorf("allow = %v, %d; want true, 3", ok, n)
	}
}

// TestWriteConcurrent exercises the decoder pool from many goroutines (run with -race).
func TestWriteConcurrent(t *testing.T) {
	app := &recordingAppender{}
	srv := testServer(t, app, Limits{}, nil)
	v1 := snappy.Encode(nil, marshal(t, nodeRequestV1(t, 50, 1)))
	v2 := snappy.Encode(nil, marshal(t, nodeRequestV2(t, 50, 2)))
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			for range 10 {
				ct, body := ctV1, v1
				if i%2 == 1 {
					ct, body = ctV2, v2
				}
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, bytes.NewReader(body))
				req.Header.Set("Content-Type", ct)
				req.Header.Set("Content-Encoding", "snappy")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := app.samples(); n != 16*10*50 {
		t.Errorf("%d samples written, want %d", n, 16*10*50)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestWriteBodyReadError(t *testing.T) {
	app := &recordingAppender{}
	h := NewWriteHandler(app, WriteHandlerOptions{})
	req := httptest.NewRequest(http.MethodPost, "/api/v1/write", io.MultiReader(strings.NewReader("abc"), failingReader{}))
	req.Header.Set("Content-Type", ctV2)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "connection reset") {
		t.Errorf("status %d body %q, want 400 naming the read error", w.Code, w.Body.String())
	}
	if got := w.Header().Get(HeaderSamplesWritten); got != "0" {
		t.Errorf("%s = %q, want 0", HeaderSamplesWritten, got)
	}
}
