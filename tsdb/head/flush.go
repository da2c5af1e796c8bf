package head

import (
	"slices"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// This file is the head's side of a flush: which range to write next, the
// range's content for a block writer, and what to drop once the block is in
// place. The DB writes the blocks (tsdb.DB.Flush); the head never touches
// the disk outside its WAL.

// MinTime returns the oldest timestamp the head holds (math.MaxInt64 when empty).
func (h *Head) MinTime() int64 { return h.minT.Load() }

// MaxTime returns the newest timestamp the head holds (math.MinInt64 when empty).
func (h *Head) MaxTime() int64 { return h.maxT.Load() }

// MinValidTime returns where the head starts: older ranges are in blocks,
// and samples older than it are late.
func (h *Head) MinValidTime() int64 { return h.minValid.Load() }

// Options returns the options the head runs with, defaults filled in and
// the limits in force.
func (h *Head) Options() Options {
	o := h.opts
	o.Limits = h.SeriesLimits()
	o.MaxExemplars = h.MaxExemplars()
	return o
}

// NextFlushRange returns the oldest block range [mint, maxt) to flush: while
// the head spans more than one and a half block ranges (as Prometheus), or,
// with all, while it holds anything. ok is false when nothing is to flush.
func (h *Head) NextFlushRange(all bool) (mint, maxt int64, ok bool) {
	rng := h.opts.BlockRange.Milliseconds()
	hmin, hmax := h.minT.Load(), h.maxT.Load()
	if hmin > hmax || (!all && !spanExceeds(hmin, hmax, rng+rng/2)) {
		return 0, 0, false
	}
	mint = rangeStart(hmin, rng)
	return mint, mint + rng, true
}

// SkipEmptyRange moves the head's lower time bound to the oldest timestamp
// it holds at or after from (after a flush found [.., from) empty), so that
// the next flush goes straight to the next range holding data.
func (h *Head) SkipEmptyRange(from int64) { h.resetMinT(from) }

// RangeExport is a head range taken for a block: its groups and exemplars,
// and, once the block is in place, the data to drop from the head.
type RangeExport struct {
	h          *Head
	mint, maxt int64
	seal       bool
	exs        []exemplarEntry
	late       []lateSeries
}

// ExportRange closes the block range [mint, maxt) (samples for it are late
// from now on) and returns its content: the exemplars the ring holds for it
// now go into its block; those arriving for it later are late too.
func (h *Head) ExportRange(mint, maxt int64) *RangeExport {
	h.raiseMinValid(maxt)
	exs := h.exemplars.collect(func(t int64) bool { return t >= mint && t < maxt })
	return &RangeExport{h: h, mint: mint, maxt: maxt, seal: true, exs: exs}
}

// ExportAll returns the head's whole content as one range for a snapshot,
// without closing anything (ok false when the head is empty). Its Drop must
// not be called.
func (h *Head) ExportAll() (e *RangeExport, ok bool) {
	hmin, hmax := h.minT.Load(), h.maxT.Load()
	exs := h.exemplars.collect(func(int64) bool { return true })
	if lo, hi, ok := exemplarBounds(exs); ok {
		hmin, hmax = min(hmin, lo), max(hmax, hi)
	}
	if hmin > hmax {
		return nil, false
	}
	return &RangeExport{h: h, mint: hmin, maxt: hmax + 1, exs: exs}, true
}

// Range returns the exported range [mint, maxt).
func (e *RangeExport) Range() (mint, maxt int64) { return e.mint, e.maxt }

// Groups calls yield with every group's data in the range, decoded for a
// block writer (block.GroupSource). Open rows of a flushed range are sealed
// first. Groups without data there are skipped.
func (e *RangeExport) Groups(yield func(*block.Group) error) error {
	e.late = e.late[:0]
	var exported *[]lateSeries
	if e.seal {
		exported = &e.late
	}
	return e.h.export(e.mint, e.maxt, e.seal, exported, yield)
}

// Exemplars returns the range's exemplars for the block writer.
func (e *RangeExport) Exemplars() block.ExemplarSource { return e.h.exemplarSource(e.exs) }

// Drop removes the exported range from the head once its block is listed
// (or it turned out empty): chunks before maxt, the late samples Groups
// exported and the exemplars. Late samples arriving meanwhile for the range
// stay for the next LateExport.
func (e *RangeExport) Drop() {
	e.h.truncate(e.maxt)
	e.h.dropLate(e.late)
	e.h.exemplars.remove(e.exs)
}

// LateExport is the late data of the head (samples and exemplars older than
// its start, whose ranges are flushed already), taken for out-of-order blocks.
type LateExport struct {
	h       *Head
	samples []lateSeries
	exs     []exemplarEntry
}

// ExportLate takes the late samples older than the head's start and the
// exemplars of the ring older than it but within --storage.late-max-age (the
// limit of late samples; older ones stay in the ring, served from memory
// only, until it overwrites them).
func (h *Head) ExportLate() *LateExport {
	before := h.minValid.Load()
	return &LateExport{h: h, samples: h.captureLate(before), exs: h.lateExemplars(before)}
}

// Empty reports whether there is no late data.
func (l *LateExport) Empty() bool { return len(l.samples) == 0 && len(l.exs) == 0 }

// Ranges returns the starts of the block ranges of length rng that hold late data, ascending.
func (l *LateExport) Ranges(rng int64) []int64 {
	var starts []int64
	for _, ls := range l.samples {
		for _, smp := range ls.samples {
			starts = append(starts, rangeStart(smp.T, rng))
		}
		for _, hs := range ls.hists {
			starts = append(starts, rangeStart(hs.T, rng))
		}
	}
	for _, en := range l.exs {
		starts = append(starts, rangeStart(en.e.T, rng))
	}
	slices.Sort(starts)
	return slices.Compact(starts)
}

// Groups returns the late samples in [mint, maxt) as block groups: each
// series an unaligned table of its own in its group.
func (l *LateExport) Groups(mint, maxt int64) block.GroupSource {
	groups := lateGroups(l.samples, mint, maxt)
	return func(yield func(*block.Group) error) error {
		for _, g := range groups {
			if err := yield(g); err != nil {
				return err
			}
		}
		return nil
	}
}

// Exemplars returns the late exemplars in [mint, maxt) for the block writer.
func (l *LateExport) Exemplars(mint, maxt int64) block.ExemplarSource {
	var in []exemplarEntry
	for _, en := range l.exs {
		if en.e.T >= mint && en.e.T < maxt {
			in = append(in, en)
		}
	}
	return l.h.exemplarSource(in)
}

// Drop removes the exported late data from the head once its blocks are listed.
func (l *LateExport) Drop() {
	l.h.dropLate(l.samples)
	l.h.exemplars.remove(l.exs)
}

// StartTime returns the oldest timestamp in the head (the wall clock when empty).
func (h *Head) StartTime() (int64, error) {
	if v := h.minT.Load(); v <= h.maxT.Load() {
		return v, nil
	}
	return h.opts.Now(), nil
}
