package remote

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the "version" metric label.
const (
	versionLabelV1      = "1.0"
	versionLabelV2      = "2.0"
	versionLabelUnknown = "unknown"
)

// droppedExemplar is the value of the "reason" label of tandem_remote_write_dropped_total
// (native histograms, once counted there too, are now written or refused).
const droppedExemplar = "exemplar"

// writeMetrics holds the write handler's instrumentation.
type writeMetrics struct {
	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	samplesReceived *prometheus.CounterVec
	// histogramsReceived counts native histogram samples received, by protocol version.
	histogramsReceived *prometheus.CounterVec
	samplesRejected    *prometheus.CounterVec
	dropped            *prometheus.CounterVec
	requestBytes       prometheus.Histogram
	panics             prometheus.Counter
	// inflightRequests and inflightBytes are the requests being handled and their decoded bytes.
	inflightRequests prometheus.Gauge
	inflightBytes    prometheus.Gauge
}

func newWriteMetrics(reg prometheus.Registerer) *writeMetrics {
	m := &writeMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_remote_write_requests_total",
			Help: "Remote-write requests handled, by protocol version and HTTP status code.",
		}, []string{"version", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tandem_remote_write_request_duration_seconds",
			Help:    "Time spent handling a remote-write request, by protocol version.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15),
		}, []string{"version"}),
		samplesReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_remote_write_samples_received_total",
			Help: "Float samples received in decoded remote-write requests, by protocol version.",
		}, []string{"version"}),
		histogramsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_remote_write_histograms_received_total",
			Help: "Native histogram samples received in decoded remote-write requests, by protocol version.",
		}, []string{"version"}),
		samplesRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_remote_write_samples_rejected_total",
			Help: "Float and native histogram samples received but not written, by reason and tenant.",
		}, []string{"reason", "tenant"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_remote_write_dropped_total",
			Help: "Exemplars received but not kept by the storage, by reason.",
		}, []string{"reason"}),
		requestBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tandem_remote_write_request_bytes",
			Help:    "Compressed size of remote-write request bodies.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 10),
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_remote_write_panics_total",
			Help: "Remote-write requests whose handling panicked (answered 500; the stack is logged).",
		}),
		inflightRequests: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_remote_write_requests_in_flight",
			Help: "Remote-write requests being handled (at most --remote-write.max-concurrent-requests).",
		}),
		inflightBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_remote_write_in_flight_decoded_bytes",
			Help: "Snappy-decoded bytes of the remote-write requests being handled (at most --remote-write.max-inflight-bytes).",
		}),
	}
	if reg != nil {
		m.requests = register(reg, m.requests)
		m.duration = register(reg, m.duration)
		m.samplesReceived = register(reg, m.samplesReceived)
		m.histogramsReceived = register(reg, m.histogramsReceived)
		m.samplesRejected = register(reg, m.samplesRejected)
		m.dropped = register(reg, m.dropped)
		m.requestBytes = register(reg, m.requestBytes)
		m.panics = register(reg, m.panics)
		m.inflightRequests = register(reg, m.inflightRequests)
		m.inflightBytes = register(reg, m.inflightBytes)
	}
	m.dropped.WithLabelValues(droppedExemplar) // exported from the start, at 0
	return m
}

// register registers c on reg, returning the already registered collector when an
// identical one exists (e.g. two handlers sharing a registry); other errors panic
// like MustRegister, as they are programming errors.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
