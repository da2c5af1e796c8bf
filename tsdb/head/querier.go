package head

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/tandem-tsdb/tandem/tsdb/fastread"
	"github.com/tandem-tsdb/tandem/tsdb/internal/results"
	"github.com/tandem-tsdb/tandem/tsdb/internal/sorted"
	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// Querier returns a storage.Querier over the head for [mint, maxt].
func (h *Head) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{h: h, mint: mint, maxt: maxt}, nil
}

type querier struct {
	h          *Head
	mint, maxt int64
}

// Select returns the series matching ms with their samples in the hinted range.
func (q *querier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	sel := q.selection(hints, ms)
	out, err := snapshotAll(ctx, sel.list, sel.mint, sel.maxt, sel.lastOnly)
	sel.buf.put(sel.list)
	if err != nil {
		q.h.logSnapshotPanic(err)
		return storage.ErrSeriesSet(err)
	}
	if sortSeries || sel.limit > 0 {
		sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].lset, out[j].lset) < 0 })
	}
	var warn annotations.Annotations
	if sel.limit > 0 && len(out) > sel.limit {
		out = out[:sel.limit]
		warn.Add(results.ErrLimitTruncated)
	}
	return results.NewList(out, warn)
}

// selection is what Select and SelectStream snapshot: the series matching
// a selector, sorted by group, in pooled slices (buf, given back with
// buf.put(list)), and the range and hints they are read with.
type selection struct {
	list       []*memSeries
	buf        *seriesBuf
	mint, maxt int64
	limit      int
	lastOnly   bool // only each series' newest sample in the range is read
}

// selection gathers the series matching ms, sorted by group.
func (q *querier) selection(hints *storage.SelectHints, ms []*labels.Matcher) selection {
	sel := selection{mint: q.mint, maxt: q.maxt}
	if hints != nil {
		sel.mint, sel.maxt = max(sel.mint, hints.Start), min(sel.maxt, hints.End)
		sel.limit = hints.Limit
		// The HTTP API's series and label calls ask only which series have
		// samples in the range: the newest sample answers that too.
		sel.lastOnly = hints.Func == fastread.HintLastSample || hints.Func == fastread.HintSeries
	}
	refs := q.h.index.postingsFor(ms...)
	sel.buf = seriesBufs.Get().(*seriesBuf)
	list := slices.Grow(sel.buf.list[:0], len(refs))
	for _, ref := range refs {
		if s := q.h.seriesByRef(ref); s != nil {
			list = append(list, s)
		}
	}
	putRefs(refs)
	// Snapshot group by group: one lock acquisition per group.
	sel.buf.tmp = sortByGroup(list, sel.buf.tmp)
	sel.list = list
	return sel
}

// logSnapshotPanic logs err when it is a snapshot that panicked.
func (h *Head) logSnapshotPanic(err error) {
	var sp *snapshotPanic
	if errors.As(err, &sp) {
		h.logger.Error("head snapshot panicked: the query fails, the process goes on", "panic", fmt.Sprint(sp.val), "stack", string(sp.stack))
	}
}

// seriesBuf holds the slices a selection is gathered and sorted in, pooled:
// a selection of a million series otherwise leaves two slices of a million
// pointers behind for the collector.
type seriesBuf struct {
	list, tmp []*memSeries
}

var seriesBufs = sync.Pool{New: func() any { return new(seriesBuf) }}

// put returns b to the pool with list as its list, holding no series.
func (b *seriesBuf) put(list []*memSeries) {
	clear(list)
	clear(b.tmp) // as long as the list it sorted, or empty
	b.list, b.tmp = list[:0], b.tmp[:0]
	seriesBufs.Put(b)
}

// sortByGroup orders list by group (creation order), then column, using
// tmp (grown as needed and returned) as scratch. The
// selections of many series (every series of a metric, of a job) come in
// postings order, which interleaves the groups as their senders' shards
// did: while the groups' ids are dense enough they are put in order by
// counting, in one pass, and only the runs of one group whose columns are
// out of order are sorted. Otherwise the sort compares keys copied out of
// the series, not the series through pointers.
func sortByGroup(list, tmp []*memSeries) []*memSeries {
	if len(list) < 2 {
		return tmp
	}
	sorted := true
	lo, hi := list[0].g.id, list[0].g.id
	for i := 1; i < len(list); i++ {
		g, p := list[i].g.id, list[i-1].g.id
		if g < p || g == p && list[i].col < list[i-1].col {
			sorted = false
		}
		lo, hi = min(lo, g), max(hi, g)
	}
	if sorted {
		return tmp
	}
	if span := hi - lo + 1; span <= uint64(2*len(list)+256) {
		tmp = slices.Grow(tmp[:0], len(list))[:len(list)]
		countingSortByGroup(list, tmp, lo, int(span))
		return tmp
	}
	type keyed struct {
		g, col int64
		s      *memSeries
	}
	ks := make([]keyed, len(list))
	for i, s := range list {
		ks[i] = keyed{int64(s.g.id), int64(s.col), s}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if a.g != b.g {
			return cmp.Compare(a.g, b.g)
		}
		return cmp.Compare(a.col, b.col)
	})
	for i := range ks {
		list[i] = ks[i].s
	}
	return tmp
}

