package rules

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	prompromql "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

var _ Storage = (*tsdb.DB)(nil)

func openDB(t *testing.T) *tsdb.DB {
	t.Helper()
	db, err := tsdb.OpenDB(t.TempDir(), tsdb.DBOptions{Head: head.DefaultOptions()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

func newEngine() *prompromql.Engine {
	return prompromql.NewEngine(prompromql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

const goodRules = `groups:
  - name: g1
    rules:
      - record: r1
        expr: vector(1)
`

func groupNames(s *Service) []string {
	var out []string
	for _, g := range s.RuleGroups() {
		out = append(out, g.File()+":"+g.Name())
	}
	return out
}

func TestReloadKeepsPreviousRulesOnError(t *testing.T) {
	dir := t.TempDir()
	f1, f2 := filepath.Join(dir, "a.rules.yml"), filepath.Join(dir, "b.rules.yml")
	writeFile(t, f1, goodRules)
	reg := prometheus.NewRegistry()
	s, err := New(openDB(t), newEngine(), Options{Files: []string{filepath.Join(dir, "*.rules.yml"), filepath.Join(dir, "missing.yml")}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(groupNames(s), ","); got != f1+":g1" {
		t.Fatalf("groups %s, want %s:g1", got, f1)
	}
	if ok, at := s.LastReload(); !ok || at.IsZero() || testutil.ToFloat64(s.reloadOK) != 1 || testutil.ToFloat64(s.reloadSuccess) <= 0 {
		t.Fatalf("after a good load: ok=%v at=%v gauges %v %v", ok, at, testutil.ToFloat64(s.reloadOK), testutil.ToFloat64(s.reloadSuccess))
	}
	okAt := testutil.ToFloat64(s.reloadSuccess)

	// A second file matching the glob with a bad expression and an unknown field.
	writeFile(t, f2, `groups:
  - name: g2
    rules:
      - record: good
        expr: vector(2)
      - alert: Broken
        expr: sum(rate(x[5m])
`)
	err = s.Reload()
	if err == nil {
		t.Fatal("Reload accepted a bad rule file")
	}
	for _, want := range []string{f2, `group "g2"`, `rule 2`, `"Broken"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if got := strings.Join(groupNames(s), ","); got != f1+":g1" {
		t.Errorf("groups after a failed reload %s, want the previous %s:g1", got, f1)
	}
	if ok, _ := s.LastReload(); ok || testutil.ToFloat64(s.reloadOK) != 0 || testutil.ToFloat64(s.reloadSuccess) != okAt {
		t.Errorf("after a failed reload: ok=%v gauges %v %v (last success was %v)", ok, testutil.ToFloat64(s.reloadOK), testutil.ToFloat64(s.reloadSuccess), okAt)
	}

	// The handler reports the same error; fixing the file makes it succeed.
	rec := httptest.NewRecorder()
	s.ReloadHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/-/reload", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `"Broken"`) {
		t.Errorf("POST /-/reload: %d %s", rec.Code, rec.Body)
	}
	writeFile(t, f2, strings.ReplaceAll(goodRules, "g1", "g2"))
	time.Sleep(10 * time.Millisecond) // a later success timestamp
	rec = httptest.NewRecorder()
	s.ReloadHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/-/reload", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("PUT /-/reload: %d %s", rec.Code, rec.Body)
	}
	if got := strings.Join(groupNames(s), ","); got != f1+":g1,"+f2+":g2" {
		t.Errorf("groups after the fix %s", got)
	}
	if testutil.ToFloat64(s.reloadOK) != 1 || testutil.ToFloat64(s.reloadSuccess) <= okAt {
		t.Errorf("after the fix: gauges %v %v", testutil.ToFloat64(s.reloadOK), testutil.ToFloat64(s.reloadSuccess))
	}
	rec = httptest.NewRecorder()
	s.ReloadHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/-/reload", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload: %d", rec.Code)
	}
	// Upstream's rule metrics are on the registry too.
	if n, err := testutil.GatherAndCount(reg, "prometheus_rule_group_rules"); err != nil || n != 2 {
		t.Errorf("prometheus_rule_group_rules series = %d (%v), want 2", n, err)
	}
}

func TestNewRejectsInvalidSettings(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	writeFile(t, bad, "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: vector(1)\n        bogus: 1\n")
	token := filepath.Join(dir, "token")
	writeFile(t, token, "secret")
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"bad rule file", Options{Files: []string{bad}}, bad},
		{"bad glob", Options{Files: []string{"[x"}}, "pattern"},
		{"bad scheme", Options{Alertmanagers: []string{"ftp://am:9093"}}, "scheme"},
		{"no host", Options{Alertmanagers: []string{"http:///x"}}, "no host"},
		{"credentials in URL", Options{Alertmanagers: []string{"http://u:p@am:9093"}}, "basic-auth"},
		{"query in URL", Options{Alertmanagers: []string{"http://am:9093/?a=b"}}, "query"},
		{"basic and bearer", Options{Alertmanagers: []string{"http://am:9093"}, AlertmanagerClient: AlertmanagerClient{
			BasicAuthUsername: "u", BasicAuthPasswordFile: token, BearerTokenFile: token,
		}}, "at most one"},
		{"password without user", Options{AlertmanagerClient: AlertmanagerClient{BasicAuthPasswordFile: token}}, "user name"},
		{"missing CA file", Options{Alertmanagers: []string{"https://am:9093"}, AlertmanagerClient: AlertmanagerClient{TLSCAFile: filepath.Join(dir, "nope.pem")}}, "nope.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(openDB(t), newEngine(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// fakeAlertmanager records the alerts POSTed to its API v2 endpoint.
type fakeAlertmanager struct {
	mu     sync.Mutex
	auth   []string
	alerts []map[string]any
}

func (f *fakeAlertmanager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/prefix/api/v2/alerts" {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var alerts []map[string]any
	if err := json.Unmarshal(body, &alerts); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.alerts = append(f.alerts, alerts...)
	f.mu.Unlock()
}

func TestAlertsReachAlertmanagerWithAuth(t *testing.T) {
	am := &fakeAlertmanager{}
	srv := httptest.NewServer(am) // 127.0.0.1
	defer srv.Close()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	writeFile(t, token, "s3cret\n")
	rulesFile := filepath.Join(dir, "rules.yml")
	writeFile(t, rulesFile, `groups:
  - name: fast
    interval: 100ms
    rules:
      - alert: Hot
        expr: temp > 50
        labels: {severity: page}
`)
	db := openDB(t)
	app := db.AppenderV2(context.Background())
	if _, err := app.Append(0, labels.FromStrings("__name__", "temp", "job", "j", "instance", "i"), 0, time.Now().UnixMilli(), 90, nil, nil, storage.AOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	s, err := New(db, newEngine(), Options{
		Files:              []string{rulesFile},
		Alertmanagers:      []string{srv.URL + "/prefix/"},
		AlertmanagerClient: AlertmanagerClient{BearerTokenFile: token},
		MaxConcurrentEvals: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		am.mu.Lock()
		n := len(am.alerts)
		am.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no alert reached the Alertmanager within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	am.mu.Lock()
	a, auth := am.alerts[0], am.auth[0]
	am.mu.Unlock()
	if auth != "Bearer s3cret" {
		t.Errorf("Authorization %q, want the bearer token from the file", auth)
	}
	lbls, _ := a["labels"].(map[string]any)
	if lbls["alertname"] != "Hot" || lbls["severity"] != "page" || lbls["instance"] != "i" {
		t.Errorf("alert labels %v", lbls)
	}
	if urls := s.Alertmanagers(); len(urls) != 1 || urls[0].String() != srv.URL+"/prefix/api/v2/alerts" {
		t.Errorf("Alertmanagers() = %v", urls)
	}
	if len(s.AlertingRules()) != 1 {
		t.Errorf("AlertingRules() = %v", s.AlertingRules())
	}
	// ALERTS goes through the storage's append path once the `for` state is
	// restored (after the second evaluation).
	for {
		n, err := countAlertsSeries(db)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("%d firing ALERTS series, want 1", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countAlertsSeries counts the firing ALERTS series in db.
func countAlertsSeries(db *tsdb.DB) (int, error) {
	q, err := db.Querier(0, time.Now().Add(time.Minute).UnixMilli())
	if err != nil {
		return 0, err
	}
	defer q.Close()
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "ALERTS"),
		labels.MustNewMatcher(labels.MatchEqual, "alertstate", "firing"))
	n := 0
	for ss.Next() {
		n++
	}
	return n, ss.Err()
}

// TestReloadFiles replaces the rule file patterns (as a re-read
// configuration file does); a bad new list keeps the previous one.
func TestReloadFiles(t *testing.T) {
	dir := t.TempDir()
	f1, f2, bad := filepath.Join(dir, "a.yml"), filepath.Join(dir, "b.yml"), filepath.Join(dir, "bad.yml")
	writeFile(t, f1, goodRules)
	writeFile(t, f2, strings.ReplaceAll(goodRules, "g1", "g2"))
	writeFile(t, bad, "groups: [{name: x, rules: [{record: r, expr: 'sum('}]}]\n")
	s, err := New(openDB(t), newEngine(), Options{Files: []string{f1}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	// Replacing a group stops the old one, which needs the manager running.
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	if err := s.ReloadFiles([]string{f2}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(groupNames(s), ","); got != f2+":g2" {
		t.Fatalf("after ReloadFiles: groups %s, want %s:g2", got, f2)
	}
	if err := s.ReloadFiles([]string{bad}); err == nil {
		t.Fatal("ReloadFiles accepted a bad rule file")
	}
	// The previous patterns stay: a plain reload loads f2 again.
	if err := s.Reload(); err != nil {
		t.Fatalf("reload after a failed ReloadFiles: %v", err)
	}
	if got := strings.Join(groupNames(s), ","); got != f2+":g2" {
		t.Fatalf("after a failed ReloadFiles: groups %s, want %s:g2", got, f2)
	}
}
