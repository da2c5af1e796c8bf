package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tandem-tsdb/tandem/limits"
	"github.com/tandem-tsdb/tandem/promql/api"
	"github.com/tandem-tsdb/tandem/promql/engine"
	"github.com/tandem-tsdb/tandem/remote"
	"github.com/tandem-tsdb/tandem/rules"
	"github.com/tandem-tsdb/tandem/tenant"
	"github.com/tandem-tsdb/tandem/tsdb"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// tenantStore is one tenant's storage, its metrics and the API over it.
type tenantStore struct {
	id   string
	db   *tsdb.DB
	reg  *prometheus.Registry // the storage's and the API's metrics; gathered with tenant="<id>"
	rate limits.Bucket
	gate limits.Gate        // the tenant's queries at once (max_query_concurrency)
	stop context.CancelFunc // ends db.Run
	done chan struct{}      // closed when db.Run has returned

	rules   *rules.Service               // the tenant's rules (tenants other than the default, with --rules.tenant-dir)
	newAPI  func() (http.Handler, error) // builds the API over the storage
	apiOnce sync.Once
	api     http.Handler
	apiErr  error
}

// close stops the tenant's maintenance and closes its storage.
func (t *tenantStore) close() error {
	t.stop()
	<-t.done
	return t.db.Close()
}

// tenants routes requests to their tenant's storage and applies each
// tenant's limits to it.
type tenants struct {
	resolver  tenant.Resolver
	overrides *limits.Overrides
	reg       *tenant.Registry[*tenantStore]
	// empty serves reads of tenants that never wrote: an API over no data,
	// so that reads do not create tenants.
	empty   http.Handler
	engines engineSet
	// retention is --storage.retention.time, for tenants whose limits set none.
	retention time.Duration
	// newFederated builds the API over several tenants (--tenant.federation).
	newFederated func(ids []string) (http.Handler, error)
	fedMu        sync.Mutex
	fed          map[string]http.Handler // by the tenants joined with |
}

// applyLimits sets t's limits, from the overrides in effect.
func (ts *tenants) applyLimits(t *tenantStore) {
	l := ts.overrides.For(t.id)
	t.rate.Set(l.IngestionRate, l.Burst(), time.Now())
	t.gate.Set(l.MaxQueryConcurrency)
	rt := time.Duration(l.RetentionTime)
	if rt == 0 {
		rt = ts.retention
	}
	t.db.SetRetentionTime(rt)
	t.db.SetSeriesLimits(head.SeriesLimits{
		MaxSeries: l.MaxSeries, MaxSeriesPerMetric: l.MaxSeriesPerMetric, MaxSeriesPerGroup: l.MaxSeriesPerGroup,
		MaxGroups: l.MaxGroups, MaxMetadata: l.MaxMetadata,
	})
	t.db.SetMaxExemplars(l.MaxExemplars)
}

// reapplyLimits applies every open tenant's limits again (after a reload).
func (ts *tenants) reapplyLimits() {
	ts.reg.Each(func(_ string, t *tenantStore) { ts.applyLimits(t) })
}

// WriteTenant implements remote.Tenants: it opens the tenant's storage on
// its first write.
func (ts *tenants) WriteTenant(r *http.Request) (remote.WriteTenant, error) {
	id, err := ts.resolver.Single(r)
	if err != nil {
		return remote.WriteTenant{}, err
	}
	if err := tenant.Validate(id); err != nil {
		return remote.WriteTenant{}, err
	}
	l := ts.overrides.For(id)
	wt := remote.WriteTenant{
		ID:                 id,
		MaxLabelsPerSeries: l.MaxLabelsPerSeries, MaxLabelNameLength: l.MaxLabelNameLength, MaxLabelValueLength: l.MaxLabelValueLength,
		IngestionRate: l.IngestionRate, IngestionBurst: l.Burst(),
	}
	t, ok := ts.reg.Get(id)
	if !ok && l.IngestionRate > 0 { // its rate bucket belongs to its storage
		var err error
		if t, err = ts.reg.Open(id); err != nil {
			return remote.WriteTenant{}, err
		}
		ok = true
	}
	if !ok {
		// A new tenant's storage is created when its first request has
		// decoded and holds something to store, not for any request
		// naming it.
		wt.App = newTenantAppender{ts, id}
		return wt, nil
	}
	wt.App, wt.Rate = t.db, &t.rate
	return wt, nil
}

// newTenantAppender opens its tenant's storage on its first append.
type newTenantAppender struct {
	ts *tenants
	id string
}