// countingSortByGroup is sortByGroup for group ids in [lo, lo+span), with
// tmp as long as list: a stable counting sort by group, then a sort by
// column of each group's run that needs one.
func countingSortByGroup(list, tmp []*memSeries, lo uint64, span int) {
	start := make([]int32, span+1)
	for _, s := range list {
		start[s.g.id-lo+1]++
	}
	for i := 1; i <= span; i++ {
		start[i] += start[i-1]
	}
	for _, s := range list {
		k := s.g.id - lo
		tmp[start[k]] = s
		start[k]++
	}
	copy(list, tmp)
	for i := 0; i < len(list); {
		j, inOrder := i+1, true
		for ; j < len(list) && list[j].g == list[i].g; j++ {
			if list[j].col < list[j-1].col {
				inOrder = false
			}
		}
		if !inOrder {
			slices.SortFunc(list[i:j], func(a, b *memSeries) int { return cmp.Compare(a.col, b.col) })
		}
		i = j
	}
}

// parallelSnapshotMin is the selection size from which snapshots are taken
// on several goroutines, each a run of whole groups.
const parallelSnapshotMin = 4096

// snapshotAll snapshots list (sorted by group) in that order, group by group
// under each group's lock.
// A panic while snapshotting becomes the error (a *snapshotPanic) of the
// query: on another goroutine nothing else would recover it, and the
// process would end.
func snapshotAll(ctx context.Context, list []*memSeries, mint, maxt int64, lastOnly bool) (_ []*headSeries, err error) {
	p := runtime.GOMAXPROCS(0)
	out := make([]*headSeries, len(list))
	if p < 2 || len(list) < parallelSnapshotMin {
		defer recoverSnapshot(&err)
		return snapshotRun(ctx, out[:0], list, mint, maxt, lastOnly)
	}
	bounds := groupCuts(list, min(p, 4))
	// Each part fills its own stretch of out (a series gives at most one
	// snapshot); the stretches are then moved together.
	parts := make([][]*headSeries, len(bounds)-1)
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer recoverSnapshot(&errs[i])
			lo, hi := bounds[i], bounds[i+1]
			parts[i], errs[i] = snapshotRun(ctx, out[lo:lo:hi], list[lo:hi], mint, maxt, lastOnly)
		}()
	}
	wg.Wait()
	n := 0
	for i := range parts {
		if errs[i] != nil {
			return nil, errs[i]
		}
		n += copy(out[n:], parts[i])
	}
	clear(out[n:])
	return out[:n], nil
}

// groupCuts returns the bounds 0 = b[0] < b[1] < ... = len(list) of at most
// p runs of list (sorted by group) of near equal length, cut between groups.
func groupCuts(list []*memSeries, p int) []int {
	bounds := []int{0}
	for k := 1; k < p; k++ {
		c := max(k*len(list)/p, 1)
		for c < len(list) && list[c].g == list[c-1].g {
			c++
		}
		if c < len(list) && c > bounds[len(bounds)-1] {
			bounds = append(bounds, c)
		}
	}
	return append(bounds, len(list))
}

// snapshotRun snapshots list (sorted by group), one lock acquisition per
// group, appending the snapshots to out (with room for len(list)).
func snapshotRun(ctx context.Context, out []*headSeries, list []*memSeries, mint, maxt int64, lastOnly bool) ([]*headSeries, error) {
	var last []headSeries // lastOnly: the one-sample snapshots, in one allocation
	if lastOnly {
		last = make([]headSeries, 0, len(list))
	}
	sl := snapSlab{left: len(list)}
	for i := 0; i < len(list); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g := list[i].g
		// Several members of one group share its decoded timestamps.
		var shared *snapCache
		if i+1 < len(list) && list[i+1].g == g {
			shared = newSnapCache()
		}
		// The group is unlocked even if snapshotting it panics.
		func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			if snapshotGroupHook != nil {
				snapshotGroupHook(g)
			}
			for ; i < len(list) && list[i].g == g; i++ {
				if lastOnly {
					if one, in, ok := list[i].lastSample(mint, maxt); ok {
						if in {
							last = append(last, headSeries{lset: list[i].lset, one: one, oneST: list[i].startAt(one.T)})
							out = append(out, &last[len(last)-1])
						}
						continue
					}
				}
				d := sl.data()
				if g.snapshotInto(d, list[i], mint, maxt, shared, &sl); d.empty() {
					sl.unData() // no series refers to it: the next one reuses it
					continue
				}
				hs := sl.series()
				hs.lset, hs.d = list[i].lset, d
				out = append(out, hs)
			}
		}()
	}
	return out, nil
}

