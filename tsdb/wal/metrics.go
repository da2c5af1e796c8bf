package wal

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	fsyncDuration  prometheus.Histogram
	recordsWritten prometheus.Counter
	bytesWritten   prometheus.Counter
	corruptions    prometheus.Counter
	droppedBytes   prometheus.Counter
	droppedRecords prometheus.Counter
	segmentCurrent prometheus.Gauge
	failing        prometheus.Gauge
	writeFailures  prometheus.Counter
	recoveries     prometheus.Counter
}

func newMetrics(r prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		fsyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tandem_wal_fsync_duration_seconds",
			Help:    "Duration of WAL segment fsyncs.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		recordsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_records_written_total",
			Help: "Records appended to the WAL.",
		}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_bytes_written_total",
			Help: "Bytes appended to WAL segments, including frame headers.",
		}),
		corruptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_corruptions_total",
			Help: "Runs of corrupt or torn WAL bytes found during replay.",
		}),
		droppedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_replay_dropped_bytes_total",
			Help: "Damaged bytes replay dropped from the last WAL segment (torn tails and corrupt frames).",
		}),
		droppedRecords: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_replay_dropped_records_total",
			Help: "Records replay dropped with damaged bytes (at least one per damaged run).",
		}),
		segmentCurrent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_wal_segment_current",
			Help: "Number of the WAL segment currently written to.",
		}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_wal_failing",
			Help: "1 while the WAL cannot be written (the last write or fsync failed), 0 once one succeeds again.",
		}),
		writeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_write_failures_total",
			Help: "Failed WAL writes, fsyncs and segment creations.",
		}),
		recoveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_wal_recoveries_total",
			Help: "Times the WAL moved on to a new segment after a failed fsync, re-writing the records not yet synced.",
		}),
	}
	if r != nil {
		cs := []prometheus.Collector{m.fsyncDuration, m.recordsWritten, m.bytesWritten, m.corruptions, m.droppedBytes,
			m.droppedRecords, m.segmentCurrent, m.failing, m.writeFailures, m.recoveries}
		for i, c := range cs {
			if err := r.Register(c); err != nil {
				for _, done := range cs[:i] {
					r.Unregister(done)
				}
				return nil, fmt.Errorf("wal: register metrics: %w", err)
			}
		}
	}
	return m, nil
}
