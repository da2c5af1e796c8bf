package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/tsdb/tsdbutil"
)

// prometheusCachePath is where .ci/run installs a real Prometheus 3
// (go install github.com/prometheus/prometheus/cmd/prometheus@v0.316.0).
const prometheusCachePath = "/root/.cache/tandem-bin/prometheus"

// nodeExporterBin is node_exporter from Debian's prometheus-node-exporter package.
const nodeExporterBin = "/usr/bin/prometheus-node-exporter"

// Files of the docker-compose setup that the end-to-end tests run as they are.
const (
	dockerPrometheusConfig = "../../docker/prometheus.yml"
	dockerRules            = "../../docker/rules.yml"
)

// prometheusBinary returns the Prometheus binary: $TANDEM_PROMETHEUS or the
// one .ci/run installs. A missing binary fails the test.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("TANDEM_PROMETHEUS")
	if bin == "" {
		bin = prometheusCachePath
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("a real Prometheus is required by this test and %s is missing (%v): build it with "+
			"`GOBIN=/root/.cache/tandem-bin go install github.com/prometheus/prometheus/cmd/prometheus@v0.316.0` "+
			"(.ci/run does this before make test) or point TANDEM_PROMETHEUS at a Prometheus 3 binary", bin, err)
	}
	return bin
}

// lockedBuffer collects a child process's output; safe to read while it writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// extProcess is an external program started by a test.
type extProcess struct {
	name   string
	cmd    *exec.Cmd
	log    *lockedBuffer
	waited chan struct{}
}

// startProcess starts bin and waits until readyURL answers 200. The process
// is killed when the test ends.
func startProcess(t *testing.T, name, bin, readyURL string, args ...string) *extProcess {
	t.Helper()
	p := &extProcess{name: name, cmd: exec.Command(bin, args...), log: &lockedBuffer{}, waited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.waited) }()
	t.Cleanup(func() { p.stop(syscall.SIGKILL) })
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.waited:
			t.Fatalf("%s exited before it was ready: %v\n%s", name, p.cmd.ProcessState, p.log)
		default:
		}
		if resp, err := http.Get(readyURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready at %s after 60s\n%s", name, readyURL, p.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends sig and waits for the process to exit (killing it after 20s).
func (p *extProcess) stop(sig syscall.Signal) {
	select {
	case <-p.waited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.waited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.waited
	}
}

// startTandemAt starts tandem listening on addr (so that it can be restarted
// where Prometheus sends to) and waits for /-/ready.
func startTandemAt(t *testing.T, dataDir, addr string, args ...string) (*tandemProc, *extProcess) {
	t.Helper()
	all := append([]string{"--web.listen-address=" + addr, "--storage.path=" + dataDir, "--log.level=warn"}, args...)
	e := startProcess(t, "tandem", tandemBin, "http://"+addr+"/-/ready", all...)
	return &tandemProc{t: t, cmd: e.cmd, url: "http://" + addr, dir: dataDir, log: &bytes.Buffer{}, waited: e.waited}, e
}

// renderPrometheusConfig returns docker/prometheus.yml with each old string
// replaced by its new one; every old string must occur in the file, so the
// test notices when the file changes under it.
func renderPrometheusConfig(t *testing.T, replacements ...string) string {
	t.Helper()
	raw, err := os.ReadFile(dockerPrometheusConfig)
	if err != nil {
		t.Fatalf("read the docker-compose Prometheus configuration: %v", err)
	}
	s := string(raw)
	for i := 0; i+1 < len(replacements); i += 2 {
		if !strings.Contains(s, replacements[i]) {
			t.Fatalf("%s no longer contains %q, which the test replaces", dockerPrometheusConfig, replacements[i])
		}
		s = strings.ReplaceAll(s, replacements[i], replacements[i+1])
	}
	return s
}

// promMetrics returns the samples of a /metrics page keyed by series text.
func promMetrics(t *testing.T, base string) map[string]float64 {
	t.Helper()
	return scrapeMetrics(t, &tandemProc{url: base})
}

// sumMetric adds up the samples of the metric name (any labels).
func sumMetric(m map[string]float64, name string) (float64, bool) {
	var sum float64
	found := false
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum += v
			found = true
		}
	}
	return sum, found
}

