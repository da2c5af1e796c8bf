package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

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
	dir  string
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

// maxFederated bounds the federated APIs kept (each cost ~80 ms to build).
const maxFederated = 64

// federated returns the API over the tenants ids.
func (ts *tenants) federated(ids []string) (http.Handler, error) {
	key := strings.Join(ids, "|")
	ts.fedMu.Lock()
	defer ts.fedMu.Unlock()
	if h, ok := ts.fed[key]; ok {
		return h, nil
	}
	h, err := ts.newFederated(ids)
	if err != nil {
		return nil, fmt.Errorf("create the API of tenants %s: %w", key, err)
	}
	if len(ts.fed) >= maxFederated || ts.fed == nil {
		ts.fed = map[string]http.Handler{}
	}
	ts.fed[key] = h
	return h, nil
}

// members returns the open tenants among ids, each bound by its query limits.
func (ts *tenants) members(ids []string) []tenant.Member {
	var out []tenant.Member
	for _, id := range ids {
		if t, ok := ts.reg.Get(id); ok {
			out = append(out, tenant.Member{ID: id, Q: limits.Queryable(t.db, func() limits.Limits { return ts.overrides.For(id) })})
		}
	}
	return out
}

// federatedMetadata merges the metadata of the open tenants among ids.
type federatedMetadata struct {
	ts  *tenants
	ids []string
}

