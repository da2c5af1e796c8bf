package tsdb

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// AppendFloats implements fastread.FloatAppender.
func (s *blockSeries) AppendFloats(ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	if s.one {
		if t := s.oneT; t >= max(mint, s.sel.mint) && t <= min(maxt, s.sel.maxt) {
			ts, vs = append(ts, t), append(vs, s.oneV)
		}
		return ts, vs, nil
	}
	reuse, _ := blockIterators.Get().(*block.Iterator)
	it := s.sel.b.IteratorWithStarts(s.id, s.startRuns(), max(mint, s.sel.mint), min(maxt, s.sel.maxt), reuse).(*block.Iterator)
	ts, vs, err := it.AppendFloats(ts, vs)
	blockIterators.Put(it)
	return ts, vs, err
}

// oneFloat iterates over one float sample.
type oneFloat struct {
	t    int64
	v    float64
	read bool // Next or Seek has been called
	done bool // past the sample
}

func (it *oneFloat) Next() chunkenc.ValueType {
	if it.read {
		it.done = true
	}
	it.read = true
	if it.done {
		return chunkenc.ValNone
	}
	return chunkenc.ValFloat
}

func (it *oneFloat) Seek(t int64) chunkenc.ValueType {
	it.read = true
	if it.done || t > it.t {
		it.done = true
		return chunkenc.ValNone
	}
	return chunkenc.ValFloat
}

func (it *oneFloat) At() (int64, float64) { return it.t, it.v }

func (it *oneFloat) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.t, nil
}

func (it *oneFloat) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return it.t, nil
}

func (it *oneFloat) AtT() int64  { return it.t }
func (it *oneFloat) AtST() int64 { return 0 }
func (it *oneFloat) Err() error  { return nil }

// blockIterators recycles the block iterators of AppendFloats.
var blockIterators sync.Pool

// mergedSeries is one series found in several blocks and the head, in time
// order of its sources: the DB querier's vertical merge.
type mergedSeries struct {
	lset  labels.Labels
	parts []storage.Series
}

// mergeSeries is the DB querier's storage.VerticalSeriesMergeFunc: Prometheus's
// chained merge, keeping fastread.FloatAppender.
func mergeSeries(ss ...storage.Series) storage.Series {
	if len(ss) == 1 {
		return ss[0]
	}
	// Prometheus's merge hands the sources of one series over in no set
	// order (a heap of series sets): put the blocks in time order, the head
	// after them, so that AppendFloats reads them one after the other.
	slices.SortStableFunc(ss, func(a, b storage.Series) int { return cmp.Compare(sourceStart(a), sourceStart(b)) })
	return &mergedSeries{lset: ss[0].Labels(), parts: ss}
}

// sourceStart orders the sources of a merged series: a block's start time,
// the end of time for the head and anything else.
func sourceStart(s storage.Series) int64 {
	if bs, ok := s.(*blockSeries); ok {
		return bs.sel.b.MinTime()
	}
	return math.MaxInt64
}

func (s *mergedSeries) Labels() labels.Labels { return s.lset }

func (s *mergedSeries) Iterator(reuse chunkenc.Iterator) chunkenc.Iterator {
	return storage.ChainedSeriesMerge(s.parts...).Iterator(reuse)
}

// HasStartTimestamps implements fastread.StartTimestamper: true when a
// source has them, or does not say.
func (s *mergedSeries) HasStartTimestamps() bool {
	for _, p := range s.parts {
		if st, ok := p.(fastread.StartTimestamper); !ok || st.HasStartTimestamps() {
			return true
		}
	}
	return false
}

// AppendFloats implements fastread.FloatAppender: the sources one after the other
// while they do not overlap in time, else through the chained merge.
func (s *mergedSeries) AppendFloats(ts []int64, vs []float64, mint, maxt int64) ([]int64, []float64, error) {
	start := len(ts)
	for _, p := range s.parts {
		fa, ok := p.(fastread.FloatAppender)
		if !ok {
			return fastread.AppendIter(s.Iterator(nil), ts[:start], vs[:start], mint, maxt)
		}
		from := len(ts)
		var err error
		if ts, vs, err = fa.AppendFloats(ts, vs, mint, maxt); err != nil {
			return ts, vs, err
		}
		if from > start && len(ts) > from && ts[from] <= ts[from-1] {
			// Overlapping sources (an out-of-order block): merge properly.
			return fastread.AppendIter(s.Iterator(nil), ts[:start], vs[:start], mint, maxt)
		}
	}
	return ts, vs, nil
}
