package api

// Contract tests for Grafana's Prometheus data source.
//
// Each file in testdata/grafana/ describes, as JSON, the requests Grafana's
// Prometheus data source (Grafana 10, 11 and 12; httpMethod POST,
// prometheusType Prometheus, prometheusVersion 3.x) sends for one user-facing
// scenario: Save & test, the metric browser, template variables, a dashboard
// panel with exemplars, Explore, ... Every request is replayed against
//
//   - "prometheus": Prometheus's own web/api/v1 over Prometheus's own TSDB
//     (with exemplar storage, scrape-target metadata and the engine options of
//     cmd/prometheus), mounted the way Prometheus's web.Handler mounts it;
//   - "tandem-head": tandem's API (engine.New + NewHandler, wired as in
//     cmd/tandem) over a tandem tsdb.DB holding the same data in its head;
//   - "tandem-blocks": the same after tsdb.DB.Flush(true), so that every
//     sample is read back from blocks;
//   - "tandem-mixed": 30-minute block ranges with the oldest range flushed
//     (Flush(false)) and the rest in the head, so that queries merge both,
//
// all served by httptest servers on 127.0.0.1, and the JSON answer of each
// tandem variant is compared with Prometheus's: HTTP status, Content-Type,
// status, errorType, error, data, warnings and infos. Only the query timings
// (data.stats.timings) and the build information's version strings are
// ignored. Arrays are compared in order, except where Prometheus itself does
// not define one: a fixture lists those paths under "unordered" (instant
// vectors, /series, metadata entries), and warnings and infos, which
// Prometheus renders from a map, are always compared as sets.
//
// A difference that cannot be fixed is listed, per tandem variant, under
// "knownDifferences" with the exact diff paths and the reason; the test fails
// when such a list no longer matches, so it stays honest in both directions.
//
// Times in fixtures are written relative to the start T of the data set, as
// ${T+600} (Unix seconds) or ${T+600|rfc3339}; the data spans [T, T+3600],
// with T on a 2-hour boundary, and ends 5 to 125 minutes before the test
// starts, so that tandem accepts it (it refuses samples from the future) and
// Grafana's usual "last hour" and "last 6 hours" ranges are realistic.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/route"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/scrape"
	promtsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/util/features"
	"github.com/prometheus/prometheus/util/teststorage"
	v1 "github.com/prometheus/prometheus/web/api/v1"

	"github.com/tandem-tsdb/tandem/promql/engine"
	tandemtsdb "github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// API flags shared by both sides (Prometheus's defaults).
const (
	gcLookbackDelta  = 5 * time.Minute
	gcQueryTimeout   = 2 * time.Minute
	gcMaxSamples     = 50_000_000
	gcMaxConcurrency = 20
	gcEvalInterval   = time.Minute // global evaluation_interval: step of `[30m:]` subqueries
)

// Data set shape: a scrape every 15s over an hour.
const (
	gcScrapeInterval = 15 * time.Second
	gcScrapes        = 241 // T .. T+3600s inclusive
)

// ---------------------------------------------------------------------------
// Data set

// gcSample is one scraped value of a series, with its exemplars.
type gcSample struct {
	series    int // index into gcDataset.series
	v         float64
	exemplars []exemplar.Exemplar
}

// gcScrape is everything scraped at one timestamp, in series order.
type gcScrape struct {
	t       int64 // ms
	samples []gcSample
}

// gcTargetMeta is the metadata one target exposes (what Prometheus's scrape
// cache holds and what a remote-write sender forwards to tandem).
type gcTargetMeta struct {
	job, instance string
	metadata      []scrape.MetricMetadata
	// gone: the target left service discovery (at T+30m), so Prometheus no
	// longer lists it, nor its metadata, when the fixtures run.
	gone bool
}

type gcDataset struct {
	t0      int64 // ms, minute-aligned
	series  []labels.Labels
	scrapes []gcScrape
	targets []gcTargetMeta
}

