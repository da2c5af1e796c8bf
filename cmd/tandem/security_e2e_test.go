package main

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// securePrometheusConfig is a Prometheus configuration scraping itself and
// writing to tandem over TLS with basic auth (the password in a file, the
// CA of tandem's certificate in ca_file); a second queue sends a wrong
// password, and remote read reads tandem back with the right one.
const securePrometheusConfig = `global:
  scrape_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ['PROM_ADDR']
remote_write:
  - name: tandem
    url: https://TANDEM_ADDR/api/v1/write
    basic_auth:
      username: prometheus
      password_file: PASSWORD_FILE
    tls_config:
      ca_file: CA_FILE
    queue_config:
      batch_send_deadline: 1s
  - name: wrong-password
    url: https://TANDEM_ADDR/api/v1/write
    basic_auth:
      username: prometheus
      password: not-the-password
    tls_config:
      ca_file: CA_FILE
    queue_config:
      batch_send_deadline: 1s
remote_read:
  - name: tandem
    url: https://TANDEM_ADDR/api/v1/read
    read_recent: true
    basic_auth:
      username: prometheus
      password_file: PASSWORD_FILE
    tls_config:
      ca_file: CA_FILE
`

// TestPrometheusEndToEndTLS runs a real Prometheus 3 against a tandem that
// serves TLS and basic auth from --web.config.file: Prometheus's
// remote_write with basic_auth and tls_config (ca_file) delivers its
// samples, which tandem's API serves to the same credentials; the queue with
// a wrong password gets 401s (Prometheus drops its samples); Prometheus's
// remote_read with the credentials reads a series only tandem has.
func TestPrometheusEndToEndTLS(t *testing.T) {
	promBin := prometheusBinary(t)
	deadline := time.Now().Add(50 * time.Second)
	dir := t.TempDir()
	certFile, keyFile, pool := testCert(t, dir)
	webConfig := filepath.Join(dir, "web.yml")
	const user, password = "prometheus", "remote-write-secret"
	writeWebConfig(t, webConfig, certFile, keyFile, user, password)
	passwordFile := filepath.Join(dir, "password")
	writeFileT(t, passwordFile, []byte(password+"\n"))

	tandem := startSecureTandem(t, filepath.Join(dir, "data"), webConfig, pool, user, password)
	// A series only tandem has, for Prometheus's remote read to find.
	now := time.Now().UnixMilli()
	if code, body := tandem.do(t, "", "", user, password, remoteWrite(t, tandem.url, "tandem_only_metric", now, 7)); code != http.StatusNoContent {
		t.Fatalf("remote write to tandem: HTTP %d: %s", code, body)
	}

	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := strings.NewReplacer("PROM_ADDR", promAddr, "TANDEM_ADDR", tandem.addr,
		"PASSWORD_FILE", passwordFile, "CA_FILE", certFile).Replace(securePrometheusConfig)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	writeFileT(t, cfgFile, []byte(cfg))
	prom := startProcess(t, "Prometheus", promBin, "http://"+promAddr+"/-/ready",
		"--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "prom-data"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	defer func() {
		if t.Failed() {
			prom.stop(syscall.SIGKILL)
			tandem.signal(syscall.SIGKILL)
			t.Logf("Prometheus log:\n%s\ntandem log:\n%s", prom.log, tandem.log)
		}
	}()

	// Prometheus's own series arrive in tandem, readable with the credentials.
	query := func(q string) []series {
		t.Helper()
		code, body := tandem.do(t, http.MethodGet, "/api/v1/query?"+url.Values{"query": {q}}.Encode(), user, password, nil)
		if code != http.StatusOK {
			t.Fatalf("query %s: HTTP %d: %s", q, code, body)
		}
		var d queryData
		jsonBody(t, body, &d)
		return decodeResult(t, d)
	}
	for {
		up := query(`up{job="prometheus"}`)
		n := query(`count({job="prometheus"})`)
		if len(up) == 1 && up[0].V[0] == 1 && len(n) == 1 && n[0].V[0] >= 100 {
			t.Logf("%v series of Prometheus in tandem", n[0].V[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus's samples did not reach tandem over TLS: up %v, series %v", up, n)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if code, _ := tandem.do(t, http.MethodGet, "/api/v1/query?query=up", "", "", nil); code != http.StatusUnauthorized {
		t.Errorf("query without credentials: HTTP %d, want 401", code)
	}

	// The queue with the wrong password fails; the right one does not.
	for {
		m := promMetrics(t, "http://"+promAddr)
		bad := m[fmt.Sprintf(`prometheus_remote_storage_samples_failed_total{remote_name="wrong-password",url="https://%s/api/v1/write"}`, tandem.addr)]
		good := m[fmt.Sprintf(`prometheus_remote_storage_samples_failed_total{remote_name="tandem",url="https://%s/api/v1/write"}`, tandem.addr)]
		if good != 0 {
			t.Fatalf("Prometheus failed %v samples sending to tandem with the right credentials", good)
		}
		if bad > 0 {
			break
		}
		if time.Now().After(deadline) {
			failed, _ := sumMetric(m, "prometheus_remote_storage_samples_failed_total")
			t.Fatalf("no failed samples for the queue with the wrong password (all queues: %v)", failed)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// Remote read over TLS with basic auth: Prometheus finds tandem's series.
	promAPI := &tandemProc{t: t, url: "http://" + promAddr}
	var d queryData
	promAPI.api(t, "/api/v1/query", url.Values{"query": {"tandem_only_metric"}, "time": {fmtTime(now)}}, false, &d)
	if got := decodeResult(t, d); len(got) != 1 || got[0].V[0] != 7 {
		t.Errorf("Prometheus remote-reading tandem_only_metric from tandem: %+v, want one series = 7", got)
	}
}
