package main

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// TestExemplarsEndToEnd writes exemplars with 1.0 and 2.0 and reads them back
// from /api/v1/query_exemplars, before and after a restart.
func TestExemplarsEndToEnd(t *testing.T) {
	dir := t.TempDir()
	p := startTandem(t, dir)
	now := time.Now().Add(-time.Minute).UnixMilli()

	v1 := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:    []prompb.Label{{Name: "__name__", Value: "http_requests_total"}, {Name: "instance", Value: "a"}, {Name: "job", Value: "api"}},
		Samples:   []prompb.Sample{{Timestamp: now, Value: 10}},
		Exemplars: []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "v1trace"}}, Value: 10, Timestamp: now}},
	}}}
	if code := postV1(t, p, v1); code != http.StatusNoContent {
		t.Fatalf("1.0 write with an exemplar: HTTP %d", code)
	}
	st := writev2.NewSymbolTable()
	ts := writev2.TimeSeries{
		LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", "http_requests_total", "instance", "b", "job", "api"), nil),
		Samples:    []writev2.Sample{{Timestamp: now + 1000, Value: 20}},
		Exemplars:  []writev2.Exemplar{{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("trace_id", "v2trace"), nil), Value: 20, Timestamp: now + 1000}},
	}
	req := &writev2.Request{Timeseries: []writev2.TimeSeries{ts}, Symbols: st.Symbols()}
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequest(http.MethodPost, p.url+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	hr.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
	hr.Header.Set("Content-Encoding", "snappy")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Prometheus-Remote-Write-Exemplars-Written") != "1" {
		t.Fatalf("2.0 write with an exemplar: HTTP %d, exemplars written %q", resp.StatusCode, resp.Header.Get("X-Prometheus-Remote-Write-Exemplars-Written"))
	}

	check := func(p *tandemProc, phase string) {
		t.Helper()
		var res []struct {
			SeriesLabels map[string]string `json:"seriesLabels"`
			Exemplars    []struct {
				Labels    map[string]string `json:"labels"`
				Value     string            `json:"value"`
				Timestamp float64           `json:"timestamp"`
			} `json:"exemplars"`
		}
		p.api(t, "/api/v1/query_exemplars", url.Values{"query": {`http_requests_total{job="api"}`}, "start": {fmtTime(now - 60000)}, "end": {fmtTime(now + 60000)}}, false, &res)
		got := map[string]string{}
		for _, r := range res {
			for _, e := range r.Exemplars {
				got[r.SeriesLabels["instance"]] = e.Labels["trace_id"] + "=" + e.Value
			}
		}
		if got["a"] != "v1trace=10" || got["b"] != "v2trace=20" {
			t.Fatalf("%s: exemplars %v", phase, got)
		}
	}
	check(p, "written")
	// Grafana's start-up probe.
	var probe []any
	p.api(t, "/api/v1/query_exemplars", url.Values{"query": {"test"}}, false, &probe)
	p.signal(9)
	p = startTandem(t, dir)
	check(p, "after kill -9")
}
