package api

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grafana/regexp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/util/teststorage"

	"github.com/tandem-tsdb/tandem/promql/engine"
)

// apiResponse is the Prometheus API envelope as a client sees it.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
}

// newEngine returns the engine tandem runs with the API configured by opts.
func newEngine(opts Options) promql.QueryEngine {
	return engine.New(opts.EngineOptions())
}

// testServer starts the API over a fresh teststorage, mounted as tandem's
// server mounts it, and returns its base URL and the storage.
func testServer(t *testing.T, modify func(*Options)) (string, *teststorage.TestStorage) {
	t.Helper()
	st := teststorage.New(t)
	opts := Options{
		Queryable:  st,
		Registerer: prometheus.NewRegistry(),
		Version:    "0.1.0",
		Revision:   "abc123",
		Branch:     "main",
		BuildDate:  "20260101-00:00:00",
	}
	if modify != nil {
		modify(&opts)
	}
	h, err := NewHandler(opts, newEngine(opts))
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server not on 127.0.0.1: %s", srv.URL)
	}
	return srv.URL, st
}

// do performs a request and returns status code, body and headers.
func do(t *testing.T, method, u string, form url.Values, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, b, resp.Header
}

// call performs a request and decodes the envelope, failing on non-JSON bodies.
func call(t *testing.T, method, u string, form url.Values) (int, apiResponse) {
	t.Helper()
	code, body, _ := do(t, method, u, form, nil)
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%s %s: code %d, invalid JSON %q: %v", method, u, code, body, err)
	}
	return code, r
}

// mustSucceed asserts a 200 success envelope and decodes data into out (if non-nil).
func mustSucceed(t *testing.T, method, u string, form url.Values, out any) {
	t.Helper()
	code, r := call(t, method, u, form)
	if code != http.StatusOK || r.Status != "success" {
		t.Fatalf("%s %s: code %d status %q error %q", method, u, code, r.Status, r.Error)
	}
	if out != nil {
		if err := json.Unmarshal(r.Data, out); err != nil {
			t.Fatalf("%s %s: decode data %s: %v", method, u, r.Data, err)
		}
	}
}

func TestGrafanaSaveAndTest(t *testing.T) {
	base, _ := testServer(t, nil)

	// Health check: instant query 1+1 as a form POST.
	var q struct {
		ResultType string `json:"resultType"`
		Result     []any  `json:"result"`
	}
	mustSucceed(t, http.MethodPost, base+"/api/v1/query", url.Values{"query": {"1+1"}, "time": {"4"}}, &q)
	if q.ResultType != "scalar" || len(q.Result) != 2 || q.Result[0] != 4.0 || q.Result[1] != "2" {
		t.Fatalf("1+1 at t=4: got %+v, want scalar [4,\"2\"]", q)
	}

	// Build info: Prometheus flavour, i.e. no features map.
	var bi map[string]any
	mustSucceed(t, http.MethodGet, base+"/api/v1/status/buildinfo", nil, &bi)
	if _, ok := bi["features"]; ok {
		t.Fatalf("buildinfo must not have a features map: %v", bi)
	}
	if bi["version"] != "0.1.0" || bi["revision"] != "abc123" || bi["branch"] != "main" || bi["buildDate"] != "20260101-00:00:00" {
		t.Fatalf("unexpected buildinfo: %v", bi)
	}
	if gv, _ := bi["goVersion"].(string); !strings.HasPrefix(gv, "go") {
		t.Fatalf("goVersion = %q", gv)
	}
}

