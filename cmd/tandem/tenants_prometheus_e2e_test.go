package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
)

// tenantsPrometheusConfig has a Prometheus scraping itself write to two
// tandem tenants (team-b only up and prometheus_build_info) with the
// X-Scope-OrgID header, and remote-read team-b.
const tenantsPrometheusConfig = `global:
  scrape_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['PROM_ADDR']
remote_write:
  - name: team-a
    url: http://TANDEM_ADDR/api/v1/write
    headers:
      X-Scope-OrgID: team-a
    queue_config:
      batch_send_deadline: 1s
  - name: team-b
    url: http://TANDEM_ADDR/api/v1/write
    headers:
      X-Scope-OrgID: team-b
    write_relabel_configs:
      - source_labels: [__name__]
        regex: up|prometheus_build_info
        action: keep
    queue_config:
      batch_send_deadline: 1s
remote_read:
  - name: team-b
    url: http://TANDEM_ADDR/api/v1/read
    read_recent: true
    headers:
      X-Scope-OrgID: team-b
`

// TestPrometheusEndToEndTenants runs a real Prometheus 3 writing to two
// tenants with remote_write headers, and reading one back with
// remote_read: each tenant holds what its queue sent, the default tenant
// nothing, and remote read sees only its tenant's series.
func TestPrometheusEndToEndTenants(t *testing.T) {
	promBin := prometheusBinary(t)
	deadline := time.Now().Add(50 * time.Second)
	dir := t.TempDir()
	tandemAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	tandem, _ := startTandemAt(t, filepath.Join(dir, "data"), tandemAddr)
	now := time.Now().UnixMilli()
	for tn, metric := range map[string]string{"team-a": "only_in_a", "team-b": "only_in_b"} {
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels:  []prompb.Label{{Name: "__name__", Value: metric}, {Name: "job", Value: "test"}},
			Samples: []prompb.Sample{{Timestamp: now, Value: 7}},
		}}}
		if code, body := tenantWrite(t, tandem, tn, req); code != http.StatusNoContent {
			t.Fatalf("write %s: %d %s", tn, code, body)
		}
	}

	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfgFile := filepath.Join(dir, "prometheus.yml")
	writeFileT(t, cfgFile, []byte(strings.NewReplacer("PROM_ADDR", promAddr, "TANDEM_ADDR", tandemAddr).Replace(tenantsPrometheusConfig)))
	prom := startProcess(t, "Prometheus", promBin, "http://"+promAddr+"/-/ready",
		"--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "prom-data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	defer func() {
		if t.Failed() {
			prom.stop(syscall.SIGKILL)
			t.Logf("Prometheus log:\n%s\ntandem log:\n%s", prom.log, tandem.log)
		}
	}()

	names := func(tn string) map[string]bool {
		t.Helper()
		code, r := tenantGet(t, tandem, tn, "/api/v1/label/__name__/values", url.Values{"match[]": {`{job="prometheus"}`}})
		var vs []string
		if code != http.StatusOK {
			t.Fatalf("label values as %s: %d %+v", tn, code, r)
		}
		if err := json.Unmarshal(r.Data, &vs); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, v := range vs {
			out[v] = true
		}
		return out
	}
	for {
		a, b := names("team-a"), names("team-b")
		if len(a) >= 50 && b["up"] && b["prometheus_build_info"] {
			t.Logf("team-a: %d metric names of Prometheus, team-b: %d", len(a), len(b))
			if len(b) != 2 {
				t.Errorf("team-b holds %v, want only up and prometheus_build_info", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus's samples did not reach the tenants: team-a %d names, team-b %v", len(a), b)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if d := names(""); len(d) != 0 {
		t.Errorf("the default tenant holds %d of Prometheus's metric names, want none", len(d))
	}
	m := promMetrics(t, "http://"+promAddr)
	if failed, _ := sumMetric(m, "prometheus_remote_storage_samples_failed_total"); failed != 0 {
		t.Errorf("Prometheus failed %v samples", failed)
	}

	// Prometheus's remote read with team-b's header sees team-b's series only.
	promAPI := &tandemProc{t: t, url: "http://" + promAddr}
	for metric, want := range map[string]int{"only_in_b": 1, "only_in_a": 0} {
		var d queryData
		promAPI.api(t, "/api/v1/query", url.Values{"query": {metric}, "time": {fmtTime(now)}}, false, &d)
		if got := decodeResult(t, d); len(got) != want {
			t.Errorf("Prometheus remote-reading %s from tenant team-b: %d series, want %d", metric, len(got), want)
		}
	}
}
