// Package rules evaluates Prometheus recording and alerting rules over
// tandem's storage and sends the alerts to Alertmanagers, by embedding
// Prometheus's own rules and notifier packages the way cmd/prometheus wires
// them: rule files are Prometheus's format, validated by Prometheus's parser;
// evaluation results (recording rules' series, ALERTS and ALERTS_FOR_STATE)
// go through the storage's append path; `for` state is restored from
// ALERTS_FOR_STATE after a restart; notifications follow Prometheus's
// resend, resolve and queueing semantics.
package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/notifier"
	prompromql "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	promrules "github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/features"
)

// Defaults applied to zero Options fields (Prometheus's flag and config defaults).
const (
	DefaultEvaluationInterval  = time.Minute
	DefaultOutageTolerance     = time.Hour
	DefaultForGracePeriod      = 10 * time.Minute
	DefaultResendDelay         = time.Minute
	DefaultAlertmanagerTimeout = 10 * time.Second
	DefaultQueueCapacity       = 10000
)

// alertmanagerSyncTimeout bounds how long Run waits for the notifier to take
// the configured Alertmanagers before rules start evaluating.
const alertmanagerSyncTimeout = 5 * time.Second

// Storage is what rules read from and write to: tandem's tsdb.DB.
type Storage interface {
	storage.Queryable
	storage.AppendableV2
}

// Options configures a Service; zero durations and sizes get the defaults above (MaxConcurrentEvals excepted).
type Options struct {
	// Files are rule file paths or glob patterns, re-resolved on every reload.
	Files []string
	// EvaluationInterval is the interval of groups that set none (Prometheus's global evaluation_interval).
	EvaluationInterval time.Duration
	// QueryOffset is the query offset of groups that set none (Prometheus's global rule_query_offset).
	QueryOffset time.Duration
	// OutageTolerance is how long an outage may last for `for` state to be restored.
	OutageTolerance time.Duration
	// ForGracePeriod is the least time a restored pending alert waits before firing.
	ForGracePeriod time.Duration
	// ResendDelay is the least time between two sends of a firing alert.
	ResendDelay time.Duration
	// MaxConcurrentEvals bounds the independent rules evaluated concurrently across groups; 0 evaluates each group's rules in sequence.
	MaxConcurrentEvals int64
	// ExternalURL is the URL tandem is reached at, for generator URLs and templates; nil means none.
	ExternalURL *url.URL
	// Alertmanagers are the Alertmanager base URLs alerts are sent to (API v2).
	Alertmanagers []string
	// AlertmanagerClient configures authentication and TLS towards the Alertmanagers.
	AlertmanagerClient AlertmanagerClient
	// QueueCapacity is the notification queue's capacity per Alertmanager.
	QueueCapacity int
	// Logger receives the rule manager's and notifier's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives prometheus_rule_*, prometheus_notifications_* and tandem_rules_* metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

func (o Options) withDefaults() Options {
	if o.EvaluationInterval <= 0 {
		o.EvaluationInterval = DefaultEvaluationInterval
	}
	if o.OutageTolerance <= 0 {
		o.OutageTolerance = DefaultOutageTolerance
	}
	if o.ForGracePeriod <= 0 {
		o.ForGracePeriod = DefaultForGracePeriod
	}
	if o.ResendDelay <= 0 {
		o.ResendDelay = DefaultResendDelay
	}
	if o.AlertmanagerClient.Timeout <= 0 {
		o.AlertmanagerClient.Timeout = DefaultAlertmanagerTimeout
	}
	if o.QueueCapacity <= 0 {
		o.QueueCapacity = DefaultQueueCapacity
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Service owns a Prometheus rule manager and notifier over one storage. It
// implements v1.RulesRetriever and v1.AlertmanagerRetriever for the HTTP API.
type Service struct {
	opts     Options
	logger   *slog.Logger
	parser   parser.Parser
	manager  *promrules.Manager
	notifier *notifier.Manager
	targets  map[string][]*targetgroup.Group
	amURLs   int

	reloadMu      sync.Mutex
	reloadOK      prometheus.Gauge
	reloadSuccess prometheus.Gauge

	statusMu   sync.RWMutex
	lastOK     bool
	lastLoaded time.Time

	runOnce sync.Once
}

// New builds the notifier and rule manager and loads the rule files; an
// invalid rule file or Alertmanager setting is an error. Evaluation starts
// with Run.
func New(store Storage, engine prompromql.QueryEngine, opts Options) (*Service, error) {
	if store == nil || engine == nil {
		return nil, errors.New("rules: nil storage or engine")
	}
	opts = opts.withDefaults()
	s := &Service{
		opts:   opts,
		logger: opts.Logger,
		parser: parser.NewParser(parser.Options{}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_rules_last_reload_successful",
			Help: "Whether the last rule file (re)load succeeded (1) or kept the previous rules (0).",
		}),
		reloadSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_rules_last_reload_success_timestamp_seconds",
			Help: "Time of the last successful rule file (re)load.",
		}),
	}

	amCfg, targets, err := alertmanagerConfigs(opts.Alertmanagers, opts.AlertmanagerClient)
	if err != nil {
		return nil, err
	}
	s.targets, s.amURLs = targets, len(opts.Alertmanagers)
	s.notifier = notifier.NewManager(&notifier.Options{
		QueueCapacity:   opts.QueueCapacity,
		DrainOnShutdown: true,
		Registerer:      opts.Registerer,
	}, model.UTF8Validation, opts.Logger.With("component", "notifier"))
	if err := s.notifier.ApplyConfig(&config.Config{AlertingConfig: config.AlertingConfig{AlertmanagerConfigs: amCfg}}); err != nil {
		return nil, fmt.Errorf("configure Alertmanager clients: %w", err)
	}

	externalURL := ""
	if opts.ExternalURL != nil {
		externalURL = opts.ExternalURL.String()
	}
	queryOffset := opts.QueryOffset
	s.manager = promrules.NewManager(&promrules.ManagerOptions{
		NameValidationScheme:   model.UTF8Validation,
		ExternalURL:            opts.ExternalURL,
		QueryFunc:              promrules.EngineQueryFunc(engine, store),
		NotifyFunc:             promrules.SendAlerts(s.notifier, externalURL),
		AppendableV2:           store,
		Queryable:              store,
		Logger:                 opts.Logger.With("component", "rule manager"),
		Registerer:             opts.Registerer,
		OutageTolerance:        opts.OutageTolerance,
		ForGracePeriod:         opts.ForGracePeriod,
		ResendDelay:            opts.ResendDelay,
		MaxConcurrentEvals:     max(opts.MaxConcurrentEvals, 1),
		ConcurrentEvalsEnabled: opts.MaxConcurrentEvals > 0,
		DefaultRuleQueryOffset: func() time.Duration { return queryOffset },
		Parser:                 s.parser,
	})

	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{s.reloadOK, s.reloadSuccess} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register rule reload metrics: %w", err)
			}
		}
	}
	if err := s.apply(nil, false); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload re-resolves the rule file patterns and loads the files. On an error
