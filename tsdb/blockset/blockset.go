// Package blockset owns the blocks of a data directory that are open: it
// opens them at start-up (quarantining the damaged ones, finishing
// interrupted deletions, dropping blocks a compacted block already holds),
// lists them sorted by time, counts the references readers and compaction
// hold to each, and closes and deletes a block only once nobody reads it. It
// also keeps the reader epoch that lets a flush drop a range from the head
// only once the readers that could not see the range's new block are done.
// Writing blocks (flush, compaction, tombstone rewriting) is its callers'.
package blockset

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-tsdb/tandem/internal/fsutil"
	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// Block is an open block of a Set with a count of the references to it; its
// Close belongs to the Set, callers use Release.
type Block struct {
	*block.Block
	dir  string
	refs sync.WaitGroup
}

// Dir returns the block's directory.
func (b *Block) Dir() string { return b.dir }

// Release drops one reference taken by Acquire or AcquireIDs.
func (b *Block) Release() { b.refs.Done() }

// Size returns the bytes the block's files take on disk.
func (b *Block) Size() int64 { return DirSize(b.dir) }

// Options configure a Set.
type Options struct {
	// Logger receives the set's messages; nil discards them.
	Logger *slog.Logger
	// Registerer, when set, gets tandem_blocks, tandem_blocks_bytes and
	// tandem_blocks_deleted_total (unregistered again by Close).
	Registerer prometheus.Registerer
}

// Set is the list of a data directory's open blocks, sorted by MinTime. Its
// methods are safe for concurrent use; the caller serializes Add, Replace
// and Retain if it needs their effects ordered.
type Set struct {
	dir    string
	logger *slog.Logger

	mu     sync.RWMutex
	blocks []*Block // sorted by MinTime
	// readers counts the readers acquired since the block list last grew by
	// Add; Add waits for the readers of the previous epoch.
	readers *sync.WaitGroup

	deleted    prometheus.Counter
	reg        prometheus.Registerer
	collectors []prometheus.Collector
}

// Open opens the blocks in dir: it removes what interrupted writes and
// deletions left, moves the blocks whose bytes are proven bad to
// dir/quarantine, fails on any other error opening a block (leaving it in
// place), and deletes the blocks a compacted block already replaces.
func Open(dir string, opts Options) (*Set, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Set{dir: dir, logger: opts.Logger, readers: &sync.WaitGroup{}}
	s.deleted = prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_blocks_deleted_total", Help: "Blocks deleted by retention or replaced by compaction."})
	if err := block.CleanupTmp(dir); err != nil {
		return nil, fmt.Errorf("remove incomplete blocks: %w", err)
	}
	if err := s.openBlocks(); err != nil {
		s.closeBlocks()
		return nil, err
	}
	if opts.Registerer != nil {
		s.reg = opts.Registerer
		cs := []prometheus.Collector{
			s.deleted,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tandem_blocks", Help: "Blocks on disk."}, func() float64 {
				s.mu.RLock()
				defer s.mu.RUnlock()
				return float64(len(s.blocks))
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tandem_blocks_bytes", Help: "Bytes of the blocks on disk."}, func() float64 {
				return float64(s.Size())
			}),
		}
		for _, c := range cs {
			if err := s.reg.Register(c); err != nil {
				s.unregister()
				s.closeBlocks()
				return nil, fmt.Errorf("register block metrics: %w", err)
			}
			s.collectors = append(s.collectors, c)
		}
	}
	return s, nil
}

func (s *Set) openBlocks() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", s.dir, err)
	}
	if err := removeDeleting(s.dir, entries); err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || !isBlockDir(e.Name()) {
			continue
		}
		p := filepath.Join(s.dir, e.Name())
		b, err := block.Open(p)
		if err != nil && !blockDamaged(err) {
			// A transient error (EMFILE, ENOMEM, EACCES, EIO, ...) says
			// nothing about the block's bytes: stop, keep the block.
			s.logger.Error("cannot open block; not moving it to quarantine", "block", p, "err", err)
			return errBlockUnavailable(p, err)
		}
		if err != nil {
			s.logger.Error("block is damaged: moving it to quarantine", "block", p, "err", err)
			if qerr := quarantine(s.dir, p); qerr != nil {
				return fmt.Errorf("quarantine %s: %w (after: %w)", p, qerr, err)
			}
			continue
		}
		s.blocks = append(s.blocks, &Block{Block: b, dir: p})
	}
	s.sortBlocks()
	return s.dropReplaced()
}

