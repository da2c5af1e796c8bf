package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/golang/snappy"
	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	promremote "github.com/prometheus/prometheus/storage/remote"
)

// tenantWrite posts a remote-write 1.0 request for tenant ("" sends no
// header) and returns the status and body.
func tenantWrite(t *testing.T, p *tandemProc, tenant string, req *prompb.WriteRequest) (int, string) {
	t.Helper()
	code, body, _ := tenantWriteHeader(t, p, tenant, req)
	return code, body
}

// tenantWriteHeader is tenantWrite returning the response headers too.
func tenantWriteHeader(t *testing.T, p *tandemProc, tenant string, req *prompb.WriteRequest) (int, string, http.Header) {
	t.Helper()
	raw, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequest(http.MethodPost, p.url+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	if tenant != "" {
		hr.Header.Set("X-Scope-OrgID", tenant)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// tenantGet calls an API path as tenant and returns the status and the
// decoded envelope.
func tenantGet(t *testing.T, p *tandemProc, tenant, path string, params url.Values) (int, apiResponse) {
	t.Helper()
	hr, _ := http.NewRequest(http.MethodGet, p.url+path+"?"+params.Encode(), nil)
	if tenant != "" {
		hr.Header.Set("X-Scope-OrgID", tenant)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%s as %q: HTTP %d: %v: %s", path, tenant, resp.StatusCode, err, body)
	}
	return resp.StatusCode, r
}

// tenantRequest is a small write for one tenant: two series of metric
// <name>_metric (job <name>), with metadata and an exemplar.
func tenantRequest(name string, t0 int64) *prompb.WriteRequest {
	metric := name + "_metric"
	req := &prompb.WriteRequest{Metadata: []prompb.MetricMetadata{{
		Type: prompb.MetricMetadata_GAUGE, MetricFamilyName: metric, Help: "help of " + name,
	}}}
	for i := range 2 {
		ts := prompb.TimeSeries{Labels: []prompb.Label{
			{Name: "__name__", Value: metric}, {Name: "instance", Value: fmt.Sprintf("host-%d", i)}, {Name: "job", Value: name},
		}}
		for k := range 5 {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t0 + int64(k)*15000, Value: float64(k + i)})
		}
		ts.Exemplars = []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: name + "-trace"}}, Value: 1, Timestamp: t0}}
		req.Timeseries = append(req.Timeseries, ts)
	}
	return req
}

// TestTenantIsolation writes three tenants (one of them the default, no
// header) and checks that every read endpoint shows each tenant only its
// own series, before and after a restart.
func TestTenantIsolation(t *testing.T) {
	dir := t.TempDir()
	p := startTandem(t, dir)
	t0 := time.Now().Add(-5 * time.Minute).UnixMilli()
	for _, tn := range []string{"", "team-a", "team-b"} {
		name := map[string]string{"": "anon", "team-a": "a", "team-b": "b"}[tn]
		if code, body := tenantWrite(t, p, tn, tenantRequest(name, t0)); code != http.StatusNoContent {
			t.Fatalf("write as %q: %d %s", tn, code, body)
		}
	}
	own := map[string]string{"": "anon", "anonymous": "anon", "team-a": "a", "team-b": "b", "team-c": ""}
	check := func(t *testing.T, p *tandemProc) {
		for tn, job := range own {
			t.Run("tenant="+tn, func(t *testing.T) { checkTenantReads(t, p, tn, job, t0) })
		}
	}
	check(t, p)
	if _, err := os.Stat(filepath.Join(dir, "tenants", "team-c")); !os.IsNotExist(err) {
		t.Errorf("a read of tenant team-c created its directory: %v", err)
	}
	for _, d := range []string{"team-a", "team-b"} {
		if _, err := os.Stat(filepath.Join(dir, "tenants", d, "wal")); err != nil {
			t.Errorf("tenant %s has no WAL of its own: %v", d, err)
		}
	}
	m := scrapeMetrics(t, p)
	if m[`tandem_head_series{tenant="team-a"}`] != 2 || m[`tandem_head_series`] != 2 {
		t.Errorf("head series metrics: team-a %v, default %v", m[`tandem_head_series{tenant="team-a"}`], m[`tandem_head_series`])
	}

	// Refused: several tenants without federation, invalid IDs.
	for _, bad := range []string{"team-a|team-b", "../etc", "a b", strings.Repeat("x", 151)} {
		if code, body := tenantWrite(t, p, bad, tenantRequest("x", t0)); code != http.StatusBadRequest || !strings.Contains(body, "tenant") {
			t.Errorf("write as %q: %d %s, want 400 naming the tenant", bad, code, body)
		}
		if code, r := tenantGet(t, p, bad, "/api/v1/query", url.Values{"query": {"up"}}); code != http.StatusBadRequest || r.ErrorType != "bad_data" {
			t.Errorf("query as %q: %d %+v, want 400 bad_data", bad, code, r)
		}
	}

	p.signal(syscall.SIGTERM)
	p = startTandem(t, dir)
	t.Run("restarted", func(t *testing.T) { check(t, p) })
}

