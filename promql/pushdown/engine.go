package pushdown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// Defaults of the engine options this package reads (Prometheus's).
const (
	defaultLookback   = 5 * time.Minute
	defaultMaxSamples = 50_000_000
)

// Engine is a promql.QueryEngine: Prometheus's engine with the pushable
// subexpressions of each query evaluated here.
type Engine struct {
	eng       *promql.Engine
	fallback  *promql.Engine
	parser    *rewriter
	lookback  time.Duration
	max       int
	workers   int
	useST     bool
	perSeries bool
	logger    *slog.Logger

	evaluated, fallbacks atomic.Int64
}

// Counts returns how many subexpressions were evaluated here and how many
// were handed back to Prometheus's engine because of their data.
func (e *Engine) Counts() (evaluated, fallbacks int64) {
	return e.evaluated.Load(), e.fallbacks.Load()
}

// Options configures what an Engine adds to Prometheus's.
type Options struct {
	// Workers is how many goroutines evaluate one pushed-down subexpression;
	// more than 1 needs a storage whose series of one Select can be iterated
	// concurrently (tandem's can, Prometheus's TSDB cannot).
	Workers int
}

// NewEngine returns an Engine built from opts, as promql.NewEngine would be.
func NewEngine(opts promql.EngineOpts, o Options) *Engine {
	base := opts.Parser
	if base == nil {
		base = parser.NewParser(parser.Options{})
	}
	// Per-series range functions get their output labels here, which is
	// right only when the engine drops metric names right away.
	perSeries := !opts.EnableDelayedNameRemoval
	rw := &rewriter{Parser: base, want: map[string]*pending{}, perSeries: perSeries}
	e := &Engine{parser: rw, lookback: opts.LookbackDelta, max: opts.MaxSamples, workers: max(o.Workers, 1), useST: opts.UseStartTimestamps, perSeries: perSeries,
		logger: opts.Logger}
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	if e.lookback <= 0 {
		e.lookback = defaultLookback
	}
	if e.max <= 0 {
		e.max = defaultMaxSamples
	}
	fo := opts
	fo.Parser = base
	fo.Reg = nil
	fo.ActiveQueryTracker = nil
	fo.FeatureRegistry = nil
	e.fallback = promql.NewEngine(fo)
	opts.Parser = rw
	e.eng = promql.NewEngine(opts)
	return e
}

// Prometheus returns the underlying Prometheus engine.
func (e *Engine) Prometheus() *promql.Engine { return e.eng }

type ctxKey struct{}

// Disable returns a context whose queries this package leaves entirely to
// Prometheus's engine (for example when query statistics were asked for,
// which count the samples the engine itself loads).
func Disable(ctx context.Context) context.Context {
	return context.WithValue(ctx, ctxKey{}, true)
}

func disabled(ctx context.Context, opts promql.QueryOpts) bool {
	if v, _ := ctx.Value(ctxKey{}).(bool); v {
		return true
	}
	return opts != nil && opts.EnablePerStepStats()
}

// NewInstantQuery implements promql.QueryEngine.
func (e *Engine) NewInstantQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, ts time.Time) (promql.Query, error) {
	t := ts.UnixNano() / int64(time.Millisecond)
	return e.newQuery(ctx, q, opts, qs, grid{start: t, end: t}, func(q storage.Queryable) (promql.Query, error) {
		return e.eng.NewInstantQuery(ctx, q, opts, qs, ts)
	})
}

// NewRangeQuery implements promql.QueryEngine.
func (e *Engine) NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, interval time.Duration) (promql.Query, error) {
	g := grid{
		start: start.UnixNano() / int64(time.Millisecond),
		end:   end.UnixNano() / int64(time.Millisecond),
		step:  interval.Nanoseconds() / int64(time.Millisecond),
	}
	if g.step <= 0 {
		// Invalid for the engine, which reports it.
		return e.eng.NewRangeQuery(ctx, q, opts, qs, start, end, interval)
	}
	return e.newQuery(ctx, q, opts, qs, g, func(q storage.Queryable) (promql.Query, error) {
		return e.eng.NewRangeQuery(ctx, q, opts, qs, start, end, interval)
	})
}

func (e *Engine) newQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, g grid, create func(storage.Queryable) (promql.Query, error)) (promql.Query, error) {
	expr, err := e.parser.Parser.ParseExpr(qs)
	if err != nil {
		return create(q) // the engine reports the error
	}
	out, nodes := plan(expr, e.perSeries)
	g.lookback = e.lookback.Milliseconds()
	if opts != nil && opts.LookbackDelta() > 0 {
		g.lookback = opts.LookbackDelta().Milliseconds()
	}
	if nodes == nil {
		// Nothing to push down for this text: the engine gets this parse.
		defer e.parser.offer(qs, expr, false)()
		if g.step == 0 && !disabled(ctx, opts) {
			return create(&newestQueryable{Queryable: q, lookback: g.lookback})
		}
		return create(q)
	}
	g.maxSamples = e.max
	g.workers = e.workers
	g.useST = e.useST
	pq := &queryable{Queryable: q, e: e, nodes: nodes, grid: g, qopts: opts, query: qs}
	// The queryable answers the synthetic selectors even when this query is
	// not rewritten: a concurrent query with the same text may have the
	// parser rewrite it.
	if !disabled(ctx, opts) {
		defer e.parser.offer(qs, out, true)()
	}
	return create(pq)
}

