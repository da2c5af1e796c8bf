package limits

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tandem-tsdb/tandem/tsdb/fastread"
)

// The bounds of a request that gave none, as the Prometheus API fills them
// in (its MinTime and MaxTime, for series and labels): such requests are
// not bound by max_query_length.
var (
	apiMinTime = timestamp.FromTime(time.Unix(math.MinInt64/1000+62135596801, 0).UTC())
	apiMaxTime = timestamp.FromTime(time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC())
)

type budgetKey struct{}

// queryBudget counts the series and chunks one request reads.
type queryBudget struct{ series, chunks atomic.Int64 }

// NewQueryContext returns ctx counting the series its request reads, so
// that max_fetched_series_per_query bounds the whole request, however
// many queriers and selects serve it.
func NewQueryContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, budgetKey{}, &queryBudget{})
}

// QueryError is the error of a query over a limit.
type QueryError struct{ msg string }

// Error implements error.
func (e *QueryError) Error() string { return e.msg }

// Queryable returns q bound by the query limits get returns (read for
// each querier, so reloads apply to the next query).
func Queryable(q storage.SampleAndChunkQueryable, get func() Limits) storage.SampleAndChunkQueryable {
	return &queryable{q: q, get: get}
}

type queryable struct {
	q   storage.SampleAndChunkQueryable
	get func() Limits
}

// checkRange refuses a querier spanning more than max_query_length.
func checkRange(l Limits, mint, maxt int64) error {
	max := time.Duration(l.MaxQueryLength)
	if max <= 0 || mint <= apiMinTime || maxt >= apiMaxTime {
		return nil
	}
	if span := time.Duration(maxt-mint) * time.Millisecond; span > max {
		return &QueryError{fmt.Sprintf("the query time range exceeds the limit (query length: %s, limit max_query_length: %s)", span, max)}
	}
	return nil
}

func (q *queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	l := q.get()
	if err := checkRange(l, mint, maxt); err != nil {
		return nil, err
	}
	inner, err := q.q.Querier(mint, maxt)
	if err != nil || l.MaxFetchedSeriesPerQuery <= 0 {
		return inner, err
	}
	lq := &querier{Querier: inner, max: int64(l.MaxFetchedSeriesPerQuery)}
	if _, ok := inner.(fastread.Streamer); ok {
		return &streamQuerier{lq}, nil
	}
	return lq, nil
}

func (q *queryable) ChunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	l := q.get()
	if err := checkRange(l, mint, maxt); err != nil {
		return nil, err
	}
	inner, err := q.q.ChunkQuerier(mint, maxt)
	if err != nil || l.MaxFetchedSeriesPerQuery <= 0 && l.MaxFetchedChunksPerQuery <= 0 {
		return inner, err
	}
	return &chunkQuerier{ChunkQuerier: inner, max: noLimit(l.MaxFetchedSeriesPerQuery), maxChunks: noLimit(l.MaxFetchedChunksPerQuery)}, nil
}

// noLimit turns a limit of 0 (none) into one that is never reached.
func noLimit(n int) int64 {
	if n <= 0 {
		return math.MaxInt64
	}
	return int64(n)
}

// budget returns the counts of ctx's request, or fresh ones for this select
// alone.
func budget(ctx context.Context) *queryBudget {
	if b, ok := ctx.Value(budgetKey{}).(*queryBudget); ok {
		return b
	}
	return &queryBudget{}
}

// countLimit fails a request once the count it adds to (the request's
// series or chunks) passes max.
type countLimit struct {
	n        *atomic.Int64
	max      int64
	what     string // series, chunks
	key      string // the limit's key
	err      error
	disabled bool // no limit: count nothing
}

// count counts one more when ok (the reader found one), reporting whether
// the reader may go on.
func (c *countLimit) count(ok bool) bool {
	if !ok || c.disabled {
		return ok
	}
	if c.n.Add(1) > c.max {
		c.err = &QueryError{fmt.Sprintf("the query hit the max number of %s limit (limit %s: %d %s)", c.what, c.key, c.max, c.what)}
		return false
	}
	return true
}

// errOr returns the limit's error, else err.
func (c *countLimit) errOr(err error) error {
	if c.err != nil {
		return c.err
	}
	return err
}

