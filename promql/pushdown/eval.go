package pushdown

import (
	"context"
	"errors"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/kahansum"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// errUnsupported reports data this package does not evaluate (native
// histograms, start timestamps where the engine uses them): the engine
// evaluates the node instead (see queryable.fallback).
var errUnsupported = errors.New("pushdown: unsupported data")

// grid is the evaluation time grid of a query: steps start, start+step, ...
// up to end (milliseconds); step 0 is an instant query.
type grid struct {
	start, end, step int64
	lookback         int64
	maxSamples       int
	workers          int
	useST            bool // the engine reads start timestamps: series with them are not evaluated here
}

func (g grid) steps() int {
	if g.step == 0 {
		return 1
	}
	return int((g.end-g.start)/g.step) + 1
}

// point is one step of a synthetic series: a float, a histogram, or a stale
// marker where the pushed-down expression has no value.
type point struct {
	t int64
	f float64
	h *histogram.FloatHistogram
}

// synthSeries is one output series of a pushed-down node.
type synthSeries struct {
	lset   labels.Labels
	points []point
}

// acc accumulates one group at one step, the way the engine's
// groupedAggregation does for floats.
type acc struct {
	v, c, mean, cnt    float64
	seen, incMean, big bool // big: a value or sum near overflow was seen
}

// bigSum is the magnitude from which partial sums of several workers may
// overflow differently than one sum in series order: such nodes are
// evaluated again on one worker.
const bigSum = math.MaxFloat64 / (1 << 20)

// groups maps input series to their aggregation group.
type groups struct {
	lsets []labels.Labels // group labels, in order of first appearance
	of    []int32         // group of each input series
}

// evalNode evaluates n on q over g.
func evalNode(ctx context.Context, q storage.Queryable, n *node, g grid) ([]synthSeries, annotations.Annotations, error) {
	back := n.rng
	if n.fn == "" {
		back = g.lookback
	}
	mint, maxt := g.start-n.offset-back, g.end-n.offset
	querier, err := q.Querier(mint, maxt)
	if err != nil {
		return nil, nil, err
	}
	defer querier.Close()
	hints := &storage.SelectHints{
		Start: mint, End: maxt, Step: g.step, Range: n.rng,
		Func: n.fn, Grouping: n.grouping, By: !n.without,
	}
	if n.fn == "" {
		hints.Func = n.op.String()
		if g.step == 0 {
			// One instant: only each series' newest sample at or before the
			// time matters (tandem's head then snapshots just that one).
			hints.Func = fastread.HintLastSample
		}
	}
	workers := min(g.workers, runtime.GOMAXPROCS(0))
	if st, ok := querier.(fastread.Streamer); ok {
		out, annos, err := evalStreams(ctx, st, n, g, hints, mint, maxt, workers)
		if !errors.Is(err, errSequential) {
			return out, annos, err
		}
		// Evaluated again below, on one worker, or left to the engine.
	}
	ss := querier.Select(ctx, false, hints, n.sel.LabelMatchers...)
	bufs := getSelectBufs()
	if sz, ok := ss.(fastread.Sized); ok {
		// Sized once: a selection of a million series would otherwise
		// allocate its slices about twice over while growing them.
		bufs.series, bufs.of = slices.Grow(bufs.series, sz.Len()), slices.Grow(bufs.of, sz.Len())
	}
	series, gp := bufs.series, newGrouper(n)
	gr := groups{of: bufs.of}
	defer func() {
		bufs.series, bufs.of = series, gr.of // given back grown, whatever the outcome
		putSelectBufs(bufs)
	}()
	for ss.Next() {
		s := ss.At()
		gi, err := gp.group(s.Labels())
		if err != nil {
			return nil, nil, err
		}
		series = append(series, s)
		gr.of = append(gr.of, gi)
	}
	if err := ss.Err(); err != nil {
		return nil, nil, err
	}
	gr.lsets = gp.lsets
	annos := ss.Warnings()
	steps := g.steps()
	// (The sample limit is enforced on the points produced, in run.)
	if len(gr.lsets)*steps > maxOutputPoints || n.perSeries && len(gr.lsets)*steps > perSeriesMaxPoints {
		// Accumulators are larger than the engine's points: very large
		// outputs are left to the engine and its memory accounting.
		return nil, annos, errUnsupported
	}
	if len(series) < 64 || !n.perSeries && len(gr.lsets)*steps > 1<<20 {
		workers = 1 // each worker would hold all groups' accumulators
	}
	accs, wannos, release, err := run(ctx, series, gr, n, g, mint, maxt, workers)
	if errors.Is(err, errSequential) {
		accs, wannos, release, err = run(ctx, series, gr, n, g, mint, maxt, 1)
	}
	if err != nil {
		return nil, annos, err
	}
	annos.Merge(wannos)
	out := collect(accs, gr, n.op, g)
	release()
	if hasDuplicates(out) {
		// Groups that differ only in labels the output drops (__type__,
		// __unit__): the engine returns both, a selector cannot.
		return nil, nil, errUnsupported
	}
	return out, annos, nil
}

// maxOutputPoints and perSeriesMaxPoints bound the output (groups × steps)
// of a node evaluated here: accumulators take 40 bytes per point (and per
// worker for aggregations), the synthetic series 24 more.
const (
	maxOutputPoints    = 1 << 22
	perSeriesMaxPoints = 1 << 21
)

// errSequential reports that the workers' partial sums cannot be merged as
// the engine would sum (values near overflow, or an average switched to the
// incremental mean): the node is evaluated again on one worker.
var errSequential = errors.New("sums near overflow: evaluate sequentially")

// run evaluates the series on workers goroutines, each taking a contiguous
// part of the series in order, and merges their accumulators in that order.
// The accumulators returned are the workers' memory: the caller calls
// release once it has read them.
func run(ctx context.Context, series []storage.Series, gr groups, n *node, g grid, mint, maxt int64, workers int) (_ []acc, _ annotations.Annotations, release func(), _ error) {
	steps := g.steps()
	ws := make([]*worker, workers)
	release = func() { putWorkers(ws) }
	per := (len(series) + workers - 1) / workers
	for i := range ws {
		w := getWorker(n, g, mint, maxt, steps)
		switch {
		case i == 0 || !n.perSeries:
			w.acc = zeroed(w.acc, len(gr.lsets)*steps)
		default:
			// Each series is its own group: the workers' groups are
			// disjoint and they share the first worker's accumulators.
			w.shared = ws[0].acc
		}
		ws[i] = w
	}
	runWorkers(ws, func(i int, w *worker) error {
		lo, hi := min(i*per, len(series)), min((i+1)*per, len(series))
		return w.runSeries(ctx, series[lo:hi], gr.of[lo:hi])
	})
	var annos annotations.Annotations
	points, window := 0, 0
	for _, w := range ws {
		if w.err != nil {
			return nil, nil, func() {}, w.err // a worker that failed is not reused
		}
		annos.Merge(w.annos)
		points += w.points
		window = max(window, w.window)
	}
	// The engine would hold the aggregation's input, every series' value at
	// every step, and one range window: enforce --query.max-samples on that.
	if points+window > g.maxSamples {
		release()
		return nil, nil, func() {}, promql.ErrTooManySamples("query execution")
	}
	out := ws[0].acc
	if n.perSeries {
		return out, annos, release, nil
	}
	if n.op == parser.SUM || n.op == parser.AVG {
		for i, w := range ws {
			// A partial sum is at most the worker's series count times the
			// largest magnitude its rate windows added (rateSteps, which
			// does not mark the accumulators itself).
			if lo := min(i*per, len(series)); workers > 1 && w.maxAbs*float64(min(lo+per, len(series))-lo) >= bigSum {
				release()
				return nil, nil, func() {}, errSequential
			}
		}
	}
	for _, w := range ws[1:] {
		for i := range out {
			if err := merge(&out[i], &w.acc[i], n.op); err != nil {
				release()
				return nil, nil, func() {}, err
			}
		}
	}
	return out, annos, release, nil
}

// runWorkers runs part for each worker, each on its own goroutine but the
// last, which runs on the caller's (a small query starts none, and wakes no
// other thread), and sets each worker's err to what part returned. A panic
// on another goroutine would end the process (no HTTP handler or engine
// recovers it): it becomes the worker's error, and fails the query.
func runWorkers(ws []*worker, part func(i int, w *worker) error) {
	var wg sync.WaitGroup
	for i, w := range ws {
		work := func() {
			defer func() {
				if r := recover(); r != nil {
					w.err = &workerPanic{val: r, stack: debug.Stack()}
				}
			}()
			w.err = part(i, w)
		}
		if i == len(ws)-1 {
			work()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	wg.Wait()
}

// workerPool keeps workers' accumulators and sample buffers from query to
// query: they were half of a small range query's allocations, and on a small
// heap the collections they caused took a sixth of the query's CPU.
var workerPool = sync.Pool{New: func() any { return new(worker) }}

// selectBufs are an evaluation's slices of selected series and their
// groups, kept for the next one: a selection of every series (count by(job)
// of {__name__=~"node_.*"}) would otherwise grow them, 20 bytes a series, on
// every query.
type selectBufs struct {
	series []storage.Series
	of     []int32
}

var selectBufsPool = sync.Pool{New: func() any { return new(selectBufs) }}

func getSelectBufs() *selectBufs { return selectBufsPool.Get().(*selectBufs) }

// putSelectBufs empties b (no series stays reachable) and pools it unless
// it grew beyond maxPooledSeries.
func putSelectBufs(b *selectBufs) {
	if cap(b.series) > maxPooledSeries {
		return
	}
	clear(b.series)
	b.series, b.of = b.series[:0], b.of[:0]
	selectBufsPool.Put(b)
}

// maxPooledSeries is the largest selection whose buffers are pooled (5 MB).
const maxPooledSeries = 1 << 18

// maxPooled is the largest buffer (in elements) a pooled worker keeps.
const maxPooled = 1 << 16

// getWorker returns a pooled worker set up for node n, its buffers emptied.
func getWorker(n *node, g grid, mint, maxt int64, steps int) *worker {
	w := workerPool.Get().(*worker)
	*w = worker{n: n, g: g, mint: mint, maxt: maxt, steps: steps,
		acc: w.acc[:0], ts: w.ts[:0], vs: w.vs[:0], resets: w.resets[:0]}
	return w
}

// putWorkers gives the workers back to the pool, keeping only their buffers.
func putWorkers(ws []*worker) {
	for _, w := range ws {
		if w == nil {
			continue
		}
		keep := worker{}
		if cap(w.acc) <= maxPooled {
			keep.acc = w.acc[:0]
		}
		if cap(w.ts) <= maxPooled && cap(w.vs) <= maxPooled {
			keep.ts, keep.vs = w.ts[:0], w.vs[:0]
		}
		if cap(w.resets) <= maxPooled {
			keep.resets = w.resets[:0]
		}
		*w = keep // nothing of the query (series, iterators) stays reachable
		workerPool.Put(w)
	}
}

// zeroed returns buf resized to n zero accumulators.
func zeroed(buf []acc, n int) []acc {
	if cap(buf) < n {
		return make([]acc, n)
	}
	buf = buf[:n]
	clear(buf)
	return buf
}

// worker evaluates a run of series into its own accumulators.
type worker struct {
	n          *node
	g          grid
	mint, maxt int64
	steps      int
	acc        []acc     // the worker's accumulators, or nil with shared
	shared     []acc     // per-series nodes: the first worker's accumulators, which this one writes too
	pages      *accPages // a streamed node's accumulators, instead of acc
	annos      annotations.Annotations
	err        error
	points     int // points of the input matrix the engine would hold
	window     int // largest window, in samples

	it     chunkenc.Iterator
	ts     []int64
	vs     []float64
	resets []int
	plan   ratePlan // of the last series' sample times
	maxAbs float64  // the largest magnitude rateSteps added to an accumulator
}

func (w *worker) runSeries(ctx context.Context, series []storage.Series, of []int32) error {
	for i, s := range series {
		if i%128 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := w.series(s, of[i]); err != nil {
			return err
		}
	}
	return nil
}

// series evaluates s into the accumulators of its group gi.
func (w *worker) series(s storage.Series, gi int32) error {
	if err := w.load(s); err != nil {
		return err
	}
	var acc []acc
	if w.pages != nil {
		acc = w.pages.group(int(gi))
	} else {
		all := w.acc
		if w.shared != nil {
			all = w.shared
		}
		acc = all[int(gi)*w.steps : int(gi+1)*w.steps]
	}
	var produced bool
	if w.n.fn == "" {
		produced = w.instant(acc)
	} else {
		produced = w.ranged(acc)
	}
	if produced && (w.n.fn == "rate" || w.n.fn == "increase") {
		w.checkCounter(s.Labels())
	}
	return nil
}

// load reads the samples of s in (mint, maxt]; range functions skip stale
// markers, as the engine's matrix selector does.
func (w *worker) load(s storage.Series) error {
	w.ts, w.vs = w.ts[:0], w.vs[:0]
	if w.g.useST {
		// The engine reads start timestamps: a series with them is its to evaluate.
		if st, ok := s.(fastread.StartTimestamper); !ok || st.HasStartTimestamps() {
			return w.loadIter(s)
		}
	}
	if fa, ok := s.(fastread.FloatAppender); ok {
		var err error
		w.ts, w.vs, err = fa.AppendFloats(w.ts, w.vs, w.mint+1, w.maxt)
		if errors.Is(err, fastread.ErrHistogram) {
			return errUnsupported
		}
		if w.n.fn != "" {
			w.dropStale()
		}
		return err
	}
	return w.loadIter(s)
}

// loadIter is load through the series' iterator.
func (w *worker) loadIter(s storage.Series) error {
	w.it = s.Iterator(w.it)
	it := w.it
	vt := it.Seek(w.mint + 1)
	for ; vt != chunkenc.ValNone; vt = it.Next() {
		if vt != chunkenc.ValFloat || (w.g.useST && it.AtST() != 0) {
			return errUnsupported
		}
		t, v := it.At()
		if t > w.maxt {
			break
		}
		if t <= w.mint || (w.n.fn != "" && value.IsStaleNaN(v)) {
			continue
		}
		w.ts = append(w.ts, t)
		w.vs = append(w.vs, v)
	}
	return it.Err()
}

// dropStale removes stale markers from the loaded samples.
func (w *worker) dropStale() {
	// A stale marker is a NaN, and a sum of values with a NaN among them is
	// NaN: eight values at a time whose sum is not NaN hold no marker. From
	// the first eight that do (a NaN, or infinities of both signs), the
	// values are looked at one by one.
	vs, i := w.vs, 0
	for ; i+8 <= len(vs); i += 8 {
		v := vs[i : i+8 : i+8]
		if s := ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); s != s {
			break
		}
	}
	first := -1
	for ; i < len(vs); i++ {
		if math.Float64bits(vs[i]) == value.StaleNaN {
			first = i
			break
		}
	}
	if first < 0 {
		return
	}
	j := first
	for i := first + 1; i < len(w.vs); i++ {
		if v := w.vs[i]; math.Float64bits(v) != value.StaleNaN {
			w.ts[j], w.vs[j] = w.ts[i], v
			j++
		}
	}
	w.ts, w.vs = w.ts[:j], w.vs[:j]
}

// instant evaluates a bare selector at every step: the latest sample within
// the lookback window, absent if it is a stale marker.
func (w *worker) instant(acc []acc) bool {
	var (
		hi       int
		produced bool
		ts, vs   = w.ts, w.vs
	)
	for k := 0; k < w.steps; k++ {
		ref := w.g.start + int64(k)*w.g.step - w.n.offset
		for hi < len(ts) && ts[hi] <= ref {
			hi++
		}
		j := hi - 1
		if j < 0 || ts[j] <= ref-w.g.lookback || value.IsStaleNaN(vs[j]) {
			continue
		}
		add(&acc[k], vs[j], w.n.op)
		produced = true
		w.points++
	}
	return produced
}

// ranged evaluates the range function over the window (ref-range, ref] of
// every step.
func (w *worker) ranged(acc []acc) bool {
	switch w.n.fn {
	case "rate":
		return w.rateSteps(acc, true, true)
	case "increase":
		return w.rateSteps(acc, true, false)
	case "delta":
		return w.rateSteps(acc, false, false)
	}
	ts, vs := w.ts, w.vs
	var (
		lo, hi   int
		produced bool
	)
	for k := 0; k < w.steps; k++ {
		right := w.g.start + int64(k)*w.g.step - w.n.offset
		left := right - w.n.rng
		for lo < len(ts) && ts[lo] <= left {
			lo++
		}
		hi = max(hi, lo)
		for hi < len(ts) && ts[hi] <= right {
			hi++
		}
		if hi-lo < 1 {
			continue
		}
		var f float64
		switch w.n.fn {
		case "sum_over_time":
			f = sumOverTime(vs[lo:hi])
		case "avg_over_time":
			f = avgOverTime(vs[lo:hi])
		case "count_over_time":
			f = float64(hi - lo)
		case "min_over_time":
			f = vs[lo]
			for _, v := range vs[lo+1 : hi] {
				if v < f || math.IsNaN(f) {
					f = v
				}
			}
		case "max_over_time":
			f = vs[lo]
			for _, v := range vs[lo+1 : hi] {
				if v > f || math.IsNaN(f) {
					f = v
				}
			}
		case "last_over_time":
			f = vs[hi-1]
		}
		add(&acc[k], f, w.n.op)
		produced = true
		w.points++
		w.window = max(w.window, hi-lo)
	}
	return produced
}

// rateSteps is ranged for rate (counter and isRate), increase (counter) and
// delta: Prometheus's extrapolatedRate for float samples without start
// timestamps (promql/functions.go), the same operations in the same order,
// with the series' counter resets found once instead of once per window,
// and the windows' ends and extrapolation taken from the plan of the
// series' sample times (ratePlan), which the next members of its group
// share.
func (w *worker) rateSteps(acc []acc, counter, isRate bool) bool {
	vs := w.vs
	resets := w.resets[:0]
	if counter {
		resets = appendResets(resets, vs)
		w.resets = resets
	}
	plan := w.ratePlan(isRate)
	var (
		rp       int
		produced bool
		op       = w.n.op
		maxAbs   = w.maxAbs
	)
	for k, st := range plan.steps {
		lo, hi := st.lo, st.hi
		if hi-lo < 2 {
			continue
		}
		last := hi - 1
		firstV := vs[lo]
		result := vs[last] - firstV
		if counter {
			for rp < len(resets) && resets[rp] <= lo {
				rp++
			}
			for r := rp; r < len(resets) && resets[r] < hi; r++ {
				result += vs[resets[r]-1]
			}
		}
		m := &plan.memos[st.memo]
		factor := m.factor
		// A counter's extrapolation stops where it would reach zero. When
		// firstV is at least twice what durationToStart needs (bound is off
		// by a few ulps at most while it is a normal number), durationToZero
		// exceeds durationToStart and changes nothing: its division is
		// skipped. NaNs and subnormal bounds take the exact path.
		if counter && result > 0 && firstV >= 0 {
			if bound := m.zeroBound * result; !(bound >= minNormal && firstV >= bound) {
				if durationToZero := m.sampledInterval * (firstV / result); durationToZero < m.durationToStart {
					factor = extrapolationFactor(m.sampledInterval, durationToZero, m.durationToEnd, isRate, m.rngSeconds)
				}
			}
		}
		f := result * factor
		// Whether the sums get near overflow is decided once, in run, from
		// the largest magnitude added (NaN is never larger).
		if af := math.Abs(f); af > maxAbs {
			maxAbs = af
		}
		if a := &acc[k]; op == parser.SUM && a.seen {
			a.v, a.c = kahansum.Inc(f, a.v, a.c)
		} else {
			add(a, f, op)
		}
		produced = true
		w.points++
		w.window = max(w.window, hi-lo)
	}
	w.maxAbs = maxAbs
	return produced
}

// appendResets appends to resets the indexes i where vs[i] < vs[i-1]
// (counter resets), looking at four values at a time: a counter resets
// rarely, and four comparisons without a branch between them cost less
// than one branch each.
func appendResets(resets []int, vs []float64) []int {
	i := 1
	for ; i+4 <= len(vs); i += 4 {
		v := vs[i-1 : i+4 : i+4]
		if v[1] < v[0] || v[2] < v[1] || v[3] < v[2] || v[4] < v[3] {
			for j := 1; j < len(v); j++ {
				if v[j] < v[j-1] {
					resets = append(resets, i-1+j)
				}
			}
		}
	}
	for ; i < len(vs); i++ {
		if vs[i] < vs[i-1] {
			resets = append(resets, i)
		}
	}
	return resets
}

// rateMemo is what a rate window's extrapolation computes from its sample
// times alone (Prometheus's extrapolatedRate, operation for operation): the
// differences in milliseconds it was computed from (the zero value matches
// no window: a window holds two samples or more, so n > 0), then the
// durations in seconds and the factor without the counter's zero clamp.
type rateMemo struct {
	toStart, toEnd, sampled        int64 // firstT-rangeStart, right-lastT, lastT-firstT
	n                              int   // samples in the window minus one
	durationToStart, durationToEnd float64
	sampledInterval                float64
	zeroBound                      float64 // 2 × durationToStart / sampledInterval
	factor                         float64
	rngSeconds                     float64 // the range, for the zero clamp's factor
}

// set computes the memo for a window with those sample times.
func (m *rateMemo) set(toStart, toEnd, sampled int64, n int, isRate bool, rngSeconds float64) {
	m.toStart, m.toEnd, m.sampled, m.n, m.rngSeconds = toStart, toEnd, sampled, n, rngSeconds
	durationToStart := float64(toStart) / 1000
	durationToEnd := float64(toEnd) / 1000
	sampledInterval := float64(sampled) / 1000
	averageDurationBetweenSamples := sampledInterval / float64(n)
	extrapolationThreshold := averageDurationBetweenSamples * 1.1
	if durationToStart >= extrapolationThreshold {
		durationToStart = averageDurationBetweenSamples / 2
	}
	if durationToEnd >= extrapolationThreshold {
		durationToEnd = averageDurationBetweenSamples / 2
	}
	m.durationToStart, m.durationToEnd, m.sampledInterval = durationToStart, durationToEnd, sampledInterval
	m.zeroBound = 2 * (durationToStart / sampledInterval)
	m.factor = extrapolationFactor(sampledInterval, durationToStart, durationToEnd, isRate, rngSeconds)
}

// minNormal is the smallest normal float64: above it a product's rounding
// error is relative.
const minNormal = 0x1p-1022

// extrapolationFactor is the factor extrapolatedRate multiplies the
// window's increase by.
func extrapolationFactor(sampledInterval, durationToStart, durationToEnd float64, isRate bool, rngSeconds float64) float64 {
	factor := 1.0
	if sampledInterval != 0 {
		factor = (sampledInterval + durationToStart + durationToEnd) / sampledInterval
	}
	if isRate {
		factor /= rngSeconds
	}
	return factor
}

// checkCounter adds the engine's info annotation for rate and increase of a
// metric whose name does not say it is a counter.
func (w *worker) checkCounter(ls labels.Labels) {
	name := ls.Get(labels.MetricName)
	if name == "" || strings.HasSuffix(name, "_total") || strings.HasSuffix(name, "_sum") ||
		strings.HasSuffix(name, "_count") || strings.HasSuffix(name, "_bucket") {
		return
	}
	w.annos.Add(annotations.NewPossibleNonCounterInfo(name, w.n.argPos))
}

// sumOverTime is Prometheus's sum_over_time for floats.
func sumOverTime(vs []float64) float64 {
	var sum, c float64
	for _, v := range vs {
		sum, c = kahansum.Inc(v, sum, c)
	}
	if math.IsInf(sum, 0) {
		return sum
	}
	return sum + c
}

// avgOverTime is Prometheus's avg_over_time for floats: a Kahan sum, switching
// to the incremental mean if the sum overflows.
func avgOverTime(vs []float64) float64 {
	var (
		sum, count   = vs[0], 1.
		mean, kahanC float64
		incremental  bool
	)
	for i, f := range vs[1:] {
		count = float64(i + 2)
		if !incremental {
			newSum, newC := kahansum.Inc(f, sum, kahanC)
			if !math.IsInf(newSum, 0) {
				sum, kahanC = newSum, newC
				continue
			}
			incremental = true
			mean = sum / (count - 1)
			kahanC /= count - 1
		}
		q := (count - 1) / count
		mean, kahanC = kahansum.Inc(f/count, q*mean, q*kahanC)
	}
	if incremental {
		return mean + kahanC
	}
	return sum/count + kahanC/count
}

// add folds f into a, as the engine's aggregation does for a float sample.
func add(a *acc, f float64, op parser.ItemType) {
	if !a.seen {
		*a = acc{seen: true, v: f, mean: f, cnt: 1, big: math.Abs(f) >= bigSum}
		if op == parser.GROUP {
			a.v = 1
		}
		return
	}
	if math.Abs(f) >= bigSum || math.Abs(a.v) >= bigSum {
		a.big = true
	}
	switch op {
	case parser.SUM:
		a.v, a.c = kahansum.Inc(f, a.v, a.c)
	case parser.AVG:
		a.cnt++
		if !a.incMean {
			nv, nc := kahansum.Inc(f, a.v, a.c)
			if !math.IsInf(nv, 0) {
				a.v, a.c = nv, nc
				return
			}
			a.incMean = true
			a.mean = a.v / (a.cnt - 1)
			a.c /= a.cnt - 1
		}
		q := (a.cnt - 1) / a.cnt
		a.mean, a.c = kahansum.Inc(f/a.cnt, q*a.mean, q*a.c)
	case parser.MAX:
		if a.v < f || math.IsNaN(a.v) {
			a.v = f
		}
	case parser.MIN:
		if a.v > f || math.IsNaN(a.v) {
			a.v = f
		}
	case parser.COUNT:
		a.cnt++
	}
}

// merge folds the accumulator of a later run of series, b, into a.
func merge(a, b *acc, op parser.ItemType) error {
	if !b.seen {
		return nil
	}
	if !a.seen {
		*a = *b
		return nil
	}
	if (op == parser.SUM || op == parser.AVG) && (a.big || b.big) {
		return errSequential
	}
	switch op {
	case parser.SUM:
		a.v, a.c = kahansum.Inc(b.v, a.v, a.c)
		a.c += b.c
	case parser.AVG:
		if a.incMean || b.incMean {
			return errSequential
		}
		a.v, a.c = kahansum.Inc(b.v, a.v, a.c)
		a.c += b.c
		a.cnt += b.cnt
		if math.IsInf(a.v, 0) {
			return errSequential
		}
	case parser.MAX:
		if a.v < b.v || math.IsNaN(a.v) {
			a.v = b.v
		}
	case parser.MIN:
		if a.v > b.v || math.IsNaN(a.v) {
			a.v = b.v
		}
	case parser.COUNT:
		a.cnt += b.cnt
	}
	return nil
}

// final is the aggregation's value of a, as the engine computes it.
func final(a *acc, op parser.ItemType) float64 {
	switch op {
	case parser.SUM:
		return a.v + a.c
	case parser.AVG:
		if a.incMean {
			return a.mean + a.c
		}
		return a.v/a.cnt + a.c/a.cnt
	case parser.COUNT:
		return a.cnt
	}
	return a.v
}

// collect turns the accumulators into one synthetic series per group that
// has a value at some step, with stale markers at the other steps.
func collect(accs []acc, gr groups, op parser.ItemType, g grid) []synthSeries {
	steps := g.steps()
	return appendCollected(make([]synthSeries, 0, len(gr.lsets)), func(gi int) []acc { return accs[gi*steps : (gi+1)*steps] }, gr.lsets, op, g)
}

// appendCollected appends to out what collect returns for the groups lsets,
// whose accumulators group returns. The points of all the groups are one
// allocation (an hour of 2000 groups was 2000 of them).
func appendCollected(out []synthSeries, group func(gi int) []acc, lsets []labels.Labels, op parser.ItemType, g grid) []synthSeries {
	steps := g.steps()
	seen := func(row []acc) bool {
		for k := range row {
			if row[k].seen {
				return true
			}
		}
		return false
	}
	n := 0
	for gi := range lsets {
		if seen(group(gi)) {
			n++
		}
	}
	slab := make([]point, n*steps)
	for gi, ls := range lsets {
		row := group(gi)
		if !seen(row) {
			continue
		}
		pts := slab[:steps:steps]
		slab = slab[steps:]
		for k := range row {
			pts[k].t = g.start + int64(k)*g.step
			if row[k].seen {
				pts[k].f = final(&row[k], op)
			} else {
				pts[k].f = math.Float64frombits(value.StaleNaN)
			}
		}
		out = append(out, synthSeries{lset: ls, points: pts})
	}
	return out
}

// groupLabels returns the labels of the group of a series with labels ls, as
// the engine's generateGroupingLabels does.
func groupLabels(lb *labels.Builder, ls labels.Labels, n *node, keep []string) labels.Labels {
	switch {
	case n.without:
		lb.Reset(ls)
		lb.Del(n.grouping...)
		lb.Del(labels.MetricName, "__type__", "__unit__")
		return lb.Labels()
	case len(keep) > 0:
		lb.Reset(ls)
		lb.Keep(keep...)
		return lb.Labels()
	}
	return labels.EmptyLabels()
}

// hasNameEquality reports whether vs selects a single metric name.
func hasNameEquality(vs *parser.VectorSelector) bool {
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return true
		}
	}
	return false
}

func hasDuplicates(out []synthSeries) bool {
	if len(out) < 2 {
		return false
	}
	seen := make(map[uint64]struct{}, len(out))
	for _, s := range out {
		h := s.lset.Hash()
		if _, ok := seen[h]; ok {
			return true
		}
		seen[h] = struct{}{}
	}
	return false
}

func slicesWithout(s []string, drop string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}
