// Package remote receives Prometheus remote-write requests (protocol 1.0 and 2.0)
// and hands them to the storage as head.Batch values.
//
// The HTTP status codes follow the remote-write specifications: 2xx only when
// everything in the request was written, 4xx for requests that can never succeed
// (the sender drops them), 5xx for server-side failures (the sender retries).
// docs/write-errors.md lists every outcome.
package remote

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// Appender is the storage a write handler feeds.
type Appender interface {
	// AppendBatch writes b; the returned error is non-nil only for server-side failures a retry can cure (→ 5xx);
	// refused samples are reported in the result (→ 400) while the accepted ones are durably written.
	// Re-sending a batch is idempotent (identical samples are accepted silently).
	// The handler reuses b's memory for its next request once AppendBatch returns:
	// the Appender copies what it keeps, except the native histograms the
	// HistogramSample values point to, which are decoded fresh for each
	// request and handed over (the Appender may keep the pointers).
	AppendBatch(ctx context.Context, b *head.Batch) (head.AppendResult, error)
}

// SeriesResolver is optionally implemented by an Appender: it finds a series
// it already stores from the labels as the decoder saw them, so that known
// series skip label validation and construction (head.Head does).
type SeriesResolver interface {
	// ResolveNext returns the series that followed prev (the series
	// resolved just before in the same request) last time, if match accepts
	// its labels: senders repeat their order, so most series are found so.
	ResolveNext(prev head.SeriesRef, match func(labels.Labels) bool) (head.SeriesRef, bool)
	// ResolveHash returns the reference of a series whose labels hash
	// (labels.Labels.Hash) is hash if match accepts its labels, and
	// remembers it as prev's successor.
	ResolveHash(prev head.SeriesRef, hash uint64, match func(labels.Labels) bool) (head.SeriesRef, bool)
}

// Limits bounds what one write request may contain and how many are handled
// at once; every bound is checked before memory is allocated for what it counts.
//
// The defaults never refuse what a Prometheus sends: it puts at most
// max_samples_per_send samples, histograms and exemplars in one request
// (2000 by default, raised to 10k-50k by heavy users), one series entry each,
// so 500k series and 2M samples leave 10x headroom over the largest common
// setting, and senders that batch many samples per series (vmagent, OTel)
// stay far below them too. They bound what a hostile request can cost: a
// request of empty entries (2 bytes each on the wire) is refused at 500k
// series or 2M samples, some 50 MiB of decoder memory, instead of growing
// with the decoded size (an empty 2.0 series cost 176 bytes, 88x its wire size).
// Native histograms are decoded into memory the Appender keeps: each is
// bounded by MaxBucketsPerHistogram and all of a request's by
// MaxHistogramBytesPerRequest, both checked before the histogram is allocated.
type Limits struct {
	// MaxBodyBytes is the largest accepted compressed body (0 = default 32 MiB).
	MaxBodyBytes int64
	// MaxDecodedBytes is the largest accepted body after snappy decoding (0 = default 128 MiB).
	MaxDecodedBytes int64
	// MaxLabelsPerSeries is the largest number of labels of one series or exemplar (0 = default 64).
	MaxLabelsPerSeries int
	// MaxLabelNameLength is the longest label name in bytes (0 = default 1024).
	MaxLabelNameLength int
	// MaxLabelValueLength is the longest label value in bytes (0 = default 4096).
	MaxLabelValueLength int
	// MaxSeriesPerRequest is the largest number of series entries (and 1.0 metadata entries) in one request (0 = default 500k).
	MaxSeriesPerRequest int
	// MaxSamplesPerRequest is the largest number of float samples, native histogram samples and exemplars in one request (0 = default 2M).
	MaxSamplesPerRequest int
	// MaxSymbolsPerRequest is the largest 2.0 symbols table (0 = default 2M).
	MaxSymbolsPerRequest int
	// MaxBucketsPerHistogram is the most spans, buckets and custom bounds one native histogram may have; a
	// histogram with more is refused (400, the rest of the request is written) before it is decoded (0 = default 16384).
	MaxBucketsPerHistogram int
	// MaxHistogramBytesPerRequest bounds the memory the native histograms of one request are decoded into,
	// counted as 184 bytes a histogram plus 8 a span, bucket and custom bound; more get 413 (0 = default 256 MiB).
	MaxHistogramBytesPerRequest int64
	// MaxConcurrentRequests is how many write requests are handled at once; more wait up to MaxQueueWait, then get 503 with Retry-After (0 = default 64).
	MaxConcurrentRequests int
	// MaxQueueWait is how long a request waits for one of the MaxConcurrentRequests slots, its body not yet read (0 = default 2s).
	MaxQueueWait time.Duration
	// MaxInflightBytes bounds the decoded bytes of the write requests handled at once; more get 503 with Retry-After (0 = default 1 GiB).
	MaxInflightBytes int64
}

