package head

import (
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
)

// SeriesLimits bounds the series and groups the head creates for appends; 0 means no limit.
//
// The limits are checked where an append would create a series, before
// anything is allocated for it; series that exist keep taking samples, and
// lowering a limit removes nothing. WAL replay and checkpoint loading ignore
// them, so acknowledged data survives a restart with lower limits. Appenders
// creating series concurrently may overshoot a limit by at most their number
// (each passes the check before the others' new series are counted).
type SeriesLimits struct {
	MaxSeries          int // active series in the head
	MaxSeriesPerMetric int // active series of one metric name (__name__)
	MaxSeriesPerGroup  int // members of one group
	MaxGroups          int // groups in the head
	MaxMetadata        int // metric names with metadata kept
}

// limitReasons are the limit errors, in the order of headMetrics.seriesRefused.
var limitReasons = [...]error{ErrSeriesLimit, ErrSeriesPerMetricLimit, ErrSeriesPerGroupLimit, ErrGroupLimit}

// limitIndex returns err's index in limitReasons, -1 if it is none of them.
func limitIndex(err error) int {
	for i, r := range limitReasons {
		if err == r {
			return i
		}
	}
	return -1
}

// set reports whether any limit is set.
func (l *SeriesLimits) set() bool { return *l != SeriesLimits{} }

// SetSeriesLimits replaces the limits; safe while appends run. They apply to
// series created afterwards: lowering one removes no series.
func (h *Head) SetSeriesLimits(l SeriesLimits) { h.limits.Store(&l) }

// SeriesLimits returns the limits in force.
func (h *Head) SeriesLimits() SeriesLimits {
	if l := h.limits.Load(); l != nil {
		return *l
	}
	return SeriesLimits{}
}

// activeLimits returns the limits appends check, nil when none is set.
func (h *Head) activeLimits() *SeriesLimits {
	if l := h.limits.Load(); l != nil && l.set() {
		return l
	}
	return nil
}

// checkLimits returns the limit error that refuses a new series lset of the
// group with key (appendGroupKey's), nil if none does. It allocates nothing.
func (h *Head) checkLimits(lim *SeriesLimits, lset labels.Labels, key []byte) error {
	if lim.MaxSeries > 0 && h.counters.series.Load() >= int64(lim.MaxSeries) {
		return ErrSeriesLimit
	}
	if lim.MaxSeriesPerMetric > 0 && h.perMetric.get(lset.Get(labels.MetricName)) >= lim.MaxSeriesPerMetric {
		return ErrSeriesPerMetricLimit
	}
	if lim.MaxSeriesPerGroup <= 0 && lim.MaxGroups <= 0 {
		return nil
	}
	gs := &h.groups[groupHash(key)%stripes]
	gs.mu.RLock()
	g := gs.byKey[string(key)]
	gs.mu.RUnlock()
	switch {
	case g == nil && lim.MaxGroups > 0 && h.counters.groups.Load() >= int64(lim.MaxGroups):
		return ErrGroupLimit
	case g != nil && lim.MaxSeriesPerGroup > 0 && int(g.nMembers.Load()) >= lim.MaxSeriesPerGroup:
		return ErrSeriesPerGroupLimit
	}
	return nil
}

// limitDetail describes for a client which limit refused series lset: the
// limit's configuration key and value and what reached it.
func (h *Head) limitDetail(reason error, lim *SeriesLimits, lset labels.Labels) string {
	switch reason {
	case ErrSeriesLimit:
		return fmt.Sprintf("per-tenant limit max_series (%d) reached: series %s not created", lim.MaxSeries, lset)
	case ErrSeriesPerMetricLimit:
		return fmt.Sprintf("per-tenant limit max_series_per_metric (%d) reached for metric %q: series %s not created",
			lim.MaxSeriesPerMetric, lset.Get(labels.MetricName), lset)
	case ErrSeriesPerGroupLimit:
		return fmt.Sprintf("per-tenant limit max_series_per_group (%d) reached for group %s: series %s not created",
			lim.MaxSeriesPerGroup, h.groupKey(lset), lset)
	case ErrGroupLimit:
		return fmt.Sprintf("per-tenant limit max_groups (%d) reached: group %s of series %s not created",
			lim.MaxGroups, h.groupKey(lset), lset)
	}
	return reason.Error()
}

