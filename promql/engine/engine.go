// Package engine builds tandem's PromQL engine: Prometheus's own engine,
// configured as a default Prometheus 3 configures it, wrapped by the push-down
// evaluator of package pushdown, with a limiter of concurrent queries, the
// shared PromQL parser and the engine's entries of /api/v1/features.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/features"

	"github.com/tandem-tsdb/tandem/promql/pushdown"
)

// Defaults applied by WithDefaults to zero Options fields (Prometheus's flag
// defaults).
const (
	defaultLookbackDelta        = 5 * time.Minute
	defaultQueryTimeout         = 2 * time.Minute
	defaultMaxSamples           = 50_000_000
	defaultMaxConcurrentQueries = 20
)

// Options configures New; zero values get defaults.
type Options struct {
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the engine's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// LookbackDelta is the staleness lookback of instant selectors (default 5m).
	LookbackDelta time.Duration
	// QueryTimeout bounds every query's execution (default 2m).
	QueryTimeout time.Duration
	// MaxSamples bounds the samples a query may hold in memory (default 50e6).
	MaxSamples int
	// MaxConcurrentQueries bounds concurrently executing queries (default 20).
	MaxConcurrentQueries int
	// QueryTracker, when set, bounds concurrent queries instead of
	// MaxConcurrentQueries: engines sharing one share the bound.
	QueryTracker promql.QueryTracker
	// DisablePushdown leaves every query to Prometheus's engine alone
	// (see package pushdown); by default aggregations of selectors and of
	// range functions are evaluated by tandem in one pass on all cores.
	DisablePushdown bool
	// PushdownWorkers is how many goroutines evaluate one pushed-down
	// aggregation (default GOMAXPROCS); the storage must allow iterating
	// the series of one Select concurrently, as tandem's does.
	PushdownWorkers int
	// UseStartTimestamps lets rate, increase, irate and resets use the
	// samples' start timestamps, as Prometheus's
	// --enable-feature=use-start-timestamps does (off by default there too).
	UseStartTimestamps bool
	// ExperimentalFunctions enables the functions Prometheus marks
	// experimental (start_timestamp, ...), as its
	// --enable-feature=promql-experimental-functions does.
	ExperimentalFunctions bool
}

// WithDefaults returns a copy of o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LookbackDelta <= 0 {
		o.LookbackDelta = defaultLookbackDelta
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = defaultQueryTimeout
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = defaultMaxSamples
	}
	if o.MaxConcurrentQueries <= 0 {
		o.MaxConcurrentQueries = defaultMaxConcurrentQueries
	}
	if o.PushdownWorkers <= 0 {
		o.PushdownWorkers = runtime.GOMAXPROCS(0)
	}
	return o
}

// defaultEvaluationInterval is Prometheus's default global evaluation_interval,
// used as the step of subqueries written without one (`[30m:]`).
const defaultEvaluationInterval = time.Minute

// NewParser returns the PromQL parser shared by the engine and the API. It
// uses Prometheus 3's defaults: duration expressions and extended range
// selectors are permanently on there, experimental functions only with
// o.ExperimentalFunctions, while binop fill modifiers and unquoted UTF-8
// names stay behind feature flags that tandem does not enable.
func NewParser(o Options) parser.Parser {
	return parser.NewParser(parser.Options{EnableExperimentalFunctions: o.ExperimentalFunctions})
}

// engineOpts translates opts (already defaulted) into Prometheus engine options,
// mirroring cmd/prometheus/main.go.
func engineOpts(opts Options, reg features.Collector) promql.EngineOpts {
	return promql.EngineOpts{
		Logger:             opts.Logger.With("component", "query engine"),
		Reg:                opts.Registerer,
		MaxSamples:         opts.MaxSamples,
		Timeout:            opts.QueryTimeout,
		ActiveQueryTracker: tracker(opts),
		LookbackDelta:      opts.LookbackDelta,
		NoStepSubqueryIntervalFn: func(int64) int64 {
			return defaultEvaluationInterval.Milliseconds()
		},
		// Always on for regular PromQL since Prometheus v2.33.
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		FeatureRegistry:      reg,
		Parser:               NewParser(opts),
		UseStartTimestamps:   opts.UseStartTimestamps,
	}
}

