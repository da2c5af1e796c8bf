// Package head holds tandem's multivariate in-memory head: series grouped
// by scrape target, each group a table sharing one timestamp column (members
// that do not line up get tables of their own), the inverted index, the
// write-ahead log (logging, replay, checkpoints), late and out-of-order
// samples, the exemplar ring, metadata, and the storage.Querier over it.
//
// The head is owned by tsdb.DB, which writes its ranges into blocks
// (NextFlushRange, ExportRange, ExportLate) and merges its querier with the
// blocks'; nothing else holds a Head. Start with AppendBatch (head.go) and
// group.go.
package head

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	promtsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/tandem-tsdb/tandem/internal/fsutil"
	"github.com/tandem-tsdb/tandem/tsdb/record"
	"github.com/tandem-tsdb/tandem/tsdb/wal"
)

// Options configure a Head.
type Options struct {
	// GroupBy names the labels whose values identify a group (a scrape target).
	GroupBy []string
	// SenderLabels are added to the group key when present, so that different
	// senders (clusters, HA replicas) never share a group.
	SenderLabels []string
	// OpenWindow is how far behind a group's newest timestamp rows stay open
	// to collect members arriving in other requests.
	OpenWindow time.Duration
	// ChunkRows is the number of rows per compressed chunk (at most 65535).
	ChunkRows int
	// BlockRange is the time range of a block; head chunks never cross its
	// boundaries (multiples of it since the epoch).
	BlockRange time.Duration
	// MaxFutureSkew rejects samples further than this ahead of the wall clock.
	MaxFutureSkew time.Duration
	// WALSegmentSize and WALSyncInterval configure the write-ahead log.
	WALSegmentSize  int64
	WALSyncInterval time.Duration
	// Logger and Registerer may be nil.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now returns the wall clock in milliseconds (tests override it).
	Now func() int64
	// DirLocked says that the caller holds dir's lock (tsdb.OpenDB takes it
	// before touching the blocks); otherwise Open takes it.
	DirLocked bool
	// MinValidTime is where the head starts: older ranges are already in blocks.
	MinValidTime int64
	// OutOfOrderWindow accepts, per group, samples this far behind the
	// group's newest timestamp in any order (0 refuses out-of-order samples).
	OutOfOrderWindow time.Duration
	// LateMaxAge accepts samples older than the head (their block range is
	// already flushed) up to this age relative to the wall clock; they go to
	// out-of-order blocks. 0 refuses them as too old.
	LateMaxAge time.Duration
	// MaxSampleAge refuses samples older than this behind the wall clock,
	// whether or not blocks exist (0: no bound but what a block range can
	// hold; cmd/tandem defaults it to the larger of LateMaxAge and BlockRange).
	MaxSampleAge time.Duration
	// HAReplicaLabel names the label that tells the replicas of an HA pair
	// apart (removed from stored series); "" disables deduplication.
	HAReplicaLabel string
	// HAFailoverTimeout is how long a group's elected replica may be silent
	// before another replica of the pair takes over.
	HAFailoverTimeout time.Duration
	// MaxExemplars bounds the exemplars kept (the newest); 0 stores none.
	// SetMaxExemplars changes it at run time.
	MaxExemplars int
	// InferStalenessRows, when > 0, writes a staleness marker for a member
	// missing from that many consecutive sealed rows of its group (for
	// senders that send no markers). Off by default.
	InferStalenessRows int
	// Limits bound the series and groups appends create (SetSeriesLimits
	// changes them at run time); the zero value sets none.
	Limits SeriesLimits
}

// DefaultOptions returns the defaults documented in the README.
func DefaultOptions() Options {
	return Options{
		GroupBy:           []string{"job", "instance"},
		SenderLabels:      []string{"cluster", "replica", "__replica__"},
		OpenWindow:        time.Minute,
		ChunkRows:         120,
		BlockRange:        2 * time.Hour,
		MaxFutureSkew:     10 * time.Minute,
		WALSegmentSize:    128 << 20,
		WALSyncInterval:   time.Second,
		OutOfOrderWindow:  time.Hour,
		LateMaxAge:        24 * time.Hour,
		HAReplicaLabel:    "__replica__",
		HAFailoverTimeout: 30 * time.Second,
		MaxExemplars:      100000,
	}
}

const stripes = 256

type seriesStripe struct {
	mu    sync.RWMutex
	table seriesTable // guarded by mu
}

// get returns the series with labels lset and hash, or nil. Called with mu held.
func (st *seriesStripe) get(hash uint64, lset labels.Labels) *memSeries {
	return st.table.get(hash, lset)
}

// add records s under hash. Called with mu held for writing.
func (st *seriesStripe) add(hash uint64, s *memSeries) { st.table.add(hash, s) }

// remove drops s, recorded under hash. Called with mu held for writing.
func (st *seriesStripe) remove(hash uint64, s *memSeries) { st.table.remove(hash, s) }

type groupStripe struct {
	mu    sync.RWMutex
	byKey map[string]*group
}

