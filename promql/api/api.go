// Package api serves the Prometheus HTTP query API (/api/v1/...) over any
// storage.SampleAndChunkQueryable, by wrapping Prometheus's own web/api/v1
// package the way Cortex and Mimir do: response formats, parameter parsing
// and error codes are exactly Prometheus's. Queries run on the engine given
// to NewHandler (in tandem, the one package engine builds).
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/grafana/regexp"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/route"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/util/features"
	"github.com/prometheus/prometheus/util/httputil"
	v1 "github.com/prometheus/prometheus/web/api/v1"

	"github.com/tandem-tsdb/tandem/promql/engine"
	"github.com/tandem-tsdb/tandem/promql/pushdown"
)

// Remote-read limits of the upstream read handler, which stays reachable at
// /api/v1/read only if the caller does not register its own (Prometheus's
// flag defaults; Options may set the sample limit and the frame size).
const (
	remoteReadSampleLimit      = 50_000_000
	remoteReadConcurrencyLimit = 10
	remoteReadMaxBytesInFrame  = 1 << 20
)

// apiPrefix is the path under which the handler serves the API.
const apiPrefix = "/api/v1"

// defaultCORSOrigin is Prometheus's --web.cors.origin default (any origin);
// the upstream API panics on requests carrying an Origin header if it is nil.
var defaultCORSOrigin = regexp.MustCompile("^(?:.*)$")

// MetadataSource serves metric metadata for /api/v1/metadata.
type MetadataSource interface {
	// MetricMetadata returns metadata per metric name; metric "" means all; limit<=0 and limitPerMetric<=0 mean unlimited.
	MetricMetadata(metric string, limit, limitPerMetric int) map[string][]MetricMetadata
}

// MetricMetadata is one metadata entry as served by the API.
type MetricMetadata struct {
	// Type is the metric type: counter, gauge, histogram, gaugehistogram, summary, info, stateset or unknown.
	Type string `json:"type"`
	// Help is the metric's HELP text.
	Help string `json:"help"`
	// Unit is the metric's unit, often empty.
	Unit string `json:"unit"`
}

// StatsSource reports head statistics for /api/v1/status/tsdb (Prometheus's own tsdb.Stats type from github.com/prometheus/prometheus/tsdb).
type StatsSource interface {
	// Stats returns head statistics with the top limit entries per cardinality list, series counted by statsByLabelName.
	Stats(statsByLabelName string, limit int) (*tsdb.Stats, error)
}

