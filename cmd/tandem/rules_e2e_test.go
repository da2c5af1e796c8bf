package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tandem-tsdb/tandem/workload"
)

// alertmanagerBin is the Alertmanager of Debian's prometheus-alertmanager package.
const alertmanagerBin = "/usr/bin/prometheus-alertmanager"

// rulesE2EBudget bounds TestRulesEndToEnd as a whole.
const rulesE2EBudget = 40 * time.Second

const e2eRules = `groups:
  - name: e2e
    interval: 1s
    rules:
      - record: job:tandem_e2e_temp:sum
        expr: sum by (job) (tandem_e2e_temp)
      - record: tandem_e2e_temp:high
        expr: tandem_e2e_temp > 50
      - alert: TempHigh
        expr: tandem_e2e_temp > 50
        for: 3s
        labels:
          severity: page
        annotations:
          summary: "{{ $labels.instance }} is at {{ $value }}"
`

// e2eBadRules has a rule whose expression does not parse.
const e2eBadRules = e2eRules + `  - name: broken
    rules:
      - alert: BadRule
        expr: sum(tandem_e2e_temp
`

const e2eExtraRules = e2eRules + `  - name: extra
    interval: 1s
    rules:
      - record: tandem_e2e_temp:count
        expr: count(tandem_e2e_temp)
`