// (naming the file, group and rule) the previous rules stay in effect, the
// error is logged and tandem_rules_last_reload_successful drops to 0.
func (s *Service) Reload() error {
	err := s.apply(nil, false)
	if err != nil {
		s.logger.Error("reloading rule files failed; the previous rules stay in effect", "err", err)
	}
	return err
}

// ReloadFiles replaces the rule file patterns (re-read from the
// configuration file, say) and loads the files; on an error the previous
// patterns and rules stay in effect, as with Reload.
func (s *Service) ReloadFiles(patterns []string) error {
	err := s.apply(patterns, true)
	if err != nil {
		s.logger.Error("reloading rule files failed; the previous rules stay in effect", "err", err)
	}
	return err
}

// apply loads the rule files (with replace, those of patterns) and records
// the outcome in the metrics.
func (s *Service) apply(patterns []string, replace bool) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	start := time.Now()
	old := s.opts.Files
	if replace {
		s.opts.Files = slices.Clone(patterns)
	}
	files, err := s.load()
	if err != nil {
		s.opts.Files = old
	}
	s.statusMu.Lock()
	s.lastOK = err == nil
	if err == nil {
		s.lastLoaded = start
	}
	s.statusMu.Unlock()
	if err != nil {
		s.reloadOK.Set(0)
		return err
	}
	s.reloadOK.Set(1)
	s.reloadSuccess.Set(float64(start.UnixNano()) / 1e9)
	s.logger.Info("rule files loaded", "files", len(files), "groups", len(s.manager.RuleGroups()),
		"duration", time.Since(start))
	return nil
}