// Options configures NewHandler; zero values get defaults.
type Options struct {
	// Queryable is the storage queries run against (required by NewHandler).
	Queryable storage.SampleAndChunkQueryable
	// Metadata serves /api/v1/metadata; nil answers an empty object.
	Metadata MetadataSource
	// Stats serves /api/v1/status/tsdb; nil answers empty statistics.
	Stats StatsSource
	// Ready gates the API; nil means always ready, false answers 503 like Prometheus's readyFunc.
	Ready func() bool
	// Logger receives engine and API logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives engine and HTTP metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Gatherer backs /api/v1/status/self_metrics and the head chunk count; nil is an empty gatherer.
	Gatherer prometheus.Gatherer
	// Engine configures the PromQL engine (see EngineOptions); the API
	// reports its settings in /api/v1/status/flags and /api/v1/features and
	// applies its LookbackDelta and QueryTimeout itself too.
	Engine engine.Options
	// RemoteReadSampleLimit bounds the samples of one query of a SAMPLES
	// remote-read response (default 50e6, like --storage.remote.read-sample-limit).
	RemoteReadSampleLimit int
	// RemoteReadMaxBytesInFrame bounds a frame of a streamed remote-read
	// response (default 1 MiB, like --storage.remote.read-max-bytes-in-frame).
	RemoteReadMaxBytesInFrame int
	// Version is reported by /api/v1/status/buildinfo.
	Version string
	// Revision is reported by /api/v1/status/buildinfo.
	Revision string
	// Branch is reported by /api/v1/status/buildinfo.
	Branch string
	// BuildDate is reported by /api/v1/status/buildinfo.
	BuildDate string
	// StartTime returns the oldest timestamp (ms) in storage, like
	// storage.Storage.StartTime; it fills headStats.minTime of
	// /api/v1/status/tsdb when Stats is nil. May be nil.
	StartTime func() (int64, error)
	// Blocks lists the storage's blocks for /api/v1/status/tsdb/blocks; may be nil.
	Blocks func() ([]tsdb.BlockMeta, error)
	// Exemplars serves /api/v1/query_exemplars; nil answers empty lists.
	Exemplars storage.ExemplarQueryable
	// Admin, when set, enables /api/v1/admin/tsdb/* (like --web.enable-admin-api).
	Admin Admin
	// DataDir is where snapshots are written (<DataDir>/snapshots/<name>).
	DataDir string
	// Rules serves /api/v1/rules and /api/v1/alerts; nil answers like a Prometheus without rule files.
	Rules v1.RulesRetriever
	// Alertmanagers serves /api/v1/alertmanagers; nil answers empty lists.
	Alertmanagers v1.AlertmanagerRetriever
	// RegisterFeatures, when set, adds entries (e.g. the rule manager's) to /api/v1/features.
	RegisterFeatures func(features.Collector)
	// LastReload, when set, reports the last rule reload's success and time in /api/v1/status/runtimeinfo.
	LastReload func() (ok bool, loaded time.Time)
	// Flags are extra entries for /api/v1/status/flags (e.g. the rule and Alertmanager flags).
	Flags map[string]string
	// SkipOpenAPI builds no OpenAPI document (/api/v1/openapi.yaml lists no
	// paths), for handlers next to one that serves it: building it costs
	// about 40 MB of allocations and 100 ms.
	SkipOpenAPI bool
	// CORSOrigin is the fully anchored regexp of the origins allowed to read
	// the API from a browser (Prometheus's --web.cors.origin); nil allows any.
	CORSOrigin *regexp.Regexp
}

// Admin is the storage's administration interface behind /api/v1/admin/tsdb.
type Admin interface {
	// Snapshot writes a consistent copy of the storage into dir.
	Snapshot(dir string, withHead bool) error
	// Delete removes the series matching ms in [mint, maxt].
	Delete(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) error
	// CleanTombstones rewrites data to drop deleted series for good.
	CleanTombstones() error
}

// EngineOptions returns the options of the engine o describes, for
// engine.New: o.Engine, logging and registering metrics where the API does
// unless it says otherwise.
func (o Options) EngineOptions() engine.Options {
	e := o.Engine
	if e.Logger == nil {
		e.Logger = o.Logger
	}
	if e.Registerer == nil {
		e.Registerer = o.Registerer
	}
	return e
}

// withDefaults returns a copy of o with zero fields defaulted, the engine's
// as engine.Options.WithDefaults defaults them.
func (o Options) withDefaults() Options {
	o.Engine = o.EngineOptions().WithDefaults()
	if o.Logger == nil {
		o.Logger = o.Engine.Logger
	}
	if o.Gatherer == nil {
		o.Gatherer = prometheus.Gatherers{}
	}
	if o.RemoteReadSampleLimit <= 0 {
		o.RemoteReadSampleLimit = remoteReadSampleLimit
	}
	if o.RemoteReadMaxBytesInFrame <= 0 {
		o.RemoteReadMaxBytesInFrame = remoteReadMaxBytesInFrame
	}
	if o.CORSOrigin == nil {
		o.CORSOrigin = defaultCORSOrigin
	}
	return o
}