// Head is tandem's in-memory multivariate store, backed by a WAL.
type Head struct {
	opts   Options
	dir    string
	logger *slog.Logger
	wal    *wal.WAL
	lock   *fsutil.DirLock // nil when the caller holds it (Options.DirLocked)
	chunks *chunkStore     // frozen chunks, outside the Go heap

	series  [stripes]seriesStripe
	refs    refTable
	groups  [stripes]groupStripe
	index   *memIndex
	nextRef atomic.Uint64
	// nextGroupID numbers groups in creation order (counters.groups is a
	// gauge: GC removes groups).
	nextGroupID atomic.Uint64
	// replicaStored is set once a series holding the HA replica label was
	// created (replayed from before the label was configured).
	replicaStored atomic.Bool
	// gcMu: appends hold it shared, GC exclusively, so no append holds a
	// series that GC removes.
	gcMu sync.RWMutex

	minT, maxT atomic.Int64
	// minValid is the end of the data already in blocks: older samples are refused.
	minValid atomic.Int64

	metaMu sync.RWMutex
	meta   map[string][]Metadata

	limits    atomic.Pointer[SeriesLimits]
	perMetric metricCounts // active series by metric name

	exemplars *exemplarStore

	commitPool sync.Pool
	ready      atomic.Bool
	health     walHealth
	counters   headCounters
	metrics    *headMetrics
}

// headCounters are updated on hot paths and exported through collectors.
type headCounters struct {
	series, groups, unaligned atomic.Int64
	appended                  atomic.Int64
	late                      atomic.Int64 // samples accepted out of order
	haDeduped                 atomic.Int64 // samples of an HA replica that was not elected
	inferredStale             atomic.Int64 // staleness markers written by inference
	gcSeries                  atomic.Int64 // series removed from the head by GC
	realigned                 atomic.Int64 // samples moved from members' own tables into shared chunks
}

// Open creates or opens the head in dir, replaying its WAL.
func Open(dir string, opts Options) (*Head, error) {
	def := DefaultOptions()
	if len(opts.GroupBy) == 0 {
		opts.GroupBy = def.GroupBy
	}
	if opts.OpenWindow <= 0 {
		opts.OpenWindow = def.OpenWindow
	}
	if opts.ChunkRows <= 0 {
		opts.ChunkRows = def.ChunkRows
	}
	opts.ChunkRows = min(opts.ChunkRows, maxChunkRows)
	if opts.BlockRange <= 0 {
		opts.BlockRange = def.BlockRange
	}
	if opts.MaxFutureSkew <= 0 {
		opts.MaxFutureSkew = def.MaxFutureSkew
	}
	if opts.WALSegmentSize <= 0 {
		opts.WALSegmentSize = def.WALSegmentSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = func() int64 { return time.Now().UnixMilli() }
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	h := &Head{opts: opts, dir: dir, logger: opts.Logger, index: newMemIndex(), meta: map[string][]Metadata{}, exemplars: newExemplarStore(opts.MaxExemplars)}
	h.SetSeriesLimits(opts.Limits)
	h.minValid.Store(opts.MinValidTime)
	h.minT.Store(math.MaxInt64)
	h.maxT.Store(math.MinInt64)
	for i := range h.series {
		h.groups[i].byKey = map[string]*group{}
	}
	h.commitPool.New = func() any { return &commitState{} }
	var err error
	if !opts.DirLocked {
		if h.lock, err = fsutil.LockDir(dir); err != nil {
			return nil, err
		}
	}
	if h.chunks, err = openChunkStore(filepath.Join(dir, "chunks_head"), opts.Logger); err != nil {
		h.lock.Release()
		return nil, err
	}
	h.metrics = newHeadMetrics(h, opts.Registerer)

	if opts.MinValidTime == 0 {
		h.minValid.Store(math.MinInt64)
	}
	w, err := wal.Open(h.walDir(), wal.Options{
		SegmentSize:  opts.WALSegmentSize,
		SyncInterval: opts.WALSyncInterval,
		Logger:       opts.Logger,
		Registerer:   opts.Registerer,
	})
	if err != nil {
		h.chunks.close()
		h.lock.Release()
		return nil, fmt.Errorf("open WAL: %w", err)
	}
	h.wal = w
	start := time.Now()
	n, err := h.replay()
	if err != nil {
		w.Close()
		h.chunks.close()
		h.lock.Release()
		return nil, fmt.Errorf("replay WAL: %w", err)
	}
	h.index.settle() // a checkpoint lists series group by group, not by reference
	h.logger.Info("WAL replayed", "records", n, "series", h.counters.series.Load(),
		"groups", h.counters.groups.Load(), "duration", time.Since(start))
	h.ready.Store(true)
	h.startProber()
	return h, nil
}

func (h *Head) walDir() string { return filepath.Join(h.dir, "wal") }

func (h *Head) cut() chunkCut {
	return chunkCut{rows: h.opts.ChunkRows, blockRange: h.opts.BlockRange.Milliseconds(), store: h.chunks}
}

func (h *Head) appendOpts() appendOpts {
	return appendOpts{window: h.opts.OpenWindow.Milliseconds(), cut: h.cut(), ooo: h.opts.OutOfOrderWindow.Milliseconds()}
}

// Ready reports whether WAL replay has finished.
func (h *Head) Ready() bool { return h != nil && h.ready.Load() }

// Close syncs and closes the WAL.
func (h *Head) Close() error {
	if h.wal == nil {
		return nil
	}
	defer h.lock.Release()
	h.stopProber()
	h.chunks.close()
	if err := h.wal.Close(); err != nil {
		return fmt.Errorf("close WAL: %w", err)
	}
	return nil
}

// groupKey returns the identity of the group a series belongs to: the values
// of the group-by and sender labels; series that have none of the group-by
// labels are grouped by metric name.
func (h *Head) groupKey(lset labels.Labels) string {
	var buf [256]byte
	return string(h.appendGroupKey(buf[:0], lset))
}

// appendGroupKey appends groupKey's key to b.
func (h *Head) appendGroupKey(b []byte, lset labels.Labels) []byte {
	add := func(n, v string) {
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, n...)
		b = append(b, '=')
		b = appendQuoted(b, v)
	}
	for _, n := range h.opts.GroupBy {
		if v := lset.Get(n); v != "" {
			add(n, v)
		}
	}
	if len(b) == 0 {
		add(labels.MetricName, lset.Get(labels.MetricName))
	}
	for _, n := range h.opts.SenderLabels {
		if v := lset.Get(n); v != "" {
			add(n, v)
		}
	}
	return b
}