// gcNewDataset builds the data set both storages are loaded with:
//
//   - job="api", two instances: up, process_resident_memory_bytes,
//     go_goroutines, http_requests_total{method,code} (api-1 restarts at
//     T+37m30s: a counter reset; api-0's code="500" series ends at T+40m
//     with a staleness marker), and the classic histogram
//     http_request_duration_seconds (le buckets, _sum, _count) with
//     exemplars (trace_id) on the le="0.25" and le="1" buckets;
//   - job="db": down from T+20m to T+25m (up=0, the other series marked
//     stale and then absent, as Prometheus writes a failed target), memory, a
//     go_goroutines whose HELP differs from api's, and
//     pg_stat_database_xact_commit_total{datname};
//   - job="batch": a target that goes away at T+30m: every series ends with
//     a staleness marker at T+30m15s, and the target (with its metadata) is
//     no longer among Prometheus's active targets;
//   - job="otel": OpenTelemetry-style UTF-8 names: the metric
//     "http.server.active_requests" and the label names "http.method" and
//     "http.route".
func gcNewDataset(t0 int64) *gcDataset {
	ds := &gcDataset{t0: t0}
	type target struct{ job, instance string }
	targets := []target{
		{"api", "api-0:8080"}, {"api", "api-1:8080"},
		{"batch", "batch-0:9091"},
		{"db", "db-0:9187"},
		{"otel", "otel-0:4317"},
	}
	meta := func(family string, typ model.MetricType, help, unit string) scrape.MetricMetadata {
		return scrape.MetricMetadata{MetricFamily: family, Type: typ, Help: help, Unit: unit}
	}
	common := []scrape.MetricMetadata{
		meta("process_resident_memory_bytes", model.MetricTypeGauge, "Resident memory size in bytes.", "bytes"),
	}
	for _, tg := range targets {
		md := slices.Clone(common)
		switch tg.job {
		case "api":
			md = append(md,
				meta("go_goroutines", model.MetricTypeGauge, "Number of goroutines that currently exist.", ""),
				meta("http_requests_total", model.MetricTypeCounter, "Total number of HTTP requests by method and status code.", ""),
				meta("http_request_duration_seconds", model.MetricTypeHistogram, "HTTP request latency.", "seconds"))
		case "db":
			md = append(md,
				meta("go_goroutines", model.MetricTypeGauge, "Number of goroutines.", ""),
				meta("pg_stat_database_xact_commit_total", model.MetricTypeCounter, "Number of transactions in this database that have been committed.", ""))
		case "batch":
			md = append(md,
				meta("batch_jobs_processed_total", model.MetricTypeCounter, "Jobs processed.", ""),
				meta("batch_last_success_timestamp_seconds", model.MetricTypeGauge, "Last successful run.", "seconds"))
		case "otel":
			md = append(md,
				meta("http.server.active_requests", model.MetricTypeGauge, "Number of active HTTP server requests.", "{request}"))
		}
		ds.targets = append(ds.targets, gcTargetMeta{job: tg.job, instance: tg.instance, metadata: md, gone: tg.job == "batch"})
	}

	// Collect samples per series first, then sort the series by labels so
	// that both storages create them in the same order.
	type point struct {
		t   int64
		v   float64
		exs []exemplar.Exemplar
	}
	points := map[string][]point{}
	lsets := map[string]labels.Labels{}
	add := func(lset labels.Labels, t int64, v float64, exs ...exemplar.Exemplar) {
		k := lset.String()
		lsets[k] = lset
		points[k] = append(points[k], point{t, v, exs})
	}
	stale := math.Float64frombits(value.StaleNaN)
	buckets := []struct {
		le  string
		cum float64 // cumulative observations per scrape
	}{{"0.05", 2}, {"0.1", 5}, {"0.25", 7}, {"0.5", 8}, {"1", 9}, {"+Inf", 10}}

	for i := 0; i < gcScrapes; i++ {
		ts := t0 + int64(i)*gcScrapeInterval.Milliseconds()
		for ti, tg := range targets {
			base := []string{"job", tg.job, "instance", tg.instance}
			l := func(name string, kv ...string) labels.Labels {
				return labels.FromStrings(append(append([]string{"__name__", name}, base...), kv...)...)
			}
			if tg.job == "batch" && i > 120 {
				if i == 121 { // the target is gone: Prometheus writes staleness markers
					for _, name := range []string{"up", "process_resident_memory_bytes", "batch_jobs_processed_total", "batch_last_success_timestamp_seconds"} {
						add(l(name), ts, stale)
					}
				}
				continue
			}
			if tg.job == "db" && i >= 80 && i < 100 {
				// The target is down: Prometheus writes up=0 and, at the
				// first failed scrape, staleness markers for the rest.
				add(l("up"), ts, 0)
				if i == 80 {
					for _, lset := range []labels.Labels{
						l("process_resident_memory_bytes"), l("go_goroutines"),
						l("pg_stat_database_xact_commit_total", "datname", "app"),
						l("pg_stat_database_xact_commit_total", "datname", "postgres"),
					} {
						add(lset, ts, stale)
					}
				}
				continue
			}
			add(l("up"), ts, 1)
			add(l("process_resident_memory_bytes"), ts, float64(40<<20+ti<<20+(i%20)*4096))
			switch tg.job {
			case "api":
				add(l("go_goroutines"), ts, float64(30+ti*3+i%7))
				n := float64(i)
				if tg.instance == "api-1:8080" && i >= 150 { // restart: counters reset
					n = float64(i - 150)
				}
				add(l("http_requests_total", "method", "GET", "code", "200"), ts, n*float64(5+ti))
				add(l("http_requests_total", "method", "POST", "code", "200"), ts, n*2)
				switch {
				case tg.instance == "api-0:8080" && i == 161:
					add(l("http_requests_total", "method", "GET", "code", "500"), ts, stale)
				case tg.instance == "api-0:8080" && i > 161:
				default:
					add(l("http_requests_total", "method", "GET", "code", "500"), ts, math.Floor(n/7))
				}
				for _, b := range buckets {
					var exs []exemplar.Exemplar
					if (b.le == "0.25" && i%4 == 0) || (b.le == "1" && i%10 == 5) {
						exs = append(exs, exemplar.Exemplar{
							Labels: labels.FromStrings("trace_id", fmt.Sprintf("%s-%04d-%s", tg.instance[:5], i, b.le)),
							Value:  map[string]float64{"0.25": 0.2, "1": 0.75}[b.le] + float64(i%5)/1000,
							Ts:     ts - 2000,
							HasTs:  true,
						})
					}
					add(l("http_request_duration_seconds_bucket", "le", b.le), ts, n*b.cum+float64(i%3), exs...)
				}
				add(l("http_request_duration_seconds_sum"), ts, n*10*0.2+float64(i%3)*0.05)
				add(l("http_request_duration_seconds_count"), ts, n*10+float64(i%3))
			case "db":
				add(l("go_goroutines"), ts, float64(12+i%3))
				add(l("pg_stat_database_xact_commit_total", "datname", "app"), ts, float64(i*40))
				add(l("pg_stat_database_xact_commit_total", "datname", "postgres"), ts, float64(i))
			case "batch":
				add(l("batch_jobs_processed_total"), ts, float64(i/4))
				add(l("batch_last_success_timestamp_seconds"), ts, float64((ts/1000)-(ts/1000)%300))
			case "otel":
				for _, m := range []string{"GET", "POST"} {
					add(l("http.server.active_requests", "http.method", m, "http.route", "/api/v1/orders"), ts, float64(i%9+len(m)))
				}
			}
		}
	}

	keys := make([]string, 0, len(lsets))
	for k := range lsets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return labels.Compare(lsets[keys[i]], lsets[keys[j]]) < 0 })
	byT := map[int64]*gcScrape{}
	for si, k := range keys {
		ds.series = append(ds.series, lsets[k])
		for _, p := range points[k] {
			sc := byT[p.t]
			if sc == nil {
				sc = &gcScrape{t: p.t}
				byT[p.t] = sc
			}
			sc.samples = append(sc.samples, gcSample{series: si, v: p.v, exemplars: p.exs})
		}
	}
	for _, sc := range byT {
		ds.scrapes = append(ds.scrapes, *sc)
	}
	sort.Slice(ds.scrapes, func(i, j int) bool { return ds.scrapes[i].t < ds.scrapes[j].t })
	return ds
}