// LimitUsage is the head's usage next to its SeriesLimits.
type LimitUsage struct {
	Limits    SeriesLimits `json:"limits"`
	Series    int          `json:"series"`    // active series
	Groups    int          `json:"groups"`    // groups
	Metadata  int          `json:"metadata"`  // metric names with metadata
	Exemplars int          `json:"exemplars"` // exemplars in the ring (of at most MaxExemplars)
	// TopMetric is the metric name with the most active series, TopMetricSeries their number.
	TopMetric       string `json:"topMetric"`
	TopMetricSeries int    `json:"topMetricSeries"`
	// TopGroup is the key of the group with the most members, TopGroupSeries their number.
	TopGroup       string `json:"topGroup"`
	TopGroupSeries int    `json:"topGroupSeries"`
}

// LimitUsage reports the head's usage of each limit. It walks the per-metric
// counts and the groups (no series, no samples).
func (h *Head) LimitUsage() LimitUsage {
	u := LimitUsage{
		Limits: h.SeriesLimits(),
		Series: int(h.counters.series.Load()),
		Groups: int(h.counters.groups.Load()),
	}
	h.metaMu.RLock()
	u.Metadata = len(h.meta)
	h.metaMu.RUnlock()
	u.Exemplars = h.NumExemplars()
	u.TopMetric, u.TopMetricSeries = h.perMetric.top()
	for i := range h.groups {
		gs := &h.groups[i]
		gs.mu.RLock()
		for key, g := range gs.byKey {
			if n := int(g.nMembers.Load()); n > u.TopGroupSeries || n == u.TopGroupSeries && n > 0 && key < u.TopGroup {
				u.TopGroup, u.TopGroupSeries = key, n
			}
		}
		gs.mu.RUnlock()
	}
	return u
}

// metricCounts counts active series by metric name, striped by name hash.
// It changes only when a series is created or removed.
type metricCounts [stripes]metricStripe

type metricStripe struct {
	mu sync.RWMutex
	n  map[string]int
}

func (m *metricCounts) stripe(name string) *metricStripe { return &m[groupHash(name)%stripes] }

// get returns the number of active series of metric name.
func (m *metricCounts) get(name string) int {
	st := m.stripe(name)
	st.mu.RLock()
	n := st.n[name]
	st.mu.RUnlock()
	return n
}

// inc counts a new series of metric name; the name is copied when it is new,
// so the map does not hold on to a series' labels.
func (m *metricCounts) inc(name string) {
	st := m.stripe(name)
	st.mu.Lock()
	if st.n == nil {
		st.n = map[string]int{}
	}
	if n, ok := st.n[name]; ok {
		st.n[name] = n + 1
	} else {
		st.n[strings.Clone(name)] = 1
	}
	st.mu.Unlock()
}

// dec uncounts a removed series of metric name.
func (m *metricCounts) dec(name string) {
	st := m.stripe(name)
	st.mu.Lock()
	if n := st.n[name]; n > 1 {
		st.n[name] = n - 1
	} else {
		delete(st.n, name)
	}
	st.mu.Unlock()
}

// top returns the metric name with the most series (the smallest name of a tie) and their number.
func (m *metricCounts) top() (string, int) {
	var name string
	var most int
	for i := range m {
		st := &m[i]
		st.mu.RLock()
		for k, n := range st.n {
			if n > most || n == most && k < name {
				name, most = k, n
			}
		}
		st.mu.RUnlock()
	}
	return name, most
}

// rejectSeries records the n samples of a batch series lset that
// getOrCreate refused with err: a limit (counted, described once per batch)
// or invalid labels.
func (h *Head) rejectSeries(res *AppendResult, err error, lim *SeriesLimits, lset labels.Labels, n int) {
	i := limitIndex(err)
	if i < 0 {
		res.Reject(ErrInvalidLabels, n, err.Error())
		return
	}
	h.metrics.seriesRefused[i].Inc()
	var detail string
	if _, ok := res.Examples[err]; !ok && n > 0 {
		detail = h.limitDetail(err, lim, lset)
	}
	res.Reject(err, n, detail)
}
