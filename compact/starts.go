package compact

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// mergeStarts returns the start timestamps of the merge of srcs (nil if no
// source has any), exact at every sample of the merged block. The sources'
// starts files are read side by side in label order. When the sources'
// time ranges do not overlap, a series' runs are those of each source, in
// time order (every merged sample comes from the one source whose range
// holds it). Otherwise a series found in several sources has its runs
// rebuilt from the merged samples: at one timestamp the sample of the
// source listed last is kept, with that source's start timestamp. Memory
// holds one series' runs of each source, and the timestamps of one series.
func mergeStarts(srcs []*block.Block) block.StartSource {
	var with []int // the sources with start timestamps, by MinTime
	for i, b := range srcs {
		if b.NumStartSeries() > 0 {
			with = append(with, i)
		}
	}
	if len(with) == 0 {
		return nil
	}
	slices.SortStableFunc(with, func(a, b int) int { return cmp.Compare(srcs[a].Meta().MinTime, srcs[b].Meta().MinTime) })
	disjoint := true
	byTime := make([]*block.Block, len(srcs))
	copy(byTime, srcs)
	slices.SortStableFunc(byTime, func(a, b *block.Block) int { return cmp.Compare(a.Meta().MinTime, b.Meta().MinTime) })
	for k := 1; k < len(byTime); k++ {
		if byTime[k].Meta().MinTime < byTime[k-1].Meta().MaxTime {
			disjoint = false
		}
	}
	return func(yield func(*block.SeriesStarts) error) error {
		its := make([]*block.StartsIterator, len(with))
		ok := make([]bool, len(with))
		for k, i := range with {
			m := srcs[i].Meta()
			its[k] = srcs[i].StartsIterator(m.MinTime, m.MaxTime-1)
			if ok[k] = its[k].Next(); !ok[k] && its[k].Err() != nil {
				return fmt.Errorf("source %s: %w", srcs[i].Dir(), its[k].Err())
			}
		}
		rb := rebuilder{srcs: srcs, runs: make([]starts.Runs, len(srcs))}
		var out block.SeriesStarts
		for {
			var next labels.Labels
			found := false
			for k, it := range its {
				if ok[k] && (!found || labels.Compare(it.At().Labels, next) < 0) {
					next, found = it.At().Labels, true
				}
			}
			if !found {
				return nil
			}
			out.Labels = next
			out.Runs = out.Runs[:0]
			clear(rb.runs)
			for k, it := range its { // by MinTime: runs concatenate in time order
				if !ok[k] || !labels.Equal(it.At().Labels, next) {
					continue
				}
				rb.runs[with[k]] = it.At().Runs
				out.Runs = append(out.Runs, it.At().Runs...)
			}
			if !disjoint {
				var err error
				if out.Runs, err = rb.rebuild(next, out.Runs); err != nil {
					return err
				}
			}
			if err := yield(&out); err != nil {
				return err
			}
			for k, it := range its {
				if !ok[k] || !labels.Equal(it.At().Labels, next) {
					continue
				}
				if ok[k] = it.Next(); !ok[k] && it.Err() != nil {
					return fmt.Errorf("source %s: %w", srcs[with[k]].Dir(), it.Err())
				}
			}
		}
	}
}

// rebuilder rebuilds a series' runs from the samples of overlapping sources.
type rebuilder struct {
	srcs    []*block.Block
	runs    []starts.Runs // per source: the series' runs, nil if none
	samples []stSample
	it      chunkenc.Iterator
}

// stSample is a sample's timestamp and start timestamp, and its source.
type stSample struct {
	t, st int64
	src   int
}

// rebuild returns the runs of series lset in the merge: concat (the
// sources' runs one after the other) when a single source holds the
// series' samples, else runs rebuilt from the merged samples.
func (rb *rebuilder) rebuild(lset labels.Labels, concat starts.Runs) (starts.Runs, error) {
	rb.samples = rb.samples[:0]
	holders := 0
	only := -1
	for i, b := range rb.srcs {
		id, ok, err := b.SeriesID(lset)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", b.Dir(), err)
		}
		if !ok {
			continue
		}
		holders++
		only = i
		rb.it = b.IteratorWithStarts(id, rb.runs[i], math.MinInt64, math.MaxInt64, rb.it)
		for rb.it.Next() != chunkenc.ValNone {
			rb.samples = append(rb.samples, stSample{t: rb.it.AtT(), st: rb.it.AtST(), src: i})
		}
		if err := rb.it.Err(); err != nil {
			return nil, fmt.Errorf("source %s: %w", b.Dir(), err)
		}
	}
	switch {
	case holders == 0:
		return concat[:0], nil // no samples: no start timestamps needed
	case holders == 1:
		if rb.runs[only] == nil {
			return concat[:0], nil
		}
		return append(concat[:0], rb.runs[only]...), nil
	}
	// Listed order, then time: at one timestamp the last listed source wins.
	slices.SortStableFunc(rb.samples, func(a, b stSample) int { return cmp.Compare(a.t, b.t) })
	out := concat[:0]
	prevT := int64(math.MinInt64)
	for k, s := range rb.samples {
		if k+1 < len(rb.samples) && rb.samples[k+1].t == s.t {
			continue
		}
		out.Append(prevT, s.t, s.st)
		prevT = s.t
	}
	return out, nil
}