// ---------------------------------------------------------------------------
// Prometheus reference

// gcTargets is a v1.TargetRetriever over targets that only carry metadata:
// Prometheus's /api/v1/metadata reads its scrape targets' metadata caches.
type gcTargets struct{ active map[string][]*scrape.Target }

func (g gcTargets) TargetsActive() map[string][]*scrape.Target { return g.active }
func (gcTargets) TargetsDropped() map[string][]*scrape.Target  { return map[string][]*scrape.Target{} }
func (gcTargets) TargetsDroppedCounts() map[string]int         { return map[string]int{} }
func (gcTargets) ScrapePoolConfig(string) (*config.ScrapeConfig, error) {
	return nil, errors.New("scrape pool not found")
}
func (g gcTargets) ScrapePools() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range g.active {
			if !yield(k) {
				return
			}
		}
	})
}

// gcMetadataStore is a scrape.MetricMetadataStore over a fixed list.
type gcMetadataStore []scrape.MetricMetadata

func (s gcMetadataStore) ListMetadata() []scrape.MetricMetadata { return slices.Clone(s) }
func (s gcMetadataStore) GetMetadata(mf string) (scrape.MetricMetadata, bool) {
	for _, m := range s {
		if m.MetricFamily == mf {
			return m, true
		}
	}
	return scrape.MetricMetadata{}, false
}
func (s gcMetadataStore) SizeMetadata() int   { return 0 }
func (s gcMetadataStore) LengthMetadata() int { return len(s) }

// gcPromAdmin adapts Prometheus's TSDB to v1.TSDBAdminStats (as its
// readyStorage does).
type gcPromAdmin struct{ db *promtsdb.DB }

func (a gcPromAdmin) CleanTombstones() error { return a.db.CleanTombstones() }
func (a gcPromAdmin) Delete(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) error {
	return a.db.Delete(ctx, mint, maxt, ms...)
}
func (a gcPromAdmin) Snapshot(dir string, withHead bool) error { return a.db.Snapshot(dir, withHead) }
func (a gcPromAdmin) Stats(name string, limit int) (*promtsdb.Stats, error) {
	return a.db.Head().Stats(name, limit), nil
}
func (gcPromAdmin) WALReplayStatus() (promtsdb.WALReplayStatus, error) {
	return promtsdb.WALReplayStatus{}, nil
}
func (a gcPromAdmin) BlockMetas() ([]promtsdb.BlockMeta, error) {
	var out []promtsdb.BlockMeta
	for _, b := range a.db.Blocks() {
		out = append(out, b.Meta())
	}
	return out, nil
}

