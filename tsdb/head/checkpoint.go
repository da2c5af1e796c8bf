package head

import (
	"container/heap"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/internal/fsutil"
	"github.com/tandem-tsdb/tandem/tsdb/record"
	"github.com/tandem-tsdb/tandem/tsdb/wal"
)

// A checkpoint is a directory wal/checkpoint.NNNNNNNN, itself a WAL in the
// record format, holding everything the head kept at or after the time it
// was written: series definitions, samples and metadata. It replaces the WAL
// segments numbered below NNNNNNNN, which are deleted once it is complete.
// Start-up replays the newest checkpoint, then the remaining segments.
const checkpointPrefix = "checkpoint."

// lastCheckpoint returns the newest complete checkpoint directory and its number.
func lastCheckpoint(walDir string) (string, int, error) {
	entries, err := os.ReadDir(walDir)
	if os.IsNotExist(err) {
		return "", -1, nil
	}
	if err != nil {
		return "", -1, fmt.Errorf("list %s: %w", walDir, err)
	}
	best, bestN := "", -1
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, checkpointPrefix) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(name, checkpointPrefix))
		if err != nil {
			// A checkpoint interrupted by a crash: never complete, remove it.
			if strings.HasSuffix(name, ".tmp") {
				if err := os.RemoveAll(filepath.Join(walDir, name)); err != nil {
					return "", -1, fmt.Errorf("remove incomplete checkpoint %s: %w", name, err)
				}
			}
			continue
		}
		if n > bestN {
			best, bestN = filepath.Join(walDir, name), n
		}
	}
	return best, bestN, nil
}

// checkpointBatch bounds the samples per checkpoint record.
const checkpointBatch = 20000

// Checkpoint rewrites the WAL: it starts a new segment N, writes the head's
// content at or after mint into wal/checkpoint.N, then deletes the segments
// and checkpoints before it. Writes continue meanwhile; a sample written both
// in the checkpoint and in segment N is an identical duplicate, which replay
// accepts once.
func (h *Head) Checkpoint(mint int64) error {
	n, err := h.wal.NextSegment()
	if err != nil {
		return fmt.Errorf("checkpoint: start WAL segment: %w", err)
	}
	final := filepath.Join(h.walDir(), fmt.Sprintf("%s%08d", checkpointPrefix, n))
	tmp := final + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("checkpoint: remove %s: %w", tmp, err)
	}
	cw, err := wal.Open(tmp, wal.Options{SyncInterval: time.Hour, Logger: h.logger}) // synced once, on Close
	if err != nil {
		return fmt.Errorf("checkpoint: open %s: %w", tmp, err)
	}
	if err := h.writeCheckpoint(cw, mint); err != nil {
		cw.Close()
		os.RemoveAll(tmp)
		return err
	}
	if err := cw.Close(); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("checkpoint: close %s: %w", tmp, err)
	}
	// The segments' directory entries must be durable before the directory
	// gets its final name (Prometheus fsyncs a block's directory the same way).
	if err := fsutil.SyncDir(tmp); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("checkpoint: rename %s: %w", tmp, err)
	}
	if err := fsutil.SyncDir(h.walDir()); err != nil {
		return err
	}
	if err := h.wal.Truncate(n); err != nil {
		return fmt.Errorf("checkpoint: truncate WAL: %w", err)
	}
	// Older checkpoints are now redundant.
	entries, _ := os.ReadDir(h.walDir())
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() && strings.HasPrefix(name, checkpointPrefix) && filepath.Join(h.walDir(), name) != final {
			if err := os.RemoveAll(filepath.Join(h.walDir(), name)); err != nil {
				return fmt.Errorf("checkpoint: remove old %s: %w", name, err)
			}
		}
	}
	h.logger.Info("WAL checkpoint written", "checkpoint", final, "from", mint)
	return nil
}