func seriesLimit(b *queryBudget, max int64) countLimit {
	return countLimit{n: &b.series, max: max, what: "series", key: "max_fetched_series_per_query", disabled: max == math.MaxInt64}
}

type querier struct {
	storage.Querier
	max int64
}

func (q *querier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	return &seriesSet{SeriesSet: q.Querier.Select(ctx, sortSeries, hints, ms...), lim: seriesLimit(budget(ctx), q.max)}
}

// streamQuerier is a querier over one that streams (fastread.Streamer): it
// streams too, so that the push-down keeps no series under limits either.
type streamQuerier struct{ *querier }

// SelectStream implements fastread.Streamer: the series of every part count
// against the request's limit.
func (q *streamQuerier) SelectStream(ctx context.Context, parts int, hints *storage.SelectHints, ms ...*labels.Matcher) []storage.SeriesSet {
	sets := q.Querier.(fastread.Streamer).SelectStream(ctx, parts, hints, ms...)
	b := budget(ctx)
	for i, ss := range sets {
		sets[i] = &seriesSet{SeriesSet: ss, lim: seriesLimit(b, q.max)}
	}
	return sets
}

// seriesSet fails once its request has read more than max series.
type seriesSet struct {
	storage.SeriesSet
	lim countLimit
}

func (s *seriesSet) Next() bool { return s.lim.err == nil && s.lim.count(s.SeriesSet.Next()) }

func (s *seriesSet) Err() error { return s.lim.errOr(s.SeriesSet.Err()) }

func (s *seriesSet) Warnings() annotations.Annotations { return s.SeriesSet.Warnings() }

type chunkQuerier struct {
	storage.ChunkQuerier
	max, maxChunks int64
}

func (q *chunkQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.ChunkSeriesSet {
	b := budget(ctx)
	return &chunkSeriesSet{ChunkSeriesSet: q.ChunkQuerier.Select(ctx, sortSeries, hints, ms...), series: seriesLimit(b, q.max),
		chunks: countLimit{n: &b.chunks, max: q.maxChunks, what: "chunks", key: "max_fetched_chunks_per_query", disabled: q.maxChunks == math.MaxInt64}}
}

// chunkSeriesSet fails once its request has read more than its series or
// chunks limit.
type chunkSeriesSet struct {
	storage.ChunkSeriesSet
	series, chunks countLimit
}

func (s *chunkSeriesSet) Next() bool {
	return s.series.err == nil && s.chunks.err == nil && s.series.count(s.ChunkSeriesSet.Next())
}

func (s *chunkSeriesSet) Err() error { return s.series.errOr(s.chunks.errOr(s.ChunkSeriesSet.Err())) }

func (s *chunkSeriesSet) At() storage.ChunkSeries {
	in := s.ChunkSeriesSet.At()
	if s.chunks.disabled {
		return in
	}
	return &countedChunkSeries{ChunkSeries: in, lim: &s.chunks}
}

// countedChunkSeries counts the chunks read of its series.
type countedChunkSeries struct {
	storage.ChunkSeries
	lim *countLimit
}

func (c *countedChunkSeries) Iterator(it chunks.Iterator) chunks.Iterator {
	return &countedChunks{Iterator: c.ChunkSeries.Iterator(it), lim: c.lim}
}

type countedChunks struct {
	chunks.Iterator
	lim *countLimit
}

func (c *countedChunks) Next() bool { return c.lim.err == nil && c.lim.count(c.Iterator.Next()) }

func (c *countedChunks) Err() error { return c.lim.errOr(c.Iterator.Err()) }

// Gate bounds the queries of one tenant running at once.
type Gate struct {
	slots atomic.Pointer[chan struct{}]
}

// Set changes the bound (0 = none); queries running keep their slots.
func (g *Gate) Set(n int) {
	if n <= 0 {
		g.slots.Store(nil)
		return
	}
	if cur := g.slots.Load(); cur != nil && cap(*cur) == n {
		return
	}
	c := make(chan struct{}, n)
	g.slots.Store(&c)
}

// Enter waits for a slot until ctx ends; the returned func leaves it.
func (g *Gate) Enter(ctx context.Context) (func(), error) {
	c := g.slots.Load()
	if c == nil {
		return func() {}, nil
	}
	select {
	case *c <- struct{}{}:
		return func() { <-*c }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for one of the tenant's %d query slots (max_query_concurrency): %w", cap(*c), ctx.Err())
	}
}
