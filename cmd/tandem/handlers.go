package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/tandem-tsdb/tandem/tsdb"
)

// atomicHead holds the handlers that become available once the head is open.
type atomicHead struct {
	mu     sync.RWMutex
	h      *tsdb.DB
	apiH   http.Handler
	writeH http.Handler
}

func (a *atomicHead) set(h *tsdb.DB, api, write http.Handler) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.h, a.apiH, a.writeH = h, api, write
}

func (a *atomicHead) ready() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.h.Ready()
}

// writable returns why writes are refused, nil while they are accepted.
func (a *atomicHead) writable() error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.h.Writable()
}

func (a *atomicHead) api() http.Handler {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.apiH
}

func (a *atomicHead) write() http.Handler {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.writeH
}

// groupsHandler serves /api/v1/status/groups: tandem's cardinality view by
// group (members, aligned and unaligned, head chunks), in the API envelope.
func (a *atomicHead) groupsHandler(w http.ResponseWriter, r *http.Request) {
	a.mu.RLock()
	db := a.h
	a.mu.RUnlock()
	w.Header().Set("Content-Type", "application/json")
	if db == nil || !db.Ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "unavailable", "error": "tandem is not ready: replaying the WAL"})
		return
	}
	limit := 10
	if s := r.FormValue("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > 10000 {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "bad_data", "error": "limit must be a number from 1 to 10000"})
			return
		}
		limit = n
	}
	json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": db.GroupStats(limit)})
}
