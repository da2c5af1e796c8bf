package head

import (
	"github.com/prometheus/client_golang/prometheus"
)

// headMetrics exports the head's state to /metrics.
type headMetrics struct {
	rejected *prometheus.CounterVec
	// seriesRefused counts new series refused by each of limitReasons.
	seriesRefused   [len(limitReasons)]prometheus.Counter
	metadataDropped prometheus.Counter
}

func newHeadMetrics(h *Head, reg prometheus.Registerer) *headMetrics {
	m := &headMetrics{
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_head_samples_rejected_total",
			Help: "Samples the head refused, by reason.",
		}, []string{"reason"}),
	}
	for _, r := range Reasons {
		m.rejected.WithLabelValues(ReasonLabel(r))
	}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tandem_head_series_refused_total",
		Help: "New series the head refused to create because a series limit was reached, by reason.",
	}, []string{"reason"})
	for i, r := range limitReasons {
		m.seriesRefused[i] = refused.WithLabelValues(ReasonLabel(r))
	}
	m.metadataDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tandem_head_metadata_dropped_total",
		Help: "Metadata of new metric names dropped because the max_metadata limit was reached.",
	})
	if reg == nil {
		return m
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	reg.MustRegister(
		m.rejected, refused, m.metadataDropped,
		gauge("tandem_head_series", "Series in the head.", func() float64 { return float64(h.counters.series.Load()) }),
		gauge("tandem_head_groups", "Groups (series sampled together) in the head.", func() float64 { return float64(h.counters.groups.Load()) }),
		gauge("tandem_head_chunks_mapped_bytes", "Bytes of frozen head chunks in memory-mapped files (<data>/chunks_head), including chunks no longer reachable whose file still holds reachable ones.", func() float64 { return float64(h.chunks.fileBytes.Load()) }),
		gauge("tandem_head_chunk_files", "Memory-mapped head chunk files.", func() float64 { return float64(h.chunks.files.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tandem_head_members", Help: "Series by storage layout: aligned (sharing the group's timestamp column) or unaligned.",
			ConstLabels: prometheus.Labels{"layout": "aligned"},
		}, func() float64 { return float64(h.counters.series.Load() - h.counters.unaligned.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tandem_head_members", Help: "Series by storage layout: aligned (sharing the group's timestamp column) or unaligned.",
			ConstLabels: prometheus.Labels{"layout": "unaligned"},
		}, func() float64 { return float64(h.counters.unaligned.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tandem_head_samples_appended_total", Help: "Samples appended to the head and logged to the WAL.",
		}, func() float64 { return float64(h.counters.appended.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tandem_head_out_of_order_samples_total", Help: "Samples accepted out of order (within a group's window, or late for a flushed range).",
		}, func() float64 { return float64(h.counters.late.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tandem_head_inferred_staleness_markers_total", Help: "Staleness markers written for members that stopped appearing in their group's rows (--storage.infer-staleness-after).",
		}, func() float64 { return float64(h.counters.inferredStale.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tandem_head_series_removed_total", Help: "Series removed from the head with their idle group once all their data was in blocks (series churn).",
		}, func() float64 { return float64(h.counters.gcSeries.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tandem_head_realigned_samples_total", Help: "Samples of lagging members moved from their own tables into their group's shared chunks (a sender that caught up).",
		}, func() float64 { return float64(h.counters.realigned.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tandem_ha_deduplicated_samples_total", Help: "Samples of an HA replica that was not the one elected for its group (accepted, not stored).",
		}, func() float64 { return float64(h.counters.haDeduped.Load()) }),
		gauge("tandem_head_min_time_seconds", "Oldest sample timestamp in the head.", func() float64 {
			if v := h.minT.Load(); v <= h.maxT.Load() {
				return float64(v) / 1000
			}
			return 0
		}),
		gauge("tandem_head_max_time_seconds", "Newest sample timestamp in the head.", func() float64 {
			if v := h.maxT.Load(); v >= h.minT.Load() {
				return float64(v) / 1000
			}
			return 0
		}),
		gauge("tandem_head_writable", "1 while the WAL takes records; 0 while writes are refused with 503 because it cannot be written (full disk, I/O error).", func() float64 {
			if h.health.failing.Load() {
				return 0
			}
			return 1
		}),
		gauge("tandem_head_ready", "1 once WAL replay has finished.", func() float64 {
			if h.ready.Load() {
				return 1
			}
			return 0
		}),
	)
	return m
}

func (m *headMetrics) observeRejections(r *AppendResult) {
	for reason, n := range r.Rejected {
		m.rejected.WithLabelValues(ReasonLabel(reason)).Add(float64(n))
	}
}
