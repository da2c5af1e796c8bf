package pushdown

import (
	"cmp"
	"context"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/schema"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// grouper assigns series to the output groups of a node by their labels,
// numbered in order of first appearance.
type grouper struct {
	n    *node
	keep []string // the grouping labels the output keeps
	// byValue maps the value of the one grouping label to its group;
	// otherwise index maps the hash of the grouping labels.
	byValue map[string]int32
	index   map[uint64]int32
	vals    []string // byValue: each group's value
	hashes  []uint64 // index: each group's hash
	// nameless holds the hashes without the metric name of the series of a
	// range function over a selector that does not fix the name: two
	// series that differ only in it collide, which the engine resolves.
	nameless map[uint64]struct{}
	lsets    []labels.Labels // each group's labels
	lb       *labels.Builder
	buf      []byte
}

func newGrouper(n *node) *grouper {
	gp := &grouper{n: n, keep: n.grouping, lb: labels.NewBuilder(labels.EmptyLabels())}
	if n.fn != "" && !n.without {
		// Range functions drop the metric name before the aggregation sees it.
		gp.keep = slicesWithout(gp.keep, labels.MetricName)
	}
	switch {
	case n.perSeries:
	case !n.without && len(gp.keep) == 1:
		gp.byValue = map[string]int32{}
	default:
		gp.index = map[uint64]int32{}
	}
	if n.fn != "" && !hasNameEquality(n.sel) {
		gp.nameless = map[uint64]struct{}{}
	}
	return gp
}

// group returns the group of a series with labels ls, added when new;
// errUnsupported for a series whose name alone tells it from another one.
func (gp *grouper) group(ls labels.Labels) (int32, error) {
	if gp.nameless != nil {
		var h uint64
		h, gp.buf = ls.HashWithoutLabels(gp.buf)
		if _, dup := gp.nameless[h]; dup {
			return 0, errUnsupported
		}
		gp.nameless[h] = struct{}{}
	}
	n := gp.n
	if n.perSeries {
		// Every series is its own output series.
		out := ls
		if n.fn != "last_over_time" {
			out = ls.DropReserved(schema.IsMetadataLabel)
		}
		gp.lsets = append(gp.lsets, out)
		return int32(len(gp.lsets) - 1), nil
	}
	if gp.byValue != nil {
		// One grouping label: its value is the group's key (a label is
		// never present with an empty value).
		v := ls.Get(gp.keep[0])
		if gi, ok := gp.byValue[v]; ok {
			return gi, nil
		}
		gp.byValue[v] = int32(len(gp.lsets))
		gp.vals = append(gp.vals, v)
	} else {
		var h uint64
		switch {
		case n.without:
			h, gp.buf = ls.HashWithoutLabels(gp.buf, n.grouping...)
		case len(gp.keep) > 0:
			h, gp.buf = ls.HashForLabels(gp.buf, gp.keep...)
		}
		if gi, ok := gp.index[h]; ok {
			return gi, nil
		}
		gp.index[h] = int32(len(gp.lsets))
		gp.hashes = append(gp.hashes, h)
	}
	gp.lsets = append(gp.lsets, groupLabels(gp.lb, ls, n, gp.keep))
	return int32(len(gp.lsets) - 1), nil
}

// add appends the groups of o (another part of the same selection, after
// gp's) to gp's that are new, and returns the group in gp of each of o's.
func (gp *grouper) add(o *grouper) ([]int32, error) {
	for h := range o.nameless {
		if _, dup := gp.nameless[h]; dup {
			return nil, errUnsupported
		}
		gp.nameless[h] = struct{}{}
	}
	to := make([]int32, len(o.lsets))
	for li, ls := range o.lsets {
		gi, ok := int32(len(gp.lsets)), false
		switch {
		case gp.byValue != nil:
			if gi, ok = gp.byValue[o.vals[li]]; !ok {
				gi = int32(len(gp.lsets))
				gp.byValue[o.vals[li]] = gi
				gp.vals = append(gp.vals, o.vals[li])
			}
		case gp.index != nil:
			if gi, ok = gp.index[o.hashes[li]]; !ok {
				gi = int32(len(gp.lsets))
				gp.index[o.hashes[li]] = gi
				gp.hashes = append(gp.hashes, o.hashes[li])
			}
		}
		if !ok {
			gp.lsets = append(gp.lsets, ls)
		}
		to[li] = gi
	}
	return to, nil
}

// streamWorker reads one set of a streamed selection: it groups and
// evaluates each series as it comes, keeping none.
type streamWorker struct {
	*worker
	gp     *grouper
	accs   accPages
	series int // series read
}

// evalStreams is evalNode over a querier that streams: the selection comes
// in up to workers sets, each read by one worker that groups and evaluates
// its series as they come, so that no series is kept, and the storage
// reuses their memory; the workers' groups and accumulators are then merged
// in order, as run merges its workers'. errSequential asks the caller to
// evaluate n without streams (sums near overflow, or more accumulators
// than maxOutputPoints across the workers).
func evalStreams(ctx context.Context, st fastread.Streamer, n *node, g grid, hints *storage.SelectHints, mint, maxt int64, workers int) ([]synthSeries, annotations.Annotations, error) {
	sets := st.SelectStream(ctx, workers, hints, n.sel.LabelMatchers...)
	if len(sets) == 0 {
		return nil, nil, nil // nothing selected
	}
	steps := g.steps()
	limit := int64(maxOutputPoints)
	if n.perSeries {
		limit = perSeriesMaxPoints
	}
	var (
		points atomic.Int64 // accumulators of all workers
		ws     = make([]*streamWorker, len(sets))
		pooled = make([]*worker, len(sets))
	)
	defer func() {
		for _, w := range ws {
			w.accs.release() // the output holds copies
		}
		putWorkers(pooled)
	}()
	for i := range sets {
		w := &streamWorker{worker: getWorker(n, g, mint, maxt, steps), gp: newGrouper(n), accs: newAccPages(steps)}
		w.pages = &w.accs
		ws[i], pooled[i] = w, w.worker
	}
	runWorkers(pooled, func(i int, _ *worker) error { return ws[i].read(ctx, sets[i], &points, limit) })
	var err error
	for i, w := range ws {
		if w.err != nil {
			pooled[i] = nil // a worker that failed is not reused
			err = cmp.Or(err, w.err)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	var annos annotations.Annotations
	used, window := 0, 0
	for i, w := range ws {
		annos.Merge(sets[i].Warnings())
		annos.Merge(w.annos)
		used += w.points
		window = max(window, w.window)
	}
	// As run: the engine would hold every series' value at every step and
	// one range window.
	if used+window > g.maxSamples {
		return nil, nil, promql.ErrTooManySamples("query execution")
	}
	if len(ws) > 1 && (n.op == parser.SUM || n.op == parser.AVG) {
		for _, w := range ws {
			if w.maxAbs*float64(w.series) >= bigSum {
				return nil, nil, errSequential // see run
			}
		}
	}
	if n.perSeries {
		// Every series is its own group: the workers' groups are disjoint,
		// and their output is theirs in order.
		total := 0
		for _, w := range ws {
			total += len(w.gp.lsets)
		}
		if int64(total)*int64(steps) > limit {
			return nil, annos, errUnsupported // as evalNode
		}
		out := make([]synthSeries, 0, total)
		for _, w := range ws {
			out = appendCollected(out, w.accs.group, w.gp.lsets, n.op, g)
		}
		if hasDuplicates(out) {
			return nil, nil, errUnsupported // as evalNode
		}
		return out, annos, nil
	}
	gp, accs := ws[0].gp, &ws[0].accs
	for _, w := range ws[1:] {
		to, err := gp.add(w.gp)
		if err != nil {
			return nil, nil, err
		}
		accs.grow(len(gp.lsets))
		for li, gi := range to {
			dst, src := accs.group(int(gi)), w.accs.group(li)
			for k := range dst {
				if err := merge(&dst[k], &src[k], n.op); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	if int64(len(gp.lsets))*int64(steps) > limit {
		return nil, annos, errUnsupported // as evalNode
	}
	out := appendCollected(make([]synthSeries, 0, len(gp.lsets)), accs.group, gp.lsets, n.op, g)
	if hasDuplicates(out) {
		return nil, nil, errUnsupported // as evalNode
	}
	return out, annos, nil
}

// read groups and evaluates the series of ss as they come, growing its
// accumulators with its groups; points counts the accumulators of all the
// workers of a node, which may not exceed limit.
func (w *streamWorker) read(ctx context.Context, ss storage.SeriesSet, points *atomic.Int64, limit int64) error {
	for ; ss.Next(); w.series++ {
		if w.series%128 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		s := ss.At()
		gi, err := w.gp.group(s.Labels())
		if err != nil {
			return err
		}
		if k := len(w.gp.lsets); k > w.accs.groups {
			if points.Add(int64((k-w.accs.groups)*w.steps)) > limit {
				return errSequential // the merged groups may be fewer: evaluated without streams
			}
			w.accs.grow(k)
		}
		if err := w.worker.series(s, gi); err != nil {
			return err
		}
	}
	return ss.Err()
}