// checkTenantReads checks that every read endpoint shows tenant tn only
// the series of job (none for "").
func checkTenantReads(t *testing.T, p *tandemProc, tn, job string, t0 int64) {
	wantNames := []string{}
	if job != "" {
		wantNames = []string{job + "_metric"}
	}
	get := func(path string, params url.Values, out any) {
		t.Helper()
		code, r := tenantGet(t, p, tn, path, params)
		if code != http.StatusOK || r.Status != "success" {
			t.Fatalf("%s: %d %+v", path, code, r)
		}
		if err := json.Unmarshal(r.Data, out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, r.Data)
		}
	}
	all := `{__name__=~".+"}`
	rng := url.Values{"start": {fmtTime(t0 - 60000)}, "end": {fmtTime(t0 + 120000)}}

	var names []string
	get("/api/v1/label/__name__/values", rng, &names)
	if !slices.Equal(names, wantNames) {
		t.Errorf("label values: %v, want %v", names, wantNames)
	}
	var lnames []string
	get("/api/v1/labels", rng, &lnames)
	if job != "" && !slices.Equal(lnames, []string{"__name__", "instance", "job"}) || job == "" && len(lnames) != 0 {
		t.Errorf("labels: %v", lnames)
	}
	var ser []map[string]string
	get("/api/v1/series", url.Values{"match[]": {all}, "start": rng["start"], "end": rng["end"]}, &ser)
	if len(ser) != 2*len(wantNames) {
		t.Errorf("series: %v", ser)
	}
	for _, s := range ser {
		if s["job"] != job {
			t.Errorf("series of another tenant: %v", s)
		}
	}
	var q queryData
	get("/api/v1/query", url.Values{"query": {"count by (job) (" + all + ")"}, "time": {fmtTime(t0 + 60000)}}, &q)
	if got := decodeResult(t, q); len(got) != len(wantNames) || job != "" && got[0].Labels != `{job="`+job+`"}` {
		t.Errorf("instant query: %v", got)
	}
	var qr queryData
	get("/api/v1/query_range", url.Values{"query": {"sum by (job) (" + all + ")"}, "start": {fmtTime(t0)}, "end": {fmtTime(t0 + 60000)}, "step": {"15"}}, &qr)
	if got := decodeResult(t, qr); len(got) != len(wantNames) || job != "" && (got[0].Labels != `{job="`+job+`"}` || len(got[0].V) != 5) {
		t.Errorf("range query: %v", got)
	}
	var md map[string][]map[string]string
	get("/api/v1/metadata", nil, &md)
	if len(md) != len(wantNames) || job != "" && (len(md[job+"_metric"]) != 1 || md[job+"_metric"][0]["help"] != "help of "+job) {
		t.Errorf("metadata: %v", md)
	}
	var ex []struct {
		SeriesLabels map[string]string `json:"seriesLabels"`
		Exemplars    []struct {
			Labels map[string]string `json:"labels"`
		} `json:"exemplars"`
	}
	get("/api/v1/query_exemplars", url.Values{"query": {all}, "start": rng["start"], "end": rng["end"]}, &ex)
	if len(ex) != 2*len(wantNames) {
		t.Errorf("exemplars: %+v", ex)
	}
	for _, e := range ex {
		if e.SeriesLabels["job"] != job || len(e.Exemplars) != 1 || e.Exemplars[0].Labels["trace_id"] != job+"-trace" {
			t.Errorf("exemplar of another tenant: %+v", e)
		}
	}
	var st struct {
		HeadStats struct {
			NumSeries int `json:"numSeries"`
		} `json:"headStats"`
		SeriesCountByMetricName []struct {
			Name string `json:"name"`
		} `json:"seriesCountByMetricName"`
	}
	get("/api/v1/status/tsdb", nil, &st)
	if st.HeadStats.NumSeries != 2*len(wantNames) || len(st.SeriesCountByMetricName) != len(wantNames) {
		t.Errorf("status/tsdb: %+v", st)
	}
	var gs struct {
		Tenant string            `json:"tenant"`
		Series int               `json:"series"`
		Limits map[string]string `json:"limits"`
	}
	get("/api/v1/status/groups", nil, &gs)
	wantTenant := tn
	if tn == "" {
		wantTenant = "anonymous"
	}
	if gs.Tenant != wantTenant || gs.Series != 2*len(wantNames) || gs.Limits["max_series"] == "" {
		t.Errorf("status/groups: %+v", gs)
	}

	// Remote read, with Prometheus's own client.
	u, _ := url.Parse(p.url + "/api/v1/read")
	hdr := map[string]string{}
	if tn != "" {
		hdr["X-Scope-OrgID"] = tn
	}
	for _, rt := range []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS, prompb.ReadRequest_SAMPLES} {
		c, err := promremote.NewReadClient("tandem", &promremote.ClientConfig{
			URL: &config_util.URL{URL: u}, Timeout: model.Duration(10 * time.Second), Headers: hdr,
			AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{rt}, ChunkedReadLimit: 50 << 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		rq, err := promremote.ToQuery(t0-60000, t0+120000, []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")}, &storage.SelectHints{Start: t0 - 60000, End: t0 + 120000})
		if err != nil {
			t.Fatal(err)
		}
		ss, err := c.Read(context.Background(), rq, true)
		if err != nil {
			t.Fatalf("remote read %v: %v", rt, err)
		}
		n := 0
		for ss.Next() {
			if got := ss.At().Labels().Get("job"); got != job {
				t.Errorf("remote read %v: series of job %q", rt, got)
			}
			n++
		}
		if n != 2*len(wantNames) {
			t.Errorf("remote read %v: %d series, want %d", rt, n, 2*len(wantNames))
		}
	}
}

// TestTenantRateLimit checks a tenant's ingestion rate from the limits
// file: 429 with Retry-After once over it, other tenants unaffected, a
// raised limit taking effect on SIGHUP, and 503 when configured.
func TestTenantRateLimit(t *testing.T) {
	dir := t.TempDir()
	lf := filepath.Join(t.TempDir(), "limits.yml")
	if err := os.WriteFile(lf, []byte("overrides:\n  slow:\n    ingestion_rate: 1\n    ingestion_burst: 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startTandem(t, dir, "--limits.file="+lf, "--limits.reload-interval=0")
	t0 := time.Now().Add(-5 * time.Minute).UnixMilli()
	if code, body := tenantWrite(t, p, "slow", tenantRequest("s", t0)); code != http.StatusNoContent {
		t.Fatalf("first write: %d %s", code, body)
	}
	code, body, hdr := tenantWriteHeader(t, p, "slow", tenantRequest("s", t0+100000))
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !strings.Contains(body, "ingestion_rate") {
		t.Fatalf("over the rate: %d (Retry-After %q) %s; want 429 with Retry-After naming ingestion_rate", code, hdr.Get("Retry-After"), body)
	}
	if code, body := tenantWrite(t, p, "fast", tenantRequest("f", t0)); code != http.StatusNoContent {
		t.Fatalf("another tenant: %d %s", code, body)
	}
	if v := scrapeMetrics(t, p)[`tandem_remote_write_samples_rejected_total{reason="rate_limited",tenant="slow"}`]; v != 10 {
		t.Errorf("rate-limited samples counted: %v, want 10", v)
	}
	if err := os.WriteFile(lf, []byte("overrides:\n  slow:\n    ingestion_rate: 1000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := tenantWrite(t, p, "slow", tenantRequest("s", t0+200000))
		if code == http.StatusNoContent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("raised limit not in effect after SIGHUP: %d %s", code, body)
		}
	}
	p.signal(syscall.SIGTERM)

	if err := os.WriteFile(lf, []byte("overrides:\n  slow:\n    ingestion_rate: 1\n    ingestion_burst: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p = startTandem(t, dir, "--limits.file="+lf, "--limits.rate-limited-status=503")
	tenantWrite(t, p, "slow", tenantRequest("s", t0+300000))
	if code, _, hdr := tenantWriteHeader(t, p, "slow", tenantRequest("s", t0+400000)); code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Errorf("with --limits.rate-limited-status=503: %d, Retry-After %q", code, hdr.Get("Retry-After"))
	}
}

// TestTenantQueryLimits checks max_fetched_series_per_query and
// max_query_length of one tenant, through the engine, the push-down, the
// series endpoint and remote read, while another tenant is not bound.
func TestTenantQueryLimits(t *testing.T) {
	lf := filepath.Join(t.TempDir(), "limits.yml")
	if err := os.WriteFile(lf, []byte("overrides:\n  small:\n    max_fetched_series_per_query: 1\n    max_query_length: 1h\n    max_samples_per_query: 3\n  chunky:\n    max_fetched_chunks_per_query: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startTandem(t, t.TempDir(), "--limits.file="+lf)
	t0 := time.Now().Add(-5 * time.Minute).UnixMilli()
	for _, tn := range []string{"small", "big", "chunky"} {
		if code, body := tenantWrite(t, p, tn, tenantRequest("m", t0)); code != http.StatusNoContent {
			t.Fatalf("write %s: %d %s", tn, code, body)
		}
	}
	at := url.Values{"time": {fmtTime(t0 + 60000)}}
	cases := []struct {
		path   string
		params url.Values
		key    string // the limit refusing tenant small; "" = allowed
	}{
		{"/api/v1/query", url.Values{"query": {"m_metric"}, "time": at["time"]}, "max_fetched_series_per_query"},
		{"/api/v1/query", url.Values{"query": {"sum by (job) (m_metric)"}, "time": at["time"]}, "max_fetched_series_per_query"}, // push-down
		{"/api/v1/query", url.Values{"query": {`m_metric{instance="host-0"}`}, "time": at["time"]}, ""},
		{"/api/v1/query", url.Values{"query": {`max_over_time(m_metric{instance="host-0"}[2h])`}, "time": at["time"]}, "max_query_length"},
		{"/api/v1/query_range", url.Values{"query": {`m_metric{instance="host-0"}`}, "start": {fmtTime(t0 - 7200000)}, "end": {fmtTime(t0)}, "step": {"60"}}, "max_query_length"},
		{"/api/v1/series", url.Values{"match[]": {"m_metric"}}, "max_fetched_series_per_query"},
		{"/api/v1/query", url.Values{"query": {`m_metric{instance="host-0"}[10m]`}, "time": at["time"]}, "too many samples"},
		{"/api/v1/query", url.Values{"query": {`sum(count_over_time(m_metric{instance="host-0"}[10m]))`}, "time": at["time"]}, "too many samples"},
	}
	for _, c := range cases {
		for _, tn := range []string{"small", "big"} {
			code, r := tenantGet(t, p, tn, c.path, c.params)
			if tn == "big" || c.key == "" {
				if code != http.StatusOK {
					t.Errorf("%s %v as %s: %d %+v", c.path, c.params, tn, code, r)
				}
				continue
			}
			if code == http.StatusOK || !strings.Contains(r.Error, c.key) {
				t.Errorf("%s %v as %s: %d %+v; want an error naming %s", c.path, c.params, tn, code, r, c.key)
			}
		}
	}
	// Remote read: a SAMPLES response says which limit; a streamed one
	// breaks off (Prometheus's read handler logs the error mid-stream).
	u, _ := url.Parse(p.url + "/api/v1/read")
	for _, rt := range []prompb.ReadRequest_ResponseType{prompb.ReadRequest_SAMPLES, prompb.ReadRequest_STREAMED_XOR_CHUNKS} {
		for _, tn := range []string{"small", "big", "chunky"} {
			c, err := promremote.NewReadClient("tandem", &promremote.ClientConfig{
				URL: &config_util.URL{URL: u}, Timeout: model.Duration(10 * time.Second), Headers: map[string]string{"X-Scope-OrgID": tn},
				AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{rt}, ChunkedReadLimit: 50 << 20,
			})
			if err != nil {
				t.Fatal(err)
			}
			rq, _ := promremote.ToQuery(t0-60000, t0+120000, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m_metric")}, nil)
			n := 0
			ss, err := c.Read(context.Background(), rq, true)
			if err == nil {
				for ss.Next() {
					n++
				}
				err = ss.Err()
			}
			switch {
			case tn == "chunky" && rt == prompb.ReadRequest_SAMPLES && (err != nil || n != 2):
				t.Errorf("remote read %v as chunky: %d series, %v; the chunk limit is for streamed reads", rt, n, err)
			case tn == "chunky" && rt == prompb.ReadRequest_STREAMED_XOR_CHUNKS && err == nil:
				t.Errorf("remote read %v as chunky: %d series and no error; want the chunk limit", rt, n)
			case tn == "big" && (err != nil || n != 2):
				t.Errorf("remote read %v as big: %d series, %v", rt, n, err)
			case tn == "small" && err == nil:
				t.Errorf("remote read %v as small: %d series and no error", rt, n)
			case tn == "small" && rt == prompb.ReadRequest_SAMPLES && !strings.Contains(err.Error(), "max_fetched_series_per_query"):
				t.Errorf("remote read %v as small: %v; want the series limit named", rt, err)
			}
		}
	}
}

// rssBytes is the resident memory of process pid.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestCardinalityExplosion sends 1M new series as one tenant against its
// max_series of 100k while another tenant writes as usual: the exploding
// tenant gets 400s naming the limit, tandem's memory stops growing at the
// limit, and the other tenant's writes all succeed, quickly.
func TestCardinalityExplosion(t *testing.T) {
	const (
		limit     = 100_000
		total     = 1_000_000
		perReq    = 2000
		senders   = 4
		steadyLen = 200
	)
	lf := filepath.Join(t.TempDir(), "limits.yml")
	if err := os.WriteFile(lf, []byte(fmt.Sprintf("overrides:\n  explode:\n    max_series: %d\n", limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startTandem(t, t.TempDir(), "--limits.file="+lf)
	pid := p.cmd.Process.Pid
	now := time.Now().UnixMilli()

	// The other tenant: one request of the same 200 series every 50 ms.
	stop := make(chan struct{})
	steadyDone := make(chan []time.Duration)
	go func() {
		var lat []time.Duration
		for i := 0; ; i++ {
			select {
			case <-stop:
				steadyDone <- lat
				return
			case <-time.After(50 * time.Millisecond):
			}
			req := &prompb.WriteRequest{}
			for k := range steadyLen {
				req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
					Labels:  []prompb.Label{{Name: "__name__", Value: "steady"}, {Name: "instance", Value: "i"}, {Name: "job", Value: "j"}, {Name: "k", Value: fmt.Sprint(k)}},
					Samples: []prompb.Sample{{Timestamp: now + int64(i)*10, Value: float64(i)}},
				})
			}
			start := time.Now()
			if code, body := tenantWrite(t, p, "steady", req); code != http.StatusNoContent {
				t.Errorf("steady tenant write %d: %d %s", i, code, body)
			}
			lat = append(lat, time.Since(start))
		}
	}()

	var (
		mu        sync.Mutex
		refused   int
		firstBody string
		rssAtLim  int64
	)
	next := make(chan int, total/perReq)
	for i := 0; i < total/perReq; i++ {
		next <- i
	}
	close(next)
	began := time.Now()
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req := &prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, perReq)}
				for k := range perReq {
					req.Timeseries[k] = prompb.TimeSeries{
						Labels:  []prompb.Label{{Name: "__name__", Value: "exploding"}, {Name: "instance", Value: "i"}, {Name: "job", Value: "j"}, {Name: "request_id", Value: fmt.Sprintf("%d-%d", i, k)}},
						Samples: []prompb.Sample{{Timestamp: now, Value: 1}},
					}
				}
				code, body := tenantWrite(t, p, "explode", req)
				mu.Lock()
				switch {
				case code == http.StatusBadRequest && strings.Contains(body, "max_series"):
					if refused == 0 {
						firstBody, rssAtLim = body, rssBytes(t, pid)
					}
					refused++
				case code != http.StatusNoContent:
					t.Errorf("exploding write: %d %s", code, body)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(began)
	close(stop)
	lat := <-steadyDone
	rssEnd := rssBytes(t, pid)

	if refused < (total-limit)/perReq-senders {
		t.Errorf("%d requests refused, want about %d", refused, (total-limit)/perReq)
	}
	t.Logf("1M new series in %v: %d requests refused, e.g. %.200s", elapsed, refused, firstBody)
	var gs struct {
		Usage struct {
			Series int `json:"series"`
		} `json:"usage"`
	}
	code, r := tenantGet(t, p, "explode", "/api/v1/status/groups", nil)
	if code != http.StatusOK || json.Unmarshal(r.Data, &gs) != nil || gs.Usage.Series < limit || gs.Usage.Series > limit+senders*perReq {
		t.Errorf("exploding tenant's active series: %d (%d %+v), want %d", gs.Usage.Series, code, r, limit)
	}
	t.Logf("tandem RSS: %d MiB when the limit was reached, %d MiB at the end", rssAtLim>>20, rssEnd>>20)
	if rssEnd > rssAtLim+256<<20 {
		t.Errorf("RSS grew by %d MiB after the limit was reached", (rssEnd-rssAtLim)>>20)
	}
	slices.Sort(lat)
	if len(lat) < 5 {
		t.Fatalf("steady tenant sent only %d requests", len(lat))
	}
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("steady tenant: %d writes during the explosion, p50 %v, p99 %v", len(lat), p50, p99)
	if p99 > 2*time.Second {
		t.Errorf("steady tenant's writes slowed down: p99 %v", p99)
	}
}

// TestTenantRules runs each tenant's rule files over its own data: recorded
// series, /api/v1/rules and /api/v1/alerts are the tenant's alone, and a
// reload picks up a tenant's new rule file.
func TestTenantRules(t *testing.T) {
	rdir := t.TempDir()
	write := func(tn, file, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(rdir, tn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rdir, tn, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("team-a", "a.yml", "groups:\n- name: a\n  rules:\n  - record: a:sum\n    expr: sum(a_metric)\n  - alert: AHigh\n    expr: a_metric > 0\n")
	write("team-b", "b.yml", "groups:\n- name: b\n  rules:\n  - record: b:count\n    expr: count(b_metric)\n")
	p := startTandem(t, t.TempDir(), "--rules.tenant-dir="+rdir, "--rules.evaluation-interval=1s")
	t0 := time.Now().Add(-2 * time.Minute).UnixMilli()
	for tn, name := range map[string]string{"team-a": "a", "team-b": "b"} {
		if code, body := tenantWrite(t, p, tn, tenantRequest(name, t0)); code != http.StatusNoContent {
			t.Fatalf("write %s: %d %s", tn, code, body)
		}
	}
	count := func(tn, q string) int {
		t.Helper()
		code, r := tenantGet(t, p, tn, "/api/v1/query", url.Values{"query": {q}})
		var d queryData
		if code != http.StatusOK || json.Unmarshal(r.Data, &d) != nil {
			t.Fatalf("%s as %s: %d %+v", q, tn, code, r)
		}
		return len(decodeResult(t, d))
	}
	for deadline := time.Now().Add(20 * time.Second); count("team-a", "a:sum") == 0 || count("team-b", "b:count") == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("rules did not record")
		}
	}
	for _, c := range []struct {
		tn, q string
		want  int
	}{{"team-b", "a:sum", 0}, {"team-a", "b:count", 0}, {"", "a:sum", 0}, {"", "b:count", 0}, {"team-b", "ALERTS", 0}} {
		if got := count(c.tn, c.q); got != c.want {
			t.Errorf("%s as %q: %d series, want %d", c.q, c.tn, got, c.want)
		}
	}
	groups := func(tn string) []string {
		t.Helper()
		var d struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name string `json:"name"`
				} `json:"rules"`
			} `json:"groups"`
		}
		code, r := tenantGet(t, p, tn, "/api/v1/rules", nil)
		if code != http.StatusOK || json.Unmarshal(r.Data, &d) != nil {
			t.Fatalf("rules as %s: %d %+v", tn, code, r)
		}
		var out []string
		for _, g := range d.Groups {
			for _, r := range g.Rules {
				out = append(out, g.Name+"/"+r.Name)
			}
		}
		return out
	}
	if got := groups("team-a"); !slices.Equal(got, []string{"a/a:sum", "a/AHigh"}) {
		t.Errorf("rules of team-a: %v", got)
	}
	if got := groups(""); len(got) != 0 {
		t.Errorf("rules of the default tenant: %v", got)
	}
	alerts := func(tn string) int {
		var d struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
			} `json:"alerts"`
		}
		code, r := tenantGet(t, p, tn, "/api/v1/alerts", nil)
		if code != http.StatusOK || json.Unmarshal(r.Data, &d) != nil {
			t.Fatalf("alerts as %s: %d %+v", tn, code, r)
		}
		return len(d.Alerts)
	}
	if a, b := alerts("team-a"), alerts("team-b"); a != 2 || b != 0 {
		t.Errorf("alerts: team-a %d (want 2, one per series), team-b %d", a, b)
	}
	write("team-b", "more.yaml", "groups:\n- name: more\n  rules:\n  - record: b:max\n    expr: max(b_metric)\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); !slices.Contains(groups("team-b"), "more/b:max"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("team-b's new rule file not loaded on SIGHUP: %v", groups("team-b"))
		}
	}
}

// TestTenantFederation reads two tenants at once with --tenant.federation:
// every series carries __tenant_id__, which also selects tenants, and
// tenants that never wrote add nothing.
func TestTenantFederation(t *testing.T) {
	p := startTandem(t, t.TempDir(), "--tenant.federation")
	t0 := time.Now().Add(-5 * time.Minute).UnixMilli()
	for tn, name := range map[string]string{"team-a": "a", "team-b": "b", "": "anon"} {
		if code, body := tenantWrite(t, p, tn, tenantRequest(name, t0)); code != http.StatusNoContent {
			t.Fatalf("write %s: %d %s", tn, code, body)
		}
	}
	const both = "team-b|team-a|team-z"
	get := func(path string, params url.Values, out any) {
		t.Helper()
		code, r := tenantGet(t, p, both, path, params)
		if code != http.StatusOK || json.Unmarshal(r.Data, out) != nil {
			t.Fatalf("%s as %s: %d %+v", path, both, code, r)
		}
	}
	at := fmtTime(t0 + 60000)
	var q queryData
	get("/api/v1/query", url.Values{"query": {`count by (__tenant_id__, job) ({__name__=~".+"})`}, "time": {at}}, &q)
	if got := labelsOf(decodeResult(t, q)); !slices.Equal(got, []string{`{__tenant_id__="team-a", job="a"}`, `{__tenant_id__="team-b", job="b"}`}) {
		t.Errorf("federated query: %v", got)
	}
	get("/api/v1/query", url.Values{"query": {`sum by (job) ({__tenant_id__="team-b"})`}, "time": {at}}, &q)
	if got := labelsOf(decodeResult(t, q)); !slices.Equal(got, []string{`{job="b"}`}) {
		t.Errorf("selecting a tenant by __tenant_id__: %v", got)
	}
	var ser []map[string]string
	get("/api/v1/series", url.Values{"match[]": {`{job=~".+"}`}}, &ser)
	if len(ser) != 4 {
		t.Errorf("federated series: %v", ser)
	}
	for _, s := range ser {
		if s["__tenant_id__"] != "team-"+s["job"] {
			t.Errorf("series without its tenant: %v", s)
		}
	}
	var vals []string
	get("/api/v1/label/__tenant_id__/values", nil, &vals)
	if !slices.Equal(vals, []string{"team-a", "team-b"}) {
		t.Errorf("tenant label values: %v", vals)
	}
	var names []string
	get("/api/v1/labels", nil, &names)
	if !slices.Contains(names, "__tenant_id__") || !slices.Contains(names, "job") {
		t.Errorf("federated label names: %v", names)
	}
	var md map[string][]map[string]string
	get("/api/v1/metadata", nil, &md)
	if len(md) != 2 || md["a_metric"] == nil || md["b_metric"] == nil {
		t.Errorf("federated metadata: %v", md)
	}
	// Writes still name one tenant.
	if code, body := tenantWrite(t, p, "team-a|team-b", tenantRequest("x", t0)); code != http.StatusBadRequest {
		t.Errorf("federated write: %d %s, want 400", code, body)
	}
}

// TestTenantRetention gives one tenant a retention of 10 minutes in the
// limits file: its old blocks are deleted, another tenant's are kept. The
// old samples are 2 to 3 hours old and the newest is now, so that the old
// ones are in blocks (however compacted) entirely beyond the retention.
func TestTenantRetention(t *testing.T) {
	lf := filepath.Join(t.TempDir(), "limits.yml")
	if err := os.WriteFile(lf, []byte("overrides:\n  short:\n    retention_time: 10m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startTandem(t, t.TempDir(), "--limits.file="+lf, "--storage.block-range=2m", "--head.maintenance-interval=50ms")
	now := time.Now().UnixMilli()
	for _, tn := range []string{"short", "long"} {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "job", Value: "j"}}}
		for k := 240; k >= 0; k-- { // an hour at 15 s, 2 to 3 hours ago
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: now - 2*3600_000 - int64(k)*15000, Value: 1})
		}
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: now, Value: 1})
		if code, body := tenantWrite(t, p, tn, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}); code != http.StatusNoContent {
			t.Fatalf("write %s: %d %s", tn, code, body)
		}
	}
	count := func(tn string) float64 {
		code, r := tenantGet(t, p, tn, "/api/v1/query", url.Values{"query": {"count_over_time(m[4h])"}, "time": {fmtTime(now)}})
		var d queryData
		if code != http.StatusOK || json.Unmarshal(r.Data, &d) != nil {
			t.Fatalf("query as %s: %d %+v", tn, code, r)
		}
		if got := decodeResult(t, d); len(got) == 1 {
			return got[0].V[0]
		}
		return 0
	}
	for deadline := time.Now().Add(60 * time.Second); count("short") != 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("tenant short still has %v samples; with a retention of 10m only the newest should be left", count("short"))
		}
	}
	if got := count("long"); got != 242 {
		t.Errorf("tenant long has %v samples, want all 242", got)
	}
}

