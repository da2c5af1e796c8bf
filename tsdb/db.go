package tsdb

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	promtsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/tandem-tsdb/tandem/compact"
	"github.com/tandem-tsdb/tandem/internal/fsutil"
	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/blockset"
	"github.com/tandem-tsdb/tandem/tsdb/fastread"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// DBOptions configure a DB: the head's options plus block management.
type DBOptions struct {
	Head head.Options
	// RetentionTime deletes blocks whose data is entirely older than the
	// newest sample minus this (0 keeps everything).
	RetentionTime time.Duration
	// RetentionSize deletes the oldest blocks while blocks take more bytes (0 = no limit).
	RetentionSize int64
	// CompactionRanges are the block ranges compaction merges into, in ms,
	// smallest (the flush range) first; nil means 1, 3, 9, 27 and 81 flush ranges.
	CompactionRanges []int64
	// SealInterval is how often Run seals idle groups' open rows, and
	// FlushInterval how often it flushes, compacts and applies retention
	// (0: DefaultSealInterval, DefaultFlushInterval).
	SealInterval, FlushInterval time.Duration
}

// DB is tandem's storage: the multivariate head (with its WAL) and the
// immutable blocks the head is flushed into. It implements storage.Storage.
type DB struct {
	dir    string
	lock   *fsutil.DirLock
	opts   DBOptions
	logger *slog.Logger
	head   *head.Head

	blocks *blockset.Set

	maintMu sync.Mutex // one flush/compaction/retention/tombstone cleaning at a time
	metrics *dbMetrics
	tombs   *tombstones
}

type dbMetrics struct {
	flushes, flushFailures prometheus.Counter
	flushDuration          prometheus.Histogram
	compactions            prometheus.Counter
	compactionFailures     prometheus.Counter
	compactionDuration     prometheus.Histogram
	compactionBytesRead    prometheus.Counter
	compactionBytesWritten prometheus.Counter
	compactionCPU          prometheus.Counter
}