// NewHandler returns an http.Handler serving the Prometheus HTTP API under /api/v1/ (it must be mountable as mux.Handle("/api/v1/", h)).
//
// The handler expects full request paths (/api/v1/query, ...). Remote write
// and OTLP ingestion are disabled here (they answer 404): tandem serves them
// itself, so the caller must register /api/v1/write (and /api/v1/read, if it
// serves remote read itself; otherwise Prometheus's read handler over
// opts.Queryable answers) on the same mux with a more specific pattern, e.g.
//
//	mux.Handle("POST /api/v1/write", writeHandler)
//	mux.Handle("POST /api/v1/read", readHandler)
//	mux.Handle("/api/v1/", apiHandler)
//
// Admin endpoints are disabled (500, errorType "unavailable", "admin APIs
// disabled", exactly like Prometheus without --web.enable-admin-api). Scrape, alertmanager, rule and
// notification endpoints answer empty, valid data unless opts.Rules and
// opts.Alertmanagers are set.
func NewHandler(opts Options, eng promql.QueryEngine) (http.Handler, error) {
	if opts.Queryable == nil {
		return nil, errors.New("promql API: nil Queryable")
	}
	if eng == nil {
		return nil, errors.New("promql API: nil engine")
	}
	opts = opts.withDefaults()
	logger := opts.Logger.With("component", "api")

	duration, err := newRequestDuration(opts.Registerer)
	if err != nil {
		return nil, err
	}

	featureRegistry := features.NewRegistry()
	engine.RegisterFeatures(featureRegistry, opts.EngineOptions())
	for name, enabled := range map[string]bool{
		"admin": opts.Admin != nil, "lifecycle": false, "remote_write_receiver": false,
		"otlp_write_receiver": false, "query_cost": false, "search": false,
	} {
		featureRegistry.Set(features.API, name, enabled)
	}

	if opts.RegisterFeatures != nil {
		opts.RegisterFeatures(featureRegistry)
	}
	var exemplars storage.ExemplarQueryable = noExemplars{}
	if opts.Exemplars != nil {
		exemplars = opts.Exemplars
	}
	var rulesRetriever v1.RulesRetriever = noRules{}
	if opts.Rules != nil {
		rulesRetriever = opts.Rules
	}
	var amRetriever v1.AlertmanagerRetriever = noAlertmanagers{}
	if opts.Alertmanagers != nil {
		amRetriever = opts.Alertmanagers
	}

	ready := readyFunc(opts.Ready)
	stats := adminStats{stats: opts.Stats, startTime: opts.StartTime, blocks: opts.Blocks, admin: opts.Admin}
	defaultConfig := config.DefaultConfig
	birth := time.Now()
	flags := map[string]string{
		"query.lookback-delta":  opts.Engine.LookbackDelta.String(),
		"query.timeout":         opts.Engine.QueryTimeout.String(),
		"query.max-samples":     strconv.Itoa(opts.Engine.MaxSamples),
		"query.max-concurrency": strconv.Itoa(opts.Engine.MaxConcurrentQueries),
		"query.pushdown":        strconv.FormatBool(!opts.Engine.DisablePushdown),
		"web.enable-admin-api":  strconv.FormatBool(opts.Admin != nil),
	}
	for k, v := range opts.Flags {
		flags[k] = v
	}

	api := v1.NewAPI(
		eng,
		opts.Queryable,
		nil, // no appender: remote write and OTLP are served by tandem itself
		exemplars,
		func(context.Context) v1.ScrapePoolsRetriever { return noTargets{} },
		func(context.Context) v1.TargetRetriever { return noTargets{} },
		func(context.Context) v1.AlertmanagerRetriever { return amRetriever },
		func() config.Config { return defaultConfig },
		flags,
		v1.GlobalURLOptions{},
		ready,
		stats,
		opts.DataDir, // snapshots go to <DataDir>/snapshots/<name>
		opts.Admin != nil,
		false, // enableSearch
		0,     // maxSearchLimit
		logger,
		func(context.Context) v1.RulesRetriever { return rulesRetriever },
		opts.RemoteReadSampleLimit,
		remoteReadConcurrencyLimit,
		opts.RemoteReadMaxBytesInFrame,
		false, // isAgent
		opts.CORSOrigin,
		runtimeInfoFunc(birth, opts.LastReload),
		&v1.PrometheusVersion{
			Version:   opts.Version,
			Revision:  opts.Revision,
			Branch:    opts.Branch,
			BuildDate: opts.BuildDate,
			GoVersion: runtime.Version(),
		},
		noNotifications,
		noNotificationsSub,
		opts.Gatherer,
		// The registerer is only used for the remote read/write handlers'
		// metrics; passing nil avoids clashing with tandem's own read
		// handler registered on the same registry.
		nil,
		nil,   // statsRenderer: Prometheus's default
		false, // rwEnabled
		remoteapi.MessageTypes{},
		false, false, false, // otlpEnabled, otlpDeltaToCumulative, otlpNativeDeltaIngestion
		opts.Engine.LookbackDelta,
		false, // enableTypeAndUnitLabels
		false, // appendMetadata
		nil,   // overrideErrorCode
		featureRegistry,
		openAPIOptions(opts),
		engine.NewParser(opts.Engine),
		false, // enableQueryCost
		opts.Engine.QueryTimeout,
	)

	api.ClearCodecs()
	api.InstallCodec(jsonCodec{})

	instrument := func(name string, h http.HandlerFunc) http.HandlerFunc {
		return promhttp.InstrumentHandlerDuration(
			duration.MustCurryWith(prometheus.Labels{"handler": apiPrefix + name}), h)
	}
	router := route.New().WithInstrumentation(instrument).WithPrefix(apiPrefix)
	api.Register(router)

	mux := http.NewServeMux()
	mux.Handle(apiPrefix+"/", compressResponses(statsQueries(router)))
	// Upstream's metadata handler reads scrape targets; tandem reads its own store.
	mux.Handle("GET "+apiPrefix+"/metadata", instrument("/metadata",
		ready(compress(opts.CORSOrigin, metadataHandler(opts.Metadata, logger)))))
	// Upstream's TSDB status reads the chunk count from a Prometheus-only
	// metric and turns its absence into int64(NaN).
	mux.Handle("GET "+apiPrefix+"/status/tsdb", instrument("/status/tsdb",
		ready(compress(opts.CORSOrigin, tsdbStatusHandler(stats, opts.Gatherer, logger)))))
	notServed := func(what string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, what+" is not served by the query API; register tandem's ingest handler on a more specific pattern", http.StatusNotFound)
		}
	}
	mux.Handle(apiPrefix+"/write", notServed("remote write"))
	mux.Handle(apiPrefix+"/otlp/", notServed("OTLP ingestion"))
	return mux, nil
}