// TestTenantDelete deletes one tenant through the admin API: its directory
// and data are gone, the other tenant's stay, and it can write anew.
func TestTenantDelete(t *testing.T) {
	dir := t.TempDir()
	p := startTandem(t, dir, "--web.enable-admin-api")
	t0 := time.Now().Add(-5 * time.Minute).UnixMilli()
	for tn, name := range map[string]string{"team-a": "a", "team-b": "b"} {
		if code, body := tenantWrite(t, p, tn, tenantRequest(name, t0)); code != http.StatusNoContent {
			t.Fatalf("write %s: %d %s", tn, code, body)
		}
	}
	del := func(p *tandemProc, tn string) int {
		hr, _ := http.NewRequest(http.MethodPost, p.url+"/api/v1/admin/tenant/delete", nil)
		if tn != "" {
			hr.Header.Set("X-Scope-OrgID", tn)
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	series := func(tn string) int {
		var ser []map[string]string
		code, r := tenantGet(t, p, tn, "/api/v1/series", url.Values{"match[]": {`{job=~".+"}`}})
		if code != http.StatusOK || json.Unmarshal(r.Data, &ser) != nil {
			t.Fatalf("series as %s: %d %+v", tn, code, r)
		}
		return len(ser)
	}
	if code := del(p, ""); code != http.StatusBadRequest {
		t.Errorf("deleting the default tenant: %d, want 400", code)
	}
	if code := del(p, "team-a"); code != http.StatusNoContent {
		t.Fatalf("delete team-a: %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "tenants", "team-a")); !os.IsNotExist(err) {
		t.Errorf("team-a's directory after the delete: %v", err)
	}
	if a, b := series("team-a"), series("team-b"); a != 0 || b != 2 {
		t.Errorf("after deleting team-a: team-a %d series, team-b %d", a, b)
	}
	if code, body := tenantWrite(t, p, "team-a", tenantRequest("a2", t0)); code != http.StatusNoContent {
		t.Fatalf("write team-a again: %d %s", code, body)
	}
	if got := series("team-a"); got != 2 {
		t.Errorf("team-a written anew: %d series", got)
	}
	p.signal(syscall.SIGTERM)
	p = startTandem(t, dir)
	if code := del(p, "team-b"); code != http.StatusInternalServerError {
		t.Errorf("delete without --web.enable-admin-api: %d, want 500 (admin APIs disabled)", code)
	}
}

// TestTenantCreation checks when a tenant's storage is created: on its
// first request that stores something, not on a request that fails to
// decode or holds nothing, and not beyond --tenant.max-tenants.
func TestTenantCreation(t *testing.T) {
	dir := t.TempDir()
	p := startTandem(t, dir, "--tenant.max-tenants=2") // the default tenant and one more
	exists := func(tn string) bool {
		_, err := os.Stat(filepath.Join(dir, "tenants", tn))
		return err == nil
	}
	hr, _ := http.NewRequest(http.MethodPost, p.url+"/api/v1/write", strings.NewReader("not snappy"))
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("X-Scope-OrgID", "ghost")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || exists("ghost") {
		t.Errorf("a corrupt request: %d, directory created %v", resp.StatusCode, exists("ghost"))
	}
	if code, _ := tenantWrite(t, p, "empty", &prompb.WriteRequest{}); code != http.StatusNoContent || exists("empty") {
		t.Errorf("an empty request: %d, directory created %v", code, exists("empty"))
	}
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	if code, body := tenantWrite(t, p, "t1", tenantRequest("a", t0)); code != http.StatusNoContent || !exists("t1") {
		t.Fatalf("first tenant: %d %s", code, body)
	}
	if code, body := tenantWrite(t, p, "t2", tenantRequest("a", t0)); code != http.StatusBadRequest || !strings.Contains(body, "tenant.max-tenants") || exists("t2") {
		t.Errorf("a tenant beyond --tenant.max-tenants: %d %s", code, body)
	}
	if code, body := tenantWrite(t, p, "t1", tenantRequest("a", t0+1000)); code != http.StatusNoContent {
		t.Errorf("the existing tenant: %d %s", code, body)
	}
}