// appendQuoted appends strconv.Quote(v) to b: as is between quotes when v is
// printable ASCII without a quote or backslash (label values nearly always
// are), through strconv otherwise.
func appendQuoted(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return strconv.AppendQuote(b, v)
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}

// ValidateLabels checks a label set the way the remote-write spec asks.
func ValidateLabels(lset labels.Labels) error {
	if lset.IsEmpty() {
		return fmt.Errorf("%w: empty label set", ErrInvalidLabels)
	}
	var prev string
	first := true
	var err error
	lset.Range(func(l labels.Label) {
		switch {
		case err != nil:
		case l.Name == "":
			err = fmt.Errorf("%w: empty label name in %s", ErrInvalidLabels, lset)
		case l.Value == "":
			err = fmt.Errorf("%w: empty value for label %q in %s", ErrInvalidLabels, l.Name, lset)
		case !utf8.ValidString(l.Name) || !utf8.ValidString(l.Value):
			err = fmt.Errorf("%w: label is not valid UTF-8 in %s", ErrInvalidLabels, lset)
		case !first && l.Name <= prev:
			err = fmt.Errorf("%w: labels not sorted or duplicate label name %q in %s", ErrInvalidLabels, l.Name, lset)
		}
		prev, first = l.Name, false
	})
	return err
}

// getOrCreate returns the series for lset, creating it (and its group) if new.
// ref is the series reference to use when replaying, 0 for a new one. lim,
// when not nil, may refuse a new series with one of limitReasons, before
// anything is allocated for it; replay passes nil.
func (h *Head) getOrCreate(lset labels.Labels, ref uint64, lim *SeriesLimits) (*memSeries, error) {
	hash := lset.Hash()
	st := &h.series[hash%stripes]
	st.mu.RLock()
	s := st.get(hash, lset)
	st.mu.RUnlock()
	if s != nil {
		return s, nil
	}
	if err := ValidateLabels(lset); err != nil {
		return nil, err
	}
	var kb [256]byte
	key := h.appendGroupKey(kb[:0], lset)
	if lim != nil {
		if err := h.checkLimits(lim, lset, key); err != nil {
			return nil, err
		}
	}

	st.mu.Lock()
	if s := st.get(hash, lset); s != nil {
		st.mu.Unlock()
		return s, nil
	}
	if ref == 0 {
		ref = h.nextRef.Add(1)
	} else {
		for {
			cur := h.nextRef.Load()
			if cur >= ref || h.nextRef.CompareAndSwap(cur, ref) {
				break
			}
		}
	}
	if rl := h.opts.HAReplicaLabel; rl != "" && lset.Has(rl) {
		h.replicaStored.Store(true)
	}
	s = &memSeries{ref: ref, lset: lset.Copy()}
	g := h.groupFor(key)
	g.mu.Lock()
	g.addMember(s)
	g.mu.Unlock()
	st.add(hash, s)
	st.mu.Unlock()

	h.refs.set(ref, s)
	h.index.add(ref, s.lset)
	h.perMetric.inc(s.lset.Get(labels.MetricName))
	h.counters.series.Add(1)
	return s, nil
}

// groupFor returns the group with key (appendGroupKey's), creating it if
// new: the key becomes a string only then.
func (h *Head) groupFor(key []byte) *group {
	gs := &h.groups[groupHash(key)%stripes]
	gs.mu.RLock()
	g := gs.byKey[string(key)]
	gs.mu.RUnlock()
	if g != nil {
		return g
	}
	return h.getOrCreateGroup(string(key))
}