// prometheusE2EQueries are asked of Prometheus and of tandem, instant and range.
var prometheusE2EQueries = []string{
	`up`,
	`rate(node_cpu_seconds_total[5s])`,
	`node_memory_MemAvailable_bytes`,
	`histogram_quantile(0.9, sum by (le, handler) (rate(prometheus_http_request_duration_seconds_bucket[5s])))`,
	`topk(2, go_memstats_alloc_bytes)`,
	`node_cpu_seconds_total{mode=~"user|system|idle"}`,
	`{__name__=~"node_load1|node_load5|node_memory_Mem.*_bytes"}`,
	`sum by (job) (scrape_samples_scraped)`,
	`count_over_time(up[10s])`,
	`increase(prometheus_http_requests_total{handler="/metrics"}[5s])`,
	// Native histograms (Prometheus's own).
	`rate(prometheus_http_request_duration_seconds{handler="/metrics"}[5s])`,
	`histogram_quantile(0.9, sum by (handler) (rate(prometheus_http_request_duration_seconds[5s])))`,
	`histogram_count(increase(prometheus_http_request_duration_seconds[10s]))`,
	`histogram_sum(prometheus_http_request_duration_seconds{handler="/metrics"})`,
}

// prometheusE2ENHCBQueries read native histograms with custom buckets:
// tandem's classic histograms, converted by Prometheus (remote write 2.0 only).
var prometheusE2ENHCBQueries = []string{
	`histogram_quantile(0.5, rate(tandem_remote_write_request_duration_seconds[5s]))`,
	`histogram_fraction(0, 0.01, rate(tandem_remote_write_request_duration_seconds[5s]))`,
	`tandem_remote_write_request_duration_seconds{version="2.0"}`,
}

// prometheusE2ESTQueries read start timestamps: the remote write 2.0 run
// starts Prometheus with st-storage (it parses the created timestamps of
// protobuf scrapes and sends them as start_timestamp) and both with
// use-start-timestamps, so rate and friends use them; the count checks that
// start timestamps really arrived.
var prometheusE2ESTQueries = []string{
	`start_timestamp(prometheus_http_requests_total)`,
	`start_timestamp(tandem_remote_write_samples_received_total)`,
	`count(start_timestamp(prometheus_http_requests_total) > 0)`,
	`count(start_timestamp(go_gc_cycles_automatic_gc_cycles_total) > 0)`,
	`rate(prometheus_http_requests_total[5s])`,
	`increase(tandem_remote_write_samples_received_total[10s])`,
	`resets(prometheus_http_requests_total[30s])`,
}

// TestPrometheusEndToEnd runs a real Prometheus 3 scraping node_exporter,
// itself and tandem every second, with docker/prometheus.yml as the
// docker-compose setup uses it (ports replaced): remote write (1.0 and 2.0)
// into tandem, which is restarted in the middle, and remote read from tandem.
// tandem runs docker/rules.yml. PromQL over tandem must equal Prometheus's
// answers, and no sample acknowledged before the restart may be lost.
func TestPrometheusEndToEnd(t *testing.T) {
	promBin := prometheusBinary(t)
	if _, err := os.Stat(nodeExporterBin); err != nil {
		t.Fatalf("node_exporter is required by this test and %s is missing (%v): install it with "+
			"`apt-get install -y prometheus-node-exporter` (.ci/run does this before make test)", nodeExporterBin, err)
	}
	neAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startProcess(t, "node_exporter", nodeExporterBin, "http://"+neAddr+"/metrics",
		"--web.listen-address="+neAddr, "--log.level=warn")
	for _, tc := range []struct{ name, message string }{
		{"remote-write-1.0", "prometheus.WriteRequest"},
		{"remote-write-2.0", "io.prometheus.write.v2.Request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testPrometheusEndToEnd(t, promBin, neAddr, tc.message)
		})
	}
}

