package limits

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Overrides serves every tenant's limits: the defaults, replaced per tenant
// by the overrides file, which Reload (and Run, on a change) reads again.
type Overrides struct {
	defaults Limits
	path     string
	logger   *slog.Logger

	cur  atomic.Pointer[loaded]
	mu   sync.Mutex // serializes reloads
	last []byte     // the file's content last loaded
	subs []func()

	reloads      *prometheus.CounterVec
	lastSuccess  prometheus.Gauge
	successMilli prometheus.Gauge
}

// loaded are the limits of the file last loaded.
type loaded struct {
	defaults Limits
	tenants  map[string]Limits
}

// NewOverrides loads the overrides file at path ("" for none) over
// defaults; reg (may be nil) receives the reload metrics.
func NewOverrides(defaults Limits, path string, logger *slog.Logger, reg prometheus.Registerer) (*Overrides, error) {
	if err := defaults.Validate(); err != nil {
		return nil, fmt.Errorf("default limits: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	o := &Overrides{defaults: defaults, path: path, logger: logger,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_limits_reloads_total",
			Help: "Loads of the limits overrides file (--limits.file), by result.",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_limits_last_reload_successful",
			Help: "Whether the last load of the limits overrides file succeeded (1) or failed (0).",
		}),
		successMilli: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_limits_last_reload_success_timestamp_seconds",
			Help: "When the limits overrides file was last loaded successfully.",
		}),
	}
	o.cur.Store(&loaded{defaults: defaults})
	if reg != nil {
		for _, c := range []prometheus.Collector{o.reloads, o.lastSuccess, o.successMilli} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register limits metrics: %w", err)
			}
		}
	}
	if err := o.Reload(); err != nil {
		return nil, err
	}
	return o, nil
}

// Defaults returns the limits of tenants the file does not name.
func (o *Overrides) Defaults() Limits { return o.cur.Load().defaults }

// For returns tenant id's limits.
func (o *Overrides) For(id string) Limits {
	cur := o.cur.Load()
	if l, ok := cur.tenants[id]; ok {
		return l
	}
	return cur.defaults
}

// OnChange registers f, called after every reload that changed the limits.
func (o *Overrides) OnChange(f func()) {
	o.mu.Lock()
	o.subs = append(o.subs, f)
	o.mu.Unlock()
}

// Reload reads the overrides file again; on an error the limits in effect
// stay.
func (o *Overrides) Reload() error {
	if o.path == "" {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	data, err := os.ReadFile(o.path)
	if err == nil {
		if bytes.Equal(data, o.last) && o.last != nil {
			return nil
		}
		var (
			def Limits
			m   map[string]Limits
		)
		if def, m, err = parse(data, o.defaults); err == nil {
			o.cur.Store(&loaded{defaults: def, tenants: m})
			o.last = data
			o.reloads.WithLabelValues("success").Inc()
			o.lastSuccess.Set(1)
			o.successMilli.SetToCurrentTime()
			o.logger.Info("loaded the limits overrides file", "file", o.path, "tenants", len(m))
			for _, f := range o.subs {
				f()
			}
			return nil
		}
	}
	o.reloads.WithLabelValues("failure").Inc()
	o.lastSuccess.Set(0)
	return fmt.Errorf("limits file %s: %w", o.path, err)
}

// Run reloads the overrides file every interval until ctx ends, logging
// failures.
func (o *Overrides) Run(ctx context.Context, interval time.Duration) {
	if o.path == "" || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := o.Reload(); err != nil {
				o.logger.Error("reloading the limits overrides file failed; the previous limits stay in effect", "err", err)
			}
		}
	}
}