// OpenDB opens the storage in dir: blocks first (a block whose bytes are
// proven bad is moved to dir/quarantine; any other error opening one fails),
// then the head, replaying its WAL from the end of the blocks.
func OpenDB(dir string, opts DBOptions) (*DB, error) {
	if opts.Head.Logger == nil {
		opts.Head.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	// The lock first: opening the blocks removes what interrupted writes
	// left, which must never be another running tandem's writes.
	lock, err := fsutil.LockDir(dir)
	if err != nil {
		return nil, err
	}
	db := &DB{dir: dir, opts: opts, logger: opts.Head.Logger, lock: lock}
	blocks, err := blockset.Open(dir, blockset.Options{Logger: opts.Head.Logger, Registerer: opts.Head.Registerer})
	if err != nil {
		lock.Release()
		return nil, err
	}
	db.blocks = blocks
	tombs, err := loadTombstones(dir)
	if err != nil {
		blocks.Close()
		lock.Release()
		return nil, err
	}
	db.tombs = tombs
	hopts := opts.Head
	hopts.MinValidTime = blocks.MaxTime()
	hopts.DirLocked = true
	h, err := head.Open(dir, hopts)
	if err != nil {
		blocks.Close()
		lock.Release()
		return nil, err
	}
	db.head = h
	db.metrics = newDBMetrics(opts.Head.Registerer)
	return db, nil
}

func newDBMetrics(reg prometheus.Registerer) *dbMetrics {
	m := &dbMetrics{
		flushes:                prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_head_flushes_total", Help: "Head ranges written as blocks."}),
		flushFailures:          prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_head_flush_failures_total", Help: "Failed head flushes."}),
		flushDuration:          prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_head_flush_duration_seconds", Help: "Time to write a head range as a block, truncate the head and checkpoint the WAL.", Buckets: prometheus.ExponentialBuckets(0.01, 3, 10)}),
		compactions:            prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_compactions_total", Help: "Block merges completed."}),
		compactionFailures:     prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_compaction_failures_total", Help: "Block merges that failed."}),
		compactionDuration:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_compaction_duration_seconds", Help: "Time to merge blocks into one.", Buckets: prometheus.ExponentialBuckets(0.01, 3, 10)}),
		compactionBytesRead:    prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_compaction_read_bytes_total", Help: "Bytes of the blocks compaction merged."}),
		compactionBytesWritten: prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_compaction_written_bytes_total", Help: "Bytes of the blocks compaction wrote."}),
		compactionCPU:          prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_compaction_cpu_seconds_total", Help: "CPU time (user and system) spent merging blocks."}),
	}
	if reg != nil {
		reg.MustRegister(m.flushes, m.flushFailures, m.flushDuration,
			m.compactions, m.compactionFailures, m.compactionDuration, m.compactionBytesRead, m.compactionBytesWritten, m.compactionCPU)
	}
	return m
}

// Ready reports whether start-up (WAL replay) has finished.
func (db *DB) Ready() bool { return db != nil && db.head.Ready() }

// Writable returns nil while writes can be made durable, else why not (an
// error wrapping head.ErrUnavailable).
func (db *DB) Writable() error {
	if db == nil {
		return nil
	}
	return db.head.Writable()
}

// Blocks returns the metas of the blocks, oldest first.
func (db *DB) Blocks() []block.Meta { return db.blocks.Metas() }

// AppendBatch writes a batch to the head (see head.Head.AppendBatch).
func (db *DB) AppendBatch(ctx context.Context, b *head.Batch) (head.AppendResult, error) {
	return db.head.AppendBatch(ctx, b)
}

// ResolveNext finds a known series as the successor of another (see head.Head.ResolveNext).
func (db *DB) ResolveNext(prev head.SeriesRef, match func(labels.Labels) bool) (head.SeriesRef, bool) {
	return db.head.ResolveNext(prev, match)
}

// ResolveHash finds a known series by its labels hash (see head.Head.ResolveHash).
func (db *DB) ResolveHash(prev head.SeriesRef, hash uint64, match func(labels.Labels) bool) (head.SeriesRef, bool) {
	return db.head.ResolveHash(prev, hash, match)
}

// MetricMetadata returns metric metadata (see head.Head.MetricMetadata).
func (db *DB) MetricMetadata(metric string, limit, limitPerMetric int) map[string][]head.Metadata {
	return db.head.MetricMetadata(metric, limit, limitPerMetric)
}

// SetSeriesLimits changes the head's series limits at run time (see head.Head.SetSeriesLimits).
func (db *DB) SetSeriesLimits(l head.SeriesLimits) { db.head.SetSeriesLimits(l) }

// SetMaxExemplars changes how many exemplars the head keeps (see head.Head.SetMaxExemplars).
func (db *DB) SetMaxExemplars(n int) { db.head.SetMaxExemplars(n) }

// LimitUsage reports the head's usage of its series limits (see head.Head.LimitUsage).
func (db *DB) LimitUsage() head.LimitUsage { return db.head.LimitUsage() }

// GroupStats returns the head's groups by size (see head.Head.GroupStats).
func (db *DB) GroupStats(limit int) head.GroupStats { return db.head.GroupStats(limit) }

// Stats returns the head's statistics in Prometheus's format.
func (db *DB) Stats(statsByLabelName string, limit int) (*promtsdb.Stats, error) {
	return db.head.Stats(statsByLabelName, limit)
}

// StartTime returns the oldest timestamp stored.
func (db *DB) StartTime() (int64, error) {
	if t, ok := db.blocks.MinTime(); ok {
		return t, nil
	}
	return db.head.StartTime()
}

// Querier returns a storage.Querier over blocks and head for [mint, maxt].
// Series present in several of them are merged in time order, identical
// timestamps once (a flush in progress may briefly hold a range in both).
func (db *DB) Querier(mint, maxt int64) (storage.Querier, error) {
	bs, done := db.blocks.Acquire(mint, maxt)
	qs := make([]storage.Querier, 0, len(bs)+1)
	for _, b := range bs {
		qs = append(qs, &blockQuerier{b: b, mint: mint, maxt: maxt})
	}
	hq, err := db.head.Querier(mint, maxt)
	if err != nil {
		for _, q := range qs {
			q.Close()
		}
		done()
		return nil, err
	}
	hq = &closeHook{Querier: hq, done: done}
	var q storage.Querier = hq
	if len(qs) > 0 {
		q = storage.NewMergeQuerier(append(qs, hq), nil, mergeSeries)
	}
	if !db.tombs.empty() {
		q = &tombstoneQuerier{Querier: q, ts: db.tombs}
	}
	return q, nil
}

// closeHook runs done when the querier is closed.
type closeHook struct {
	storage.Querier
	done func()
}

// SelectStream implements fastread.Streamer with the querier's, or with its
// Select.
func (q *closeHook) SelectStream(ctx context.Context, parts int, hints *storage.SelectHints, ms ...*labels.Matcher) []storage.SeriesSet {
	if st, ok := q.Querier.(fastread.Streamer); ok {
		return st.SelectStream(ctx, parts, hints, ms...)
	}
	return []storage.SeriesSet{q.Querier.Select(ctx, false, hints, ms...)}
}

func (q *closeHook) Close() error {
	err := q.Querier.Close()
	q.done()
	return err
}

// ChunkQuerier returns a storage.ChunkQuerier over blocks and head.
func (db *DB) ChunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	q, err := db.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &mergedChunkQuerier{q}, nil
}