// AppendBatch implements remote.Appender.
func (a newTenantAppender) AppendBatch(ctx context.Context, b *head.Batch) (head.AppendResult, error) {
	t, err := a.ts.reg.Open(a.id)
	if err != nil {
		return head.AppendResult{}, err
	}
	return t.db.AppendBatch(ctx, b)
}

// Gather implements prometheus.Gatherer: every open tenant's metrics,
// labelled with its tenant, but for the default tenant's: those keep the
// names and labels they had before tenancy, so that a single-tenant setup
// sees no change.
func (ts *tenants) Gather() ([]*dto.MetricFamily, error) {
	byName := map[string]*dto.MetricFamily{}
	var errs []error
	ts.reg.Each(func(id string, t *tenantStore) {
		mfs, err := t.reg.Gather()
		if err != nil {
			errs = append(errs, err)
		}
		for _, mf := range mfs {
			out := byName[mf.GetName()]
			if out == nil {
				out = &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type, Unit: mf.Unit}
				byName[mf.GetName()] = out
			}
			for _, m := range mf.Metric {
				if id != ts.resolver.Default {
					m.Label = withLabel(m.Label, "tenant", id)
				}
				out.Metric = append(out.Metric, m)
			}
		}
	})
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, mf := range byName {
		out = append(out, mf)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, errors.Join(errs...)
}

// withLabel returns ls (sorted by name) with name=value inserted in order.
func withLabel(ls []*dto.LabelPair, name, value string) []*dto.LabelPair {
	i, _ := slices.BinarySearchFunc(ls, name, func(l *dto.LabelPair, n string) int { return strings.Compare(l.GetName(), n) })
	return slices.Insert(ls, i, &dto.LabelPair{Name: &name, Value: &value})
}

