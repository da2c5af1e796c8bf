package tsdb

import (
	"context"
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"
)

var _ storage.Storage = (*Head)(nil)

// StartTime returns the oldest timestamp in the head (the wall clock when empty).
func (h *Head) StartTime() (int64, error) {
	if v := h.minT.Load(); v <= h.maxT.Load() {
		return v, nil
	}
	return h.opts.Now(), nil
}

// Appender returns a Prometheus storage.Appender that collects samples and
// writes them as one batch on Commit (used by rule evaluation and tests).
func (h *Head) Appender(ctx context.Context) storage.Appender {
	return &appender{h: h, ctx: ctx, idx: map[uint64]int{}}
}

// AppenderV2 returns a Prometheus storage.AppenderV2 with the same semantics.
func (h *Head) AppenderV2(ctx context.Context) storage.AppenderV2 {
	return &appenderV2{appender{h: h, ctx: ctx, idx: map[uint64]int{}}}
}

type appender struct {
	h     *Head
	ctx   context.Context
	batch Batch
	idx   map[uint64]int // series hash → index in batch (hash collisions fall back to a new entry)
}

func (a *appender) add(lset labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	if err := validateLabels(lset); err != nil {
		return 0, err
	}
	hash := lset.Hash()
	i, ok := a.idx[hash]
	if !ok || !labels.Equal(a.batch.Series[i].Labels, lset) {
		i = len(a.batch.Series)
		a.batch.Series = append(a.batch.Series, BatchSeries{Labels: lset.Copy()})
		a.idx[hash] = i
	}
	a.batch.Series[i].Samples = append(a.batch.Series[i].Samples, Sample{T: t, V: v})
	return storage.SeriesRef(hash), nil
}

func (a *appender) Append(_ storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	return a.add(l, t, v)
}

func (a *appender) SetOptions(*storage.AppendOptions) {}

func (a *appender) AppendExemplar(ref storage.SeriesRef, _ labels.Labels, _ exemplar.Exemplar) (storage.SeriesRef, error) {
	return ref, nil // exemplars are not stored yet; Prometheus ignores exemplar errors.
}

func (a *appender) AppendHistogram(storage.SeriesRef, labels.Labels, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, ErrHistogram
}

func (a *appender) AppendHistogramSTZeroSample(storage.SeriesRef, labels.Labels, int64, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, ErrHistogram
}

func (a *appender) UpdateMetadata(ref storage.SeriesRef, l labels.Labels, m metadata.Metadata) (storage.SeriesRef, error) {
	a.batch.Metadata = append(a.batch.Metadata, Metadata{Metric: l.Get(labels.MetricName), Type: string(m.Type), Help: m.Help, Unit: m.Unit})
	return ref, nil
}

func (a *appender) AppendSTZeroSample(ref storage.SeriesRef, _ labels.Labels, _, _ int64) (storage.SeriesRef, error) {
	return ref, nil // start timestamps are not stored yet
}

// Commit writes everything appended as one batch. Samples the head refuses
// (out of order, duplicates) are reported as an error naming them.
func (a *appender) Commit() error {
	defer func() { a.batch.Reset(); clear(a.idx) }()
	if len(a.batch.Series) == 0 && len(a.batch.Metadata) == 0 {
		return nil
	}
	res, err := a.h.AppendBatch(a.ctx, &a.batch)
	if err != nil {
		return err
	}
	return res.Err()
}

func (a *appender) Rollback() error {
	a.batch.Reset()
	clear(a.idx)
	return nil
}

type appenderV2 struct{ appender }

func (a *appenderV2) Append(_ storage.SeriesRef, ls labels.Labels, _, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AppendV2Options) (storage.SeriesRef, error) {
	if h != nil || fh != nil {
		return 0, fmt.Errorf("series %s: %w", ls, ErrHistogram)
	}
	ref, err := a.add(ls, t, v)
	if err != nil {
		return 0, err
	}
	if !opts.Metadata.IsEmpty() {
		name := opts.MetricFamilyName
		if name == "" {
			name = ls.Get(labels.MetricName)
		}
		a.batch.Metadata = append(a.batch.Metadata, Metadata{Metric: name, Type: string(opts.Metadata.Type), Help: opts.Metadata.Help, Unit: opts.Metadata.Unit})
	}
	return ref, nil
}

var _ = math.MaxInt64