// gcPrometheusServer serves Prometheus's API over Prometheus's TSDB loaded with ds.
func gcPrometheusServer(t *testing.T, ds *gcDataset) string {
	t.Helper()
	// Exemplar storage on (1e5 exemplars), no out-of-order window, and
	// Prometheus's default 2h block range (which is also its head chunk
	// range), not teststorage's 24h.
	st := teststorage.New(t, func(o *promtsdb.Options) {
		o.MinBlockDuration = (2 * time.Hour).Milliseconds()
		o.MaxBlockDuration = (2 * time.Hour).Milliseconds()
	})
	st.DisableCompactions()
	for _, sc := range ds.scrapes {
		app := st.Appender(context.Background())
		for _, s := range sc.samples {
			lset := ds.series[s.series]
			ref, err := app.Append(0, lset, sc.t, s.v)
			if err != nil {
				t.Fatalf("prometheus append %s: %v", lset, err)
			}
			for _, e := range s.exemplars {
				if _, err := app.AppendExemplar(ref, lset, e); err != nil {
					t.Fatalf("prometheus append exemplar %s: %v", lset, err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatalf("prometheus commit: %v", err)
		}
	}

	logger := slog.New(slog.DiscardHandler)
	tracker, err := promql.NewActiveQueryTracker(t.TempDir(), gcMaxConcurrency, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tracker.Close() })
	promParser := parser.NewParser(parser.Options{})
	// The engine options of cmd/prometheus with default flags.
	engine := promql.NewEngine(promql.EngineOpts{
		Logger:             logger,
		MaxSamples:         gcMaxSamples,
		Timeout:            gcQueryTimeout,
		ActiveQueryTracker: tracker,
		LookbackDelta:      gcLookbackDelta,
		NoStepSubqueryIntervalFn: func(int64) int64 {
			return gcEvalInterval.Milliseconds()
		},
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		Parser:               promParser,
	})
	ruleManager := rules.NewManager(&rules.ManagerOptions{
		Queryable: st,
		QueryFunc: rules.EngineQueryFunc(engine, st),
		Context:   context.Background(),
		Logger:    logger,
	})

	targets := gcTargets{active: map[string][]*scrape.Target{}}
	for _, tg := range ds.targets {
		if tg.gone {
			continue
		}
		tt := scrape.NewTarget(labels.FromStrings("job", tg.job, "instance", tg.instance), &config.ScrapeConfig{JobName: tg.job}, nil, nil)
		tt.SetMetadataStore(gcMetadataStore(tg.metadata))
		targets.active[tg.job] = append(targets.active[tg.job], tt)
	}
	cfg := config.DefaultConfig
	api := v1.NewAPI(
		engine, st, nil, st,
		func(context.Context) v1.ScrapePoolsRetriever { return targets },
		func(context.Context) v1.TargetRetriever { return targets },
		func(context.Context) v1.AlertmanagerRetriever { return noAlertmanagers{} },
		func() config.Config { return cfg },
		map[string]string{"query.lookback-delta": gcLookbackDelta.String()},
		v1.GlobalURLOptions{ListenAddress: "127.0.0.1:9090", Host: "127.0.0.1:9090", Scheme: "http"},
		func(f http.HandlerFunc) http.HandlerFunc { return f },
		gcPromAdmin{st.DB}, t.TempDir(),
		false, false, 0, logger,
		func(context.Context) v1.RulesRetriever { return ruleManager },
		remoteReadSampleLimit, remoteReadConcurrencyLimit, remoteReadMaxBytesInFrame,
		false, defaultCORSOrigin,
		func() (v1.RuntimeInfo, error) { return v1.RuntimeInfo{}, nil },
		&v1.PrometheusVersion{Version: "3.7.0", Revision: "reference", Branch: "HEAD", BuildUser: "test", BuildDate: "20260101-00:00:00", GoVersion: "go1"},
		noNotifications, noNotificationsSub,
		prometheus.NewRegistry(), nil, nil,
		false, nil, false, false, false,
		gcLookbackDelta, false, false, nil,
		features.NewRegistry(), v1.OpenAPIOptions{}, promParser, false, gcQueryTimeout,
	)
	// Mounted as web.Handler mounts it.
	av1 := route.New()
	api.Register(av1)
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", http.StripPrefix("/api/v1", av1))
	return gcServe(t, mux)
}

// ---------------------------------------------------------------------------
// tandem

// gcTandemMetadata adapts the DB's metadata to the API (cmd/tandem's headMetadata).
type gcTandemMetadata struct{ db *tandemtsdb.DB }

func (m gcTandemMetadata) MetricMetadata(metric string, limit, perMetric int) map[string][]MetricMetadata {
	out := map[string][]MetricMetadata{}
	for name, list := range m.db.MetricMetadata(metric, limit, perMetric) {
		for _, md := range list {
			out[name] = append(out[name], MetricMetadata{Type: md.Type, Help: md.Help, Unit: md.Unit})
		}
	}
	return out
}

// gcVariantNames are the tandem variants every request is replayed against.
var gcVariantNames = []string{"tandem-head", "tandem-blocks", "tandem-mixed"}

// gcLayout is where a tandem variant keeps the data when it is queried.
type gcLayout int

const (
	gcInHead   gcLayout = iota // everything in the head
	gcInBlocks                 // everything flushed to blocks (Flush(true))
	gcMixed                    // 30m block ranges, the oldest flushed (Flush(false)), the rest in the head
)

// gcTandemServer serves tandem's API, wired as cmd/tandem wires it, over a
// tandem DB loaded with ds (one remote-write-like batch per scrape, metadata
// with the first), laid out as layout says.
func gcTandemServer(t *testing.T, ds *gcDataset, layout gcLayout) string {
	t.Helper()
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	hopts := head.DefaultOptions()
	hopts.Registerer = reg
	if layout == gcMixed {
		hopts.BlockRange = 30 * time.Minute
	}
	db, err := tandemtsdb.OpenDB(dir, tandemtsdb.DBOptions{Head: hopts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for i, sc := range ds.scrapes {
		var b head.Batch
		if i == 0 {
			for _, tg := range ds.targets {
				for _, m := range tg.metadata {
					b.Metadata = append(b.Metadata, head.Metadata{Metric: m.MetricFamily, Type: string(m.Type), Help: m.Help, Unit: m.Unit})
				}
			}
		}
		for _, s := range sc.samples {
			bs := head.BatchSeries{Labels: ds.series[s.series], Samples: []head.Sample{{T: sc.t, V: s.v}}}
			for _, e := range s.exemplars {
				bs.Exemplars = append(bs.Exemplars, head.Exemplar{Labels: e.Labels, T: e.Ts, V: e.Value})
			}
			b.Series = append(b.Series, bs)
		}
		res, err := db.AppendBatch(context.Background(), &b)
		if err == nil {
			err = res.Err()
		}
		if err != nil {
			t.Fatalf("tandem append at %d: %v", sc.t, err)
		}
	}
	if layout != gcInHead {
		if err := db.Flush(layout == gcInBlocks); err != nil {
			t.Fatalf("flush: %v", err)
		}
		if len(db.Blocks()) == 0 {
			t.Fatal("flush wrote no block")
		}
		// With T on a block boundary: mixed flushes [T, T+30m) only.
		if st, _ := db.Stats("", 0); layout == gcMixed && st.MinTime != ds.t0+30*time.Minute.Milliseconds() {
			t.Fatalf("mixed layout: the head starts at T%+ds, want T+1800s", (st.MinTime-ds.t0)/1000)
		}
	}
	opts := Options{
		Queryable: db, Metadata: gcTandemMetadata{db}, Stats: db, Ready: db.Ready,
		Registerer: reg, Gatherer: reg,
		Engine: engine.Options{
			LookbackDelta: gcLookbackDelta, QueryTimeout: gcQueryTimeout, MaxSamples: gcMaxSamples,
			MaxConcurrentQueries: gcMaxConcurrency,
		},
		Version: "0.1.0", Revision: "test", Branch: "main", BuildDate: "20260101-00:00:00",
		StartTime: db.StartTime,
		Exemplars: db,
		DataDir:   dir,
	}
	h, err := NewHandler(opts, newEngine(opts))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", h)
	return gcServe(t, mux)
}

func gcServe(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server not on 127.0.0.1: %s", srv.URL)
	}
	return srv.URL
}

// ---------------------------------------------------------------------------
// Fixtures

// gcFixture is one scenario: the requests Grafana sends for it, in order.
type gcFixture struct {
	// Scenario names what the user does in Grafana.
	Scenario string `json:"scenario"`
	// Grafana tells which Grafana code sends the requests, and how.
	Grafana  string      `json:"grafana"`
	Requests []gcRequest `json:"requests"`
}

type gcRequest struct {
	Name    string `json:"name"`
	Comment string `json:"comment,omitempty"`
	Method  string `json:"method"`
	// Path is the request path, e.g. /api/v1/label/job/values.
	Path string `json:"path"`
	// Params go in the URL for GET and in an
	// application/x-www-form-urlencoded body for POST, as Grafana sends them.
	Params map[string][]string `json:"params,omitempty"`
	// URLParams go in the URL whatever the method: Grafana's "custom query
	// parameters" setting (e.g. stats=all) is added to the URL of POSTs too.
	URLParams map[string][]string `json:"urlParams,omitempty"`
	// Expect is what Prometheus answers (checked on the reference, so that a
	// fixture keeps testing what it claims to).
	Expect gcExpect `json:"expect"`
	// Unordered lists JSON paths ("data", "data.result", "data.*") of arrays
	// whose order Prometheus does not define; "*" matches any key or index.
	Unordered []string `json:"unordered,omitempty"`
	// KnownDifferences maps a tandem variant ("tandem-head", "tandem-blocks",
	// "tandem-mixed", or "all" for every variant without its own entry) to
	// the diff paths it is known to show, with the reason.
	KnownDifferences map[string]gcKnown `json:"knownDifferences,omitempty"`
}

type gcExpect struct {
	Code      int    `json:"code"`
	ErrorType string `json:"errorType,omitempty"`
	// Empty allows a successful answer with empty data (otherwise the
	// fixture would test nothing).
	Empty bool `json:"empty,omitempty"`
	// Warnings requires the reference to answer with warnings (e.g. the
	// limit truncation warning); Infos likewise for info annotations.
	Warnings bool `json:"warnings,omitempty"`
	Infos    bool `json:"infos,omitempty"`
}

type gcKnown struct {
	Paths []string `json:"paths"`
	Why   string   `json:"why"`
}

var gcTimeRef = regexp.MustCompile(`\$\{T([+-][0-9]+(?:\.[0-9]+)?)?(?:\|(rfc3339))?\}`)

// gcExpand replaces ${T+offset} by the data start plus offset seconds.
func gcExpand(s string, t0 int64) string {
	return gcTimeRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := gcTimeRef.FindStringSubmatch(m)
		off := 0.0
		if sub[1] != "" {
			off, _ = strconv.ParseFloat(sub[1], 64)
		}
		sec := float64(t0)/1000 + off
		if sub[2] == "rfc3339" {
			ns := int64(math.Round(sec * 1e9))
			return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
		}
		return strconv.FormatFloat(sec, 'f', -1, 64)
	})
}

func gcLoadFixtures(t *testing.T) map[string]gcFixture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "grafana", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/grafana: %v", err)
	}
	out := map[string]gcFixture{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var fx gcFixture
		if err := dec.Decode(&fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		names := map[string]bool{}
		for _, r := range fx.Requests {
			if r.Name == "" || names[r.Name] {
				t.Fatalf("%s: request name %q empty or repeated", f, r.Name)
			}
			names[r.Name] = true
			if r.Method != http.MethodGet && r.Method != http.MethodPost {
				t.Fatalf("%s: %s: method %q", f, r.Name, r.Method)
			}
			if r.Expect.Code == 0 {
				t.Fatalf("%s: %s: no expected code", f, r.Name)
			}
			for v, k := range r.KnownDifferences {
				if !slices.Contains(gcVariantNames, v) && v != "all" {
					t.Fatalf("%s: %s: unknown variant %q", f, r.Name, v)
				}
				if len(k.Paths) == 0 || k.Why == "" {
					t.Fatalf("%s: %s: known difference without paths or reason", f, r.Name)
				}
			}
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = fx
	}
	return out
}

// ---------------------------------------------------------------------------
// Requests and comparison

type gcResponse struct {
	code        int
	contentType string
	body        []byte
}

func gcDo(t *testing.T, base string, r gcRequest, t0 int64) gcResponse {
	t.Helper()
	vals := url.Values{}
	for k, vs := range r.Params {
		for _, v := range vs {
			vals.Add(k, gcExpand(v, t0))
		}
	}
	inURL := url.Values{}
	for k, vs := range r.URLParams {
		for _, v := range vs {
			inURL.Add(k, gcExpand(v, t0))
		}
	}
	var body io.Reader
	if r.Method == http.MethodGet {
		for k, vs := range vals {
			inURL[k] = append(inURL[k], vs...)
		}
	} else {
		body = strings.NewReader(vals.Encode())
	}
	u := base + r.Path
	if len(inURL) > 0 {
		u += "?" + inURL.Encode()
	}
	req, err := http.NewRequest(r.Method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.Method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return gcResponse{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}
}

// gcDecode parses a JSON body keeping numbers as written; nil if not JSON.
func gcDecode(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// gcBuildInfoVersionFields are the build information values that differ by
// construction between tandem and Prometheus.
var gcBuildInfoVersionFields = []string{"version", "revision", "branch", "buildUser", "buildDate", "goVersion"}

// gcNormalize drops what the comparison ignores and sorts the arrays whose
// order is not defined.
func gcNormalize(v any, r gcRequest) any {
	top, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if data, ok := top["data"].(map[string]any); ok {
		if st, ok := data["stats"].(map[string]any); ok {
			delete(st, "timings")
		}
		if r.Path == "/api/v1/status/buildinfo" {
			for _, f := range gcBuildInfoVersionFields {
				if _, ok := data[f]; ok {
					data[f] = "<ignored>"
				}
			}
		}
	}
	// Prometheus renders annotations from a map: their order is random.
	for _, p := range append([]string{"warnings", "infos"}, r.Unordered...) {
		gcSortAt(v, strings.Split(p, "."))
	}
	return v
}

func gcSortAt(v any, path []string) {
	if len(path) == 0 {
		if a, ok := v.([]any); ok {
			sort.SliceStable(a, func(i, j int) bool { return gcCanon(a[i]) < gcCanon(a[j]) })
		}
		return
	}
	switch x := v.(type) {
	case map[string]any:
		if path[0] == "*" {
			for _, c := range x {
				gcSortAt(c, path[1:])
			}
		} else if c, ok := x[path[0]]; ok {
			gcSortAt(c, path[1:])
		}
	case []any:
		if path[0] == "*" {
			for _, c := range x {
				gcSortAt(c, path[1:])
			}
		}
	}
}

func gcCanon(v any) string {
	b, _ := json.Marshal(v) // map keys come out sorted
	return string(b)
}

type gcDiffEntry struct{ path, detail string }

// gcDiff lists where got (tandem) differs from want (Prometheus).
func gcDiff(got, want any, path string, out *[]gcDiffEntry) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, gcDiffEntry{path, fmt.Sprintf("tandem %s, prometheus %s", gcShort(got), gcShort(want))})
			return
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			gv, gok := g[k]
			wv, wok := w[k]
			switch {
			case !gok:
				*out = append(*out, gcDiffEntry{p, "missing in tandem; prometheus " + gcShort(wv)})
			case !wok:
				*out = append(*out, gcDiffEntry{p, "missing in prometheus; tandem " + gcShort(gv)})
			default:
				gcDiff(gv, wv, p, out)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			*out = append(*out, gcDiffEntry{path, fmt.Sprintf("tandem %s, prometheus %s", gcShort(got), gcShort(want))})
			return
		}
		if len(g) != len(w) {
			*out = append(*out, gcDiffEntry{path, fmt.Sprintf("tandem has %d elements, prometheus %d: tandem %s, prometheus %s", len(g), len(w), gcShort(g), gcShort(w))})
			return
		}
		for i := range w {
			gcDiff(g[i], w[i], fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		if gcCanon(got) != gcCanon(want) {
			*out = append(*out, gcDiffEntry{path, fmt.Sprintf("tandem %s, prometheus %s", gcShort(got), gcShort(want))})
		}
	}
}

func gcShort(v any) string {
	s := gcCanon(v)
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// gcCompare diffs a tandem answer with Prometheus's.
func gcCompare(got, want gcResponse, r gcRequest) []gcDiffEntry {
	var out []gcDiffEntry
	if got.code != want.code {
		out = append(out, gcDiffEntry{"<http status>", fmt.Sprintf("tandem %d, prometheus %d", got.code, want.code)})
	}
	if got.contentType != want.contentType {
		out = append(out, gcDiffEntry{"<content-type>", fmt.Sprintf("tandem %q, prometheus %q", got.contentType, want.contentType)})
	}
	gv, gok := gcDecode(got.body)
	wv, wok := gcDecode(want.body)
	if !gok || !wok {
		if gok != wok || !bytes.Equal(got.body, want.body) {
			out = append(out, gcDiffEntry{"<body>", fmt.Sprintf("tandem %q, prometheus %q", got.body, want.body)})
		}
		return out
	}
	gcDiff(gcNormalize(gv, r), gcNormalize(wv, r), "", &out)
	return out
}

// gcCheckReference verifies that Prometheus answers what the fixture expects.
func gcCheckReference(t *testing.T, r gcRequest, resp gcResponse) {
	t.Helper()
	var env struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Data      json.RawMessage `json:"data"`
		Warnings  []string        `json:"warnings"`
		Infos     []string        `json:"infos"`
	}
	if err := json.Unmarshal(resp.body, &env); err != nil {
		t.Fatalf("prometheus answered %d with a non-JSON body %q", resp.code, resp.body)
	}
	if resp.code != r.Expect.Code || env.ErrorType != r.Expect.ErrorType {
		t.Fatalf("prometheus answered %d %q (%s), fixture expects %d %q", resp.code, env.ErrorType, resp.body, r.Expect.Code, r.Expect.ErrorType)
	}
	if r.Expect.Warnings != (len(env.Warnings) > 0) || r.Expect.Infos != (len(env.Infos) > 0) {
		t.Fatalf("prometheus warnings %q infos %q; fixture expects warnings %v infos %v", env.Warnings, env.Infos, r.Expect.Warnings, r.Expect.Infos)
	}
	if env.Status != "success" {
		return
	}
	d := strings.TrimSpace(string(env.Data))
	empty := d == "[]" || d == "{}" || d == "null" || strings.Contains(d, `"result":[]`)
	if empty != r.Expect.Empty {
		t.Fatalf("prometheus data %s: empty=%v, fixture expects empty=%v", gcShort(json.RawMessage(env.Data)), empty, r.Expect.Empty)
	}
}

// TestGrafanaContract replays the Grafana fixtures against Prometheus and tandem.
func TestGrafanaContract(t *testing.T) {
	// T is aligned to 2h, Prometheus's and tandem's block range, so that
	// chunk and block boundaries fall at the same place in the data on every
	// run; the data then ends between 5 minutes and 2 hours 5 minutes ago.
	t0 := time.Now().Add(-65 * time.Minute).UnixMilli()
	t0 -= t0 % (2 * time.Hour).Milliseconds()
	ds := gcNewDataset(t0)
	fixtures := gcLoadFixtures(t)

	prom := gcPrometheusServer(t, ds)
	variants := []struct{ name, base string }{
		{gcVariantNames[0], gcTandemServer(t, ds, gcInHead)},
		{gcVariantNames[1], gcTandemServer(t, ds, gcInBlocks)},
		{gcVariantNames[2], gcTandemServer(t, ds, gcMixed)},
	}

	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range fixtures {
			if !yield(k) {
				return
			}
		}
	}) {
		fx := fixtures[name]
		t.Run(name, func(t *testing.T) {
			for _, r := range fx.Requests {
				t.Run(r.Name, func(t *testing.T) {
					want := gcDo(t, prom, r, t0)
					gcCheckReference(t, r, want)
					for _, v := range variants {
						got := gcDo(t, v.base, r, t0)
						diffs := gcCompare(got, want, r)
						var paths []string
						for _, d := range diffs {
							paths = append(paths, d.path)
						}
						slices.Sort(paths)
						paths = slices.Compact(paths)
						known, isKnown := r.KnownDifferences[v.name]
						if !isKnown {
							known, isKnown = r.KnownDifferences["all"]
						}
						wantPaths := slices.Sorted(slices.Values(known.Paths))
						if slices.Equal(paths, wantPaths) {
							continue
						}
						var sb strings.Builder
						for _, d := range diffs {
							fmt.Fprintf(&sb, "\n  %s: %s", d.path, d.detail)
						}
						if isKnown {
							t.Errorf("%s: %s %s: known difference %q (%s) changed; differences now:%s", v.name, r.Method, r.Path, known.Paths, known.Why, sb.String())
						} else {
							t.Errorf("%s: %s %s differs from Prometheus:%s", v.name, r.Method, r.Path, sb.String())
						}
					}
				})
			}
		})
	}
}