// dropReplaced deletes blocks that a compacted block already contains (a
// crash between writing a merged block and deleting its sources).
func (s *Set) dropReplaced() error {
	sources := func(m block.Meta) []string {
		if len(m.Compaction.Sources) == 0 {
			return []string{m.ULID}
		}
		return m.Compaction.Sources
	}
	var keep, drop []*Block
	for _, x := range s.blocks {
		mx := x.Meta()
		replaced := false
		for _, y := range s.blocks {
			my := y.Meta()
			if y == x || my.Compaction.Level <= mx.Compaction.Level {
				continue
			}
			have := map[string]bool{}
			for _, src := range sources(my) {
				have[src] = true
			}
			all := true
			for _, src := range sources(mx) {
				all = all && have[src]
			}
			if all {
				replaced = true
				break
			}
		}
		if replaced {
			drop = append(drop, x)
		} else {
			keep = append(keep, x)
		}
	}
	s.blocks = keep
	for _, b := range drop {
		s.logger.Info("deleting a block already merged into a compacted block", "block", b.dir)
		b.Close()
		if err := removeBlockDir(s.dir, b.dir); err != nil {
			return fmt.Errorf("delete replaced block %s: %w", b.dir, err)
		}
	}
	return nil
}

// isBlockDir reports whether a directory name is a block's (a ULID).
func isBlockDir(name string) bool {
	_, err := ulid.ParseStrict(name)
	return err == nil
}

// quarantine moves the damaged block p of the data directory dir to
// <dir>/quarantine, durably.
func quarantine(dir, p string) error {
	q := filepath.Join(dir, "quarantine")
	if err := os.MkdirAll(q, 0o755); err != nil {
		return err
	}
	if err := os.Rename(p, filepath.Join(q, filepath.Base(p))); err != nil {
		return err
	}
	if err := fsutil.SyncDir(q); err != nil {
		return err
	}
	return fsutil.SyncDir(dir)
}

// sortBlocks sorts the list by MinTime; called with mu held (or before the
// set is shared).
func (s *Set) sortBlocks() {
	slices.SortStableFunc(s.blocks, func(a, b *Block) int {
		switch {
		case a.Meta().MinTime < b.Meta().MinTime:
			return -1
		case a.Meta().MinTime > b.Meta().MinTime:
			return 1
		}
		return 0
	})
}

// Metas returns the metas of the blocks, oldest first.
func (s *Set) Metas() []block.Meta {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]block.Meta, len(s.blocks))
	for i, b := range s.blocks {
		out[i] = b.Meta()
	}
	return out
}

// MaxTime returns the end of the newest block (math.MinInt64 without blocks).
func (s *Set) MaxTime() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.maxTimeLocked()
}

func (s *Set) maxTimeLocked() int64 {
	m := int64(math.MinInt64)
	for _, b := range s.blocks {
		m = max(m, b.Meta().MaxTime)
	}
	return m
}

// MinTime returns the start of the oldest block; ok is false without blocks.
func (s *Set) MinTime() (mint int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.blocks) == 0 {
		return 0, false
	}
	return s.blocks[0].Meta().MinTime, true
}

// Size returns the bytes the blocks take on disk.
func (s *Set) Size() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for _, b := range s.blocks {
		n += DirSize(b.dir)
	}
	return n
}

// DirSize returns the bytes of the files under dir (0 for what it cannot read).
func DirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// Acquire returns the blocks overlapping [mint, maxt], each referenced once
// (Release each), and registers a reader of the current epoch until done is
// called (done may be called more than once).
func (s *Set) Acquire(mint, maxt int64) (bs []*Block, done func()) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	wg := s.readers
	wg.Add(1)
	done = sync.OnceFunc(wg.Done)
	for _, b := range s.blocks {
		m := b.Meta()
		if m.MinTime <= maxt && m.MaxTime > mint {
			b.refs.Add(1)
			bs = append(bs, b)
		}
	}
	return bs, done
}

// AcquireIDs returns the blocks named by ulids (compaction sources) in the
// set's order, each referenced once, or an error and no reference if one of
// them is not listed.
func (s *Set) AcquireIDs(ulids []string) ([]*Block, error) {
	want := map[string]bool{}
	for _, u := range ulids {
		want[u] = true
	}
	s.mu.RLock()
	var bs []*Block
	for _, b := range s.blocks {
		if want[b.Meta().ULID] {
			b.refs.Add(1)
			bs = append(bs, b)
		}
	}
	s.mu.RUnlock()
	if len(bs) != len(ulids) {
		for _, b := range bs {
			b.Release()
		}
		return nil, fmt.Errorf("compaction plan names blocks that are gone")
	}
	return bs, nil
}

