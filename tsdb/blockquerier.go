package tsdb

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/blockset"
	"github.com/tandem-tsdb/tandem/tsdb/fastread"
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
	newest := false
	if hints != nil {
		mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
		limit = hints.Limit
		// Only each series' newest sample is read: the chunk statistics
		// often hold it, and nothing need be decoded.
		newest = hints.Func == fastread.HintLastSample && q.b.NumStartSeries() == 0
	}
	ids, err := q.b.Postings(ms...)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	if err := q.b.StartsErr(); err != nil {
		return storage.ErrSeriesSet(err)
	}
	// Series ids are in label order: the set is sorted without sorting.
	var out []storage.Series
	if limit > 0 || len(ids) < parallelSelectMin || runtime.GOMAXPROCS(0) < 2 {
		out, err = q.selectIDs(ctx, ids, mint, maxt, limit, newest)
	} else {
		out, err = q.selectParallel(ctx, ids, mint, maxt, newest)
	}
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	var warn annotations.Annotations
	if limit > 0 && len(out) > limit {
		out = out[:limit]
		warn.Add(results.ErrLimitTruncated)
	}
	return results.NewList(out, warn)
}

// parallelSelectMin is the number of series from which Select reads their
// index entries on several goroutines.
const parallelSelectMin = 4096

// selectIDs returns the series of ids with samples in [mint, maxt], in ids'
// order; with limit > 0, at most limit+1 of them; with newest, those whose
// newest sample the chunk statistics hold carry just that one.
func (q *blockQuerier) selectIDs(ctx context.Context, ids []uint32, mint, maxt int64, limit int, newest bool) ([]storage.Series, error) {
	n := len(ids)
	if limit > 0 {
		n = min(n, limit+1)
	}
	out := make([]storage.Series, 0, n)
	slab := make([]blockSeries, 0, n) // one allocation for all
	withST := q.b.NumStartSeries() > 0
	sel := &blockSelect{b: q.b.Block, mint: mint, maxt: maxt}
	var sc block.SeriesScratch
	for i, id := range ids {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		var (
			lset labels.Labels
			in   bool
			err  error
		)
		if newest {
			lset, in, err = q.b.SeriesNewest(id, mint, maxt, &sc)
		} else {
			lset, in, err = q.b.SeriesIn(id, mint, maxt, &sc)
		}
		if err != nil {
			return nil, err
		}
		if !in {
			continue
		}
		slab = append(slab, blockSeries{sel: sel, id: id, lset: lset})
		bs := &slab[len(slab)-1]
		bs.oneT, bs.oneV, bs.one = sc.Newest()
		if withST {
			if runs := q.b.Starts(lset); runs != nil {
				bs.runs = &runs
			}
		}
		out = append(out, bs)
		if limit > 0 && len(out) > limit {
			break
		}
	}
	return out, nil
}

// selectParallel is selectIDs without a limit, ids cut in equal shares read
// on up to four goroutines.
func (q *blockQuerier) selectParallel(ctx context.Context, ids []uint32, mint, maxt int64, newest bool) ([]storage.Series, error) {
	p := min(runtime.GOMAXPROCS(0), 4)
	parts := make([][]storage.Series, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for k := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				// A panic here would end the process: nothing above this
				// goroutine recovers it. It fails the query instead.
				if r := recover(); r != nil {
					errs[k] = fmt.Errorf("%s: select panicked: %v", q.b.Dir(), r)
				}
			}()
			parts[k], errs[k] = q.selectIDs(ctx, ids[k*len(ids)/p:(k+1)*len(ids)/p], mint, maxt, 0, newest)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	n := 0
	for _, part := range parts {
		n += len(part)
	}
	out := make([]storage.Series, 0, n)
	for _, part := range parts {
		out = append(out, part...)
	}
	return out, nil
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
	sel  *blockSelect
	lset labels.Labels
	runs *starts.Runs // start timestamps, nil if none

	// one: the series stands for its newest sample in [mint, maxt] alone
	// (the caller hinted fastread.HintLastSample), oneT and oneV.
	oneT int64
	oneV float64
	id   uint32
	one  bool
}

// blockSelect is what the series of one selection share: 56 bytes a series
// instead of 96 (a selection of every series builds them all).
type blockSelect struct {
	b          *block.Block
	mint, maxt int64
}

// startRuns returns the series' start timestamps, nil if none.
func (s *blockSeries) startRuns() starts.Runs {
	if s.runs == nil {
		return nil
	}
	return *s.runs
}

func (s *blockSeries) Labels() labels.Labels { return s.lset }

func (s *blockSeries) Iterator(reuse chunkenc.Iterator) chunkenc.Iterator {
	if s.one {
		return &oneFloat{t: s.oneT, v: s.oneV}
	}
	return s.sel.b.IteratorWithStarts(s.id, s.startRuns(), s.sel.mint, s.sel.maxt, reuse)
}

// HasStartTimestamps implements fastread.StartTimestamper.
func (s *blockSeries) HasStartTimestamps() bool { return len(s.startRuns()) > 0 }
