package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tandem-tsdb/tandem/workload"
)

// dashboardFile is the Grafana dashboard for operating tandem.
const dashboardFile = "../../dashboards/tandem.json"

// grafanaDashboard is the part of Grafana's dashboard JSON model the test reads.
type grafanaDashboard struct {
	UID           string                           `json:"uid"`
	Title         string                           `json:"title"`
	SchemaVersion int                              `json:"schemaVersion"`
	Panels        []grafanaPanel                   `json:"panels"`
	Templating    struct{ List []grafanaVariable } `json:"templating"`
}

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *grafanaDatasource       `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []struct {
		Datasource *grafanaDatasource `json:"datasource"`
		Expr       string             `json:"expr"`
		RefID      string             `json:"refId"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaVariable struct {
	Name       string             `json:"name"`
	Type       string             `json:"type"`
	Query      json.RawMessage    `json:"query"`
	Datasource *grafanaDatasource `json:"datasource"`
	Definition string             `json:"definition"`
}

// grafanaVars are Grafana's variables in expressions, replaced by values the
// PromQL parser accepts.
var grafanaVars = regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range|[a-zA-Z_]+)\}?`)

// expandGrafanaVars makes a dashboard expression plain PromQL.
func expandGrafanaVars(expr string) string {
	return grafanaVars.ReplaceAllStringFunc(expr, func(v string) string {
		switch strings.Trim(v, "${}") {
		case "__rate_interval", "__interval", "__range":
			return "1m"
		}
		return ".*" // label-value variables are used in =~ matchers with All = .*
	})
}

// loadDashboard reads and checks the dashboard's structure and returns its
// PromQL expressions (panels and variable queries), variables expanded.
func loadDashboard(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("%s: uid %q, title %q, schemaVersion %d: want a uid, a title and a current schema (>= 36)", dashboardFile, d.UID, d.Title, d.SchemaVersion)
	}
	var exprs []string
	hasDS := false
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			var q string
			if err := json.Unmarshal(v.Query, &q); err != nil || q != "prometheus" || v.Name != "datasource" {
				t.Errorf("variable %s: a datasource variable named datasource of type prometheus is wanted, got query %s", v.Name, v.Query)
			}
			hasDS = true
		case "query":
			if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				t.Errorf("variable %s does not use ${datasource}", v.Name)
			}
			m := regexp.MustCompile(`^label_values\((.*), *[a-zA-Z_]+\)$`).FindStringSubmatch(v.Definition)
			if m == nil {
				t.Errorf("variable %s: definition %q is not label_values(selector, label)", v.Name, v.Definition)
				continue
			}
			exprs = append(exprs, expandGrafanaVars(m[1]))
		}
	}
	if !hasDS {
		t.Errorf("%s has no Prometheus datasource variable", dashboardFile)
	}
	ids := map[int]string{}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if prev, ok := ids[p.ID]; ok || p.ID == 0 {
				t.Errorf("panel %q: id %d is missing or used by %q too", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no queries", p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.RefID == "" {
					t.Errorf("panel %q: query %q with refId %q", p.Title, tg.Expr, tg.RefID)
				}
				exprs = append(exprs, expandGrafanaVars(tg.Expr))
			}
		}
	}
	walk(d.Panels)
	return exprs
}

// metricNames returns the metric names an expression selects.
func metricNames(t *testing.T, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("dashboard query %q does not parse: %v", expr, err)
		return nil
	}
	var names []string
	for _, sel := range parser.ExtractSelectors(e) {
		found := false
		for _, m := range sel {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				names, found = append(names, m.Value), true
			}
		}
		if !found {
			t.Errorf("dashboard query %q has a selector without a metric name", expr)
		}
	}
	return names
}

// exportedNames returns the metric names of the samples on tandem's /metrics.
func exportedNames(t *testing.T, p *tandemProc) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for series := range scrapeMetrics(t, p) {
		if i := strings.IndexByte(series, '{'); i >= 0 {
			series = series[:i]
		}
		out[series] = true
	}
	return out
}

// TestDashboard checks dashboards/tandem.json: its structure, that every
// query parses with Prometheus's parser and runs on tandem, and that every
// metric it uses is exported by a tandem running rules (with an
// Alertmanager configured) and taking remote writes, rejections and queries.
func TestDashboard(t *testing.T) {
	exprs := loadDashboard(t)
	want := map[string][]string{}
	for _, e := range exprs {
		for _, n := range metricNames(t, e) {
			want[n] = append(want[n], e)
		}
	}
	if len(want) < 40 {
		t.Errorf("the dashboard uses only %d metrics", len(want))
	}

	rulesFile, err := filepath.Abs(dockerRules)
	if err != nil {
		t.Fatal(err)
	}
	p := startTandem(t, t.TempDir(), "--rules.file="+rulesFile, "--rules.evaluation-interval=1s",
		fmt.Sprintf("--alertmanager.url=http://127.0.0.1:%d", freePort(t)), "--alertmanager.timeout=100ms")
	scrapes, err := workload.Generate(workload.Options{Targets: 2, Scrapes: 5, Start: time.Now().Add(-time.Minute), Seed: 3, Histogram: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []int{1, 2} {
		if _, err := workload.Send(ctx, p.url+"/api/v1/write", v, scrapes, 1, 500); err != nil {
			t.Fatal(err)
		}
	}
	// A sample too far in the future (rejected) and a native histogram (stored).
	future := time.Now().Add(time.Hour).UnixMilli()
	lbls := []prompb.Label{{Name: "__name__", Value: "dash_probe"}, {Name: "instance", Value: "a"}, {Name: "job", Value: "dash"}}
	if code := postV1(t, p, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: lbls, Samples: []prompb.Sample{{Value: 1, Timestamp: future}}}}}); code != http.StatusBadRequest {
		t.Errorf("future sample: HTTP %d, want 400", code)
	}
	nh := prompb.Histogram{Count: &prompb.Histogram_CountInt{CountInt: 1}, Sum: 1, Schema: 0, ZeroThreshold: 1e-128,
		ZeroCount: &prompb.Histogram_ZeroCountInt{ZeroCountInt: 1}, Timestamp: time.Now().UnixMilli()}
	postV1(t, p, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: lbls, Histograms: []prompb.Histogram{nh}}}})

	// Every dashboard query runs on tandem.
	for _, e := range exprs {
		resp, err := http.PostForm(p.url+"/api/v1/query", url.Values{"query": {e}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("dashboard query %q: HTTP %d: %s", e, resp.StatusCode, body)
		}
	}

	// Rule evaluations and notification attempts happen within a few seconds.
	var missing []string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		have := exportedNames(t, p)
		missing = missing[:0]
		for n := range want {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	sort.Strings(missing)
	for _, n := range missing {
		t.Errorf("the dashboard uses %s, which tandem does not export (in %q)", n, slices.Compact(want[n]))
	}
}