// Default limit values, used for zero fields of Limits.
const (
	DefaultMaxBodyBytes          = 32 << 20        // compressed body: 32 MiB
	DefaultMaxDecodedBytes       = 128 << 20       // snappy-decoded body: 128 MiB
	DefaultMaxLabelsPerSeries    = 64              // labels of one series
	DefaultMaxLabelNameLength    = 1024            // bytes of one label name
	DefaultMaxLabelValueLength   = 4096            // bytes of one label value
	DefaultMaxSeriesPerRequest   = 500_000         // series entries of one request
	DefaultMaxSamplesPerRequest  = 2_000_000       // samples, histograms and exemplars of one request
	DefaultMaxSymbolsPerRequest  = 2_000_000       // 2.0 symbols of one request
	DefaultMaxConcurrentRequests = 64              // write requests handled at once
	DefaultMaxInflightBytes      = 1 << 30         // decoded bytes of the requests handled at once: 1 GiB
	DefaultMaxQueueWait          = 2 * time.Second // wait for a request slot
)

// Default limits of native histograms, used for zero fields of Limits.
const (
	// DefaultMaxBucketsPerHistogram: Prometheus bounds no histogram it
	// receives (and scrapes none by default: native_histogram_bucket_limit
	// is 0); client libraries and OpenTelemetry default to 160 buckets per
	// side, and schema 8 over 1e-9…1e9 takes some 15k.
	DefaultMaxBucketsPerHistogram = 16384
	// DefaultMaxHistogramBytesPerRequest: 50k histograms (a heavy
	// max_samples_per_send) of 320 buckets take about 140 MiB.
	DefaultMaxHistogramBytesPerRequest = 256 << 20
)

// DefaultLimits returns the limits used when none are configured.
func DefaultLimits() Limits {
	return Limits{
		MaxBodyBytes:                DefaultMaxBodyBytes,
		MaxDecodedBytes:             DefaultMaxDecodedBytes,
		MaxLabelsPerSeries:          DefaultMaxLabelsPerSeries,
		MaxLabelNameLength:          DefaultMaxLabelNameLength,
		MaxLabelValueLength:         DefaultMaxLabelValueLength,
		MaxSeriesPerRequest:         DefaultMaxSeriesPerRequest,
		MaxSamplesPerRequest:        DefaultMaxSamplesPerRequest,
		MaxSymbolsPerRequest:        DefaultMaxSymbolsPerRequest,
		MaxBucketsPerHistogram:      DefaultMaxBucketsPerHistogram,
		MaxHistogramBytesPerRequest: DefaultMaxHistogramBytesPerRequest,
		MaxConcurrentRequests:       DefaultMaxConcurrentRequests,
		MaxInflightBytes:            DefaultMaxInflightBytes,
		MaxQueueWait:                DefaultMaxQueueWait,
	}
}

// withDefaults replaces zero or negative fields by their defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	def := func(v *int, dv int) {
		if *v <= 0 {
			*v = dv
		}
	}
	def64 := func(v *int64, dv int64) {
		if *v <= 0 {
			*v = dv
		}
	}
	def64(&l.MaxBodyBytes, d.MaxBodyBytes)
	def64(&l.MaxDecodedBytes, d.MaxDecodedBytes)
	def(&l.MaxLabelsPerSeries, d.MaxLabelsPerSeries)
	def(&l.MaxLabelNameLength, d.MaxLabelNameLength)
	def(&l.MaxLabelValueLength, d.MaxLabelValueLength)
	def(&l.MaxSeriesPerRequest, d.MaxSeriesPerRequest)
	def(&l.MaxSamplesPerRequest, d.MaxSamplesPerRequest)
	def(&l.MaxSymbolsPerRequest, d.MaxSymbolsPerRequest)
	def(&l.MaxBucketsPerHistogram, d.MaxBucketsPerHistogram)
	def64(&l.MaxHistogramBytesPerRequest, d.MaxHistogramBytesPerRequest)
	def(&l.MaxConcurrentRequests, d.MaxConcurrentRequests)
	def64(&l.MaxInflightBytes, d.MaxInflightBytes)
	if l.MaxQueueWait <= 0 {
		l.MaxQueueWait = d.MaxQueueWait
	}
	return l
}

// WriteHandlerOptions configures NewWriteHandler.
type WriteHandlerOptions struct {
	// Limits bounds request size and label sets; zero fields take the defaults.
	Limits Limits
	// Logger receives handler logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the handler metrics; nil disables registration.
	Registerer prometheus.Registerer
	// RateLimitedStatus answers writes over a tenant's ingestion rate:
	// 429 (the default; Prometheus drops them unless its queue sets
	// retry_on_http_429) or 503 (Prometheus retries).
	RateLimitedStatus int
}
