package tsdb

import (
	"context"
	"fmt"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// Appender returns a Prometheus storage.Appender that collects samples and
// writes them as one batch on Commit (used by rule evaluation and tests).
func (db *DB) Appender(ctx context.Context) storage.Appender {
	return &appender{h: db.head, ctx: ctx, idx: map[uint64]int{}}
}

// AppenderV2 returns a Prometheus storage.AppenderV2 with the same semantics.
func (db *DB) AppenderV2(ctx context.Context) storage.AppenderV2 {
	return &appenderV2{appender{h: db.head, ctx: ctx, idx: map[uint64]int{}}}
}

// sampleKind is what an append adds to a batch entry.
type sampleKind int

const (
	kindAny       sampleKind = iota // an exemplar: any entry of the series
	kindFloat                       // a float sample
	kindHistogram                   // a native histogram sample
)

type appender struct {
	h     *head.Head
	ctx   context.Context
	batch head.Batch
	idx   map[uint64]int // series hash → index in batch (hash collisions fall back to a new entry)
}

// entry returns the batch index of the series lset, adding it if new. A
// series whose samples switch between floats and histograms gets another
// entry at each switch, so the head places them in the order appended (as
// Prometheus's appender does; a batch entry holds its floats, then its
// histograms).
func (a *appender) entry(lset labels.Labels, kind sampleKind) (int, error) {
	if err := head.ValidateLabels(lset); err != nil {
		return 0, err
	}
	hash := lset.Hash()
	i, ok := a.idx[hash]
	if ok && kind == kindHistogram && len(a.batch.Series[i].Samples) > 0 && len(a.batch.Series[i].Histograms) == 0 {
		ok = false // floats, then histograms: the same entry keeps that order
	}
	if ok && kind == kindFloat && len(a.batch.Series[i].Histograms) > 0 {
		ok = false
	}
	if !ok || !labels.Equal(a.batch.Series[i].Labels, lset) {
		i = len(a.batch.Series)
		a.batch.Series = append(a.batch.Series, head.BatchSeries{Labels: lset.Copy()})
		a.idx[hash] = i
	}
	return i, nil
}

// add adds a float sample with start timestamp st (0: none).
func (a *appender) add(lset labels.Labels, st, t int64, v float64) (storage.SeriesRef, error) {
	i, err := a.entry(lset, kindFloat)
	if err != nil {
		return 0, err
	}
	bs := &a.batch.Series[i]
	if st != 0 && bs.Starts == nil {
		bs.Starts = make([]int64, len(bs.Samples), cap(bs.Samples)+1)
	}
	bs.Samples = append(bs.Samples, head.Sample{T: t, V: v})
	if bs.Starts != nil {
		bs.Starts = append(bs.Starts, st)
	}
	return storage.SeriesRef(lset.Hash()), nil
}

func (a *appender) Append(_ storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	return a.add(l, 0, t, v)
}

func (a *appender) SetOptions(*storage.AppendOptions) {}

// AppendExemplar adds e to the series l in the batch; it is written with the
// batch on Commit.
func (a *appender) AppendExemplar(ref storage.SeriesRef, l labels.Labels, e exemplar.Exemplar) (storage.SeriesRef, error) {
	i, err := a.entry(l, kindAny)
	if err != nil {
		return 0, err
	}
	a.batch.Series[i].Exemplars = append(a.batch.Series[i].Exemplars, head.Exemplar{Labels: e.Labels.Copy(), T: e.Ts, V: e.Value})
	return ref, nil
}

// AppendHistogram adds a native histogram sample (a copy of h or fh) to the
// series l in the batch.
func (a *appender) AppendHistogram(_ storage.SeriesRef, l labels.Labels, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return a.addHistogram(l, 0, t, h, fh)
}

// addHistogram adds a native histogram sample with start timestamp st (0: none).
func (a *appender) addHistogram(l labels.Labels, st, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	i, err := a.entry(l, kindHistogram)
	if err != nil {
		return 0, err
	}
	hs := head.HistogramSample{T: t, ST: st}
	switch {
	case h != nil:
		hs.H = h.Copy()
	case fh != nil:
		hs.FH = fh.Copy()
	default:
		return 0, fmt.Errorf("series %s: %w: no histogram given", l, head.ErrInvalidHistogram)
	}
	a.batch.Series[i].Histograms = append(a.batch.Series[i].Histograms, hs)
	return storage.SeriesRef(l.Hash()), nil
}

// AppendHistogramSTZeroSample does nothing: tandem stores start timestamps
// with their samples (AppenderV2's st) and synthesizes no zero samples.
func (a *appender) AppendHistogramSTZeroSample(ref storage.SeriesRef, _ labels.Labels, _, _ int64, _ *histogram.Histogram, _ *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return ref, nil
}

func (a *appender) UpdateMetadata(ref storage.SeriesRef, l labels.Labels, m metadata.Metadata) (storage.SeriesRef, error) {
	a.batch.Metadata = append(a.batch.Metadata, head.Metadata{Metric: l.Get(labels.MetricName), Type: string(m.Type), Help: m.Help, Unit: m.Unit})
	return ref, nil
}

func (a *appender) AppendSTZeroSample(ref storage.SeriesRef, _ labels.Labels, _, _ int64) (storage.SeriesRef, error) {
	return ref, nil // as AppendHistogramSTZeroSample
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

func (a *appenderV2) Append(_ storage.SeriesRef, ls labels.Labels, st, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AppendV2Options) (storage.SeriesRef, error) {
	var ref storage.SeriesRef
	var err error
	if h != nil || fh != nil {
		ref, err = a.addHistogram(ls, st, t, h, fh)
	} else {
		ref, err = a.add(ls, st, t, v)
	}
	if err != nil {
		return 0, err
	}
	for _, e := range opts.Exemplars {
		if _, err := a.AppendExemplar(ref, ls, e); err != nil {
			return 0, err
		}
	}
	if !opts.Metadata.IsEmpty() {
		name := opts.MetricFamilyName
		if name == "" {
			name = ls.Get(labels.MetricName)
		}
		a.batch.Metadata = append(a.batch.Metadata, head.Metadata{Metric: name, Type: string(opts.Metadata.Type), Help: opts.Metadata.Help, Unit: opts.Metadata.Unit})
	}
	return ref, nil
}