// rewriter is the engine's parser: it rewrites the queries marked by
// Engine.newQuery while the engine parses them, and only those. The engine
// parses a query's text once more after newQuery has: newQuery offers the
// tree it parsed and planned, which the engine takes instead of parsing it
// again. Every tree is fresh and the engine's only (it preprocesses trees in
// place); a tree of one query taken by a concurrent one with the same text is
// the same plan, its synthetic selectors naming nodes by position.
type rewriter struct {
	parser.Parser
	perSeries bool // see plan
	mu        sync.Mutex
	want      map[string]*pending
}

// pending is what the queries being created with one text ask of the parser.
type pending struct {
	n     int        // queries asking for the text to be rewritten
	trees []*offered // parsed for them and not taken yet
}

type offered struct{ expr parser.Expr }

// offer hands expr, the parse (and plan, if rewrite) of qs, to the engine's
// next parse of qs, and marks qs for rewriting if rewrite. The returned func
// takes both back, once the engine has created the query.
func (r *rewriter) offer(qs string, expr parser.Expr, rewrite bool) func() {
	t := &offered{expr: expr}
	r.mu.Lock()
	p := r.want[qs]
	if p == nil {
		p = &pending{}
		r.want[qs] = p
	}
	if rewrite {
		p.n++
	}
	p.trees = append(p.trees, t)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if rewrite {
			p.n--
		}
		if i := slices.Index(p.trees, t); i >= 0 {
			p.trees = slices.Delete(p.trees, i, i+1)
		}
		if p.n == 0 && len(p.trees) == 0 {
			delete(r.want, qs)
		}
		r.mu.Unlock()
	}
}

// ParseExpr implements parser.Parser.
func (r *rewriter) ParseExpr(qs string) (parser.Expr, error) {
	r.mu.Lock()
	want := false
	if p := r.want[qs]; p != nil {
		if n := len(p.trees); n > 0 {
			t := p.trees[n-1]
			p.trees = p.trees[:n-1]
			r.mu.Unlock()
			return t.expr, nil
		}
		want = p.n > 0
	}
	r.mu.Unlock()
	expr, err := r.Parser.ParseExpr(qs)
	if err != nil || !want {
		return expr, err
	}
	out, _ := plan(expr, r.perSeries)
	return out, nil
}

// queryable serves the synthetic selectors of one query and passes every
// other selector to the storage.
type queryable struct {
	storage.Queryable
	e     *Engine
	nodes []*node
	grid  grid
	qopts promql.QueryOpts
	query string // the query's text, for the positions of the fallback's annotations
}

func (q *queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	inner, err := q.Queryable.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &querier{Querier: inner, q: q}, nil
}

type querier struct {
	storage.Querier
	q *queryable
}

func (qr *querier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	if len(ms) == 1 && ms[0].Name == markerLabel {
		i, err := strconv.Atoi(ms[0].Value)
		if err != nil || i < 0 || i >= len(qr.q.nodes) {
			return storage.ErrSeriesSet(fmt.Errorf("pushdown: unknown node %q", ms[0].Value))
		}
		return qr.q.evaluate(ctx, qr.q.nodes[i])
	}
	if qr.q.grid.step == 0 {
		hints = newestHint(hints, qr.q.grid.lookback)
	}
	return qr.Querier.Select(ctx, sortSeries, hints, ms...)
}

// newestHint returns hints with fastread.HintLastSample when they are an
// instant query's vector selector: one evaluation time (no step, no range)
// and the lookback window exactly (a smoothed selector's reaches past the
// time), where the engine reads each series' newest sample alone.
func newestHint(hints *storage.SelectHints, lookback int64) *storage.SelectHints {
	if hints == nil || hints.Step != 0 || hints.Range != 0 || hints.End-hints.Start != lookback-1 || hints.Func == fastread.HintSeries {
		return hints
	}
	h := *hints
	h.Func = fastread.HintLastSample
	return &h
}

// newestQueryable gives the vector selectors of an instant query that is not
// rewritten the hint of newestHint.
type newestQueryable struct {
	storage.Queryable
	lookback int64
}

func (q *newestQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	inner, err := q.Queryable.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &newestQuerier{Querier: inner, lookback: q.lookback}, nil
}

type newestQuerier struct {
	storage.Querier
	lookback int64
}

func (q *newestQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	return q.Querier.Select(ctx, sortSeries, newestHint(hints, q.lookback), ms...)
}

