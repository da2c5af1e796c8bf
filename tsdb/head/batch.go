package head

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
)

// Sample is one float sample of a series.
type Sample struct {
	T int64
	V float64
}

// HistogramSample is one native histogram sample of a series: exactly one
// of H (integer counts) and FH (float counts) is set. The head keeps the
// pointers it is given: the caller hands them over (remote write decodes
// them fresh for each request) and must not change them afterwards.
type HistogramSample struct {
	T  int64
	H  *histogram.Histogram
	FH *histogram.FloatHistogram
	ST int64 // start timestamp; 0: none
}

// SeriesRef names a series the head holds, as Head.ResolveHash found it.
type SeriesRef struct {
	ID uint64     // the series' reference
	s  *memSeries // the series itself: appending it needs no lookup
}

// BatchSeries is one series of a write batch with its samples in timestamp order.
type BatchSeries struct {
	Labels  labels.Labels
	Samples []Sample
	// Ref, when its ID is non-zero, names an existing series (found with
	// Head.ResolveHash); Labels may then be empty.
	Ref SeriesRef
	// Exemplars of the series, in timestamp order.
	Exemplars []Exemplar
	// Histograms holds the series' native histogram samples in timestamp
	// order, validated (histogram.Validate) and with schemas in -4…8 or
	// custom buckets; a series may carry both Samples and Histograms.
	Histograms []HistogramSample
	// Starts, when not nil, holds the start timestamp of each of Samples
	// (same length; 0: none); nil when no sample has one.
	Starts []int64
}

// Metadata describes a metric family (type, help and unit).
type Metadata struct {
	Metric string // metric family name
	Type   string // one of the model.MetricType values ("counter", "gauge", ...)
	Help   string
	Unit   string
}

// Batch is one write request: series with samples plus metric metadata.
// A batch is logged to the WAL as one record, so it is recovered whole or not at all.
type Batch struct {
	Series   []BatchSeries
	Metadata []Metadata
}

// Reset empties the batch keeping its allocated capacity.
func (b *Batch) Reset() {
	b.Series = b.Series[:0]
	b.Metadata = b.Metadata[:0]
}

// Rejection reasons: every sample the head refuses is counted under one of these.
var (
	ErrOutOfOrderSample = errors.New("out of order sample")
	ErrDuplicateSample  = errors.New("duplicate sample for timestamp with a different value")
	ErrTooOldSample     = errors.New("sample is too old: its time range is already persisted in a block")
	ErrTooFarInFuture   = errors.New("sample timestamp too far in the future")
	ErrInvalidLabels    = errors.New("invalid labels")
	ErrInvalidHistogram = errors.New("invalid native histogram")
	// The samples of a new series that a SeriesLimits limit refused to create.
	ErrSeriesLimit          = errors.New("new series refused: limit of active series reached")
	ErrSeriesPerMetricLimit = errors.New("new series refused: limit of active series per metric name reached")
	ErrSeriesPerGroupLimit  = errors.New("new series refused: limit of series per group reached")
	ErrGroupLimit           = errors.New("new series refused: limit of groups reached")
)

// Reasons lists every rejection reason, in the order used by AppendResult.Rejected.
var Reasons = []error{ErrOutOfOrderSample, ErrDuplicateSample, ErrTooOldSample, ErrTooFarInFuture, ErrInvalidLabels, ErrInvalidHistogram,
	ErrSeriesLimit, ErrSeriesPerMetricLimit, ErrSeriesPerGroupLimit, ErrGroupLimit}

// ReasonLabel returns the short label value used for a rejection reason in metrics.
func ReasonLabel(err error) string {
	switch {
	case errors.Is(err, ErrOutOfOrderSample):
		return "out_of_order"
	case errors.Is(err, ErrDuplicateSample):
		return "duplicate"
	case errors.Is(err, ErrTooOldSample):
		return "too_old"
	case errors.Is(err, ErrTooFarInFuture):
		return "too_far_in_future"
	case errors.Is(err, ErrInvalidLabels):
		return "invalid_labels"
	case errors.Is(err, ErrInvalidHistogram):
		return "invalid_histogram"
	case errors.Is(err, ErrSeriesLimit):
		return "series_limit"
	case errors.Is(err, ErrSeriesPerMetricLimit):
		return "series_per_metric_limit"
	case errors.Is(err, ErrSeriesPerGroupLimit):
		return "series_per_group_limit"
	case errors.Is(err, ErrGroupLimit):
		return "group_limit"
	}
	return "other"
}

// AppendResult reports what happened to a batch that the head accepted for processing.
type AppendResult struct {
	SamplesWritten    int
	HistogramsWritten int // native histogram samples written (not in SamplesWritten)
	ExemplarsWritten  int
	// Rejected counts refused samples by reason (keyed by one of Reasons).
	Rejected map[error]int
	// Examples holds one readable message per reason, naming a series.
	Examples map[error]string
}

// Reject records n refused samples of a series for a reason.
func (r *AppendResult) Reject(reason error, n int, detail string) {
	if n <= 0 {
		return
	}
	if r.Rejected == nil {
		r.Rejected = map[error]int{}
		r.Examples = map[error]string{}
	}
	r.Rejected[reason] += n
	if _, ok := r.Examples[reason]; !ok {
		r.Examples[reason] = detail
	}
}

// RejectedTotal returns the number of refused samples.
func (r *AppendResult) RejectedTotal() int {
	n := 0
	for _, c := range r.Rejected {
		n += c
	}
	return n
}

// Err returns nil when nothing was rejected, else an error that lists counts and examples per reason.
func (r *AppendResult) Err() error {
	if len(r.Rejected) == 0 {
		return nil
	}
	reasons := make([]error, 0, len(r.Rejected))
	for e := range r.Rejected {
		reasons = append(reasons, e)
	}
	sort.Slice(reasons, func(i, j int) bool { return reasons[i].Error() < reasons[j].Error() })
	var sb strings.Builder
	for i, e := range reasons {
		if i > 0 {
			sb.WriteString("; ")
		}
		fmt.Fprintf(&sb, "%d samples rejected: %v (e.g. %s)", r.Rejected[e], e, r.Examples[e])
	}
	return &RejectError{Msg: sb.String(), First: reasons[0]}
}

// RejectError is returned for batches with refused samples; it unwraps to one reason.
type RejectError struct {
	Msg   string
	First error
}

func (e *RejectError) Error() string { return e.Msg }
func (e *RejectError) Unwrap() error { return e.First }

// ErrUnavailable reports that the head cannot make writes durable right now
// (the WAL cannot be written: full disk, I/O error); nothing of the batch was
// acknowledged and a retry after a pause can succeed (→ 503 with Retry-After).
var ErrUnavailable = errors.New("storage unavailable: the write-ahead log cannot be written")

var errCorruptPresence = errors.New("chunk presence bitmap does not match its columns")
