package main

// The HTTP server's security settings, as Prometheus has them: TLS and basic
// auth from --web.config.file (exporter-toolkit's web package, the file
// format of Prometheus's --web.config.file), the lifecycle endpoints behind
// --web.enable-lifecycle, the profiler behind --web.enable-pprof and the
// CORS origin of --web.cors.origin.

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"

	"github.com/grafana/regexp"
	"github.com/oklog/run"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/prometheus/util/features"

	"github.com/tandem-tsdb/tandem/promql/api"
)

// securityConfig are the flags of the HTTP server's security settings.
type securityConfig struct {
	webConfigFile   string
	enableLifecycle bool
	enablePprof     bool
	corsOrigin      string
	// corsRegexp is corsOrigin compiled (fully anchored) by validateSecurity.
	corsRegexp *regexp.Regexp
}

// addSecurityFlags defines the security flags on fs.
func addSecurityFlags(fs *flag.FlagSet, c *securityConfig) {
	fs.StringVar(&c.webConfigFile, "web.config.file", "", "Prometheus web configuration file enabling TLS (tls_server_config), basic auth (basic_auth_users, bcrypt hashes) and response headers (http_server_config); read again for every connection and request, so changes take effect without a restart. Empty serves plain HTTP to anyone.")
	fs.BoolVar(&c.enableLifecycle, "web.enable-lifecycle", false, "Enable shutdown and reload over HTTP (POST or PUT /-/quit and /-/reload); otherwise they answer 403.")
	fs.BoolVar(&c.enablePprof, "web.enable-pprof", false, "Serve Go's profiler at /debug/pprof/ (profiles and traces run as long as the client asks); otherwise it answers 404.")
	fs.StringVar(&c.corsOrigin, "web.cors.origin", ".*", `Regexp (fully anchored) of the origins allowed to read the API from a browser (CORS), e.g. 'https?://(grafana|dashboards)\.example\.com'.`)
}

// validateSecurity checks the web configuration file (its YAML, users and
// certificates) and compiles the CORS origin; check reports an error against
// the flag it is about.
func validateSecurity(c *securityConfig, check func(name string, err error)) {
	if err := web.Validate(c.webConfigFile); err != nil {
		check("web.config.file", fmt.Errorf("%s: %w", c.webConfigFile, err))
	}
	re, err := regexp.Compile("^(?:" + c.corsOrigin + ")$")
	if err != nil {
		check("web.cors.origin", fmt.Errorf("invalid regexp %q: %w", c.corsOrigin, err))
		return
	}
	c.corsRegexp = re
}

// serveWeb serves srv on ln with TLS and basic auth as --web.config.file
// says (plain HTTP without it) until srv is shut down.
func serveWeb(srv *http.Server, ln net.Listener, c *securityConfig, logger *slog.Logger) error {
	if srv.ErrorLog == nil { // TLS handshake failures, plain HTTP to the TLS port
		srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	}
	addrs, systemd := []string{ln.Addr().String()}, false
	err := web.Serve(ln, srv, &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &systemd, WebConfigFile: &c.webConfigFile}, logger)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("HTTP server: %w", err)
	}
	return nil
}

// securityAPIOptions sets the API options that follow the security flags:
// the CORS origin, the lifecycle feature and the flags' values in
// /api/v1/status/flags.
func securityAPIOptions(o *api.Options, c *securityConfig) {
	o.CORSOrigin = c.corsRegexp
	o.Flags = maps.Clone(o.Flags)
	if o.Flags == nil {
		o.Flags = map[string]string{}
	}
	o.Flags["web.config.file"] = c.webConfigFile
	o.Flags["web.enable-lifecycle"] = strconv.FormatBool(c.enableLifecycle)
	o.Flags["web.enable-pprof"] = strconv.FormatBool(c.enablePprof)
	o.Flags["web.cors.origin"] = c.corsOrigin
	prev := o.RegisterFeatures
	o.RegisterFeatures = func(r features.Collector) {
		if prev != nil {
			prev(r)
		}
		r.Set(features.API, "lifecycle", c.enableLifecycle)
	}
}

// lifecycle guards a lifecycle endpoint (/-/reload, /-/quit) as Prometheus
// does: only POST and PUT (405 otherwise), and only with
// --web.enable-lifecycle (403 otherwise).
func lifecycle(enabled bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "Only POST or PUT requests allowed", http.StatusMethodNotAllowed)
			return
		}
		if !enabled {
			http.Error(w, "Lifecycle API is not enabled.", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// quitter is /-/quit: the first request closes the channel an actor of the
// run group waits on, so tandem shuts down as on SIGTERM.
type quitter struct {
	once sync.Once
	ch   chan struct{}
}

func newQuitter() *quitter { return &quitter{ch: make(chan struct{})} }

// ServeHTTP requests the shutdown (Prometheus's answers).
func (q *quitter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	first := false
	q.once.Do(func() { first = true; close(q.ch) })
	if !first {
		fmt.Fprint(w, "Termination already in progress.")
		return
	}
	fmt.Fprint(w, "Requesting termination... Goodbye!")
}

// addTo adds the actor that ends the run group on /-/quit.
func (q *quitter) addTo(g *run.Group, logger *slog.Logger) {
	done := make(chan struct{})
	g.Add(func() error {
		select {
		case <-q.ch:
			logger.Info("received /-/quit, shutting down")
		case <-done:
		}
		return nil
	}, func(error) { close(done) })
}

// registerPprof serves Go's profiler under /debug/pprof/ on mux.
func registerPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
