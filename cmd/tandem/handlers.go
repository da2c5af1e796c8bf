package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/tandem-tsdb/tandem/tsdb"
)

// storageHandlers holds the storage and the handlers that become available
// once it is open (WAL replayed).
type storageHandlers struct {
	mu     sync.RWMutex
	db     *tsdb.DB
	apiH   http.Handler
	writeH http.Handler
}

func (a *storageHandlers) set(db *tsdb.DB, api, write http.Handler) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.db, a.apiH, a.writeH = db, api, write
}

func (a *storageHandlers) ready() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.db.Ready()
}

// writable returns why writes are refused, nil while they are accepted.
func (a *storageHandlers) writable() error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.db.Writable()
}

func (a *storageHandlers) api() http.Handler {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.apiH
}

func (a *storageHandlers) write() http.Handler {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.writeH
}

// groupsHandler serves /api/v1/status/groups: tandem's cardinality view by
// group (members, aligned and unaligned, head chunks), in the API envelope.
func (a *storageHandlers) groupsHandler(w http.ResponseWriter, r *http.Request) {
	a.mu.RLock()
	db := a.db
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