// openDirs opens the blocks in dirs; on error it closes those it opened and
// returns an error reading "<dir>: <the error of block.Open>".
func openDirs(dirs []string) ([]*Block, error) {
	bs := make([]*Block, 0, len(dirs))
	for _, p := range dirs {
		b, err := block.Open(p)
		if err != nil {
			for _, x := range bs {
				x.Close()
			}
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		bs = append(bs, &Block{Block: b, dir: p})
	}
	return bs, nil
}

// Add opens the blocks written in dirs, lists them, starts a new reader
// epoch and waits until the readers acquired before are done, so that the
// caller may then drop the blocks' ranges from the head. If a block does
// not open, none is listed and the error reads "<dir>: <why>" (wrap it as
// "open flushed block %w").
func (s *Set) Add(dirs ...string) error {
	if len(dirs) == 0 {
		return nil
	}
	bs, err := openDirs(dirs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.blocks = append(s.blocks, bs...)
	s.sortBlocks()
	older := s.readers
	s.readers = &sync.WaitGroup{}
	s.mu.Unlock()
	// Readers acquired before the blocks were listed read their ranges
	// from the head: the head keeps them until these readers are done.
	older.Wait()
	return nil
}

// Replace opens the block written in dir and lists it instead of old in one
// step (a reader sees either old or the new block, never both or neither),
// then waits until nobody reads old and closes and deletes them. The caller
// holds one reference to each of old (from AcquireIDs or Acquire) and hands
// it over: Replace releases it, on error too. If the new block does not
// open, old stay listed and the error reads "<dir>: <why>"; if one of old is
// no longer listed, nothing changes and the new block is deleted.
func (s *Set) Replace(old []*Block, dir string) error {
	release := func() {
		for _, b := range old {
			b.Release()
		}
	}
	if len(old) == 0 {
		return fmt.Errorf("replace %s: no blocks to replace", dir)
	}
	nbs, err := openDirs([]string{dir})
	if err != nil {
		release()
		return err
	}
	nb := nbs[0]
	s.mu.Lock()
	for _, o := range old {
		if !slices.Contains(s.blocks, o) {
			s.mu.Unlock()
			release()
			nb.Close()
			if rerr := removeBlockDir(s.dir, dir); rerr != nil {
				return fmt.Errorf("replace: block %s is gone; delete %s: %w", o.dir, dir, rerr)
			}
			return fmt.Errorf("replace: block %s is gone", o.dir)
		}
	}
	keep := s.blocks[:0]
	for _, b := range s.blocks {
		if !slices.Contains(old, b) {
			keep = append(keep, b)
		}
	}
	s.blocks = append(keep, nb)
	s.sortBlocks()
	s.mu.Unlock()
	release()
	return s.deleteBlocks(old)
}

// Retain deletes the blocks whose data is entirely older than the newest
// timestamp minus retention (retention > 0), then the oldest blocks while
// the blocks take more than maxBytes (maxBytes > 0). newest is the newest
// timestamp outside the blocks (the head's); the newest block's end counts
// too. Blocks are unlisted at once and deleted once nobody reads them:
// Retain waits for that.
func (s *Set) Retain(newest int64, retention time.Duration, maxBytes int64) error {
	var drop []*Block
	s.mu.Lock()
	if rt := retention.Milliseconds(); rt > 0 {
		newest := max(newest, s.maxTimeLocked())
		keep := s.blocks[:0]
		for _, b := range s.blocks {
			if b.Meta().MaxTime <= newest-rt {
				drop = append(drop, b)
			} else {
				keep = append(keep, b)
			}
		}
		s.blocks = keep
	}
	if rs := maxBytes; rs > 0 {
		var total int64
		sizes := make([]int64, len(s.blocks))
		for i, b := range s.blocks {
			sizes[i] = DirSize(b.dir)
			total += sizes[i]
		}
		i := 0
		for total > rs && i < len(s.blocks) {
			drop = append(drop, s.blocks[i])
			total -= sizes[i]
			i++
		}
		s.blocks = s.blocks[i:]
	}
	s.mu.Unlock()
	return s.deleteBlocks(drop)
}

// deleteBlocks closes and removes blocks already taken out of the list, once
// the readers reading them are done.
func (s *Set) deleteBlocks(bs []*Block) error {
	var errs []error
	for _, b := range bs {
		b.refs.Wait()
		if err := b.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close block %s: %w", b.dir, err))
		}
		if err := removeBlockDir(s.dir, b.dir); err != nil {
			errs = append(errs, fmt.Errorf("delete block %s: %w", b.dir, err))
		}
		s.deleted.Inc()
		s.logger.Info("block deleted", "block", b.dir)
	}
	return errors.Join(errs...)
}

// closeBlocks closes every listed block and empties the list.
func (s *Set) closeBlocks() {
	for _, b := range s.blocks {
		b.Close()
	}
	s.blocks = nil
}

func (s *Set) unregister() {
	for _, c := range s.collectors {
		s.reg.Unregister(c)
	}
	s.collectors = nil
}

// Close waits until nobody references a block, closes them all and
// unregisters the set's metrics; the set is empty afterwards. It returns
// the errors of closing the blocks (unmapping their files).
func (s *Set) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, b := range s.blocks {
		b.refs.Wait()
		if err := b.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.blocks = nil
	s.unregister()
	return errors.Join(errs...)
}
