package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	dto "github.com/prometheus/client_model/go"

	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// groupsStatus is the data of /api/v1/status/groups.
type groupsStatus struct {
	head.GroupStats
	// Tenant is the tenant the answer is about.
	Tenant string `json:"tenant"`
	// Limits are the tenant's limits in effect, by key (0 = none).
	Limits map[string]string `json:"limits"`
	// Usage is how close the tenant is to its series limits.
	Usage *head.LimitUsage `json:"usage,omitempty"`
}

// storageHandlers holds the tenants and the write handler, which become
// available once the storages are open (WAL replayed).
type storageHandlers struct {
	mu     sync.RWMutex
	ts     *tenants
	writeH http.Handler
}

func (a *storageHandlers) set(ts *tenants, write http.Handler) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ts, a.writeH = ts, write
}

func (a *storageHandlers) get() (*tenants, http.Handler) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.ts, a.writeH
}

func (a *storageHandlers) ready() bool {
	ts, _ := a.get()
	return ts != nil
}

// writable returns why writes are refused, nil while they are accepted:
// the default tenant's WAL stands for the disk all tenants share.
func (a *storageHandlers) writable() error {
	ts, _ := a.get()
	if ts == nil {
		return nil
	}
	if t, ok := ts.reg.Get(ts.resolver.Default); ok {
		return t.db.Writable()
	}
	return nil
}

// gatherTenants gathers the open tenants' metrics (none before start-up ends).
func (a *storageHandlers) gatherTenants() ([]*dto.MetricFamily, error) {
	ts, _ := a.get()
	if ts == nil {
		return nil, nil
	}
	return ts.Gather()
}

// reloadTenants reads the limits overrides file and the rule files of the
// tenants other than the default again.
func (a *storageHandlers) reloadTenants() error {
	ts, _ := a.get()
	if ts == nil {
		return nil
	}
	return errors.Join(ts.overrides.Reload(), ts.reloadRules())
}

func notReady(w http.ResponseWriter) {
	http.Error(w, "tandem is not ready: replaying the WAL.", http.StatusServiceUnavailable)
}

// serveAPI serves the request's tenant's Prometheus HTTP API.
func (a *storageHandlers) serveAPI(w http.ResponseWriter, r *http.Request) {
	ts, _ := a.get()
	if ts == nil {
		notReady(w)
		return
	}
	ts.serveAPI(w, r)
}

// serveWrite serves remote write.
func (a *storageHandlers) serveWrite(w http.ResponseWriter, r *http.Request) {
	_, wh := a.get()
	if wh == nil {
		notReady(w)
		return
	}
	wh.ServeHTTP(w, r)
}

// groupsHandler serves /api/v1/status/groups: the tenant's cardinality view
// by group (members, aligned and unaligned, head chunks) and its limits,
// in the API envelope.
func (a *storageHandlers) groupsHandler(w http.ResponseWriter, r *http.Request) {
	ts, _ := a.get()
	if ts == nil {
		writeAPIError(w, http.StatusServiceUnavailable, "unavailable", "tandem is not ready: replaying the WAL")
		return
	}
	limit := 10
	if s := r.FormValue("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > 10000 {
			writeAPIError(w, http.StatusBadRequest, "bad_data", "limit must be a number from 1 to 10000")
			return
		}
		limit = n
	}
	t, err := ts.readTenant(w, r)
	if err != nil {
		return
	}
	id, _ := ts.resolver.Single(r) // readTenant accepted it
	data := groupsStatus{Tenant: id, Limits: ts.overrides.For(id).Map()}
	if t != nil {
		data.GroupStats = t.db.GroupStats(limit)
		u := t.db.LimitUsage()
		data.Usage = &u
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}

// deleteTenantHandler serves POST /api/v1/admin/tenant/delete: it deletes
// the storage of the tenant the request names (X-Scope-OrgID), all its data,
// when the admin API is enabled. A later write of the tenant starts it anew.
func (a *storageHandlers) deleteTenantHandler(enabled bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !enabled: // as Prometheus answers its admin API without --web.enable-admin-api
			writeAPIError(w, http.StatusInternalServerError, "unavailable", "admin APIs disabled")
			return
		case r.Method != http.MethodPost && r.Method != http.MethodPut:
			w.Header().Set("Allow", "POST, PUT")
			writeAPIError(w, http.StatusMethodNotAllowed, "bad_data", "method "+r.Method+" not allowed")
			return
		}
		ts, _ := a.get()
		if ts == nil {
			writeAPIError(w, http.StatusServiceUnavailable, "unavailable", "tandem is not ready: replaying the WAL")
			return
		}
		id, err := ts.resolver.Single(r)
		if err == nil && id == ts.resolver.Default {
			err = errors.New("the default tenant's data is the data directory itself and cannot be deleted; name a tenant in " + ts.resolver.Header)
		}
		if err != nil {
			writeAPIError(w, http.StatusBadRequest, "bad_data", err.Error())
			return
		}
		if err := ts.reg.Delete(id); err != nil {
			writeAPIError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