func testPrometheusEndToEnd(t *testing.T, promBin, neAddr, message string) {
	begin := time.Now()
	rulesFile, err := filepath.Abs(dockerRules)
	if err != nil {
		t.Fatal(err)
	}
	tandemAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dataDir := t.TempDir()
	tandemArgs := []string{"--rules.file=" + rulesFile, "--rules.evaluation-interval=1s"}
	promArgs := []string(nil)
	if message != "prometheus.WriteRequest" {
		// Start timestamps travel in remote write 2.0 only.
		tandemArgs = append(tandemArgs, "--query.use-start-timestamps", "--query.experimental-functions")
		promArgs = append(promArgs, "--enable-feature=st-storage,use-start-timestamps,promql-experimental-functions")
	}
	tandem, tandemExt := startTandemAt(t, dataDir, tandemAddr, tandemArgs...)

	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	promURL := "http://" + promAddr
	cfg := renderPrometheusConfig(t,
		"scrape_interval: 5s", "scrape_interval: 1s",
		"evaluation_interval: 5s", "evaluation_interval: 1s",
		"tandem:9201", tandemAddr,
		"node-exporter:9100", neAddr,
		"localhost:9090", promAddr,
		"protobuf_message: io.prometheus.write.v2.Request", "protobuf_message: "+message,
	)
	if message == "prometheus.WriteRequest" {
		// 1.0 cannot carry custom buckets: Prometheus would drop its NHCB.
		cfg = strings.Replace(cfg, "convert_classic_histograms_to_nhcb: true", "convert_classic_histograms_to_nhcb: false", 1)
	}
	promDir := t.TempDir()
	cfgFile := filepath.Join(promDir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := startProcess(t, "Prometheus", promBin, promURL+"/-/ready", append([]string{
		"--config.file=" + cfgFile, "--storage.tsdb.path=" + filepath.Join(promDir, "data"),
		"--web.listen-address=" + promAddr, "--log.level=warn"}, promArgs...)...)
	started := time.Now()
	promAPI := &tandemProc{t: t, url: promURL}
	defer func() {
		if t.Failed() {
			t.Logf("Prometheus log:\n%s\ntandem log:\n%s", prom.log, tandemExt.log)
		}
	}()

	// Restart tandem in the middle: SIGTERM, then start it again on the same
	// address and data; Prometheus retries what failed meanwhile.
	// Wait (at least 7 s, at most 60 s on a loaded machine) until Prometheus
	// scraped every target a few times and tandem received its samples.
	time.Sleep(time.Until(started.Add(7 * time.Second)))
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		var cnt queryData
		promAPI.api(t, "/api/v1/query", url.Values{"query": {`count({__name__=~".+"})`}}, false, &cnt)
		res := decodeResult(t, cnt)
		got, _ := sumMetric(scrapeMetrics(t, tandem), "tandem_remote_write_samples_received_total")
		if len(res) == 1 && len(res[0].V) == 1 && res[0].V[0] >= 500 && got > 0 {
			// The check below looks back from a second before the restart:
			// let every target's first scrapes fall inside that window.
			time.Sleep(2500 * time.Millisecond)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s Prometheus has %v series and tandem received %v samples\n%s", res, got, prom.log)
		}
	}
	restartAt := time.Now().Add(-time.Second).Truncate(time.Second)
	tandemExt.stop(syscall.SIGTERM)
	if code := tandemExt.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("tandem exited with %d on SIGTERM\n%s", code, tandemExt.log)
	}
	time.Sleep(500 * time.Millisecond) // some scrapes of tandem and sends fail
	tandem, tandemExt = startTandemAt(t, dataDir, tandemAddr, tandemArgs...)

	restarted := time.Now()
	time.Sleep(time.Until(restarted.Add(8 * time.Second)))
	evalT := time.Now().Add(-4 * time.Second).Truncate(time.Second)
	waitSent(t, tandem, evalT.Add(2*time.Second))

	// Remote write: tandem answers as Prometheus does.
	rangeStart := started.Truncate(time.Second).Add(2 * time.Second)
	queries := prometheusE2EQueries
	if message != "prometheus.WriteRequest" {
		queries = append(slices.Clip(queries), prometheusE2ENHCBQueries...)
		queries = append(queries, prometheusE2ESTQueries...)
		checkStartTimestampsArrived(t, promAPI, evalT)
	}
	for _, q := range queries {
		inst := url.Values{"query": {q}, "time": {fmtTime(evalT.UnixMilli())}}
		var want, got queryData
		promAPI.api(t, "/api/v1/query", inst, false, &want)
		tandem.api(t, "/api/v1/query", inst, true, &got)
		compareSeries(t, "instant "+q, decodeResult(t, got), decodeResult(t, want))
		rng := url.Values{"query": {q}, "start": {fmtTime(rangeStart.UnixMilli())}, "end": {fmtTime(evalT.UnixMilli())}, "step": {"1"}}
		promAPI.api(t, "/api/v1/query_range", rng, false, &want)
		tandem.api(t, "/api/v1/query_range", rng, false, &got)
		compareSeries(t, "range "+q, decodeResult(t, got), decodeResult(t, want))
	}

	// Nothing acknowledged before the restart is lost: every raw sample of
	// every series scraped by Prometheus (rule outputs excluded) up to the
	// restart is in tandem, with its value.
	countQ := fmt.Sprintf(`{__name__=~".+", __name__!~".*:.*|ALERTS.*"}[%ds]`,
		int(restartAt.Sub(started.Add(-2*time.Second)).Seconds()))
	inst := url.Values{"query": {countQ}, "time": {fmtTime(restartAt.UnixMilli())}}
	var want, got queryData
	promAPI.api(t, "/api/v1/query", inst, false, &want)
	tandem.api(t, "/api/v1/query", inst, true, &got)
	wantCounts := decodeResult(t, want)
	if len(wantCounts) < 500 {
		t.Errorf("Prometheus has only %d series before the restart; expected node_exporter's, its own and tandem's", len(wantCounts))
	}
	compareSeries(t, "samples before the restart: "+countQ, decodeResult(t, got), wantCounts)

	checkRemoteRead(t, tandem, promAPI)
	checkDockerRules(t, tandem, rulesFile)

	// Prometheus's own account: everything it sent was accepted.
	pm := promMetrics(t, promURL)
	sent, ok := sumMetric(pm, "prometheus_remote_storage_samples_total")
	if !ok || sent == 0 {
		t.Errorf("prometheus_remote_storage_samples_total = %v (found %v), want > 0", sent, ok)
	}
	hsent, _ := sumMetric(pm, "prometheus_remote_storage_histograms_total")
	if hsent == 0 {
		t.Errorf("prometheus_remote_storage_histograms_total = 0: Prometheus sent no native histograms")
	}
	for _, name := range []string{"prometheus_remote_storage_samples_failed_total", "prometheus_remote_storage_samples_dropped_total",
		"prometheus_remote_storage_histograms_failed_total", "prometheus_remote_storage_histograms_dropped_total"} {
		if v, _ := sumMetric(pm, name); v != 0 {
			t.Errorf("%s = %v, want 0", name, v)
		}
	}
	retried, _ := sumMetric(pm, "prometheus_remote_storage_samples_retried_total")
	t.Logf("%s: Prometheus sent %v samples (%v retried) and %v histograms, %d series before the restart; took %v",
		message, sent, retried, hsent, len(wantCounts), time.Since(begin).Round(100*time.Millisecond))
}

