package main

import (
	"net/http"
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