// startAlertmanager starts a real Alertmanager on 127.0.0.1 with a null
// receiver and returns its base URL.
func startAlertmanager(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(alertmanagerBin); err != nil {
		t.Fatalf("Alertmanager is required by this test and %s is missing (%v): install it with "+
			"`apt-get update && apt-get install -y prometheus-alertmanager` (.ci/run does this before make test)", alertmanagerBin, err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte("route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	var log bytes.Buffer
	cmd := exec.Command(alertmanagerBin, "--config.file="+cfg, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start Alertmanager: %v", err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
	})
	base := "http://" + addr
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-waited:
			t.Fatalf("Alertmanager exited: %v\n%s", cmd.ProcessState, log.String())
		default:
		}
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Alertmanager not ready after 15s\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// amAlert is an alert as Alertmanager's GET /api/v2/alerts returns it.
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Status       struct {
		State string `json:"state"`
	} `json:"status"`
}

// amTempHigh returns Alertmanager's TempHigh alerts.
func amTempHigh(t *testing.T, base string) []amAlert {
	t.Helper()
	resp, err := http.Get(base + "/api/v2/alerts?filter=" + url.QueryEscape(`alertname="TempHigh"`))
	if err != nil {
		t.Fatalf("Alertmanager alerts: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("Alertmanager alerts: HTTP %d, %v: %s", resp.StatusCode, err, body)
	}
	var out []amAlert
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("decode Alertmanager alerts: %v: %s", err, body)
	}
	return out
}

// apiAlert is an alert of tandem's /api/v1/alerts.
type apiAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

func tandemAlerts(t *testing.T, p *tandemProc) []apiAlert {
	t.Helper()
	var d struct {
		Alerts []apiAlert `json:"alerts"`
	}
	p.api(t, "/api/v1/alerts", url.Values{}, false, &d)
	return d.Alerts
}

// apiRuleGroups is the data of /api/v1/rules.
type apiRuleGroups struct {
	Groups []struct {
		Name     string  `json:"name"`
		File     string  `json:"file"`
		Interval float64 `json:"interval"`
		Rules    []struct {
			Type   string            `json:"type"`
			Name   string            `json:"name"`
			Query  string            `json:"query"`
			Health string            `json:"health"`
			State  string            `json:"state"`
			Labels map[string]string `json:"labels"`
			Alerts *[]apiAlert       `json:"alerts"`
		} `json:"rules"`
	} `json:"groups"`
}

// tempWriter remote-writes tandem_e2e_temp{instance="a"|"b"} every 300ms and
// records each write's [sample timestamp, acknowledgement] window: a rule
// evaluated inside one may or may not have seen that sample.
type tempWriter struct {
	url     atomic.Pointer[string]
	a       atomic.Uint64 // float64 bits of instance a's value
	mu      sync.Mutex
	windows [][2]int64
	writes  int
	stop    chan struct{}
	done    chan struct{}
}

func startTempWriter(t *testing.T, p *tandemProc) *tempWriter {
	t.Helper()
	w := &tempWriter{stop: make(chan struct{}), done: make(chan struct{})}
	w.setURL(p)
	w.a.Store(math.Float64bits(100))
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			w.write(i)
			select {
			case <-w.stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *tempWriter) setURL(p *tandemProc) {
	u := p.url + "/api/v1/write"
	w.url.Store(&u)
}

func (w *tempWriter) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *tempWriter) write(i int) {
	api, err := workload.NewClient(*w.url.Load(), workload.SendOptions{
		Version: 1, Backoff: remoteapi.BackoffConfig{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond, MaxRetries: 1},
	})
	if err != nil {
		return
	}
	ts := time.Now().UnixMilli()
	series := func(instance string, v float64) prompb.TimeSeries {
		return prompb.TimeSeries{
			Labels: []prompb.Label{
				{Name: "__name__", Value: "tandem_e2e_temp"}, {Name: "instance", Value: instance}, {Name: "job", Value: "e2e"},
			},
			Samples: []prompb.Sample{{Timestamp: ts, Value: v}},
		}
	}
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("a", math.Float64frombits(w.a.Load())),
		series("b", float64(10+i%7)),
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = api.Write(ctx, remoteapi.WriteV1MessageType, req)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.windows = append(w.windows, [2]int64{ts, time.Now().UnixMilli()})
	if err == nil {
		w.writes++
	}
}

// racy reports whether a rule evaluated at ts may have raced a write.
func (w *tempWriter) racy(ts int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, win := range w.windows {
		if ts >= win[0] && ts <= win[1] {
			return true
		}
	}
	return false
}

// within polls cond every 100ms until it holds or timeout (capped by the
// test's deadline) passes; then it fails with what.
func within(t *testing.T, deadline time.Time, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(timeout)
	if end.After(deadline) {
		end = deadline
	}
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// instant runs an instant query at now on p.
func instant(t *testing.T, p *tandemProc, q string) []series {
	t.Helper()
	var d queryData
	p.api(t, "/api/v1/query", url.Values{"query": {q}, "time": {fmtTime(time.Now().UnixMilli())}}, false, &d)
	return decodeResult(t, d)
}

// TestRulesEndToEnd runs tandem with a rule file against a real Alertmanager:
// an alert fires, reaches Alertmanager and resolves; a recording rule's series
// equals its expression evaluated ad hoc; `for` state survives a restart;
// staleness markers end the series of resolved alerts and vanished recording
// results; a bad rule file on reload keeps the previous rules.
func TestRulesEndToEnd(t *testing.T) {
	start := time.Now()
	deadline := start.Add(rulesE2EBudget)
	amURL := startAlertmanager(t)

	rulesFile := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(rulesFile, []byte(e2eRules), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	args := []string{"--rules.file=" + rulesFile, "--alertmanager.url=" + amURL, "--web.external-url=http://tandem.example:9201/", "--web.enable-lifecycle"}
	p := startTandem(t, dataDir, args...)
	w := startTempWriter(t, p)

	// 1. The alert fires after its `for` and reaches Alertmanager.
	var fired []amAlert
	within(t, deadline, 15*time.Second, "TempHigh in Alertmanager", func() bool {
		fired = amTempHigh(t, amURL)
		return len(fired) > 0
	})
	t.Logf("alert in Alertmanager after %v", time.Since(start).Round(time.Millisecond))
	if len(fired) != 1 {
		t.Fatalf("Alertmanager has %d TempHigh alerts, want 1 (instance a): %+v", len(fired), fired)
	}
	a := fired[0]
	wantLabels := map[string]string{"alertname": "TempHigh", "instance": "a", "job": "e2e", "severity": "page"}
	for k, v := range wantLabels {
		if a.Labels[k] != v {
			t.Errorf("Alertmanager alert label %s = %q, want %q (labels %v)", k, a.Labels[k], v, a.Labels)
		}
	}
	if len(a.Labels) != len(wantLabels) {
		t.Errorf("Alertmanager alert labels %v, want %v", a.Labels, wantLabels)
	}
	if !strings.HasPrefix(a.Annotations["summary"], "a is at 1") {
		t.Errorf("summary annotation %q, want the templated `a is at <value>`", a.Annotations["summary"])
	}
	if !strings.HasPrefix(a.GeneratorURL, "http://tandem.example:9201/graph?g0.expr=") {
		t.Errorf("generatorURL %q does not point to tandem's external URL", a.GeneratorURL)
	}
	if a.Status.State != "active" || !a.EndsAt.After(time.Now()) {
		t.Errorf("Alertmanager alert state %q endsAt %v, want active with endsAt in the future", a.Status.State, a.EndsAt)
	}

	// 2. tandem's own API shows the firing alert, the rules and the Alertmanager.
	var before apiAlert
	for _, al := range tandemAlerts(t, p) {
		if al.Labels["alertname"] == "TempHigh" {
			if before.State != "" {
				t.Fatalf("two TempHigh alerts in /api/v1/alerts")
			}
			before = al
		}
	}
	if before.State != "firing" || before.Labels["instance"] != "a" || before.ActiveAt.IsZero() {
		t.Fatalf("/api/v1/alerts TempHigh = %+v, want firing for instance a", before)
	}
	if !a.StartsAt.After(before.ActiveAt) {
		t.Errorf("Alertmanager startsAt %v not after activeAt %v (the alert fires after its `for`)", a.StartsAt, before.ActiveAt)
	}
	checkRulesAPI(t, p, rulesFile)
	var ams struct {
		Active []struct {
			URL string `json:"url"`
		} `json:"activeAlertmanagers"`
	}
	p.api(t, "/api/v1/alertmanagers", url.Values{}, false, &ams)
	if len(ams.Active) != 1 || ams.Active[0].URL != amURL+"/api/v2/alerts" {
		t.Errorf("/api/v1/alertmanagers active = %+v, want %s/api/v2/alerts", ams.Active, amURL)
	}
	// ALERTS and ALERTS_FOR_STATE were written through tandem's append path.
	got := instant(t, p, `ALERTS{alertname="TempHigh"}`)
	if len(got) != 1 || got[0].Labels != `{__name__="ALERTS", alertname="TempHigh", alertstate="firing", instance="a", job="e2e", severity="page"}` || got[0].V[0] != 1 {
		t.Errorf("ALERTS = %+v, want one firing series for instance a", got)
	}
	got = instant(t, p, `ALERTS_FOR_STATE{alertname="TempHigh"}`)
	if len(got) != 1 || got[0].V[0] != float64(before.ActiveAt.Unix()) {
		t.Errorf("ALERTS_FOR_STATE = %+v, want activeAt %d", got, before.ActiveAt.Unix())
	}
	m := scrapeMetrics(t, p)
	group := rulesFile + ";e2e"
	if v := m[fmt.Sprintf(`prometheus_rule_evaluations_total{rule_group=%q}`, group)]; v < 3 {
		t.Errorf("prometheus_rule_evaluations_total for %s = %v, want >= 3", group, v)
	}
	if v, ok := m[fmt.Sprintf(`prometheus_rule_evaluation_failures_total{rule_group=%q}`, group)]; !ok || v != 0 {
		t.Errorf("prometheus_rule_evaluation_failures_total for %s = %v (present %v), want 0", group, v, ok)
	}
	if v := m[fmt.Sprintf(`prometheus_notifications_sent_total{alertmanager=%q}`, amURL+"/api/v2/alerts")]; v < 1 {
		t.Errorf("prometheus_notifications_sent_total = %v, want >= 1", v)
	}
	if m["tandem_rules_last_reload_successful"] != 1 {
		t.Errorf("tandem_rules_last_reload_successful = %v, want 1", m["tandem_rules_last_reload_successful"])
	}

	// 3. After a restart the alert fires again with its old activeAt: the
	// `for` state is restored from ALERTS_FOR_STATE (stored in whole seconds).
	p.signal(syscall.SIGTERM)
	restart := time.Now()
	p = startTandem(t, dataDir, args...)
	w.setURL(p)
	var after apiAlert
	within(t, deadline, 10*time.Second, "TempHigh firing after restart", func() bool {
		for _, al := range tandemAlerts(t, p) {
			if al.Labels["alertname"] == "TempHigh" && al.State == "firing" {
				after = al
				return true
			}
		}
		return false
	})
	t.Logf("firing again %v after the restart", time.Since(restart).Round(time.Millisecond))
	if want := before.ActiveAt.Truncate(time.Second); !after.ActiveAt.Equal(want) {
		t.Errorf("activeAt after restart = %v, want the restored %v (before: %v)", after.ActiveAt, want, before.ActiveAt)
	}

	// 4. The data changes: the alert resolves in Alertmanager, and staleness
	// markers end ALERTS and the vanished recording-rule series at once.
	if got := instant(t, p, `tandem_e2e_temp:high`); len(got) != 1 {
		t.Errorf("tandem_e2e_temp:high = %+v, want the series of instance a", got)
	}
	w.a.Store(math.Float64bits(0))
	within(t, deadline, 10*time.Second, "TempHigh resolved in Alertmanager", func() bool {
		for _, al := range amTempHigh(t, amURL) {
			if al.Status.State == "active" && al.EndsAt.After(time.Now()) {
				return false
			}
		}
		return true
	})
	within(t, deadline, 3*time.Second, "stale markers for ALERTS and tandem_e2e_temp:high", func() bool {
		return len(instant(t, p, `ALERTS{alertname="TempHigh"}`)) == 0 && len(instant(t, p, `tandem_e2e_temp:high`)) == 0
	})
	for _, al := range tandemAlerts(t, p) {
		if al.Labels["alertname"] == "TempHigh" {
			t.Errorf("/api/v1/alerts still lists %+v after resolution", al)
		}
	}

	// 5. The recording rule's series equals its expression evaluated ad hoc at
	// every evaluation timestamp (before and after the restart, before and
	// after the change).
	checkRecording(t, p, w)

	// 6. Reloads: a bad file keeps the previous rules and says why.
	checkReload(t, p, deadline, rulesFile)

	w.close()
	p.signal(syscall.SIGTERM) // the log may be read once the process is gone
	if !strings.Contains(p.log.String(), "BadRule") {
		t.Errorf("the failed reload is not logged:\n%s", p.log)
	}
	w.mu.Lock()
	t.Logf("%d acknowledged writes; test took %v", w.writes, time.Since(start).Round(time.Millisecond))
	w.mu.Unlock()
}

// checkRulesAPI checks /api/v1/rules and its filters (upstream's handler over tandem's rules).
func checkRulesAPI(t *testing.T, p *tandemProc, rulesFile string) {
	t.Helper()
	var all apiRuleGroups
	p.api(t, "/api/v1/rules", url.Values{}, false, &all)
	if len(all.Groups) != 1 || all.Groups[0].Name != "e2e" || all.Groups[0].File != rulesFile || all.Groups[0].Interval != 1 {
		t.Fatalf("/api/v1/rules groups = %+v, want group e2e of %s every 1s", all.Groups, rulesFile)
	}
	var kinds []string
	for _, r := range all.Groups[0].Rules {
		kinds = append(kinds, r.Type+":"+r.Name+":"+r.Health)
	}
	want := "recording:job:tandem_e2e_temp:sum:ok recording:tandem_e2e_temp:high:ok alerting:TempHigh:ok"
	if strings.Join(kinds, " ") != want {
		t.Errorf("/api/v1/rules rules = %v, want %s", kinds, want)
	}
	if r := all.Groups[0].Rules[2]; r.State != "firing" || r.Alerts == nil || len(*r.Alerts) != 1 || r.Labels["severity"] != "page" {
		t.Errorf("alerting rule = %+v, want firing with one alert", r)
	}
	var alerts apiRuleGroups
	p.api(t, "/api/v1/rules", url.Values{"type": {"alert"}, "exclude_alerts": {"true"}}, false, &alerts)
	if len(alerts.Groups) != 1 || len(alerts.Groups[0].Rules) != 1 || alerts.Groups[0].Rules[0].Name != "TempHigh" || alerts.Groups[0].Rules[0].Alerts != nil {
		t.Errorf("/api/v1/rules?type=alert&exclude_alerts=true = %+v, want TempHigh alone without alerts", alerts.Groups)
	}
	var named apiRuleGroups
	p.api(t, "/api/v1/rules", url.Values{"rule_name[]": {"job:tandem_e2e_temp:sum"}, "file[]": {rulesFile}}, false, &named)
	if len(named.Groups) != 1 || len(named.Groups[0].Rules) != 1 || named.Groups[0].Rules[0].Query != "sum by (job) (tandem_e2e_temp)" {
		t.Errorf("/api/v1/rules?rule_name[]=job:tandem_e2e_temp:sum = %+v", named.Groups)
	}
	var none apiRuleGroups
	p.api(t, "/api/v1/rules", url.Values{"rule_group[]": {"nope"}}, false, &none)
	if len(none.Groups) != 0 {
		t.Errorf("/api/v1/rules?rule_group[]=nope = %+v, want no groups", none.Groups)
	}
}

// checkRecording compares every point of the recording rule's series with
// its expression evaluated ad hoc at that timestamp (points an evaluation may
// have taken while a write was in flight are skipped).
func checkRecording(t *testing.T, p *tandemProc, w *tempWriter) {
	t.Helper()
	rec := instant(t, p, `job:tandem_e2e_temp:sum[2m]`)
	if len(rec) != 1 || rec[0].Labels != `{__name__="job:tandem_e2e_temp:sum", job="e2e"}` {
		t.Fatalf("recorded series = %v, want job:tandem_e2e_temp:sum{job=\"e2e\"}", labelsOf(rec))
	}
	compared := 0
	for i, ts := range rec[0].T {
		if w.racy(ts) {
			continue
		}
		var d queryData
		p.api(t, "/api/v1/query", url.Values{"query": {`sum by (job) (tandem_e2e_temp)`}, "time": {fmtTime(ts)}}, false, &d)
		adhoc := decodeResult(t, d)
		if len(adhoc) != 1 || adhoc[0].Labels != `{job="e2e"}` || !floatEq(adhoc[0].V[0], rec[0].V[i]) {
			t.Errorf("recorded %v at %d, ad hoc %+v", rec[0].V[i], ts, adhoc)
		}
		compared++
	}
	t.Logf("recording rule: %d points, %d compared", len(rec[0].T), compared)
	if compared < 5 {
		t.Errorf("only %d of %d recorded points compared; want >= 5", compared, len(rec[0].T))
	}
}

// checkReload writes a bad rule file (POST /-/reload fails and keeps the
// rules), then a good one with one more group (SIGHUP loads it).
func checkReload(t *testing.T, p *tandemProc, deadline time.Time, rulesFile string) {
	t.Helper()
	if err := os.WriteFile(rulesFile, []byte(e2eBadRules), 0o600); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(p.url+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("POST /-/reload with a bad file: HTTP %d, want 500: %s", resp.StatusCode, body)
	}
	for _, want := range []string{rulesFile, `group "broken"`, `"BadRule"`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("reload error %q does not name %s", body, want)
		}
	}
	if v := scrapeMetrics(t, p)["tandem_rules_last_reload_successful"]; v != 0 {
		t.Errorf("tandem_rules_last_reload_successful = %v after a failed reload, want 0", v)
	}
	var groups apiRuleGroups
	p.api(t, "/api/v1/rules", url.Values{}, false, &groups)
	if len(groups.Groups) != 1 || groups.Groups[0].Name != "e2e" || len(groups.Groups[0].Rules) != 3 {
		t.Errorf("rules after a failed reload = %+v, want the previous group e2e", groups.Groups)
	}

	if err := os.WriteFile(rulesFile, []byte(e2eExtraRules), 0o600); err != nil {
		t.Fatal(err)
	}
	successBefore := scrapeMetrics(t, p)["tandem_rules_last_reload_success_timestamp_seconds"]
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	within(t, deadline, 5*time.Second, "SIGHUP reload", func() bool {
		m := scrapeMetrics(t, p)
		return m["tandem_rules_last_reload_successful"] == 1 && m["tandem_rules_last_reload_success_timestamp_seconds"] > successBefore
	})
	p.api(t, "/api/v1/rules", url.Values{}, false, &groups)
	if len(groups.Groups) != 2 || groups.Groups[0].Name != "e2e" || groups.Groups[1].Name != "extra" {
		t.Errorf("rules after SIGHUP = %+v, want groups e2e and extra", groups.Groups)
	}
	within(t, deadline, 5*time.Second, "the new group's recording rule", func() bool {
		got := instant(t, p, `tandem_e2e_temp:count`)
		return len(got) == 1 && got[0].V[0] == 2
	})
	for method, want := range map[string]int{http.MethodPut: http.StatusOK, http.MethodGet: http.StatusMethodNotAllowed} {
		req, _ := http.NewRequest(method, p.url+"/-/reload", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s /-/reload: HTTP %d, want %d", method, resp.StatusCode, want)
		}
	}
}
