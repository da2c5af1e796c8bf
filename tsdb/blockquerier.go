package tsdb

import (
	"context"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/blockset"
	"github.com/tandem-tsdb/tandem/tsdb/internal/results"
	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// blockQuerier is a storage.Querier over one on-disk block.
type blockQuerier struct {
	b          *blockset.Block
	mint, maxt int64
}

func (q *blockQuerier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	limit := 0
	if hints != nil {
		mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
		limit = hints.Limit
	}
	ids, err := q.b.Postings(ms...)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	withST := q.b.NumStartSeries() > 0
	if err := q.b.StartsErr(); err != nil {
		return storage.ErrSeriesSet(err)
	}
	// Series ids are in label order: the set is sorted without sorting.
	out := make([]storage.Series, 0, len(ids))
	var warn annotations.Annotations
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return storage.ErrSeriesSet(err)
		}
		st, err := q.b.ChunkStats(id, mint, maxt)
		if err != nil {
			return storage.ErrSeriesSet(err)
		}
		if len(st) == 0 {
			continue
		}
		lset, err := q.b.Labels(id)
		if err != nil {
			return storage.ErrSeriesSet(err)
		}
		if limit > 0 && len(out) == limit {
			warn.Add(results.ErrLimitTruncated)
			break
		}
		bs := &blockSeries{b: q.b.Block, id: id, lset: lset, mint: mint, maxt: maxt}
		if withST {
			bs.runs = q.b.Starts(lset)
		}
		out = append(out, bs)
	}
	return results.NewList(out, warn)
}

func (q *blockQuerier) LabelValues(_ context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	vals, err := q.b.LabelValues(name, ms...)
	if err != nil {
		return nil, nil, err
	}
	return results.ApplyLimit(vals, hints)
}

func (q *blockQuerier) LabelNames(_ context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	names, err := q.b.LabelNames(ms...)
	if err != nil {
		return nil, nil, err
	}
	return results.ApplyLimit(names, hints)
}

func (q *blockQuerier) Close() error {
	q.b.Release()
	return nil
}

type blockSeries struct {
	b          *block.Block
	id         uint32
	lset       labels.Labels
	runs       starts.Runs // start timestamps, nil if none
	mint, maxt int64
}

func (s *blockSeries) Labels() labels.Labels { return s.lset }

func (s *blockSeries) Iterator(reuse chunkenc.Iterator) chunkenc.Iterator {
	return s.b.IteratorWithStarts(s.id, s.runs, s.mint, s.maxt, reuse)
}

// HasStartTimestamps implements fastread.StartTimestamper.
func (s *blockSeries) HasStartTimestamps() bool { return len(s.runs) > 0 }