// TestGrafanaContractComparison checks the comparison itself: what it ignores
// and what it must report.
func TestGrafanaContractComparison(t *testing.T) {
	resp := func(code int, body string) gcResponse {
		return gcResponse{code: code, contentType: "application/json", body: []byte(body)}
	}
	query := gcRequest{Path: "/api/v1/query", Unordered: []string{"data.result"}}
	cases := []struct {
		name      string
		r         gcRequest
		got, want gcResponse
		paths     []string
	}{
		{"timings ignored", query,
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[],"stats":{"timings":{"evalTotalTime":1},"samples":{"totalQueryableSamples":3}}}}`),
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[],"stats":{"timings":{"evalTotalTime":2},"samples":{"totalQueryableSamples":3}}}}`),
			nil},
		{"sample stats compared", query,
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[],"stats":{"samples":{"totalQueryableSamples":4}}}}`),
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[],"stats":{"samples":{"totalQueryableSamples":3}}}}`),
			[]string{"data.stats.samples.totalQueryableSamples"}},
		{"unordered result", query,
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"2"}},{"metric":{"a":"1"}}]}}`),
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"}},{"metric":{"a":"2"}}]}}`),
			nil},
		{"ordered data", gcRequest{Path: "/api/v1/labels"},
			resp(200, `{"status":"success","data":["b","a"]}`),
			resp(200, `{"status":"success","data":["a","b"]}`),
			[]string{"data[0]", "data[1]"}},
		{"warnings as a set", query,
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[]},"warnings":["x","y"]}`),
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[]},"warnings":["y","x"]}`),
			nil},
		{"missing infos", query,
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[]}}`),
			resp(200, `{"status":"success","data":{"resultType":"vector","result":[]},"infos":["i"]}`),
			[]string{"infos"}},
		{"error envelope", query,
			resp(400, `{"status":"error","errorType":"bad_data","error":"a"}`),
			resp(422, `{"status":"error","errorType":"execution","error":"b"}`),
			[]string{"<http status>", "error", "errorType"}},
		{"build info versions ignored, keys compared", gcRequest{Path: "/api/v1/status/buildinfo"},
			resp(200, `{"status":"success","data":{"version":"0.1","revision":"x","branch":"main","buildDate":"d","goVersion":"go1.26"}}`),
			resp(200, `{"status":"success","data":{"version":"3.7","revision":"y","branch":"HEAD","buildUser":"u","buildDate":"e","goVersion":"go1.25","features":{}}}`),
			[]string{"data.buildUser", "data.features"}},
		{"non-JSON body", gcRequest{Path: "/api/v1/label/x/values"},
			gcResponse{code: 405, body: []byte("Method Not Allowed")},
			gcResponse{code: 405, body: []byte("Method Not Allowed\n")},
			[]string{"<body>"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var paths []string
			for _, d := range gcCompare(c.got, c.want, c.r) {
				paths = append(paths, d.path)
			}
			slices.Sort(paths)
			if !slices.Equal(paths, c.paths) {
				t.Fatalf("diff paths %q, want %q", paths, c.paths)
			}
		})
	}
	if got, want := gcExpand("${T+600}|${T-1.5}|${T}|${T+60|rfc3339}", 1_700_000_000_000), "1700000600|1699999998.5|1700000000|2023-11-14T22:14:20Z"; got != want {
		t.Fatalf("gcExpand = %q, want %q", got, want)
	}
}
