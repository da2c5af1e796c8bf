// Package remote receives Prometheus remote-write requests (protocol 1.0 and 2.0)
// and hands them to the storage as tsdb.Batch values.
//
// The HTTP status codes follow the remote-write specifications: 2xx only when
// everything in the request was written, 4xx for requests that can never succeed
// (the sender drops them), 5xx for server-side failures (the sender retries).
// docs/write-errors.md lists every outcome.
package remote

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb"
)

// Appender is the storage a write handler feeds.
type Appender interface {
	// AppendBatch writes b; the returned error is non-nil only for server-side failures a retry can cure (→ 5xx);
	// refused samples are reported in the result (→ 400) while the accepted ones are durably written.
	// Re-sending a batch is idempotent (identical samples are accepted silently).
	// The handler reuses b's memory for its next request once AppendBatch returns:
	// the Appender copies what it keeps.
	AppendBatch(ctx context.Context, b *tsdb.Batch) (tsdb.AppendResult, error)
}

// SeriesResolver is optionally implemented by an Appender: it finds a series
// it already stores from the labels as the decoder saw them, so that known
// series skip label validation and construction (tsdb.Head does).
type SeriesResolver interface {
	// ResolveNext returns the series that followed prev (the series
	// resolved just before in the same request) last time, if match accepts
	// its labels: senders repeat their order, so most series are found so.
	ResolveNext(prev tsdb.SeriesRef, match func(labels.Labels) bool) (tsdb.SeriesRef, bool)
	// ResolveHash returns the reference of a series whose labels hash
	// (labels.Labels.Hash) is hash if match accepts its labels, and
	// remembers it as prev's successor.
	ResolveHash(prev tsdb.SeriesRef, hash uint64, match func(labels.Labels) bool) (tsdb.SeriesRef, bool)
}

// Limits bounds what a single write request may contain.
type Limits struct {
	// MaxBodyBytes is the largest accepted compressed body (0 = default 32 MiB).
	MaxBodyBytes int64
	// MaxDecodedBytes is the largest accepted body after snappy decoding (0 = default 128 MiB).
	MaxDecodedBytes int64
	// MaxLabelsPerSeries is the largest number of labels of one series (0 = default 64).
	MaxLabelsPerSeries int
	// MaxLabelNameLength is the longest label name in bytes (0 = default 1024).
	MaxLabelNameLength int
	// MaxLabelValueLength is the longest label value in bytes (0 = default 4096).
	MaxLabelValueLength int
	// MaxSeriesPerRequest is the largest number of series entries in one request (0 = unlimited).
	MaxSeriesPerRequest int
}

// Default limit values, used for zero fields of Limits.
const (
	DefaultMaxBodyBytes        = 32 << 20  // compressed body: 32 MiB
	DefaultMaxDecodedBytes     = 128 << 20 // snappy-decoded body: 128 MiB
	DefaultMaxLabelsPerSeries  = 64        // labels of one series
	DefaultMaxLabelNameLength  = 1024      // bytes of one label name
	DefaultMaxLabelValueLength = 4096      // bytes of one label value
)

// DefaultLimits returns the limits used when none are configured.
func DefaultLimits() Limits {
	return Limits{
		MaxBodyBytes:        DefaultMaxBodyBytes,
		MaxDecodedBytes:     DefaultMaxDecodedBytes,
		MaxLabelsPerSeries:  DefaultMaxLabelsPerSeries,
		MaxLabelNameLength:  DefaultMaxLabelNameLength,
		MaxLabelValueLength: DefaultMaxLabelValueLength,
	}
}

// withDefaults replaces zero or negative fields by their defaults.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = d.MaxBodyBytes
	}
	if l.MaxDecodedBytes <= 0 {
		l.MaxDecodedBytes = d.MaxDecodedBytes
	}
	if l.MaxLabelsPerSeries <= 0 {
		l.MaxLabelsPerSeries = d.MaxLabelsPerSeries
	}
	if l.MaxLabelNameLength <= 0 {
		l.MaxLabelNameLength = d.MaxLabelNameLength
	}
	if l.MaxLabelValueLength <= 0 {
		l.MaxLabelValueLength = d.MaxLabelValueLength
	}
	if l.MaxSeriesPerRequest < 0 {
		l.MaxSeriesPerRequest = 0
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
}