type mergedChunkQuerier struct{ storage.Querier }

func (q *mergedChunkQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.ChunkSeriesSet {
	return newChunkSeriesSet(q.Querier.Select(ctx, sortSeries, hints, ms...))
}

// Flush writes the head's oldest block ranges as blocks while the head spans
// more than one and a half block ranges, then truncates the head and
// checkpoints the WAL. With all, every range is flushed, the newest too, and
// the head ends empty (later samples before the end of that range are then
// refused as too old): for tests and shutdown-time snapshots.
func (db *DB) Flush(all bool) error {
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	flushed := false
	for {
		mint, maxt, ok := db.head.NextFlushRange(all)
		if !ok {
			break
		}
		start := time.Now()
		empty, err := db.flushRange(mint, maxt)
		if err != nil {
			db.metrics.flushFailures.Inc()
			return err
		}
		db.metrics.flushes.Inc()
		db.metrics.flushDuration.Observe(time.Since(start).Seconds())
		flushed = true
		if empty {
			// Nothing was in the range: go straight to the next one that
			// holds data instead of walking empty ranges one by one.
			db.head.SkipEmptyRange(maxt)
		}
	}
	late, err := db.flushLate()
	if err != nil {
		db.metrics.flushFailures.Inc()
		return err
	}
	if flushed || late {
		// Groups whose data is all in blocks now and that stopped sending a
		// block range ago leave the head (before the checkpoint, which then
		// no longer names their series).
		hopts := db.head.Options()
		if g, s := db.head.GC(hopts.Now() - hopts.BlockRange.Milliseconds()); g > 0 {
			db.logger.Info("removed idle groups from the head", "groups", g, "series", s)
		}
		if err := db.head.Checkpoint(db.head.MinValidTime()); err != nil {
			return err
		}
	}
	return nil
}

// flushLate writes the late samples older than the head (their ranges were
// flushed already) as out-of-order blocks, one per block range; compaction
// merges them with the blocks they overlap. It reports whether it wrote any.
func (db *DB) flushLate() (bool, error) {
	late := db.head.ExportLate()
	if late.Empty() {
		return false, nil
	}
	rng := db.head.Options().BlockRange.Milliseconds()
	var dirs []string
	for _, mint := range late.Ranges(rng) {
		meta, err := block.Write(db.dir, mint, mint+rng, late.Groups(mint, mint+rng),
			block.WriteOptions{Exemplars: late.Exemplars(mint, mint+rng), Starts: late.Starts(mint, mint+rng), KeepLabels: true})
		if err != nil {
			return false, fmt.Errorf("write out-of-order block [%d, %d): %w", mint, mint+rng, err)
		}
		dirs = append(dirs, filepath.Join(db.dir, meta.ULID))
		db.logger.Info("late samples written to an out-of-order block", "block", meta.ULID, "mint", mint, "maxt", mint+rng,
			"samples", meta.Stats.NumSamples, "exemplars", meta.Stats.NumExemplars)
	}
	// Queriers created before the blocks were listed read the late data
	// from the head: Add returns once they are done.
	if err := db.blocks.Add(dirs...); err != nil {
		return false, fmt.Errorf("open out-of-order block %w", err)
	}
	late.Drop()
	return true, nil
}

// flushRange writes the head's range [mint, maxt) as a block and drops it
// from the head; empty reports that the range held nothing (no block is kept).
func (db *DB) flushRange(mint, maxt int64) (empty bool, err error) {
	// From here on the range is closed: late samples for it are refused.
	r := db.head.ExportRange(mint, maxt)
	// A head's series labels are strings it never reuses: the writer keeps
	// them rather than copying a million of them (KeepLabels).
	meta, err := block.Write(db.dir, mint, maxt, r.Groups, block.WriteOptions{Exemplars: r.Exemplars(), Starts: r.Starts(), KeepLabels: true})
	if err != nil {
		return false, fmt.Errorf("flush [%d, %d): %w", mint, maxt, err)
	}
	empty = meta.Stats.NumSamples == 0 && meta.Stats.NumExemplars == 0
	if empty {
		// An empty range leaves no block behind.
		if err := os.RemoveAll(filepath.Join(db.dir, meta.ULID)); err != nil {
			return false, fmt.Errorf("remove empty block of [%d, %d): %w", mint, maxt, err)
		}
	} else {
		// Queriers created before the block was listed read the range from
		// the head: Add returns once they are done, and the head keeps the
		// range until then.
		if err := db.blocks.Add(filepath.Join(db.dir, meta.ULID)); err != nil {
			return false, fmt.Errorf("open flushed block %w", err)
		}
		db.logger.Info("head range flushed to a block", "block", meta.ULID, "mint", mint, "maxt", maxt,
			"samples", meta.Stats.NumSamples, "series", meta.Stats.NumSeries, "groups", meta.Stats.NumGroups,
			"exemplars", meta.Stats.NumExemplars)
	}
	r.Drop()
	return empty, nil
}

// Snapshot writes a consistent copy of the storage into dir: hard links to
// every block's files (exemplars included) and, with withHead, the head's
// content (samples and exemplars) as one more block.
func (db *DB) Snapshot(dir string, withHead bool) error {
	bs, done := db.blocks.Acquire(math.MinInt64, math.MaxInt64)
	defer func() {
		for _, b := range bs {
			b.Release()
		}
		done()
	}()
	for _, b := range bs {
		dst := filepath.Join(dir, filepath.Base(b.Dir()))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		entries, err := os.ReadDir(b.Dir())
		if err != nil {
			return fmt.Errorf("snapshot: list %s: %w", b.Dir(), err)
		}
		for _, e := range entries {
			if err := os.Link(filepath.Join(b.Dir(), e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return fmt.Errorf("snapshot: link %s: %w", e.Name(), err)
			}
		}
	}
	if !withHead {
		return nil
	}
	r, ok := db.head.ExportAll()
	if !ok {
		return nil
	}
	mint, maxt := r.Range()
	_, err := block.Write(dir, mint, maxt, r.Groups, block.WriteOptions{Exemplars: r.Exemplars(), Starts: r.Starts(), KeepLabels: true})
	if err != nil {
		return fmt.Errorf("snapshot: write head block: %w", err)
	}
	return nil
}

func (db *DB) compactionRanges() []int64 {
	if len(db.opts.CompactionRanges) > 0 {
		return db.opts.CompactionRanges
	}
	return compact.ExponentialRanges(db.head.Options().BlockRange, 3, 5)
}

// Compact merges adjacent blocks into larger ranges (and overlapping blocks
// into one) as compact.Plan decides, until nothing is left to merge. Queries
// and ingestion go on meanwhile: a merged block replaces its sources in one
// step, and the sources are deleted once no querier reads them.
func (db *DB) Compact() error {
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	for {
		safe := db.head.MinValidTime()
		plans := compact.Plan(db.Blocks(), db.compactionRanges(), safe)
		if len(plans) == 0 {
			return nil
		}
		for _, plan := range plans {
			if err := db.compactPlan(plan); err != nil {
				db.metrics.compactionFailures.Inc()
				return err
			}
		}
	}
}

func (db *DB) compactPlan(plan []block.Meta) error {
	start := time.Now()
	ids := make([]string, len(plan))
	for i, m := range plan {
		ids[i] = m.ULID
	}
	srcs, err := db.blocks.AcquireIDs(ids)
	if err != nil {
		return err
	}
	raw := make([]*block.Block, len(srcs))
	var read int64
	for i, b := range srcs {
		raw[i] = b.Block
		read += b.Size()
	}
	// The merge runs on this goroutine: pin it to its thread to measure its CPU.
	runtime.LockOSThread()
	cpu0 := threadCPU()
	meta, err := compact.Merge(db.dir, raw, block.WriteOptions{})
	db.metrics.compactionCPU.Add(threadCPU() - cpu0)
	runtime.UnlockOSThread()
	if err != nil {
		for _, b := range srcs {
			b.Release()
		}
		return fmt.Errorf("compact %d blocks: %w", len(srcs), err)
	}
	p := filepath.Join(db.dir, meta.ULID)
	written := blockset.DirSize(p)
	// The merged block replaces its sources in one step; they are deleted
	// once no querier reads them.
	if err := db.blocks.Replace(srcs, p); err != nil {
		return fmt.Errorf("open compacted block %w", err)
	}
	db.metrics.compactions.Inc()
	db.metrics.compactionDuration.Observe(time.Since(start).Seconds())
	db.metrics.compactionBytesRead.Add(float64(read))
	db.metrics.compactionBytesWritten.Add(float64(written))
	db.logger.Info("blocks compacted", "block", meta.ULID, "sources", len(srcs), "mint", meta.MinTime, "maxt", meta.MaxTime,
		"level", meta.Compaction.Level, "duration", time.Since(start))
	return nil
}

// threadCPU returns the calling thread's CPU time in seconds (0 if unknown).
func threadCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// rusageThread is RUSAGE_THREAD (Linux).
const rusageThread = 1

// SetRetentionTime changes the retention time (0 keeps everything), from
// the next retention pass on.
func (db *DB) SetRetentionTime(d time.Duration) {
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	db.opts.RetentionTime = d
}

// ApplyRetention deletes blocks beyond the retention time and size.
func (db *DB) ApplyRetention() error {
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	return db.blocks.Retain(db.head.MaxTime(), db.opts.RetentionTime, db.opts.RetentionSize)
}

// Close closes the head (syncing the WAL) and the blocks.
func (db *DB) Close() error {
	db.maintMu.Lock()
	defer db.maintMu.Unlock()
	err := db.head.Close()
	db.blocks.Close() // unmapping errors change nothing on disk
	if lerr := db.lock.Release(); err == nil {
		err = lerr
	}
	return err
}