func TestEmptyDatabaseEndpoints(t *testing.T) {
	base, _ := testServer(t, nil)
	rng := url.Values{"start": {"0"}, "end": {"3600"}}
	with := func(v url.Values, kv ...string) url.Values {
		out := url.Values{}
		for k, vs := range v {
			out[k] = vs
		}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	cases := []struct {
		method, path string
		params       url.Values
		// check inspects the decoded data; nil means only the envelope is checked.
		check func(t *testing.T, data json.RawMessage)
	}{
		{"GET", "/query", url.Values{"query": {"up"}}, wantJSON(`{"resultType":"vector","result":[]}`)},
		{"POST", "/query", url.Values{"query": {"up"}, "time": {"100"}}, wantJSON(`{"resultType":"vector","result":[]}`)},
		{"GET", "/query_range", with(rng, "query", "rate(up[5m])", "step", "60"), wantJSON(`{"resultType":"matrix","result":[]}`)},
		{"POST", "/query_range", with(rng, "query", "up", "step", "15"), wantJSON(`{"resultType":"matrix","result":[]}`)},
		{"GET", "/series", with(rng, "match[]", `{__name__!=""}`, "limit", "40000"), wantJSON(`[]`)},
		{"POST", "/series", with(rng, "match[]", "up"), wantJSON(`[]`)},
		{"GET", "/labels", rng, wantJSON(`[]`)},
		{"POST", "/labels", with(rng, "match[]", "up", "limit", "40000"), wantJSON(`[]`)},
		{"GET", "/label/__name__/values", with(rng, "limit", "40000"), wantJSON(`[]`)},
		{"GET", "/label/U__http_2e_status_code/values", nil, wantJSON(`[]`)},
		{"GET", "/metadata", nil, wantJSON(`{}`)},
		{"GET", "/metadata", url.Values{"metric": {"up"}, "limit": {"10"}}, wantJSON(`{}`)},
		{"GET", "/query_exemplars", url.Values{"query": {"test"}}, wantJSON(`[]`)},
		{"POST", "/query_exemplars", with(rng, "query", `rate(http_requests_total[5m])`), wantJSON(`[]`)},
		{"GET", "/format_query", url.Values{"query": {"sum(rate(x[5m]))by(job)"}}, wantJSON(`"sum by (job) (rate(x[5m]))"`)},
		{"POST", "/format_query", url.Values{"query": {"up"}}, wantJSON(`"up"`)},
		{"GET", "/parse_query", url.Values{"query": {"up + 1"}}, func(t *testing.T, d json.RawMessage) {
			if !strings.Contains(string(d), `"binaryExpr"`) {
				t.Errorf("parse_query: no binaryExpr in %s", d)
			}
		}},
		{"GET", "/status/buildinfo", nil, nil},
		{"GET", "/status/tsdb", nil, func(t *testing.T, d json.RawMessage) {
			var s struct {
				HeadStats               map[string]float64 `json:"headStats"`
				SeriesCountByMetricName []any              `json:"seriesCountByMetricName"`
			}
			mustUnmarshal(t, d, &s)
			if s.HeadStats["numSeries"] != 0 || s.HeadStats["chunkCount"] != 0 || s.SeriesCountByMetricName == nil {
				t.Errorf("status/tsdb on empty db: %s", d)
			}
		}},
		{"GET", "/status/config", nil, func(t *testing.T, d json.RawMessage) {
			var c struct{ YAML string }
			mustUnmarshal(t, d, &c)
			if !strings.Contains(c.YAML, "global:") {
				t.Errorf("status/config yaml: %q", c.YAML)
			}
		}},
		{"GET", "/status/flags", nil, func(t *testing.T, d json.RawMessage) {
			var f map[string]string
			mustUnmarshal(t, d, &f)
			if f["query.lookback-delta"] != "5m0s" || f["query.max-concurrency"] != "20" {
				t.Errorf("status/flags: %v", f)
			}
		}},
		{"GET", "/status/runtimeinfo", nil, func(t *testing.T, d json.RawMessage) {
			var ri map[string]any
			mustUnmarshal(t, d, &ri)
			if ri["hostname"] == "" || ri["GOMAXPROCS"] == 0.0 {
				t.Errorf("runtimeinfo: %v", ri)
			}
		}},
		{"GET", "/status/walreplay", nil, nil},
		{"GET", "/status/tsdb/blocks", nil, wantJSON(`{"blocks":[]}`)},
		{"GET", "/status/self_metrics", nil, wantJSON(`[]`)},
		{"GET", "/rules", nil, wantJSON(`{"groups":[]}`)},
		{"GET", "/rules", url.Values{"type": {"record"}}, wantJSON(`{"groups":[]}`)},
		{"GET", "/alerts", nil, wantJSON(`{"alerts":[]}`)},
		{"GET", "/targets", nil, wantJSON(`{"activeTargets":[],"droppedTargets":[],"droppedTargetCounts":{}}`)},
		{"GET", "/targets", url.Values{"state": {"active"}}, nil},
		{"GET", "/targets/metadata", url.Values{"metric": {"up"}}, wantJSON(`[]`)},
		{"GET", "/scrape_pools", nil, wantJSON(`{"scrapePools":[]}`)},
		{"GET", "/alertmanagers", nil, wantJSON(`{"activeAlertmanagers":[],"droppedAlertmanagers":[]}`)},
		{"GET", "/notifications", nil, wantJSON(`[]`)},
		{"GET", "/features", nil, func(t *testing.T, d json.RawMessage) {
			var f map[string]map[string]bool
			mustUnmarshal(t, d, &f)
			if !f["promql"]["at_modifier"] || f["api"]["admin"] || !f["promql_functions"]["rate"] {
				t.Errorf("features: %s", d)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path+"?"+c.params.Encode(), func(t *testing.T) {
			u := base + "/api/v1" + c.path
			var form url.Values
			if c.method == http.MethodGet {
				if len(c.params) > 0 {
					u += "?" + c.params.Encode()
				}
			} else {
				form = c.params
			}
			code, r := call(t, c.method, u, form)
			if code < 200 || code > 299 || r.Status != "success" {
				t.Fatalf("code %d status %q errorType %q error %q", code, r.Status, r.ErrorType, r.Error)
			}
			if c.check != nil {
				c.check(t, r.Data)
			}
		})
	}

	// Endpoints that are not JSON envelopes still must not fail.
	for _, p := range []string{"/openapi.yaml", "/notifications/live"} {
		code, _, _ := do(t, http.MethodGet, base+"/api/v1"+p, nil, nil)
		if code != http.StatusOK && code != http.StatusNoContent {
			t.Errorf("GET %s: code %d", p, code)
		}
	}
}

func wantJSON(want string) func(t *testing.T, data json.RawMessage) {
	return func(t *testing.T, data json.RawMessage) {
		t.Helper()
		var got, exp any
		mustUnmarshal(t, data, &got)
		mustUnmarshal(t, []byte(want), &exp)
		gb, _ := json.Marshal(got)
		eb, _ := json.Marshal(exp)
		if string(gb) != string(eb) {
			t.Errorf("data = %s, want %s", gb, eb)
		}
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("unmarshal %q: %v", b, err)
	}
}

func TestErrorEnvelopes(t *testing.T) {
	base, _ := testServer(t, nil)
	cases := []struct {
		name, method, path string
		params             url.Values
		code               int
		errorType          string
	}{
		{"bad query GET", "GET", "/query", url.Values{"query": {"sum(("}}, 400, "bad_data"},
		{"bad query POST", "POST", "/query", url.Values{"query": {"rate(up)"}}, 400, "bad_data"},
		{"bad range query", "POST", "/query_range", url.Values{"query": {"up{"}, "start": {"0"}, "end": {"60"}, "step": {"15"}}, 400, "bad_data"},
		{"range end before start", "GET", "/query_range", url.Values{"query": {"up"}, "start": {"60"}, "end": {"0"}, "step": {"15"}}, 400, "bad_data"},
		{"bad time", "GET", "/query", url.Values{"query": {"up"}, "time": {"yesterday"}}, 400, "bad_data"},
		{"series without match", "GET", "/series", nil, 400, "bad_data"},
		{"series without match POST", "POST", "/series", url.Values{"start": {"0"}}, 400, "bad_data"},
		{"series empty matcher", "GET", "/series", url.Values{"match[]": {`{job=""}`}}, 400, "bad_data"},
		{"timeout parameter", "GET", "/query", url.Values{"query": {"up"}, "timeout": {"0.000000001"}}, 503, "timeout"},
		{"bad format_query", "GET", "/format_query", url.Values{"query": {"1 +"}}, 400, "bad_data"},
		{"bad exemplar query", "GET", "/query_exemplars", url.Values{"query": {"{"}}, 400, "bad_data"},
		{"metadata bad limit", "GET", "/metadata", url.Values{"limit": {"x"}}, 400, "bad_data"},
		{"metadata bad limit_per_metric", "GET", "/metadata", url.Values{"limit_per_metric": {"x"}}, 400, "bad_data"},
		{"tsdb bad limit", "GET", "/status/tsdb", url.Values{"limit": {"0"}}, 400, "bad_data"},
		{"tsdb too high limit", "GET", "/status/tsdb", url.Values{"limit": {"10001"}}, 400, "bad_data"},
		// Prometheus maps "unavailable" to 500 (getDefaultErrorCode has no case for it).
		{"admin delete disabled", "POST", "/admin/tsdb/delete_series", url.Values{"match[]": {"up"}}, 500, "unavailable"},
		{"admin snapshot disabled", "PUT", "/admin/tsdb/snapshot", url.Values{}, 500, "unavailable"},
		{"unknown scrape pool", "GET", "/scrape_pools/config", url.Values{"scrapePool": {"x"}}, 400, "bad_data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := base + "/api/v1" + c.path
			var form url.Values
			if c.method == http.MethodGet {
				u += "?" + c.params.Encode()
			} else {
				form = c.params
			}
			code, r := call(t, c.method, u, form)
			if code != c.code || r.Status != "error" || r.ErrorType != c.errorType || r.Error == "" {
				t.Fatalf("got code %d status %q errorType %q error %q; want %d %s", code, r.Status, r.ErrorType, r.Error, c.code, c.errorType)
			}
		})
	}

	// Label values are GET-only, as in Prometheus.
	if code, _, _ := do(t, http.MethodPost, base+"/api/v1/label/job/values", url.Values{}, nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST label values: code %d, want 405", code)
	}
}

func TestEngineTimeout(t *testing.T) {
	base, _ := testServer(t, func(o *Options) { o.Engine.QueryTimeout = time.Nanosecond })
	code, r := call(t, http.MethodGet, base+"/api/v1/query?query=1", nil)
	if code != http.StatusServiceUnavailable || r.ErrorType != "timeout" {
		t.Fatalf("got %d %q %q, want 503 timeout", code, r.ErrorType, r.Error)
	}
}

// appendTestData writes a few series to st: up for two jobs, a counter going
// up by 10 every 15s, and a series with a UTF-8 label name.
func appendTestData(t *testing.T, st *teststorage.TestStorage) {
	t.Helper()
	app := st.Appender(context.Background())
	for i := int64(0); i <= 40; i++ {
		ts := i * 15_000
		for _, s := range []struct {
			lbls labels.Labels
			v    float64
		}{
			{labels.FromStrings("__name__", "up", "job", "api", "instance", "a:9090"), 1},
			{labels.FromStrings("__name__", "up", "job", "db", "instance", "b:9090"), 0},
			{labels.FromStrings("__name__", "http_requests_total", "job", "api", "http.status_code", "200"), float64(i * 10)},
			{labels.FromStrings("__name__", "http_requests_total", "job", "api", "http.status_code", "500"), float64(i)},
		} {
			if _, err := app.Append(0, s.lbls, ts, s.v); err != nil {
				t.Fatalf("append %s: %v", s.lbls, err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

type vectorSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

type matrixSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

func TestQueriesOverData(t *testing.T) {
	base, st := testServer(t, nil)
	appendTestData(t, st)

	// Instant query: both up series at t=300s, sorted by the query.
	var inst struct {
		ResultType string         `json:"resultType"`
		Result     []vectorSample `json:"result"`
	}
	mustSucceed(t, http.MethodGet, base+"/api/v1/query?"+url.Values{"query": {"sort_desc(up)"}, "time": {"300"}}.Encode(), nil, &inst)
	if inst.ResultType != "vector" || len(inst.Result) != 2 {
		t.Fatalf("instant up: %+v", inst)
	}
	if inst.Result[0].Metric["job"] != "api" || inst.Result[0].Value[0] != 300.0 || inst.Result[0].Value[1] != "1" ||
		inst.Result[1].Metric["job"] != "db" || inst.Result[1].Value[1] != "0" {
		t.Fatalf("instant up values: %+v", inst.Result)
	}

	// rate over a counter increasing by 10 every 15s is 2/3 per second;
	// UTF-8 label selectors use the quoted syntax.
	mustSucceed(t, http.MethodPost, base+"/api/v1/query", url.Values{
		"query": {`rate(http_requests_total{"http.status_code"="200"}[1m])`}, "time": {"600"},
	}, &inst)
	if len(inst.Result) != 1 || inst.Result[0].Metric["http.status_code"] != "200" {
		t.Fatalf("rate result: %+v", inst.Result)
	}
	if got := inst.Result[0].Value[1]; got != "0.6666666666666666" {
		t.Fatalf("rate = %v, want 0.6666666666666666", got)
	}

	// Range query: sum(up) is 1 at every step; the lookback window (t-5m, t]
	// keeps the last sample (600s) visible up to, not including, 900s.
	var rng struct {
		ResultType string         `json:"resultType"`
		Result     []matrixSeries `json:"result"`
	}
	mustSucceed(t, http.MethodPost, base+"/api/v1/query_range", url.Values{
		"query": {"sum(up)"}, "start": {"0"}, "end": {"1200"}, "step": {"60"},
	}, &rng)
	if rng.ResultType != "matrix" || len(rng.Result) != 1 {
		t.Fatalf("range sum(up): %+v", rng)
	}
	vals := rng.Result[0].Values
	if len(vals) != 15 || vals[0][0] != 0.0 || vals[14][0] != 840.0 {
		t.Fatalf("range sum(up): %d points %v (want 0..840 step 60)", len(vals), vals)
	}
	for _, v := range vals {
		if v[1] != "1" {
			t.Fatalf("sum(up) point %v, want 1", v)
		}
	}

	// Series, labels and label values over the data.
	var series []map[string]string
	mustSucceed(t, http.MethodGet, base+"/api/v1/series?"+url.Values{"match[]": {"up"}, "start": {"0"}, "end": {"600"}}.Encode(), nil, &series)
	if len(series) != 2 || series[0]["instance"] != "a:9090" {
		t.Fatalf("series: %v", series)
	}
	var names []string
	mustSucceed(t, http.MethodGet, base+"/api/v1/labels", nil, &names)
	if strings.Join(names, ",") != "__name__,http.status_code,instance,job" {
		t.Fatalf("labels: %v", names)
	}
	mustSucceed(t, http.MethodGet, base+"/api/v1/label/__name__/values", nil, &names)
	if strings.Join(names, ",") != "http_requests_total,up" {
		t.Fatalf("metric names: %v", names)
	}
	mustSucceed(t, http.MethodGet, base+"/api/v1/label/job/values?"+url.Values{"match[]": {"http_requests_total"}}.Encode(), nil, &names)
	if strings.Join(names, ",") != "api" {
		t.Fatalf("job values for http_requests_total: %v", names)
	}

	// Limits add a warning, as upstream does.
	code, r := call(t, http.MethodGet, base+"/api/v1/label/__name__/values?limit=1", nil)
	if code != http.StatusOK || len(r.Warnings) == 0 || string(r.Data) != `["http_requests_total"]` {
		t.Fatalf("limited label values: %d %s warnings %v", code, r.Data, r.Warnings)
	}
}

func TestLabelValuesUTF8Escaping(t *testing.T) {
	base, st := testServer(t, nil)
	appendTestData(t, st)
	var vals []string
	// "http.status_code" escaped as U__ + http + _2e_ (".") + status__code ("_" doubled).
	mustSucceed(t, http.MethodGet, base+"/api/v1/label/U__http_2e_status__code/values", nil, &vals)
	if strings.Join(vals, ",") != "200,500" {
		t.Fatalf("U__ escaped label values: %v", vals)
	}
	// Without the escape the (nonexistent) literal name yields nothing.
	mustSucceed(t, http.MethodGet, base+"/api/v1/label/http_status_code/values", nil, &vals)
	if len(vals) != 0 {
		t.Fatalf("unescaped name matched: %v", vals)
	}
}

// fakeMetadata is a MetadataSource over a fixed map that honours the limits.
type fakeMetadata struct {
	m     map[string][]MetricMetadata
	calls []string
}

func (f *fakeMetadata) MetricMetadata(metric string, limit, limitPerMetric int) map[string][]MetricMetadata {
	f.calls = append(f.calls, metric)
	out := map[string][]MetricMetadata{}
	for name, entries := range f.m {
		if metric != "" && name != metric {
			continue
		}
		if limitPerMetric > 0 && len(entries) > limitPerMetric {
			entries = entries[:limitPerMetric]
		}
		out[name] = entries
	}
	// Deliberately ignores limit: the handler must enforce it.
	_ = limit
	return out
}

func TestMetadata(t *testing.T) {
	src := &fakeMetadata{m: map[string][]MetricMetadata{
		"up":                  {{Type: "gauge", Help: "Whether the target is up.", Unit: ""}},
		"http_requests_total": {{Type: "counter", Help: "Requests.", Unit: ""}, {Type: "counter", Help: "HTTP requests.", Unit: "requests"}},
		"go_goroutines":       {{Type: "gauge", Help: "Goroutines.", Unit: ""}},
	}}
	base, _ := testServer(t, func(o *Options) { o.Metadata = src })
	get := func(q url.Values) string {
		t.Helper()
		code, body, hdr := do(t, http.MethodGet, base+"/api/v1/metadata?"+q.Encode(), nil, nil)
		if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
			t.Fatalf("metadata %v: code %d content-type %q", q, code, hdr.Get("Content-Type"))
		}
		return string(body)
	}

	if got, want := get(url.Values{"metric": {"up"}}),
		`{"status":"success","data":{"up":[{"type":"gauge","help":"Whether the target is up.","unit":""}]}}`; got != want {
		t.Fatalf("metric=up:\n got %s\nwant %s", got, want)
	}
	if got, want := get(url.Values{"metric": {"http_requests_total"}, "limit_per_metric": {"1"}}),
		`{"status":"success","data":{"http_requests_total":[{"type":"counter","help":"Requests.","unit":""}]}}`; got != want {
		t.Fatalf("limit_per_metric=1:\n got %s\nwant %s", got, want)
	}
	if got, want := get(url.Values{"limit": {"2"}}),
		`{"status":"success","data":{"go_goroutines":[{"type":"gauge","help":"Goroutines.","unit":""}],"http_requests_total":[{"type":"counter","help":"Requests.","unit":""},{"type":"counter","help":"HTTP requests.","unit":"requests"}]}}`; got != want {
		t.Fatalf("limit=2:\n got %s\nwant %s", got, want)
	}
	if got := get(url.Values{"metric": {"nope"}}); got != `{"status":"success","data":{}}` {
		t.Fatalf("unknown metric: %s", got)
	}
	if got := get(url.Values{"limit": {"0"}}); got != `{"status":"success","data":{}}` {
		t.Fatalf("limit=0: %s", got)
	}
	var all map[string][]MetricMetadata
	if err := json.Unmarshal([]byte(get(url.Values{"limit": {"-1"}})), &struct {
		Data *map[string][]MetricMetadata `json:"data"`
	}{&all}); err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || len(all["http_requests_total"]) != 2 {
		t.Fatalf("limit=-1: %v", all)
	}
	if len(src.calls) == 0 || src.calls[0] != "up" {
		t.Fatalf("source calls: %v", src.calls)
	}
	// Only GET, as in Prometheus.
	if code, _, _ := do(t, http.MethodPost, base+"/api/v1/metadata", url.Values{}, nil); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST metadata: code %d, want 405", code)
	}
}

// headStats adapts a tsdb.Head to StatsSource.
type headStats struct{ h *tsdb.Head }

func (s headStats) Stats(name string, limit int) (*tsdb.Stats, error) {
	return s.h.Stats(name, limit), nil
}

func TestTSDBStatus(t *testing.T) {
	reg := prometheus.NewRegistry()
	chunks := prometheus.NewGauge(prometheus.GaugeOpts{Name: headChunksMetric, Help: "chunks"})
	chunks.Set(7)
	reg.MustRegister(chunks)
	base, st := testServer(t, func(o *Options) {
		o.Stats = headStats{o.Queryable.(*teststorage.TestStorage).Head()}
		o.Gatherer = reg
	})
	appendTestData(t, st)

	var s struct {
		HeadStats struct {
			NumSeries  int   `json:"numSeries"`
			ChunkCount int64 `json:"chunkCount"`
			MinTime    int64 `json:"minTime"`
			MaxTime    int64 `json:"maxTime"`
		} `json:"headStats"`
		SeriesCountByMetricName []struct {
			Name  string `json:"name"`
			Value int    `json:"value"`
		} `json:"seriesCountByMetricName"`
	}
	mustSucceed(t, http.MethodGet, base+"/api/v1/status/tsdb?limit=1", nil, &s)
	if s.HeadStats.NumSeries != 4 || s.HeadStats.ChunkCount != 7 || s.HeadStats.MinTime != 0 || s.HeadStats.MaxTime != 600_000 {
		t.Fatalf("headStats: %+v", s.HeadStats)
	}
	if len(s.SeriesCountByMetricName) != 1 || s.SeriesCountByMetricName[0].Value != 2 {
		t.Fatalf("seriesCountByMetricName (limit 1): %+v", s.SeriesCountByMetricName)
	}

	// Without a StatsSource, StartTime fills minTime.
	base2, _ := testServer(t, func(o *Options) { o.StartTime = func() (int64, error) { return 1234, nil } })
	mustSucceed(t, http.MethodGet, base2+"/api/v1/status/tsdb", nil, &s)
	if s.HeadStats.NumSeries != 0 || s.HeadStats.MinTime != 1234 {
		t.Fatalf("nil Stats headStats: %+v", s.HeadStats)
	}

	// A failing source is an internal error.
	base3, _ := testServer(t, func(o *Options) { o.Stats = failingStats{} })
	code, r := call(t, http.MethodGet, base3+"/api/v1/status/tsdb", nil)
	if code != http.StatusInternalServerError || r.ErrorType != "internal" || !strings.Contains(r.Error, "boom") {
		t.Fatalf("failing stats: %d %+v", code, r)
	}
}

type failingStats struct{}

func (failingStats) Stats(string, int) (*tsdb.Stats, error) { return nil, errors.New("boom") }

func TestReady(t *testing.T) {
	var ready atomic.Bool
	base, _ := testServer(t, func(o *Options) { o.Ready = ready.Load })
	for _, p := range []string{"/query?query=1", "/metadata", "/status/tsdb", "/labels"} {
		code, body, hdr := do(t, http.MethodGet, base+"/api/v1"+p, nil, nil)
		if code != http.StatusServiceUnavailable || string(body) != "Service Unavailable" || hdr.Get("X-Prometheus-Stopping") != "false" {
			t.Fatalf("not ready %s: %d %q %v", p, code, body, hdr)
		}
	}
	ready.Store(true)
	mustSucceed(t, http.MethodGet, base+"/api/v1/query?query=1", nil, nil)
}

func TestWriteAndReadRoutesTakePrecedence(t *testing.T) {
	st := teststorage.New(t)
	opts := Options{Queryable: st}
	h, err := NewHandler(opts, newEngine(opts))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", h)
	mux.Handle("POST /api/v1/write", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.Handle("/api/v1/read", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	if code, _, _ := do(t, http.MethodPost, srv.URL+"/api/v1/write", url.Values{}, nil); code != http.StatusNoContent {
		t.Fatalf("write: code %d, want tandem's 204", code)
	}
	if code, _, _ := do(t, http.MethodPost, srv.URL+"/api/v1/read", url.Values{}, nil); code != http.StatusTeapot {
		t.Fatalf("read: code %d, want tandem's handler", code)
	}
	// The API still answers next to them.
	mustSucceed(t, http.MethodGet, srv.URL+"/api/v1/query?query=1", nil, nil)

	// Unregistered, the API handler refuses ingestion instead of swallowing it.
	bare := httptest.NewServer(h)
	defer bare.Close()
	for _, p := range []string{"/api/v1/write", "/api/v1/otlp/v1/metrics"} {
		code, body, _ := do(t, http.MethodPost, bare.URL+p, url.Values{}, nil)
		if code != http.StatusNotFound || !strings.Contains(string(body), "not served by the query API") {
			t.Fatalf("%s on bare API: %d %q", p, code, body)
		}
	}
	// Remote read falls back to Prometheus's handler over the Queryable,
	// which rejects a body that is not a snappy-compressed ReadRequest.
	if code, _, _ := do(t, http.MethodPost, bare.URL+"/api/v1/read", url.Values{"x": {"y"}}, nil); code != http.StatusBadRequest {
		t.Fatalf("read on bare API: code %d, want upstream's 400", code)
	}
}

// TestCORSAndCompression: the CORS headers on answers small enough to be
// sent uncompressed (under minCompressSize, with their length) and on a
// large one, compressed.
func TestCORSAndCompression(t *testing.T) {
	base, st := testServer(t, nil)
	appendTestData(t, st)
	large := "/query_range?" + url.Values{"query": {"up"}, "start": {"0"}, "end": {"600"}, "step": {"1"}}.Encode()
	for p, enc := range map[string]string{"/query?query=1": "", "/metadata": "", large: "gzip"} {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1"+p, nil)
		req.Header.Set("Origin", "http://grafana.example")
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Content-Encoding") != enc {
			t.Fatalf("%s: %d %v", p, resp.StatusCode, resp.Header)
		}
		if enc == "" && (resp.ContentLength != int64(len(body)) || !bytes.Contains(body, []byte(`"status":"success"`))) {
			t.Fatalf("%s: Content-Length %d, body %q", p, resp.ContentLength, body)
		}
	}
}

// TestCORSOrigin restricts the origins (Options.CORSOrigin, as
// --web.cors.origin): the upstream endpoints and tandem's own ones echo a
// matching origin and give no Access-Control-Allow-Origin to another.
func TestCORSOrigin(t *testing.T) {
	base, _ := testServer(t, func(o *Options) {
		o.CORSOrigin = regexp.MustCompile(`^(?:https://grafana\.example)$`)
	})
	for _, p := range []string{"/query?query=1", "/metadata", "/status/tsdb", "/labels"} {
		for origin, want := range map[string]string{
			"https://grafana.example":      "https://grafana.example",
			"https://grafana.example.evil": "",
			"http://grafana.example":       "",
		} {
			req, _ := http.NewRequest(http.MethodGet, base+"/api/v1"+p, nil)
			req.Header.Set("Origin", origin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode != http.StatusOK || got != want {
				t.Errorf("%s from %s: HTTP %d, Access-Control-Allow-Origin %q, want %q", p, origin, resp.StatusCode, got, want)
			}
		}
	}
}

func TestMetricsRegistration(t *testing.T) {
	st := teststorage.New(t)
	reg := prometheus.NewRegistry()
	opts := Options{Queryable: st, Registerer: reg}
	eng := newEngine(opts)
	h1, err := NewHandler(opts, eng)
	if err != nil {
		t.Fatal(err)
	}
	// A second handler on the same registry reuses the request metric.
	if _, err := NewHandler(opts, eng); err != nil {
		t.Fatalf("second handler: %v", err)
	}
	srv := httptest.NewServer(h1)
	defer srv.Close()
	mustSucceed(t, http.MethodGet, srv.URL+"/api/v1/query?query=1", nil, nil)
	mustSucceed(t, http.MethodGet, srv.URL+"/api/v1/metadata", nil, nil)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() == "tandem_api_request_duration_seconds" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "handler" {
						found[l.GetValue()] = m.GetHistogram().GetSampleCount() > 0
					}
				}
			}
		}
		if mf.GetName() == "prometheus_engine_queries_concurrent_max" {
			found["engine"] = mf.GetMetric()[0].GetGauge().GetValue() == float64(engine.Options{}.WithDefaults().MaxConcurrentQueries)
		}
	}
	if !found["/api/v1/query"] || !found["/api/v1/metadata"] || !found["engine"] {
		t.Fatalf("metrics found: %v", found)
	}
}

func TestNewHandlerValidation(t *testing.T) {
	if _, err := NewHandler(Options{}, newEngine(Options{})); err == nil {
		t.Fatal("nil Queryable accepted")
	}
	if _, err := NewHandler(Options{Queryable: teststorage.New(t)}, nil); err == nil {
		t.Fatal("nil engine accepted")
	}
}

// TestResponseCompression: API responses of minCompressSize and more are
// gzip- or deflate-compressed as the client asks (the first of the two in
// Accept-Encoding), decode to the plain response, and say so in
// Content-Encoding and Vary; smaller ones, and error answers, are sent as
// they are, with their status.
func TestResponseCompression(t *testing.T) {
	base, st := testServer(t, nil)
	appendTestData(t, st)
	for _, tc := range []struct {
		path string
		code int
	}{
		{"/api/v1/query?query=up", http.StatusOK},
		{"/api/v1/query?query=up(", http.StatusBadRequest},
		{"/api/v1/query_range?query=up", http.StatusBadRequest},
	} {
		code, body, hdr := do(t, http.MethodGet, base+tc.path, nil, map[string]string{"Accept-Encoding": "gzip"})
		if code != tc.code || hdr.Get("Content-Encoding") != "" || len(body) >= minCompressSize || !bytes.Contains(body, []byte(`"status"`)) {
			t.Fatalf("%s: %d, Content-Encoding %q, body %q", tc.path, code, hdr.Get("Content-Encoding"), body)
		}
	}
	u := base + "/api/v1/query_range?" + url.Values{"query": {"up"}, "start": {"0"}, "end": {"600"}, "step": {"5"}}.Encode()
	_, plain, hdr := do(t, http.MethodGet, u, nil, map[string]string{"Accept-Encoding": "identity"})
	if hdr.Get("Content-Encoding") != "" || !strings.Contains(string(plain), `"status":"success"`) || len(plain) < minCompressSize {
		t.Fatalf("identity: Content-Encoding %q, %d bytes, body %.100s", hdr.Get("Content-Encoding"), len(plain), plain)
	}
	for _, tc := range []struct{ accept, want string }{
		{"gzip", "gzip"},
		{"deflate", "deflate"},
		{"br, deflate, gzip", "deflate"},
		{"zstd, gzip;q=1.0", ""}, // upstream matches names exactly, q-values aside
		{"gzip, deflate", "gzip"},
	} {
		_, body, hdr := do(t, http.MethodGet, u, nil, map[string]string{"Accept-Encoding": tc.accept})
		if got := hdr.Get("Content-Encoding"); got != tc.want {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q, want %q", tc.accept, got, tc.want)
		}
		if !strings.Contains(hdr.Get("Vary"), "Accept-Encoding") {
			t.Errorf("Accept-Encoding %q: Vary %q", tc.accept, hdr.Get("Vary"))
		}
		var r io.Reader = bytes.NewReader(body)
		var err error
		switch tc.want {
		case "gzip":
			r, err = gzip.NewReader(r)
		case "deflate":
			r, err = zlib.NewReader(r)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.accept, err)
		}
		got, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", tc.accept, err)
		}
		if !bytes.Equal(got, plain) {
			t.Fatalf("Accept-Encoding %q: decoded body differs:\n%.200s\n%.200s", tc.accept, got, plain)
		}
	}
}
