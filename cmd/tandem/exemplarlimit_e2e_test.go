package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
)

// exemplarRequest is one series of metric ex_metric with a sample and an
// exemplar (trace id "<k>") at each of the given seconds after t0.
func exemplarRequest(t0 int64, ks ...int) *prompb.WriteRequest {
	ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "ex_metric"}, {Name: "instance", Value: "i"}, {Name: "job", Value: "ex"}}}
	for _, k := range ks {
		at := t0 + int64(k)*1000
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: at, Value: float64(k)})
		ts.Exemplars = append(ts.Exemplars, prompb.Exemplar{Labels: []prompb.Label{{Name: "trace_id", Value: fmt.Sprint(k)}}, Value: float64(k), Timestamp: at})
	}
	return &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}
}

// tenantExemplars returns the trace ids of tenant's exemplars of ex_metric, in time order.
func tenantExemplars(t *testing.T, p *tandemProc, tenant string, t0 int64) []string {
	t.Helper()
	code, r := tenantGet(t, p, tenant, "/api/v1/query_exemplars", url.Values{"query": {"ex_metric"}, "start": {fmtTime(t0 - 1000)}, "end": {fmtTime(t0 + 100000)}})
	var res []struct {
		Exemplars []struct {
			Labels map[string]string `json:"labels"`
		} `json:"exemplars"`
	}
	if code != http.StatusOK || json.Unmarshal(r.Data, &res) != nil {
		t.Fatalf("query_exemplars as %q: %d %+v", tenant, code, r)
	}
	ids := []string{}
	for _, s := range res {
		for _, e := range s.Exemplars {
			ids = append(ids, e.Labels["trace_id"])
		}
	}
	return ids
}

// TestTenantExemplarLimit checks max_exemplars per tenant: each keeps its
// newest exemplars, 0 keeps none, the deprecated --storage.exemplars.max
// sets the default, and a reloaded file resizes the rings of running
// tenants at once and survives a restart.
func TestTenantExemplarLimit(t *testing.T) {
	lf := filepath.Join(t.TempDir(), "limits.yml")
	write := func(s string) {
		if err := os.WriteFile(lf, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("overrides:\n  few:\n    max_exemplars: 3\n  none:\n    max_exemplars: 0\n  many:\n    max_exemplars: 10\n")
	dir := t.TempDir()
	args := []string{"--limits.file=" + lf, "--limits.reload-interval=0", "--storage.exemplars.max=4"}
	p := startTandem(t, dir, args...)
	t0 := time.Now().Add(-5 * time.Minute).UnixMilli()
	for _, tn := range []string{"", "few", "none", "many"} {
		if code, body := tenantWrite(t, p, tn, exemplarRequest(t0, 1, 2, 3, 4, 5, 6)); code != http.StatusNoContent {
			t.Fatalf("write as %q: %d %s", tn, code, body)
		}
	}
	expect := func(tn string, want ...string) {
		t.Helper()
		if got := tenantExemplars(t, p, tn, t0); !slices.Equal(got, want) {
			t.Fatalf("exemplars of %q: %v, want %v", tn, got, want)
		}
	}
	expect("", "3", "4", "5", "6") // --storage.exemplars.max=4
	expect("few", "4", "5", "6")
	expect("none")
	expect("many", "1", "2", "3", "4", "5", "6")

	var gs struct {
		Limits map[string]string `json:"limits"`
		Usage  struct {
			Exemplars int `json:"exemplars"`
		} `json:"usage"`
	}
	if code, r := tenantGet(t, p, "few", "/api/v1/status/groups", nil); code != http.StatusOK || json.Unmarshal(r.Data, &gs) != nil ||
		gs.Limits["max_exemplars"] != "3" || gs.Usage.Exemplars != 3 {
		t.Fatalf("status/groups of few: %d %+v", code, gs)
	}

	// A reload resizes the rings without a write.
	write("overrides:\n  few:\n    max_exemplars: 1\n  none:\n    max_exemplars: 5\n  many:\n    max_exemplars: 10\n")
	p.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got := tenantExemplars(t, p, "few", t0); slices.Equal(got, []string{"6"}) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("few after lowering max_exemplars to 1: %v, want [6]", got)
		}
	}
	if code, body := tenantWrite(t, p, "none", exemplarRequest(t0, 7, 8)); code != http.StatusNoContent {
		t.Fatalf("write as none: %d %s", code, body)
	}
	expect("none", "7", "8")
	expect("", "3", "4", "5", "6")

	// After a restart (WAL replay), each tenant holds what its limit keeps.
	p.signal(syscall.SIGKILL)
	p = startTandem(t, dir, args...)
	expect("many", "1", "2", "3", "4", "5", "6")
	expect("few", "6")
	expect("none", "7", "8")
	expect("", "3", "4", "5", "6")
}
