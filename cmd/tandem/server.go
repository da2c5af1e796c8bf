package main

import (
	"net/http"
	"time"
)

// Defaults of the HTTP server timeouts (--web.*-timeout).
const (
	defaultReadHeaderTimeout = 30 * time.Second
	// defaultReadTimeout bounds how long a slow sender holds a remote-write
	// request slot; Prometheus gives a whole request 30 s (remote_timeout).
	defaultReadTimeout = time.Minute
	// defaultIdleTimeout matches the keep-alive of Prometheus's HTTP client.
	defaultIdleTimeout = 5 * time.Minute
)

// serverTimeouts are the HTTP server's timeouts.
type serverTimeouts struct {
	readHeader, read, idle time.Duration
}

// newHTTPServer returns the HTTP server of the API, remote write and
// /metrics. It sets no WriteTimeout: queries share the server and may take
// --query.timeout, remote-read responses stream and /debug/pprof profiles
// take their duration; a write deadline would cut them off.
func newHTTPServer(h http.Handler, t serverTimeouts) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.readHeader,
		ReadTimeout:       t.read,
		IdleTimeout:       t.idle,
	}
}
