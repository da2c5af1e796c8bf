package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tandem-tsdb/tandem/limits"
	"github.com/tandem-tsdb/tandem/promql/api"
	"github.com/tandem-tsdb/tandem/promql/engine"
	"github.com/tandem-tsdb/tandem/tenant"
)

// The read side of tenancy: a request's API, federated reads and the
// engines of the tenants' sample limits.

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

// emptyStorage is a queryable without data.
type emptyStorage struct{}

func (emptyStorage) Querier(int64, int64) (storage.Querier, error) { return storage.NoopQuerier(), nil }

func (emptyStorage) ChunkQuerier(int64, int64) (storage.ChunkQuerier, error) {
	return storage.NoopChunkedQuerier(), nil
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