func (h *Head) writeCheckpoint(cw *wal.WAL, mint int64) error {
	var (
		c       record.Commit
		buf     []byte
		hstarts []record.RefStart // of c.Histograms: logged after those of c.Samples
	)
	flush := func() error {
		if len(c.Series) == 0 && len(c.Samples) == 0 && len(c.Metadata) == 0 && len(c.Exemplars) == 0 && len(c.Histograms) == 0 {
			return nil
		}
		c.Starts = append(c.Starts, hstarts...)
		buf = c.Encode(buf[:0])
		c.Reset()
		hstarts = hstarts[:0]
		if err := cw.Log(buf); err != nil {
			return fmt.Errorf("checkpoint: write: %w", err)
		}
		return nil
	}
	var werr error
	h.forEachGroup(func(g *group) {
		if werr != nil {
			return
		}
		g.mu.Lock()
		members := slices.DeleteFunc(slices.Clone(g.members), func(s *memSeries) bool { return s == nil })
		data := make([]*seriesData, len(members))
		for i, s := range members {
			data[i] = g.snapshot(s, mint, maxTime)
		}
		g.mu.Unlock()
		// Every series is defined, even without samples, so refs stay stable.
		for _, s := range members {
			c.Series = append(c.Series, record.RefSeries{Ref: s.ref, Labels: s.lset})
		}
		// Samples row by row (in time order across the members), so that
		// replay appends them as the group's rows, aligned, as they were.
		its := make([]*seriesIterator, len(members))
		for i := range members {
			its[i] = newSeriesIterator(data[i])
		}
		werr = mergeRows(its, func(i int, vt chunkenc.ValueType) error {
			switch vt {
			case chunkenc.ValHistogram:
				t, h := its[i].AtHistogram(nil)
				c.Histograms = append(c.Histograms, record.RefHistogram{Ref: members[i].ref, T: t, H: h})
			case chunkenc.ValFloatHistogram:
				t, fh := its[i].AtFloatHistogram(nil)
				c.Histograms = append(c.Histograms, record.RefHistogram{Ref: members[i].ref, T: t, FH: fh})
			default:
				t, v := its[i].At()
				c.Samples = append(c.Samples, record.RefSample{Ref: members[i].ref, T: t, V: v})
			}
			if st := its[i].AtST(); st != 0 {
				rs := record.RefStart{Ref: members[i].ref, T: its[i].AtT(), ST: st}
				if vt == chunkenc.ValFloat {
					c.Starts = append(c.Starts, rs)
				} else {
					hstarts = append(hstarts, rs)
				}
			}
			if len(c.Samples)+len(c.Histograms) >= checkpointBatch {
				return flush()
			}
			return nil
		})
		if werr != nil {
			return
		}
		for i, s := range members {
			if err := its[i].Err(); err != nil {
				werr = fmt.Errorf("checkpoint: read series %s: %w", s.lset, err)
				return
			}
		}
	})
	if werr != nil {
		return werr
	}
	h.exemplars.all(func(s *memSeries, e Exemplar) {
		c.Exemplars = append(c.Exemplars, record.RefExemplar{Ref: s.ref, T: e.T, V: e.V, Labels: e.Labels})
	})
	h.metaMu.RLock()
	for _, ms := range h.meta {
		for i := len(ms) - 1; i >= 0; i-- { // oldest first: replay keeps the newest first
			m := ms[i]
			c.Metadata = append(c.Metadata, record.Metadata{Metric: m.Metric, Type: m.Type, Help: m.Help, Unit: m.Unit})
		}
	}
	h.metaMu.RUnlock()
	return flush()
}

const maxTime = int64(^uint64(0) >> 1)

// mergeRows calls emit for every sample of its (with its value type; emit
// reads the sample from its[i]), in time order and, at equal
// times, in member order: row by row. A group's aligned members share their
// timestamps, so each row is found by one scan of the members still going
// and yields most of them; if rows turn out to yield few samples (members
// on their own schedules), the rest is merged with a heap instead.
func mergeRows[I rowIterator](its []I, emit func(i int, vt chunkenc.ValueType) error) error {
	cur := make([]int64, len(its))
	vts := make([]chunkenc.ValueType, len(its))
	active := make([]int, 0, len(its))
	for i, it := range its {
		if vts[i] = it.Next(); vts[i] != chunkenc.ValNone {
			cur[i] = it.AtT()
			active = append(active, i)
		}
	}
	rows, emitted := 0, 0
	for len(active) > 0 {
		if rows >= 64 && emitted < 4*rows && len(active) > 64 {
			return mergeHeap(its, active, cur, vts, emit)
		}
		tmin := cur[active[0]]
		for _, i := range active[1:] {
			tmin = min(tmin, cur[i])
		}
		k := 0
		for _, i := range active {
			if cur[i] == tmin {
				if err := emit(i, vts[i]); err != nil {
					return err
				}
				emitted++
				if vts[i] = its[i].Next(); vts[i] == chunkenc.ValNone {
					continue
				}
				cur[i] = its[i].AtT()
			}
			active[k] = i
			k++
		}
		active = active[:k]
		rows++
	}
	return nil
}

// mergeHeap is mergeRows with a heap over the members in active, whose
// next sample times are in cur.
func mergeHeap[I rowIterator](its []I, active []int, cur []int64, vts []chunkenc.ValueType, emit func(i int, vt chunkenc.ValueType) error) error {
	h := make(memberHeap, 0, len(active))
	for _, i := range active {
		h = append(h, memberAt{t: cur[i], i: i})
	}
	heap.Init(&h)
	for len(h) > 0 {
		m := h[0]
		if err := emit(m.i, vts[m.i]); err != nil {
			return err
		}
		if vts[m.i] = its[m.i].Next(); vts[m.i] != chunkenc.ValNone {
			h[0].t = its[m.i].AtT()
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return nil
}

// rowIterator is what mergeRows reads: a member's samples in time order.
type rowIterator interface {
	Next() chunkenc.ValueType
	AtT() int64
}

// memberAt is a group member's next sample time in mergeHeap.
type memberAt struct {
	t int64
	i int
}

// memberHeap orders members by their next sample, then by column.
type memberHeap []memberAt

func (h memberHeap) Len() int { return len(h) }
func (h memberHeap) Less(a, b int) bool {
	return h[a].t < h[b].t || h[a].t == h[b].t && h[a].i < h[b].i
}
func (h memberHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *memberHeap) Push(x any)   { *h = append(*h, x.(memberAt)) }
func (h *memberHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