// openAPIOptions are the options of the handler's OpenAPI document.
func openAPIOptions(o Options) v1.OpenAPIOptions {
	opts := v1.OpenAPIOptions{Version: o.Version}
	if o.SkipOpenAPI {
		opts.IncludePaths = []string{"/\x00none"} // a prefix no path has
	}
	return opts
}

// statsQueries leaves queries that ask for statistics (stats=...) to
// Prometheus's engine alone: the sample counts it reports are those of its
// own evaluation.
func statsQueries(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case apiPrefix + "/query", apiPrefix + "/query_range":
			if r.FormValue("stats") != "" {
				r = r.WithContext(pushdown.Disable(r.Context()))
			}
		}
		h.ServeHTTP(w, r)
	})
}

// newRequestDuration returns the API request duration histogram, registered on
// reg (or reusing the one already registered there).
func newRequestDuration(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:                            "tandem_api_request_duration_seconds",
		Help:                            "Duration of Prometheus HTTP API requests served by tandem.",
		Buckets:                         prometheus.DefBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"handler", "code"})
	if reg == nil {
		return h, nil
	}
	if err := reg.Register(h); err != nil {
		are := &prometheus.AlreadyRegisteredError{}
		if !errors.As(err, are) {
			return nil, fmt.Errorf("register API request duration metric: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.HistogramVec)
		if !ok {
			return nil, fmt.Errorf("register API request duration metric: conflicting collector: %w", err)
		}
		return existing, nil
	}
	return h, nil
}

// readyFunc returns the API's readiness gate: like Prometheus's
// web.Handler.testReady it answers 503 "Service Unavailable" while not ready.
func readyFunc(isReady func() bool) func(http.HandlerFunc) http.HandlerFunc {
	return func(f http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if isReady != nil && !isReady() {
				w.Header().Set("X-Prometheus-Stopping", "false")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = fmt.Fprint(w, "Service Unavailable")
				return
			}
			f(w, r)
		}
	}
}

// compress applies Prometheus's CORS headers (for the origins matching
// origin) and response compression to h, as the upstream API does for its
// own endpoints.
func compress(origin *regexp.Regexp, h http.HandlerFunc) http.HandlerFunc {
	c := compressResponses(h)
	return func(w http.ResponseWriter, r *http.Request) {
		httputil.SetCORS(w, origin, r)
		w.Header().Add("Vary", "Accept-Encoding")
		c.ServeHTTP(w, r)
	}
}