// checkStartTimestampsArrived fails the test unless Prometheus itself holds
// counters with start timestamps at ts: the start-timestamp comparisons
// would otherwise compare nothing.
func checkStartTimestampsArrived(t *testing.T, prom *tandemProc, ts time.Time) {
	t.Helper()
	var d queryData
	prom.api(t, "/api/v1/query", url.Values{"query": {`count(start_timestamp(prometheus_http_requests_total) > 0)`}, "time": {fmtTime(ts.UnixMilli())}}, false, &d)
	if res := decodeResult(t, d); len(res) != 1 || len(res[0].V) != 1 || res[0].V[0] < 2 {
		t.Errorf("Prometheus holds start timestamps for %v of its prometheus_http_requests_total series, want at least 2: st-storage did not parse created timestamps", res)
	}
}

// waitSent waits until tandem holds every target's samples up to at least ts.
func waitSent(t *testing.T, p *tandemProc, ts time.Time) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var d queryData
		p.api(t, "/api/v1/query", url.Values{"query": {`min(timestamp(up)) and count(up) == 3`}}, false, &d)
		if res := decodeResult(t, d); len(res) == 1 && res[0].V[0]*1000 >= float64(ts.UnixMilli()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tandem has not received the samples up to %v from Prometheus within 20s", ts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkRemoteRead writes a series to tandem only (a counter sampled every 5s
// for the last 10 minutes) and queries it through Prometheus's remote_read:
// Prometheus's answers, instant and range, raw and through rate(), must equal
// tandem's own.
func checkRemoteRead(t *testing.T, tandem, prom *tandemProc) {
	t.Helper()
	now := time.Now().Truncate(time.Second).UnixMilli()
	ts := prompb.TimeSeries{Labels: []prompb.Label{
		{Name: "__name__", Value: "tandem_e2e_remote_read_probe"},
		{Name: "instance", Value: "probe"},
		{Name: "job", Value: "probe"},
	}}
	const n = 120
	for i := 0; i < n; i++ {
		ts.Samples = append(ts.Samples, prompb.Sample{Value: float64(i*i%97 + 10*i), Timestamp: now - int64(n-1-i)*5000})
	}
	// Native histograms too: integer counts, float counts and custom buckets.
	hts := []prompb.TimeSeries{ts}
	for _, kind := range []string{"int", "float", "nhcb"} {
		h := prompb.TimeSeries{Labels: []prompb.Label{
			{Name: "__name__", Value: "tandem_e2e_remote_read_histogram"},
			{Name: "instance", Value: "probe"},
			{Name: "job", Value: "probe"},
			{Name: "kind", Value: kind},
		}}
		for i := 0; i < n; i++ {
			at := now - int64(n-1-i)*5000
			switch kind {
			case "int":
				h.Histograms = append(h.Histograms, prompb.FromIntHistogram(at, tsdbutil.GenerateTestHistogram(int64(i))))
			case "float":
				h.Histograms = append(h.Histograms, prompb.FromFloatHistogram(at, tsdbutil.GenerateTestFloatHistogram(int64(i))))
			default:
				h.Histograms = append(h.Histograms, prompb.FromIntHistogram(at, tsdbutil.GenerateTestCustomBucketsHistogram(int64(i))))
			}
		}
		hts = append(hts, h)
	}
	if code := postV1(t, tandem, &prompb.WriteRequest{Timeseries: hts}); code != http.StatusNoContent {
		t.Fatalf("write the remote-read probe: HTTP %d", code)
	}
	var d queryData
	prom.api(t, "/api/v1/query", url.Values{"query": {"tandem_e2e_remote_read_probe"}, "time": {fmtTime(now)}}, false, &d)
	want := []series{{Labels: `{__name__="tandem_e2e_remote_read_probe", instance="probe", job="probe"}`, T: []int64{now}, V: []float64{float64((n-1)*(n-1)%97 + 10*(n-1))}}}
	compareSeries(t, "Prometheus remote read from tandem", decodeResult(t, d), want)
	for _, q := range []url.Values{
		{"query": {"tandem_e2e_remote_read_probe[10m]"}, "time": {fmtTime(now)}},
		{"query": {"rate(tandem_e2e_remote_read_probe[1m])"}, "start": {fmtTime(now - 9*60000)}, "end": {fmtTime(now)}, "step": {"15"}},
		{"query": {"max_over_time(tandem_e2e_remote_read_probe[2m])"}, "start": {fmtTime(now - 9*60000)}, "end": {fmtTime(now)}, "step": {"30"}},
		{"query": {"tandem_e2e_remote_read_histogram[10m]"}, "time": {fmtTime(now)}},
		{"query": {"histogram_quantile(0.8, rate(tandem_e2e_remote_read_histogram[1m]))"}, "start": {fmtTime(now - 9*60000)}, "end": {fmtTime(now)}, "step": {"15"}},
	} {
		path := "/api/v1/query"
		if q.Has("step") {
			path = "/api/v1/query_range"
		}
		var got, ref queryData
		prom.api(t, path, q, false, &got)
		tandem.api(t, path, q, false, &ref)
		compareSeries(t, "Prometheus remote read vs tandem: "+q.Get("query"), decodeResult(t, got), decodeResult(t, ref))
	}
}

// checkDockerRules checks that docker/rules.yml is valid for Prometheus and
// that each of its recording rules produced series in tandem.
func checkDockerRules(t *testing.T, p *tandemProc, rulesFile string) {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", rulesFile, errs)
	}
	var records, alerts int
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts++
				continue
			}
			records++
			var d queryData
			p.api(t, "/api/v1/query", url.Values{"query": {r.Record}}, false, &d)
			if len(decodeResult(t, d)) == 0 {
				t.Errorf("recording rule %s of %s has no series in tandem", r.Record, rulesFile)
			}
		}
	}
	var rulesAPI struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	p.api(t, "/api/v1/rules", nil, false, &rulesAPI)
	var n int
	for _, g := range rulesAPI.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("rule %s: health %q, %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	if n != records+alerts || records == 0 || alerts == 0 {
		t.Errorf("tandem runs %d rules, %s has %d recording and %d alerting rules", n, rulesFile, records, alerts)
	}
}