func (h *Head) getOrCreateGroup(key string) *group {
	gs := &h.groups[groupHash(key)%stripes]
	gs.mu.RLock()
	g := gs.byKey[key]
	gs.mu.RUnlock()
	if g != nil {
		return g
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g = gs.byKey[key]; g == nil {
		g = newGroup(h.nextGroupID.Add(1), key)
		h.counters.groups.Add(1)
		g.inferStale = h.opts.InferStalenessRows
		gs.byKey[key] = g
	}
	return g
}

func groupHash[K string | []byte](key K) uint64 {
	// FNV-1a; group lookups happen only when a series is created.
	var x uint64 = 14695981039346656037
	for i := 0; i < len(key); i++ {
		x ^= uint64(key[i])
		x *= 1099511628211
	}
	return x
}

// ResolveNext returns the series that followed prev in the last batch that
// held prev, if it is still in the head and match accepts its labels: a
// sender's shards repeat their series in the same order request after
// request, so most known series are found without a hash, a map or a lock.
func (h *Head) ResolveNext(prev SeriesRef, match func(labels.Labels) bool) (SeriesRef, bool) {
	if p := prev.s; p != nil {
		if c := p.rawNext.Load(); c != nil && !c.removed() && match(c.lset) {
			return SeriesRef{ID: c.ref, s: c}, true
		}
	}
	return SeriesRef{}, false
}

// ResolveHash returns the series whose labels hash (labels.Labels.Hash) is
// hash if match accepts its labels, so that a known series is found without
// building or validating its labels again. It remembers the series as the
// successor of prev (the series resolved just before in the same request, or
// zero) for ResolveNext.
func (h *Head) ResolveHash(prev SeriesRef, hash uint64, match func(labels.Labels) bool) (SeriesRef, bool) {
	st := &h.series[hash%stripes]
	st.mu.RLock()
	s := st.table.find(hash, func(s *memSeries) bool { return match(s.lset) })
	st.mu.RUnlock()
	if s == nil {
		return SeriesRef{}, false
	}
	if p := prev.s; p != nil && p != s {
		p.rawNext.Store(s)
	}
	return SeriesRef{ID: s.ref, s: s}, true
}

// predictNext returns the series that followed p in the last batch that
// held p, if it is still in the head. The caller holds gcMu.
func predictNext(p *memSeries) *memSeries {
	if p == nil {
		return nil
	}
	if c := p.rawNext.Load(); c != nil && !c.removed() {
		return c
	}
	return nil
}

// seriesByRef returns the series with the given reference, or nil.
func (h *Head) seriesByRef(ref uint64) *memSeries { return h.refs.get(ref) }

// commitState is the reusable per-batch scratch space.
type commitState struct {
	series  []*memSeries
	replica []string // HA replica of each batch series ("" when none)
	order   []int
	commit  record.Commit
	buf     []byte
	fresh   int               // samples of commit new to the head (the others were resent)
	hstarts []record.RefStart // start timestamps of commit.Histograms, appended to commit.Starts when logged
}

// AppendBatch writes a batch: each group's samples are placed under that
// group's lock, the accepted ones (resent identical ones too) are logged to
// the WAL as one record, and the call returns after the record is written,
// so whatever it reports written is in a record of this batch. The error is
// non-nil only when the WAL cannot be written (it wraps ErrUnavailable):
// nothing is acknowledged, and while the WAL stays unwritable batches are
// refused before they touch memory; a retry of the same batch is idempotent.
// The batch belongs to the head for the call: it may clear the exemplars of
// series it drops (an HA replica that is not elected).
func (h *Head) AppendBatch(_ context.Context, b *Batch) (AppendResult, error) {
	var res AppendResult
	if err := h.Writable(); err != nil {
		return res, err
	}
	h.gcMu.RLock()
	defer h.gcMu.RUnlock()
	cs := h.commitPool.Get().(*commitState)
	defer h.commitPool.Put(cs)
	cs.commit.Reset()
	cs.hstarts = cs.hstarts[:0]
	cs.fresh = 0
	cs.series = cs.series[:0]
	cs.replica = cs.replica[:0]
	cs.order = cs.order[:0]
	limits := h.activeLimits()

	var prev *memSeries // the batch's series before this one
	for i := range b.Series {
		bs := &b.Series[i]
		var s *memSeries
		switch {
		case len(bs.Samples) == 0 && len(bs.Exemplars) == 0 && len(bs.Histograms) == 0:
		case bs.Ref.ID != 0:
			// GC sets removed under gcMu, which this append holds shared.
			if s = bs.Ref.s; s == nil {
				s = h.seriesByRef(bs.Ref.ID)
			}
			if s == nil || s.removed() {
				return res, fmt.Errorf("series %d: %w", bs.Ref.ID, ErrSeriesGone)
			}
			cs.order = append(cs.order, i)
		default:
			// Senders repeat their order: the series that followed prev last
			// time is checked first, without hashing or a map lookup. Stored
			// series do not hold the HA replica label (unless replayed from
			// before it was configured), so a request series equal to one
			// has none either.
			lset, replica := bs.Labels, ""
			c := predictNext(prev)
			var err error
			if c != nil && labels.Equal(c.lset, lset) && !h.replicaStored.Load() {
				s = c
			} else {
				if rl := h.opts.HAReplicaLabel; rl != "" {
					if replica = lset.Get(rl); replica != "" {
						// An HA pair's replicas write the same series: drop the
						// replica label; each group elects one replica below.
						lset = labels.NewBuilder(lset).Del(rl).Labels()
					}
				}
				if c != nil && replica != "" && labels.Equal(c.lset, lset) {
					s = c
				} else if s, err = h.getOrCreate(lset, 0, limits); err == nil && prev != nil {
					prev.rawNext.Store(s)
				}
			}
			if err != nil {
				h.rejectSeries(&res, err, limits, lset, len(bs.Samples)+len(bs.Histograms))
			} else {
				cs.order = append(cs.order, i)
			}
			for len(cs.replica) < i {
				cs.replica = append(cs.replica, "")
			}
			cs.replica = append(cs.replica, replica)
		}
		cs.series = append(cs.series, s)
		if s != nil {
			prev = s
		}
	}
	// Visit each group once: one lock acquisition per group per batch.
	slices.SortFunc(cs.order, func(a, b int) int {
		ga, gb := cs.series[a].g, cs.series[b].g
		if ga == gb {
			return a - b
		}
		if groupLess(ga, gb) {
			return -1
		}
		return 1
	})
	now := h.opts.Now()
	lim := timeLimits{floor: h.opts.acceptFloor(now), ceiling: h.opts.acceptCeiling(now), lateMin: math.MaxInt64}
	if h.opts.LateMaxAge > 0 {
		lim.lateMin = subSat(now, h.opts.LateMaxAge.Milliseconds())
	}
	ao := h.appendOpts()
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for k := 0; k < len(cs.order); {
		g := cs.series[cs.order[k]].g
		k = h.appendGroup(g, b, cs, k, now, lim, ao, &res, &lo, &hi)
	}
	for _, i := range cs.order {
		bs := &b.Series[i]
		if len(bs.Exemplars) == 0 {
			continue
		}
		s := cs.series[i]
		for _, e := range bs.Exemplars {
			// Logged when stored and when resent (as resent samples are).
			if written, _ := h.exemplars.add(s, e); written {
				res.ExemplarsWritten++
				cs.commit.Exemplars = append(cs.commit.Exemplars, record.RefExemplar{Ref: s.ref, T: e.T, V: e.V, Labels: e.Labels})
				if !s.logged() {
					cs.commit.Series = append(cs.commit.Series, record.RefSeries{Ref: s.ref, Labels: s.lset})
				}
			}
		}
	}
	for _, m := range b.Metadata {
		if h.setMetadata(m, limits) {
			cs.commit.Metadata = append(cs.commit.Metadata, record.Metadata{Metric: m.Metric, Type: m.Type, Help: m.Help, Unit: m.Unit})
		}
	}
	res.SamplesWritten += len(cs.commit.Samples)
	res.HistogramsWritten += len(cs.commit.Histograms)
	// The samples are in memory whether or not the record below is written:
	// flushes must see them (a retry logs them).
	h.updateBounds(lo, hi)
	if len(cs.commit.Samples) == 0 && len(cs.commit.Metadata) == 0 && len(cs.commit.Exemplars) == 0 && len(cs.commit.Histograms) == 0 {
		h.metrics.observeRejections(&res)
		return res, nil
	}
	cs.commit.Starts = append(cs.commit.Starts, cs.hstarts...)
	cs.buf = cs.commit.Encode(cs.buf[:0])
	if err := h.logRecord(cs.buf); err != nil {
		res.SamplesWritten, res.HistogramsWritten, res.ExemplarsWritten = 0, 0, 0
		return res, err
	}
	for _, rs := range cs.commit.Series {
		if s := h.seriesByRef(rs.Ref); s != nil {
			s.flags.Or(seriesLogged)
		}
	}
	h.counters.appended.Add(int64(cs.fresh))
	h.metrics.observeRejections(&res)
	return res, nil
}

// testHookAppendGroup, set by tests, runs under each group's lock in appendGroup.
var testHookAppendGroup func(*group)

// timeLimits bound the timestamps one batch accepts.
type timeLimits struct {
	floor, ceiling int64 // oldest and newest accepted timestamp
	lateMin        int64 // oldest accepted timestamp older than the head (for out-of-order blocks)
}

// appendGroup places the samples of the batch series cs.order[k:] that belong
// to group g, under g's lock, and returns the index of the first series of
// the next group. The lock is released even if placing panics.
func (h *Head) appendGroup(g *group, b *Batch, cs *commitState, k int, now int64, lim timeLimits, ao appendOpts, res *AppendResult, lo, hi *int64) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if testHookAppendGroup != nil {
		testHookAppendGroup(g)
	}
	g.lastAppend = now
	// Read under the group lock: a flush raises it before capturing the
	// group, so nothing lands in a range after it was captured.
	minValid := h.minValid.Load()
	for ; k < len(cs.order) && cs.series[cs.order[k]].g == g; k++ {
		i := cs.order[k]
		s := cs.series[i]
		haCutoff := int64(math.MinInt64)
		if i < len(cs.replica) && cs.replica[i] != "" {
			keep, cutoff := g.haAccept(cs.replica[i], now, h.opts.HAFailoverTimeout.Milliseconds())
			if !keep {
				// The other replica of the pair is active: these samples are
				// already written by it (accepted, not stored again).
				n := len(b.Series[i].Samples)
				res.SamplesWritten += n
				res.HistogramsWritten += len(b.Series[i].Histograms)
				res.ExemplarsWritten += len(b.Series[i].Exemplars)
				b.Series[i].Exemplars = nil // nor are its exemplars
				h.counters.haDeduped.Add(int64(n + len(b.Series[i].Histograms)))
				continue
			}
			haCutoff = cutoff
		}
		sts := b.Series[i].Starts
		for j, smp := range b.Series[i].Samples {
			var st int64
			if sts != nil {
				st = sts[j]
			}
			if smp.T > lim.ceiling {
				res.Reject(ErrTooFarInFuture, 1, fmt.Sprintf("series %s at %d (more than --storage.max-future-skew ahead of the clock)", s.lset, smp.T))
				continue
			}
			if smp.T < lim.floor {
				res.Reject(ErrTooOldSample, 1, fmt.Sprintf("series %s at %d (older than --storage.max-sample-age behind the clock)", s.lset, smp.T))
				continue
			}
			if smp.T <= haCutoff {
				// Failover: the old replica already wrote up to the cutoff.
				res.SamplesWritten++
				h.counters.haDeduped.Add(1)
				continue
			}
			if hs, ok := s.staleAsHistogram(smp); ok {
				// A staleness marker of a histogram series is a histogram, as in Prometheus.
				if h.appendHistogram(g, s, hs, haCutoff, minValid, lim, ao, cs, res) {
					*lo, *hi = min(*lo, hs.T), max(*hi, hs.T)
					res.HistogramsWritten--
					res.SamplesWritten++
				}
				continue
			}
			var err error
			prevT := s.lastT
			if smp.T < minValid {
				if smp.T < lim.lateMin {
					res.Reject(ErrTooOldSample, 1, fmt.Sprintf("series %s at %d (its range is in a block, and it is older than --storage.late-max-age)", s.lset, smp.T))
					continue
				}
				err = g.appendLate(s, smp.T, smp.V, &h.counters)
			} else {
				err = g.append(s, smp.T, smp.V, ao, &h.counters)
			}
			switch err {
			case nil:
				cs.fresh++
				if st != 0 || s.x != nil {
					s.recordST(prevT, smp.T, st)
				}
			case errDupSame:
				// A resent sample, already in memory: logged again all the
				// same, since the request that placed it may have failed to
				// log it (full disk) and this retry is what gets acknowledged.
			default:
				res.Reject(err, 1, fmt.Sprintf("series %s at %d", s.lset, smp.T))
				continue
			}
			cs.commit.Samples = append(cs.commit.Samples, record.RefSample{Ref: s.ref, T: smp.T, V: smp.V})
			cs.logST(s, smp.T, st)
			*lo, *hi = min(*lo, smp.T), max(*hi, smp.T)
			cs.logSeries(s)
		}
		for _, hs := range b.Series[i].Histograms {
			if h.appendHistogram(g, s, hs, haCutoff, minValid, lim, ao, cs, res) {
				*lo, *hi = min(*lo, hs.T), max(*hi, hs.T)
			}
		}
	}
	return k
}