// openTenants opens the default tenant's storage and every tenant's found
// on disk, with the API over each and, for the default tenant, the rule
// service (handed to setRules). reg gets the server-wide metrics and
// gathers the tenants' (labelled tenant="<id>").
func openTenants(c *config, hopts head.Options, logger *slog.Logger, reg *prometheus.Registry, extURL *url.URL, setRules func(*rules.Service)) (*tenants, error) {
	overrides, err := limits.NewOverrides(c.tenancy.defaults, c.tenancy.limitsFile, logger, reg)
	if err != nil {
		return nil, err
	}
	ts := &tenants{
		resolver:  tenant.Resolver{Header: c.tenancy.header, Default: c.tenancy.defaultID, Federation: c.tenancy.federation},
		overrides: overrides,
		retention: c.retentionTime,
	}
	base := api.Options{
		Logger: logger, Registerer: reg, Gatherer: reg,
		Engine: engine.Options{
			LookbackDelta: c.lookback, QueryTimeout: c.queryTimeout, MaxSamples: c.maxSamples,
			DisablePushdown: !c.pushdown, MaxConcurrentQueries: c.maxQueries,
			UseStartTimestamps: c.useST, ExperimentalFunctions: c.experimentalFns,
		},
		Version: version, Revision: revision, Branch: branch, BuildDate: buildDate,
	}
	// Engines for tenants with their own max_samples_per_query share the
	// concurrency bound of the server's engine.
	base.Engine.QueryTracker = engine.NewConcurrencyLimiter(base.EngineOptions().WithDefaults().MaxConcurrentQueries)
	eng := engine.New(base.EngineOptions())
	ts.engines = engineSet{opts: base.EngineOptions(), def: eng, maxSamples: c.maxSamples}
	emptyOpts := base
	emptyOpts.Queryable, emptyOpts.Registerer = emptyStorage{}, nil
	emptyOpts.Flags = rulesFlags(c, extURL)
	securityAPIOptions(&emptyOpts, &c.security)
	if ts.empty, err = api.NewHandler(emptyOpts, eng); err != nil {
		return nil, fmt.Errorf("create API: %w", err)
	}

	ts.newFederated = func(ids []string) (http.Handler, error) {
		fo := emptyOpts
		fo.Queryable = tenant.Federate(func() []tenant.Member { return ts.members(ids) })
		fo.Metadata = federatedMetadata{ts, ids}
		fo.SkipOpenAPI = true
		return api.NewHandler(fo, eng)
	}
	open := func(id, dir string) (*tenantStore, error) {
		t := &tenantStore{id: id, reg: prometheus.NewRegistry(), done: make(chan struct{})}
		tlog := logger
		if id != c.tenancy.defaultID {
			tlog = logger.With("tenant", id)
		}
		o := hopts
		o.Logger, o.Registerer = tlog, t.reg
		// Replay fills the exemplar ring up to the tenant's limit, not the default's.
		o.MaxExemplars = overrides.For(id).MaxExemplars
		db, err := tsdb.OpenDB(dir, tsdb.DBOptions{
			Head: o, RetentionTime: c.retentionTime, RetentionSize: c.retentionSize,
			SealInterval: c.maintInterval, FlushInterval: 4 * c.maintInterval,
		})
		if err != nil {
			return nil, fmt.Errorf("open storage at %s: %w", dir, err)
		}
		t.db = db
		ao := base
		ao.Queryable = limits.Queryable(db, func() limits.Limits { return overrides.For(id) })
		ao.Metadata, ao.Stats, ao.Ready = storageMetadata{db}, db, db.Ready
		ao.Registerer, ao.Gatherer = t.reg, prometheus.Gatherers{t.reg, reg}
		ao.StartTime, ao.Blocks, ao.Exemplars, ao.DataDir = db.StartTime, blockMetas(db), db, dir
		if c.enableAdmin {
			ao.Admin = db
		}
		ao.Flags = rulesFlags(c, extURL)
		ao.SkipOpenAPI = true // ts.empty serves /api/v1/openapi.yaml for all
		if files := tenantRuleFiles(c, id); id == c.tenancy.defaultID || len(files) > 0 {
			ro := rules.Options{
				Files:              files,
				EvaluationInterval: c.evalInterval,
				QueryOffset:        c.ruleQueryOffset,
				OutageTolerance:    c.outageTolerance,
				ForGracePeriod:     c.forGracePeriod,
				ResendDelay:        c.resendDelay,
				MaxConcurrentEvals: c.maxConcurrentEvals,
				ExternalURL:        extURL,
				Alertmanagers:      c.alertmanagers,
				AlertmanagerClient: c.amClient,
				QueueCapacity:      c.amQueueCapacity,
				Logger:             tlog,
				Registerer:         reg,
			}
			if id != c.tenancy.defaultID {
				// A tenant's alerts name it, for a multi-tenant Alertmanager.
				ro.AlertmanagerClient.Headers = map[string]string{tenant.DefaultHeader: id}
				ro.Registerer = t.reg
			}
			svc, err := rules.New(db, eng, ro)
			if err != nil {
				db.Close()
				return nil, fmt.Errorf("rules: %w", err)
			}
			ao.Rules, ao.Alertmanagers = svc, svc
			ao.RegisterFeatures, ao.LastReload = svc.RegisterFeatures, svc.LastReload
			if id == c.tenancy.defaultID {
				setRules(svc) // run and reloaded by runServer
			} else {
				t.rules = svc
			}
		}
		// The API is built on the tenant's first read: building Prometheus's
		// API handler costs ~80 ms and ~25 MB of garbage (its OpenAPI
		// document), which a tenant that only writes never needs.
		securityAPIOptions(&ao, &c.security)
		teng := tenantEngine{ts: ts, id: id}
		t.newAPI = func() (http.Handler, error) { return api.NewHandler(ao, teng) }
		if id == c.tenancy.defaultID {
			if _, err := t.apiHandler(); err != nil { // fail start-up, not the first query
				db.Close()
				return nil, err
			}
		}
		ts.applyLimits(t)
		ctx, cancel := context.WithCancel(context.Background())
		t.stop = cancel
		go func() {
			defer close(t.done)
			if t.rules == nil {
				db.Run(ctx)
				return
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				if err := t.rules.Run(ctx); err != nil {
					tlog.Error("rule evaluation stopped", "err", err)
				}
			})
			db.Run(ctx)
			wg.Wait()
		}()
		if id != c.tenancy.defaultID {
			tlog.Info("opened tenant storage", "dir", dir)
		}
		return t, nil
	}
	ts.reg = tenant.NewRegistry(tenant.Options[*tenantStore]{
		Root: c.storagePath, Default: c.tenancy.defaultID, MaxTenants: c.tenancy.maxTenants,
		Open: open, Close: func(_ string, t *tenantStore) error { return t.close() },
	})
	overrides.OnChange(ts.reapplyLimits)
	if _, err := ts.reg.Open(c.tenancy.defaultID); err != nil {
		return nil, err
	}
	ids, err := ts.reg.OnDisk()
	if err != nil {
		ts.reg.Close()
		return nil, err
	}
	ids = append(ids, tenantsWithRules(c)...)
	for _, id := range ids {
		if _, err := ts.reg.Open(id); err != nil {
			ts.reg.Close()
			return nil, err
		}
	}
	return ts, nil
}