// New returns the PromQL engine configured from opts: Prometheus 3's default
// engine, with the @ modifier and negative offsets on, duration expressions
// and extended range selectors (always on in the parser), subqueries without
// a step evaluated every 1m, and the functions marked experimental off, as
// without --enable-feature=promql-experimental-functions; queries thus
// behave exactly as on a default Prometheus. The engine registers its
// prometheus_engine_* metrics on opts.Registerer, so it must be created once
// per registry.
//
// Unless opts.DisablePushdown is set, the engine evaluates aggregations of
// selectors and of range functions itself (package pushdown) and hands the
// result to Prometheus's engine for the rest of the query.
func New(opts Options) promql.QueryEngine {
	opts = opts.WithDefaults()
	eo := engineOpts(opts, nil)
	if opts.DisablePushdown {
		return promql.NewEngine(eo)
	}
	e := pushdown.NewEngine(eo, pushdown.Options{Workers: opts.PushdownWorkers})
	if opts.Registerer != nil {
		for outcome, read := range map[string]func() float64{
			"evaluated": func() float64 { n, _ := e.Counts(); return float64(n) },
			"fallback":  func() float64 { _, n := e.Counts(); return float64(n) },
		} {
			opts.Registerer.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "tandem_query_pushdown_total",
				Help:        "Aggregations evaluated by tandem's push-down (evaluated) or, because of their data, by Prometheus's engine (fallback).",
				ConstLabels: prometheus.Labels{"outcome": outcome},
			}, read))
		}
	}
	return e
}

// RegisterFeatures records in reg the features an engine built by New from
// opts offers, for /api/v1/features (the same entries promql.NewEngine sets
// when given a registry).
func RegisterFeatures(reg features.Collector, opts Options) {
	eo := engineOpts(opts.WithDefaults(), nil)
	reg.Set(features.PromQL, "at_modifier", eo.EnableAtModifier)
	reg.Set(features.PromQL, "negative_offset", eo.EnableNegativeOffset)
	reg.Set(features.PromQL, "per_step_stats", eo.EnablePerStepStats)
	reg.Set(features.PromQL, "delayed_name_removal", eo.EnableDelayedNameRemoval)
	reg.Set(features.PromQL, "type_and_unit_labels", eo.EnableTypeAndUnitLabels)
	reg.Enable(features.PromQL, "per_query_lookback_delta")
	reg.Enable(features.PromQL, "subqueries")
	eo.Parser.RegisterFeatures(reg)
}

// tracker is the query tracker of an engine of opts.
func tracker(opts Options) promql.QueryTracker {
	if opts.QueryTracker != nil {
		return opts.QueryTracker
	}
	return NewConcurrencyLimiter(opts.MaxConcurrentQueries)
}

// NewConcurrencyLimiter returns a query tracker that only bounds the queries
// running at once, for engines sharing the bound (Options.QueryTracker).
func NewConcurrencyLimiter(maxConcurrent int) promql.QueryTracker {
	return newConcurrencyLimiter(maxConcurrent)
}

// concurrencyLimiter is a promql.QueryTracker that only bounds the number of
// concurrently executing queries (Prometheus's ActiveQueryTracker also logs
// them to an mmapped file, which tandem does not need).
type concurrencyLimiter struct {
	slots chan struct{}
}

func newConcurrencyLimiter(maxConcurrent int) *concurrencyLimiter {
	return &concurrencyLimiter{slots: make(chan struct{}, maxConcurrent)}
}

// GetMaxConcurrent implements promql.QueryTracker.
func (l *concurrencyLimiter) GetMaxConcurrent() int { return cap(l.slots) }

// Insert implements promql.QueryTracker: it blocks until a slot is free or ctx
// is done, in which case it returns the engine's timeout/cancel error so the
// API maps it to 503/499 rather than 422.
func (l *concurrencyLimiter) Insert(ctx context.Context, _ string) (int, error) {
	// Prefer failing fast on an already expired context, like the engine does.
	if err := ctx.Err(); err != nil {
		return 0, queueError(err)
	}
	select {
	case l.slots <- struct{}{}:
		return 0, nil
	case <-ctx.Done():
		return 0, queueError(ctx.Err())
	}
}

// Delete implements promql.QueryTracker.
func (l *concurrencyLimiter) Delete(int) { <-l.slots }

// Close implements promql.QueryTracker.
func (*concurrencyLimiter) Close() error { return nil }

// queueError converts a context error hit while waiting for a query slot into
// the engine's error types.
func queueError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return promql.ErrQueryTimeout("query queue")
	}
	return promql.ErrQueryCanceled("query queue")
}