func (m federatedMetadata) MetricMetadata(metric string, limit, perMetric int) map[string][]api.MetricMetadata {
	out := map[string][]api.MetricMetadata{}
	for _, id := range m.ids {
		t, ok := m.ts.reg.Get(id)
		if !ok {
			continue
		}
		for name, list := range (storageMetadata{t.db}).MetricMetadata(metric, limit, perMetric) {
			for _, md := range list {
				if !slices.Contains(out[name], md) && (perMetric <= 0 || len(out[name]) < perMetric) {
					out[name] = append(out[name], md)
				}
			}
		}
	}
	return out
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

// apiHandler returns t's API, building it on the first call.
func (t *tenantStore) apiHandler() (http.Handler, error) {
	t.apiOnce.Do(func() {
		if t.api, t.apiErr = t.newAPI(); t.apiErr != nil {
			t.apiErr = fmt.Errorf("create the API of tenant %q: %w", t.id, t.apiErr)
		}
	})
	return t.api, t.apiErr
}

// serveAPI serves t's API within its query limits.
func (t *tenantStore) serveAPI(w http.ResponseWriter, r *http.Request) {
	h, err := t.apiHandler()
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	ctx := limits.NewQueryContext(r.Context())
	switch r.URL.Path {
	case "/api/v1/query", "/api/v1/query_range", "/api/v1/read":
		leave, err := t.gate.Enter(ctx)
		if err != nil {
			writeAPIError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
			return
		}
		defer leave()
	}
	h.ServeHTTP(w, r.WithContext(ctx))
}

// tenantRuleFiles are tenant id's rule file patterns: --rules.file for the
// default tenant, and <--rules.tenant-dir>/<id>/*.yml and *.yaml.
func tenantRuleFiles(c *config, id string) []string {
	var files []string
	if id == c.tenancy.defaultID {
		files = append(files, c.ruleFiles...)
	}
	if d := c.tenancy.rulesDir; d != "" {
		files = append(files, filepath.Join(d, id, "*.yml"), filepath.Join(d, id, "*.yaml"))
	}
	return files
}

// tenantsWithRules lists the tenants with a directory in --rules.tenant-dir:
// they are opened at start-up, so that their rules run before they write.
func tenantsWithRules(c *config) []string {
	if c.tenancy.rulesDir == "" {
		return nil
	}
	entries, _ := os.ReadDir(c.tenancy.rulesDir) // a missing directory holds no rules
	var ids []string
	for _, e := range entries {
		if e.IsDir() && tenant.Validate(e.Name()) == nil && e.Name() != c.tenancy.defaultID {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// reloadRules reloads the rule files of the tenants other than the
// default (whose rules runServer reloads).
func (ts *tenants) reloadRules() error {
	var errs []error
	ts.reg.Each(func(_ string, t *tenantStore) {
		if t.rules != nil {
			errs = append(errs, t.rules.Reload())
		}
	})
	return errors.Join(errs...)
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

// readTenant returns the tenant a read names; nil (and no error) for a
// tenant without storage. It answers the request itself when it returns an
// error.
func (ts *tenants) readTenant(w http.ResponseWriter, r *http.Request) (*tenantStore, error) {
	ids, err := ts.resolver.Read(r)
	if err == nil && len(ids) > 1 {
		err = errors.New("this endpoint reads one tenant; only the query API federates tenants")
	}
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "bad_data", err.Error())
		return nil, err
	}
	t, _ := ts.reg.Get(ids[0])
	return t, nil
}

// serveAPI serves the Prometheus HTTP API of the request's tenant, or of
// several tenants federated.
func (ts *tenants) serveAPI(w http.ResponseWriter, r *http.Request) {
	ids, err := ts.resolver.Read(r)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, "bad_data", err.Error())
		return
	}
	if len(ids) > 1 {
		h, err := ts.federated(ids)
		if err != nil {
			writeAPIError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		h.ServeHTTP(w, r.WithContext(limits.NewQueryContext(r.Context())))
		return
	}
	t, _ := ts.reg.Get(ids[0])
	if t == nil || r.URL.Path == "/api/v1/openapi.yaml" {
		ts.empty.ServeHTTP(w, r)
		return
	}
	t.serveAPI(w, r)
}

// writeAPIError answers in the Prometheus API's error envelope.
func writeAPIError(w http.ResponseWriter, status int, errorType, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": errorType, "error": msg})
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

// emptyStorage is a queryable without data.
type emptyStorage struct{}

func (emptyStorage) Querier(int64, int64) (storage.Querier, error) { return storage.NoopQuerier(), nil }

func (emptyStorage) ChunkQuerier(int64, int64) (storage.ChunkQuerier, error) {
	return storage.NoopChunkedQuerier(), nil
}

// tenancyConfig are the tenancy and limits flags.
type tenancyConfig struct {
	header            string
	defaultID         string
	federation        bool
	maxTenants        int
	rulesDir          string
	limitsFile        string
	limitsReload      time.Duration
	rateLimitedStatus int
	defaults          limits.Limits
}

// addTenancyFlags defines the tenancy flags and the limits' defaults on fs.
func addTenancyFlags(fs *flag.FlagSet, c *tenancyConfig) {
	c.defaults = limits.Defaults()
	fs.StringVar(&c.header, "tenant.header", tenant.DefaultHeader, "Request header naming the tenant (the Cortex/Mimir/Thanos convention); requests without it belong to --tenant.default; empty ignores it, so everything is the default tenant's.")
	fs.StringVar(&c.defaultID, "tenant.default", tenant.DefaultID, "Tenant of requests that name none; its data is the data directory itself, the other tenants' are under <storage.path>/tenants/<id>.")
	fs.BoolVar(&c.federation, "tenant.federation", false, "Let queries name several tenants joined by | (tenant-a|tenant-b) and read all of them.")
	fs.IntVar(&c.maxTenants, "tenant.max-tenants", 1000, "Most tenants (each has its own storage); a write of a new tenant beyond it is refused (400); 0 = no limit.")
	fs.StringVar(&c.rulesDir, "rules.tenant-dir", "", "Directory of per-tenant rule files: <dir>/<tenant>/*.yml (and *.yaml) are evaluated over that tenant's data, their alerts sent with X-Scope-OrgID: <tenant>; reloaded with the other rule files. The default tenant's are --rules.file and <dir>/<default tenant>/.")
	fs.StringVar(&c.limitsFile, "limits.file", "", "YAML file of per-tenant limits (overrides: {<tenant>: {max_series: 100000, ...}}) over the --limits.* defaults; read again every --limits.reload-interval, on SIGHUP and on /-/reload.")
	durationVar(fs, &c.limitsReload, "limits.reload-interval", 10*time.Second, "How often --limits.file is read again; 0 reads it only on SIGHUP and /-/reload.")
	fs.IntVar(&c.rateLimitedStatus, "limits.rate-limited-status", http.StatusTooManyRequests, "Status of writes over a tenant's ingestion rate: 429 (Prometheus drops them unless its queue_config sets retry_on_http_429) or 503 (Prometheus retries them).")
	limits.RegisterFlags(fs, &c.defaults)
	// The label limits' names before they were per tenant.
	fs.IntVar(&c.defaults.MaxLabelsPerSeries, "remote-write.max-labels-per-series", c.defaults.MaxLabelsPerSeries, "Deprecated: use --limits.max-labels-per-series.")
	fs.IntVar(&c.defaults.MaxLabelNameLength, "remote-write.max-label-name-length", c.defaults.MaxLabelNameLength, "Deprecated: use --limits.max-label-name-length.")
	fs.IntVar(&c.defaults.MaxLabelValueLength, "remote-write.max-label-value-length", c.defaults.MaxLabelValueLength, "Deprecated: use --limits.max-label-value-length.")
	fs.IntVar(&c.defaults.MaxExemplars, "storage.exemplars.max", c.defaults.MaxExemplars, "Deprecated: use --limits.max-exemplars.")
}

// validate checks the tenancy flags.
func (c *tenancyConfig) validate(check func(name string, err error)) {
	if err := tenant.Validate(c.defaultID); err != nil {
		check("tenant.default", err)
	}
	if c.rateLimitedStatus != http.StatusTooManyRequests && c.rateLimitedStatus != http.StatusServiceUnavailable {
		check("limits.rate-limited-status", fmt.Errorf("want 429 or 503, got %d", c.rateLimitedStatus))
	}
	if c.maxTenants < 0 {
		check("tenant.max-tenants", fmt.Errorf("must not be negative, got %d", c.maxTenants))
	}
	if err := c.defaults.Validate(); err != nil {
		check("limits", err)
	}
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
		t := &tenantStore{id: id, dir: dir, reg: prometheus.NewRegistry(), done: make(chan struct{})}
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

// engineSet holds the PromQL engines of the sample limits in use: the
// server's (--query.max-samples) and one per other max_samples_per_query.
type engineSet struct {
	opts       engine.Options
	def        promql.QueryEngine
	maxSamples int
	mu         sync.Mutex
	by         map[int]promql.QueryEngine
}

// forLimit returns the engine loading at most n samples per query (0: the server's).
func (s *engineSet) forLimit(n int) promql.QueryEngine {
	if n <= 0 || n == s.maxSamples {
		return s.def
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.by[n]; ok {
		return e
	}
	if s.by == nil {
		s.by = map[int]promql.QueryEngine{}
	}
	o := s.opts
	o.MaxSamples, o.Registerer = n, nil // the server's engine has the metrics
	e := engine.New(o)
	s.by[n] = e
	return e
}

// tenantEngine runs each query of a tenant on the engine of its
// max_samples_per_query in effect.
type tenantEngine struct {
	ts *tenants
	id string
}

func (e tenantEngine) engine() promql.QueryEngine {
	return e.ts.engines.forLimit(e.ts.overrides.For(e.id).MaxSamplesPerQuery)
}

// NewInstantQuery implements promql.QueryEngine.
func (e tenantEngine) NewInstantQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, ts time.Time) (promql.Query, error) {
	return e.engine().NewInstantQuery(ctx, q, opts, qs, ts)
}

// NewRangeQuery implements promql.QueryEngine.
func (e tenantEngine) NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, interval time.Duration) (promql.Query, error) {
	return e.engine().NewRangeQuery(ctx, q, opts, qs, start, end, interval)
}