// evaluate computes node n here or, for data this package does not
// evaluate (native histograms), with Prometheus's engine.
func (q *queryable) evaluate(ctx context.Context, n *node) storage.SeriesSet {
	out, annos, err := evalNode(ctx, q.Queryable, n, q.grid)
	if errors.Is(err, errUnsupported) {
		q.e.fallbacks.Add(1)
		out, annos, err = q.fallback(ctx, n)
	} else {
		q.e.evaluated.Add(1)
	}
	if err != nil {
		var wp *workerPanic
		if errors.As(err, &wp) {
			q.e.logger.Error("push-down evaluation panicked: the query fails, the process goes on",
				"query", q.query, "panic", fmt.Sprint(wp.val), "stack", string(wp.stack))
			err = promql.ErrStorage{Err: err} // an internal error (HTTP 500), not the query's
		}
		return storage.ErrSeriesSet(err)
	}
	return &seriesSet{list: out, i: -1, warn: annos}
}

// fallback evaluates n with Prometheus's engine on the same grid.
func (q *queryable) fallback(ctx context.Context, n *node) ([]synthSeries, annotations.Annotations, error) {
	g := q.grid
	// The node's own text at its own offset, so that the positions in the
	// engine's annotations are those of the whole query.
	pr := n.expr.PositionRange()
	qs := n.expr.String()
	if int(pr.Start) >= 0 && int(pr.End) <= len(q.query) && pr.Start < pr.End {
		qs = strings.Repeat(" ", int(pr.Start)) + q.query[pr.Start:pr.End]
	}
	var (
		qry promql.Query
		err error
	)
	if g.step == 0 {
		qry, err = q.e.fallback.NewInstantQuery(ctx, q.Queryable, q.qopts, qs, time.UnixMilli(g.start))
	} else {
		qry, err = q.e.fallback.NewRangeQuery(ctx, q.Queryable, q.qopts, qs, time.UnixMilli(g.start), time.UnixMilli(g.end), time.Duration(g.step)*time.Millisecond)
	}
	if err != nil {
		return nil, nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Warnings, res.Err
	}
	var mat promql.Matrix
	switch v := res.Value.(type) {
	case promql.Matrix:
		mat = v
	case promql.Vector:
		for _, s := range v {
			ps := promql.Series{Metric: s.Metric}
			if s.H != nil {
				ps.Histograms = []promql.HPoint{{T: g.start, H: s.H}}
			} else {
				ps.Floats = []promql.FPoint{{T: g.start, F: s.F}}
			}
			mat = append(mat, ps)
		}
	default:
		return nil, res.Warnings, fmt.Errorf("pushdown: unexpected result type %s", res.Value.Type())
	}
	steps := g.steps()
	out := make([]synthSeries, 0, len(mat))
	stale := math.Float64frombits(value.StaleNaN)
	for _, s := range mat {
		pts := make([]point, steps)
		for k := range pts {
			pts[k] = point{t: g.start + int64(k)*g.step, f: stale}
		}
		at := func(t int64) int {
			if g.step == 0 {
				return 0
			}
			return int((t - g.start) / g.step)
		}
		for _, p := range s.Floats {
			pts[at(p.T)].f = p.F
		}
		for _, p := range s.Histograms {
			pts[at(p.T)] = point{t: p.T, h: p.H}
		}
		out = append(out, synthSeries{lset: s.Metric, points: pts})
	}
	return out, res.Warnings, nil
}

type seriesSet struct {
	list []synthSeries
	i    int
	warn annotations.Annotations
}

func (s *seriesSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *seriesSet) At() storage.Series                { return &s.list[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return s.warn }

func (s *synthSeries) Labels() labels.Labels { return s.lset }

func (s *synthSeries) Iterator(reuse chunkenc.Iterator) chunkenc.Iterator {
	if it, ok := reuse.(*pointIterator); ok {
		*it = pointIterator{pts: s.points, i: -1}
		return it
	}
	return &pointIterator{pts: s.points, i: -1}
}

// pointIterator iterates the points of a synthetic series.
type pointIterator struct {
	pts []point
	i   int
}

func (it *pointIterator) typ() chunkenc.ValueType {
	if it.i >= len(it.pts) {
		return chunkenc.ValNone
	}
	if it.pts[it.i].h != nil {
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (it *pointIterator) Next() chunkenc.ValueType {
	if it.i < len(it.pts) {
		it.i++
	}
	return it.typ()
}

func (it *pointIterator) Seek(t int64) chunkenc.ValueType {
	if it.i < 0 {
		it.i = 0
	}
	for it.i < len(it.pts) && it.pts[it.i].t < t {
		it.i++
	}
	return it.typ()
}

func (it *pointIterator) At() (int64, float64) { return it.pts[it.i].t, it.pts[it.i].f }

func (it *pointIterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	panic("pushdown: integer histograms are never produced")
}

func (it *pointIterator) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	p := it.pts[it.i]
	if fh == nil {
		return p.t, p.h.Copy()
	}
	p.h.CopyTo(fh)
	return p.t, fh
}

func (it *pointIterator) AtT() int64  { return it.pts[it.i].t }
func (it *pointIterator) AtST() int64 { return 0 }
func (it *pointIterator) Err() error  { return nil }