// load resolves, validates and applies the rule files.
func (s *Service) load() ([]string, error) {
	files, err := s.resolve()
	if err != nil {
		return nil, err
	}
	// Validate every file first with Prometheus's parser so that all errors
	// are reported (the manager stops at the first file and only logs).
	var errs []error
	for _, fn := range files {
		_, ferrs := rulefmt.ParseFile(fn, false, model.UTF8Validation, s.parser, s.logger)
		errs = append(errs, ferrs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("invalid rule files: %w", err)
	}
	externalURL := ""
	if s.opts.ExternalURL != nil {
		externalURL = s.opts.ExternalURL.String()
	}
	if err := s.manager.Update(s.opts.EvaluationInterval, files, labels.EmptyLabels(), externalURL, nil); err != nil {
		return nil, fmt.Errorf("apply rule files: %w", err)
	}
	return files, nil
}

// resolve expands the rule file patterns into a sorted list of files.
func (s *Service) resolve() ([]string, error) {
	var files []string
	for _, pat := range s.opts.Files {
		fns, err := filepath.Glob(pat)
		if err != nil {
			return nil, fmt.Errorf("rule file pattern %q: %w", pat, err)
		}
		if len(fns) == 0 {
			s.logger.Warn("rule file pattern matches no file", "pattern", pat)
		}
		files = append(files, fns...)
	}
	slices.Sort(files)
	return slices.Compact(files), nil
}

// LastReload reports whether the last (re)load succeeded and when the rules
// in effect were loaded.
func (s *Service) LastReload() (ok bool, loaded time.Time) {
	s.statusMu.RLock()
	defer s.statusMu.RUnlock()
	return s.lastOK, s.lastLoaded
}

// Run sends notifications and evaluates the rules until ctx is done, then
// stops evaluation and drains the notification queues. Call it once.
func (s *Service) Run(ctx context.Context) error {
	ran := false
	s.runOnce.Do(func() { ran = true })
	if !ran {
		return errors.New("rules: Run called twice")
	}
	tsets := make(chan map[string][]*targetgroup.Group, 1)
	tsets <- s.targets
	var wg sync.WaitGroup
	wg.Go(func() { s.notifier.Run(tsets) })
	s.waitForAlertmanagers(ctx)
	wg.Go(s.manager.Run)

	<-ctx.Done()
	// Stop the rules first: stopping the notifier while groups still send panics in upstream's code.
	s.manager.Stop()
	s.notifier.Stop()
	wg.Wait()
	return nil
}

// waitForAlertmanagers waits until the notifier has started its send loops,
// so that the first notifications are not dropped (a firing alert is only
// re-sent after the resend delay).
func (s *Service) waitForAlertmanagers(ctx context.Context) {
	deadline := time.Now().Add(alertmanagerSyncTimeout)
	for len(s.notifier.Alertmanagers()) < s.amURLs {
		if time.Now().After(deadline) {
			s.logger.Warn("notifier did not take the Alertmanagers in time; starting rule evaluation anyway")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// RuleGroups implements v1.RulesRetriever.
func (s *Service) RuleGroups() []*promrules.Group { return s.manager.RuleGroups() }

// AlertingRules implements v1.RulesRetriever.
func (s *Service) AlertingRules() []*promrules.AlertingRule { return s.manager.AlertingRules() }

// Alertmanagers implements v1.AlertmanagerRetriever.
func (s *Service) Alertmanagers() []*url.URL { return s.notifier.Alertmanagers() }

// DroppedAlertmanagers implements v1.AlertmanagerRetriever.
func (s *Service) DroppedAlertmanagers() []*url.URL { return s.notifier.DroppedAlertmanagers() }

// RegisterFeatures records the rule manager's features for /api/v1/features, as Prometheus does.
func (s *Service) RegisterFeatures(c features.Collector) {
	c.Set(features.Rules, "concurrent_rule_eval", s.opts.MaxConcurrentEvals > 0)
	c.Enable(features.Rules, "query_offset")
	c.Enable(features.Rules, "keep_firing_for")
}

// ReloadHandler serves POST and PUT /-/reload: 200 once the rule files are
// reloaded, 500 with the error (the previous rules stay in effect) otherwise.
func (s *Service) ReloadHandler() http.Handler { return ReloadHandler(s.Reload) }

// ReloadHandler serves POST and PUT /-/reload with reload: 200 on success,
// 500 with the error otherwise, 405 for other methods.
func ReloadHandler(reload func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "Only POST or PUT requests allowed", http.StatusMethodNotAllowed)
			return
		}
		if err := reload(); err != nil {
			http.Error(w, fmt.Sprintf("failed to reload rules: %s", err), http.StatusInternalServerError)
		}
	})
}