// logSeries adds s's series record to the commit unless it is logged or
// the commit's newest one.
func (cs *commitState) logSeries(s *memSeries) {
	if !s.logged() && (len(cs.commit.Series) == 0 || cs.commit.Series[len(cs.commit.Series)-1].Ref != s.ref) {
		cs.commit.Series = append(cs.commit.Series, record.RefSeries{Ref: s.ref, Labels: s.lset})
	}
}

// appendHistogram places one histogram sample of s as appendGroup does a
// float one and reports whether it goes into the commit; called with g.mu held.
func (h *Head) appendHistogram(g *group, s *memSeries, hs HistogramSample, haCutoff, minValid int64, lim timeLimits, ao appendOpts, cs *commitState, res *AppendResult) bool {
	switch {
	case hs.T > lim.ceiling:
		res.Reject(ErrTooFarInFuture, 1, fmt.Sprintf("series %s at %d (more than --storage.max-future-skew ahead of the clock)", s.lset, hs.T))
		return false
	case hs.T < lim.floor:
		res.Reject(ErrTooOldSample, 1, fmt.Sprintf("series %s at %d (older than --storage.max-sample-age behind the clock)", s.lset, hs.T))
		return false
	case hs.T <= haCutoff:
		res.HistogramsWritten++
		h.counters.haDeduped.Add(1)
		return false
	case hs.T < minValid && hs.T < lim.lateMin:
		res.Reject(ErrTooOldSample, 1, fmt.Sprintf("series %s at %d (its range is in a block, and it is older than --storage.late-max-age)", s.lset, hs.T))
		return false
	}
	hs = staleHistogram(hs)
	if err := validHistogram(hs); err != nil {
		res.Reject(ErrInvalidHistogram, 1, fmt.Sprintf("series %s at %d: %v", s.lset, hs.T, err))
		return false
	}
	var err error
	prevT := s.lastT
	if hs.T < minValid {
		err = g.appendLateHistogram(s, hs, &h.counters)
	} else {
		err = g.appendHistogram(s, hs, ao, &h.counters)
	}
	switch err {
	case nil:
		cs.fresh++
		s.recordST(prevT, hs.T, hs.ST)
	case errDupSame: // logged again, as resent floats are
	default:
		res.Reject(err, 1, fmt.Sprintf("series %s at %d", s.lset, hs.T))
		return false
	}
	cs.commit.Histograms = append(cs.commit.Histograms, record.RefHistogram{Ref: s.ref, T: hs.T, H: hs.H, FH: hs.FH})
	if hs.ST != 0 {
		cs.hstarts = append(cs.hstarts, record.RefStart{Ref: s.ref, T: hs.T, ST: hs.ST})
	}
	cs.logSeries(s)
	return true
}

