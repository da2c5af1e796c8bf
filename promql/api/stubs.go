package api

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/scrape"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/index"
	"github.com/prometheus/prometheus/util/notifications"
	v1 "github.com/prometheus/prometheus/web/api/v1"
)

// errNotSupported is returned by operations tandem's query API does not offer.
var errNotSupported = errors.New("not supported by tandem")

// noTargets answers the scrape-related endpoints: tandem does not scrape.
type noTargets struct{}

var (
	_ v1.TargetRetriever      = noTargets{}
	_ v1.ScrapePoolsRetriever = noTargets{}
)

// ScrapePools implements v1.ScrapePoolsRetriever.
func (noTargets) ScrapePools() []string { return []string{} }

// TargetsActive implements v1.TargetRetriever.
func (noTargets) TargetsActive() map[string][]*scrape.Target { return map[string][]*scrape.Target{} }

// TargetsDropped implements v1.TargetRetriever.
func (noTargets) TargetsDropped() map[string][]*scrape.Target {
	return map[string][]*scrape.Target{}
}

// TargetsDroppedCounts implements v1.TargetRetriever.
func (noTargets) TargetsDroppedCounts() map[string]int { return map[string]int{} }

// ScrapePoolConfig implements v1.TargetRetriever; every pool is unknown.
func (noTargets) ScrapePoolConfig(name string) (*config.ScrapeConfig, error) {
	return nil, fmt.Errorf("scrape pool %q not found: tandem does not scrape", name)
}

// noAlertmanagers answers /api/v1/alertmanagers: tandem sends no alerts.
type noAlertmanagers struct{}

var _ v1.AlertmanagerRetriever = noAlertmanagers{}

// Alertmanagers implements v1.AlertmanagerRetriever.
func (noAlertmanagers) Alertmanagers() []*url.URL { return []*url.URL{} }

// DroppedAlertmanagers implements v1.AlertmanagerRetriever.
func (noAlertmanagers) DroppedAlertmanagers() []*url.URL { return []*url.URL{} }

// noRules answers /api/v1/rules and /api/v1/alerts like a Prometheus without rule files.
type noRules struct{}

var _ v1.RulesRetriever = noRules{}

// RuleGroups implements v1.RulesRetriever.
func (noRules) RuleGroups() []*rules.Group { return []*rules.Group{} }

// AlertingRules implements v1.RulesRetriever.
func (noRules) AlertingRules() []*rules.AlertingRule { return []*rules.AlertingRule{} }

// noExemplars is an ExemplarQueryable that never holds exemplars, so
// /api/v1/query_exemplars answers success with an empty list.
type noExemplars struct{}

var (
	_ storage.ExemplarQueryable = noExemplars{}
	_ storage.ExemplarQuerier   = noExemplars{}
)

// ExemplarQuerier implements storage.ExemplarQueryable.
func (noExemplars) ExemplarQuerier(context.Context) (storage.ExemplarQuerier, error) {
	return noExemplars{}, nil
}

// Select implements storage.ExemplarQuerier.
func (noExemplars) Select(int64, int64, ...[]*labels.Matcher) ([]exemplar.QueryResult, error) {
	return []exemplar.QueryResult{}, nil
}

// adminStats implements v1.TSDBAdminStats over an optional StatsSource. The
// admin operations are never reached (admin APIs are disabled) but fail
// cleanly anyway.
type adminStats struct {
	stats     StatsSource
	startTime func() (int64, error)
	blocks    func() ([]tsdb.BlockMeta, error)
	admin     Admin
}

var _ v1.TSDBAdminStats = adminStats{}

// CleanTombstones implements v1.TSDBAdminStats.
func (a adminStats) CleanTombstones() error {
	if a.admin == nil {
		return errNotSupported
	}
	return a.admin.CleanTombstones()
}

// Delete implements v1.TSDBAdminStats.
func (a adminStats) Delete(ctx context.Context, mint, maxt int64, ms ...*labels.Matcher) error {
	if a.admin == nil {
		return errNotSupported
	}
	return a.admin.Delete(ctx, mint, maxt, ms...)
}

// Snapshot implements v1.TSDBAdminStats.
func (a adminStats) Snapshot(dir string, withHead bool) error {
	if a.admin == nil {
		return errNotSupported
	}
	return a.admin.Snapshot(dir, withHead)
}

// Stats implements v1.TSDBAdminStats. It never returns nil stats nor nil
// IndexPostingStats (the upstream handler dereferences both).
func (a adminStats) Stats(statsByLabelName string, limit int) (*tsdb.Stats, error) {
	if a.stats == nil {
		s := &tsdb.Stats{IndexPostingStats: &index.PostingsStats{}}
		if a.startTime != nil {
			mint, err := a.startTime()
			if err != nil {
				return nil, fmt.Errorf("get storage start time: %w", err)
			}
			s.MinTime = mint
		}
		return s, nil
	}
	s, err := a.stats.Stats(statsByLabelName, limit)
	if err != nil {
		return nil, fmt.Errorf("get head stats: %w", err)
	}
	if s == nil {
		s = &tsdb.Stats{}
	}
	if s.IndexPostingStats == nil {
		s.IndexPostingStats = &index.PostingsStats{}
	}
	return s, nil
}

// WALReplayStatus implements v1.TSDBAdminStats: replay is always complete by
// the time the API answers.
func (adminStats) WALReplayStatus() (tsdb.WALReplayStatus, error) {
	return tsdb.WALReplayStatus{}, nil
}

// BlockMetas implements v1.TSDBAdminStats for /api/v1/status/tsdb/blocks.
func (a adminStats) BlockMetas() ([]tsdb.BlockMeta, error) {
	if a.blocks == nil {
		return []tsdb.BlockMeta{}, nil
	}
	return a.blocks()
}

// noNotifications returns the (always empty) list for /api/v1/notifications.
func noNotifications() []notifications.Notification { return []notifications.Notification{} }

// noNotificationsSub refuses subscriptions, so /api/v1/notifications/live answers 204.
func noNotificationsSub() (<-chan notifications.Notification, func(), bool) {
	return nil, func() {}, false
}

// runtimeInfoFunc returns the /api/v1/status/runtimeinfo source, modelled on
// Prometheus's web.Handler.runtimeInfo; lastReload (may be nil) reports the
// rule reloads as Prometheus reports its configuration reloads.
func runtimeInfoFunc(birth time.Time, lastReload func() (bool, time.Time)) func() (v1.RuntimeInfo, error) {
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "<error retrieving current working directory>"
	}
	return func() (v1.RuntimeInfo, error) {
		info := v1.RuntimeInfo{
			StartTime:           birth,
			CWD:                 cwd,
			ServerTime:          time.Now().UTC(),
			ReloadConfigSuccess: true,
			LastConfigTime:      birth,
			GoroutineCount:      runtime.NumGoroutine(),
			GOMAXPROCS:          runtime.GOMAXPROCS(0),
			GOMEMLIMIT:          debug.SetMemoryLimit(-1),
			GOGC:                os.Getenv("GOGC"),
			GODEBUG:             os.Getenv("GODEBUG"),
		}
		if lastReload != nil {
			info.ReloadConfigSuccess, info.LastConfigTime = lastReload()
		}
		hostname, err := os.Hostname()
		if err != nil {
			return info, fmt.Errorf("get hostname: %w", err)
		}
		info.Hostname = hostname
		return info, nil
	}
}