// snapshotGroupHook, when set (by tests), runs with each group locked before
// snapshotRun reads it.
var snapshotGroupHook func(*group)

// snapshotPanic is the error of a head snapshot that panicked.
type snapshotPanic struct {
	val   any    // what was passed to panic
	stack []byte // where
}

func (p *snapshotPanic) Error() string { return fmt.Sprintf("head snapshot panicked: %v", p.val) }

// recoverSnapshot, deferred, turns a panic into *err.
func recoverSnapshot(err *error) {
	if r := recover(); r != nil {
		*err = &snapshotPanic{val: r, stack: debug.Stack()}
	}
}

// lastSample returns s's newest sample and whether it is at or after mint,
// when that sample is the newest at or before maxt; false when a full
// snapshot is needed. Called with s.g.mu held.
func (s *memSeries) lastSample(mint, maxt int64) (one Sample, in, ok bool) {
	if s.removed() || s.lastT > maxt {
		return Sample{}, false, false
	}
	if n := len(s.late()); n > 0 && s.late()[n-1].T >= s.lastT {
		return Sample{}, false, false
	}
	if s.lastT < s.minT {
		// The newest sample was flushed to a block with everything before
		// it: nothing of this series is left in the head to read.
		return Sample{}, false, len(s.late()) == 0 && len(s.lateHist()) == 0
	}
	if x := s.x; x != nil && (x.lastH != nil || x.lastFH != nil || len(x.lateH) > 0) {
		return Sample{}, false, false // histograms: read through the iterator
	}
	return Sample{T: s.lastT, V: s.lastV}, s.lastT >= mint, true
}

// holdsRange reports whether the head has samples in the querier's range.
// Like Prometheus's head index reader, label names and values come from every
// series of the head when it does, and there are none when it does not (e.g.
// a range before any data, or an empty head after a flush).
func (q *querier) holdsRange() bool {
	return q.maxt >= q.h.minT.Load() && q.mint <= q.h.maxT.Load()
}

// LabelValues returns the sorted values of a label among series matching ms.
func (q *querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var vals []string
	switch {
	case !q.holdsRange():
		vals = []string{}
	case len(ms) == 0:
		vals = q.h.index.labelValues(name)
	default:
		// Series of one group sit next to each other in postings and mostly
		// share the value asked for: the last one found skips the map.
		set := map[string]struct{}{}
		last := ""
		refs := q.h.index.postingsFor(ms...)
		for _, ref := range refs {
			if s := q.h.seriesByRef(ref); s != nil {
				if v := s.lset.Get(name); v != "" && v != last {
					set[v] = struct{}{}
					last = v
				}
			}
		}
		putRefs(refs)
		vals = make([]string, 0, len(set))
		for v := range set {
			vals = append(vals, v)
		}
		sort.Strings(vals)
	}
	return results.ApplyLimit(vals, hints)
}

// LabelNames returns the sorted label names among series matching ms.
func (q *querier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	var names []string
	switch {
	case !q.holdsRange():
		names = []string{}
	case len(ms) == 0:
		names = q.h.index.labelNames()
	default:
		names = []string{}
		refs := q.h.index.postingsFor(ms...)
		for _, ref := range refs {
			if s := q.h.seriesByRef(ref); s != nil {
				names = sorted.AddNames(names, s.lset)
			}
		}
		putRefs(refs)
	}
	return results.ApplyLimit(names, hints)
}

// Close implements storage.Querier.
func (q *querier) Close() error { return nil }

// headSeries is one selected series with its data snapshot.
type headSeries struct {
	lset labels.Labels
	d    *seriesData // nil: the series is the one sample below (lastSample)
	one  Sample
	// oneST is the one sample's start timestamp (0: none).
	oneST int64
}

// data returns the series' snapshot; a one-sample series makes one (not
// kept: a series may be read by several goroutines).
func (s *headSeries) data() *seriesData {
	if s.d == nil {
		// The one sample is in the querier's range (lastSample): it bounds its snapshot.
		d := &seriesData{mint: s.one.T, maxt: s.one.T, parts: []part{{raw: &rawRun{samples: []Sample{s.one}}}}}
		if s.oneST != 0 {
			d.x = &dataExtra{starts: starts.Runs{{From: s.one.T, To: s.one.T, V: s.oneST}}}
		}
		return d
	}
	return s.d
}

func (s *headSeries) Labels() labels.Labels { return s.lset }

func (s *headSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if si, ok := it.(*seriesIterator); ok {
		si.reset(s.data())
		return si
	}
	return newSeriesIterator(s.data())
}