func groupLess(a, b *group) bool { return a.id < b.id }

func (h *Head) updateBounds(lo, hi int64) {
	if lo > hi {
		return
	}
	for {
		cur := h.minT.Load()
		if lo >= cur || h.minT.CompareAndSwap(cur, lo) {
			break
		}
	}
	for {
		cur := h.maxT.Load()
		if hi <= cur || h.maxT.CompareAndSwap(cur, hi) {
			break
		}
	}
}

// setMetadata records metadata for a metric family; true if it changed.
// Metadata of a new family beyond lim's MaxMetadata (lim may be nil) is
// dropped and counted.
func (h *Head) setMetadata(m Metadata, lim *SeriesLimits) bool {
	if m.Metric == "" {
		return false
	}
	h.metaMu.RLock()
	cur := h.meta[m.Metric]
	h.metaMu.RUnlock()
	if slices.Contains(cur, m) {
		return false
	}
	h.metaMu.Lock()
	defer h.metaMu.Unlock()
	cur = h.meta[m.Metric]
	if slices.Contains(cur, m) {
		return false
	}
	if cur == nil && lim != nil && lim.MaxMetadata > 0 && len(h.meta) >= lim.MaxMetadata {
		h.metrics.metadataDropped.Inc()
		return false
	}
	// The newest metadata of a family comes first; keep a few distinct ones.
	cur = append([]Metadata{m}, cur...)
	if len(cur) > 4 {
		cur = cur[:4]
	}
	h.meta[m.Metric] = cur
	return true
}

// MetricMetadata returns metadata per metric family; metric "" means all,
// limits <= 0 mean unlimited.
func (h *Head) MetricMetadata(metric string, limit, limitPerMetric int) map[string][]Metadata {
	h.metaMu.RLock()
	defer h.metaMu.RUnlock()
	out := map[string][]Metadata{}
	add := func(name string, ms []Metadata) {
		if limitPerMetric > 0 && len(ms) > limitPerMetric {
			ms = ms[:limitPerMetric]
		}
		out[name] = slices.Clone(ms)
	}
	if metric != "" {
		if ms, ok := h.meta[metric]; ok {
			add(metric, ms)
		}
		return out
	}
	names := make([]string, 0, len(h.meta))
	for n := range h.meta {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if limit > 0 && len(out) >= limit {
			break
		}
		add(n, h.meta[n])
	}
	return out
}

// replay rebuilds the head from the newest checkpoint and the WAL; returns
// the number of records.
func (h *Head) replay() (int, error) {
	var (
		c       record.Commit
		n       int
		ao      = h.appendOpts()
		dropped int
		unknown int
		old     int
	)
	apply := func(rec []byte) error {
		if err := record.Decode(rec, &c); err != nil {
			return fmt.Errorf("decode record %d: %w", n, err)
		}
		n++
		for _, rs := range c.Series {
			// No limits: what was acknowledged is kept whatever they are now.
			s, err := h.getOrCreate(rs.Labels, rs.Ref, nil)
			if err != nil {
				return fmt.Errorf("record %d: series %d: %w", n, rs.Ref, err)
			}
			s.flags.Or(seriesLogged)
			if s.ref != rs.Ref {
				return fmt.Errorf("record %d: series %s logged as %d and %d", n, rs.Labels, s.ref, rs.Ref)
			}
		}
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		minValid := h.minValid.Load()
		stc := startsCursor{list: c.Starts}
		for _, smp := range c.Samples {
			st := stc.at(smp.Ref, smp.T)
			s := h.seriesByRef(smp.Ref)
			if s == nil {
				// Its series record was in a damaged record that replay or
				// repair dropped: the sample cannot be placed.
				unknown++
				continue
			}
			if smp.T < minPlaceable || smp.T > maxPlaceable {
				// Logged before timestamps were bounded; no block range can
				// hold it (it would stop flushes).
				dropped++
				continue
			}
			s.g.mu.Lock()
			var err error
			prevT := s.lastT
			if smp.T < minValid {
				// Older than the head: a late sample not flushed yet (or, after a
				// crash during a flush, one already in a block: a duplicate
				// that compaction merges away).
				old++
				err = s.g.appendLate(s, smp.T, smp.V, &h.counters)
			} else {
				err = s.g.append(s, smp.T, smp.V, ao, &h.counters)
			}
			if errors.Is(err, ErrOutOfOrderSample) {
				// Acknowledged live, logged in another order: keep it.
				s.addLate(smp.T, smp.V)
				err = nil
			}
			if err == nil {
				s.recordST(prevT, smp.T, st)
			}
			s.g.mu.Unlock()
			if err != nil && err != errDupSame {
				dropped++
				continue
			}
			lo, hi = min(lo, smp.T), max(hi, smp.T)
		}
		for _, rh := range c.Histograms {
			st := stc.at(rh.Ref, rh.T)
			s := h.seriesByRef(rh.Ref)
			if s == nil {
				unknown++
				continue
			}
			if rh.T < minPlaceable || rh.T > maxPlaceable {
				dropped++
				continue
			}
			hs := HistogramSample{T: rh.T, H: rh.H, FH: rh.FH, ST: st}
			s.g.mu.Lock()
			var err error
			prevT := s.lastT
			if rh.T < minValid {
				old++
				err = s.g.appendLateHistogram(s, hs, &h.counters)
			} else {
				err = s.g.appendHistogram(s, hs, ao, &h.counters)
			}
			if errors.Is(err, ErrOutOfOrderSample) {
				s.addLateHist(hs)
				err = nil
			}
			if err == nil {
				s.recordST(prevT, rh.T, st)
			}
			s.g.mu.Unlock()
			if err != nil && err != errDupSame {
				dropped++
				continue
			}
			lo, hi = min(lo, rh.T), max(hi, rh.T)
		}
		h.updateBounds(lo, hi)
		for _, m := range c.Metadata {
			h.setMetadata(Metadata{Metric: m.Metric, Type: m.Type, Help: m.Help, Unit: m.Unit}, nil)
		}
		for _, e := range c.Exemplars {
			if s := h.seriesByRef(e.Ref); s != nil {
				h.exemplars.add(s, Exemplar{Labels: e.Labels, T: e.T, V: e.V})
			}
		}
		return nil
	}
	if cp, _, err := lastCheckpoint(h.walDir()); err != nil {
		return 0, err
	} else if cp != "" {
		cw, err := wal.Open(cp, wal.Options{Logger: h.logger})
		if err != nil {
			return 0, fmt.Errorf("open checkpoint %s: %w", cp, err)
		}
		err = cw.Replay(apply)
		cw.Close()
		if err != nil {
			return n, h.replayError(fmt.Errorf("replay checkpoint %s: %w", cp, err))
		}
	}
	err := h.wal.Replay(apply)
	if dropped > 0 {
		h.logger.Warn("WAL replay could not place some samples", "samples", dropped)
	}
	if unknown > 0 {
		h.logger.Warn("WAL replay dropped samples whose series record was in a damaged record", "samples", unknown)
	}
	if old > 0 {
		h.logger.Debug("WAL replay kept samples older than the head aside for out-of-order blocks", "samples", old)
	}
	return n, h.replayError(err)
}

// replayError adds the way out to a WAL corruption error.
func (h *Head) replayError(err error) error {
	var ce *wal.CorruptionError
	if !errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("WAL is damaged in segment %d of %s at offset %d; nothing was changed. "+
		"Stop tandem and run `tandem tsdb repair --storage.path=%s`: it keeps every readable record, "+
		"drops only the damaged bytes and reports what was lost: %w", ce.Segment, ce.Dir, ce.Offset, h.dir, err)
}

// Stats returns head statistics in Prometheus's format (for /api/v1/status/tsdb).
func (h *Head) Stats(statsByLabelName string, limit int) (*promtsdb.Stats, error) {
	if limit <= 0 {
		limit = 10
	}
	mint, maxt := h.minT.Load(), h.maxT.Load()
	if mint > maxt {
		mint, maxt = 0, 0
	}
	return &promtsdb.Stats{
		NumSeries:         uint64(h.index.numSeries()),
		MinTime:           mint,
		MaxTime:           maxt,
		IndexPostingStats: h.index.stats(statsByLabelName, limit),
	}, nil
}

// forEachGroup calls fn for every group.
func (h *Head) forEachGroup(fn func(g *group)) {
	for i := range h.groups {
		gs := &h.groups[i]
		gs.mu.RLock()
		gl := make([]*group, 0, len(gs.byKey))
		for _, g := range gs.byKey {
			gl = append(gl, g)
		}
		gs.mu.RUnlock()
		for _, g := range gl {
			fn(g)
		}
	}
}
