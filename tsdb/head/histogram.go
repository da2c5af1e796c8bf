package head

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
)

// Native histogram members. A series that receives a histogram sample is
// stored unaligned from then on: its samples go to its own table, encoded as
// they arrive, one histogram column per chunk (a float sample after
// histograms, or a change between integer and float counts, starts a new
// chunk). An open row slot per group member for a histogram would cost more
// than the timestamp column the member would share; blocks put such members
// back into their group's shared table (compaction realigns them). Histograms
// accepted out of order are kept in x.lateH, sorted, beside the late floats.

// histColumn encodes the histograms of a one-column chunk.
type histColumn struct {
	kind colKind // colHistogram or colFloatHistogram
	h    encoding.HistogramEncoder
	fh   encoding.FloatHistogramEncoder
}

func (hc *histColumn) append(hs HistogramSample) error {
	if hc.kind == colFloatHistogram {
		return hc.fh.Append(hs.FH)
	}
	return hc.h.Append(hs.H)
}

func (hc *histColumn) bytes() []byte {
	if hc.kind == colFloatHistogram {
		return hc.fh.Bytes()
	}
	return hc.h.Bytes()
}

func (hc *histColumn) count() int {
	if hc.kind == colFloatHistogram {
		return hc.fh.Count()
	}
	return hc.h.Count()
}

// colData describes the column in a chunk whose data starts at off.
func (hc *histColumn) colData(off uint32) colData {
	return colData{kind: hc.kind, n: int32(hc.count()), off: off, end: off + uint32(len(hc.bytes()))}
}

// kindOf returns the column kind that holds hs.
func kindOf(hs HistogramSample) colKind {
	if hs.FH != nil {
		return colFloatHistogram
	}
	return colHistogram
}

// appendHistogram encodes hs, newer than every row of tb (a one-column
// table whose rows are sealed as they arrive), into the chunk being built.
// Nothing is written when the histogram does not encode.
func (tb *table) appendHistogram(hs HistogramSample, cut chunkCut) error {
	kind := kindOf(hs)
	if b := tb.building; b != nil && b.rows > 0 && (hs.T >= cut.rangeEnd(b.minT) || b.hist == nil || b.hist.kind != kind) {
		tb.chunks = append(tb.chunks, cut.freeze(b))
		tb.building = nil
	}
	if tb.building == nil {
		tb.building = &chunkBuilder{hist: &histColumn{kind: kind}}
	}
	b := tb.building
	if err := b.hist.append(hs); err != nil {
		if b.rows == 0 {
			tb.building = nil
		}
		return fmt.Errorf("%w: %v", ErrInvalidHistogram, err)
	}
	if b.rows == 0 {
		b.minT = hs.T
	}
	b.maxT = hs.T
	b.ts.Append(hs.T)
	b.rows++
	tb.maxT, tb.sealedMaxT = max(tb.maxT, hs.T), hs.T
	if b.rows >= cut.rows {
		tb.chunks = append(tb.chunks, cut.freeze(b))
		tb.building = nil
	}
	return nil
}

// sampleValue is one stored sample of a series: a float, or a histogram when h or fh is set.
type sampleValue struct {
	v  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

// same reports whether a re-sent sample equals the stored one bit for bit.
func (a sampleValue) same(b sampleValue) bool {
	switch {
	case a.h != nil || b.h != nil:
		return a.h != nil && b.h != nil && sameHistogram(a.h, b.h)
	case a.fh != nil || b.fh != nil:
		return a.fh != nil && b.fh != nil && sameFloatHistogram(a.fh, b.fh)
	}
	return math.Float64bits(a.v) == math.Float64bits(b.v)
}

// sameHistogram compares as Prometheus's head does for duplicates: the
// data, not the counter reset hint (the head stores the hint it reads with).
func sameHistogram(a, b *histogram.Histogram) bool {
	return math.Float64bits(a.ZeroThreshold) == math.Float64bits(b.ZeroThreshold) && a.Equals(b)
}

func sameFloatHistogram(a, b *histogram.FloatHistogram) bool {
	return math.Float64bits(a.ZeroThreshold) == math.Float64bits(b.ZeroThreshold) && a.Equals(b)
}

// lastValue returns s's newest in-order sample; called with g.mu held.
func (s *memSeries) lastValue() sampleValue {
	if x := s.x; x != nil && (x.lastH != nil || x.lastFH != nil) {
		return sampleValue{h: x.lastH, fh: x.lastFH}
	}
	return sampleValue{v: s.lastV}
}

// appendHistogram adds one histogram sample of member s, as append does a
// float one; called with g.mu held.
func (g *group) appendHistogram(s *memSeries, hs HistogramSample, o appendOpts, stats *headCounters) error {
	t, nv := hs.T, sampleValue{h: hs.H, fh: hs.FH}
	if t <= s.lastT {
		old, ok := s.lastValue(), t == s.lastT
		if !ok {
			old, ok = g.lookup(s, t)
		}
		if ok {
			if old.same(nv) {
				return errDupSame
			}
			return ErrDuplicateSample
		}
		if o.ooo > 0 && t >= g.maxT-o.ooo {
			stats.late.Add(1)
			s.insertLateHist(withHint(hs, lateHint(hs)))
			return nil
		}
		return ErrOutOfOrderSample
	}
	x := s.extra()
	wasUnaligned := x.unaligned
	g.unalign(s, stats)
	if err := x.own.appendHistogram(withHint(hs, readHint(s.lastValue(), hs)), o.cut); err != nil {
		if !wasUnaligned {
			x.unaligned = false // nothing was stored: it stays aligned
			g.nUnaligned--
			stats.unaligned.Add(-1)
		}
		return err
	}
	if !x.hist {
		x.hist = true
		g.nHist++
	}
	x.matchRun = 0
	g.maxT = max(g.maxT, t)
	s.minT = min(s.minT, t)
	s.lastT, s.lastV, x.lastH, x.lastFH = t, 0, hs.H, hs.FH
	return nil
}

// appendLateHistogram places a histogram older than the head's range, as
// appendLate does a float; called with g.mu held.
func (g *group) appendLateHistogram(s *memSeries, hs HistogramSample, stats *headCounters) error {
	if old, found := s.findLateAny(hs.T); found {
		if old.same(sampleValue{h: hs.H, fh: hs.FH}) {
			return errDupSame
		}
		return ErrDuplicateSample
	}
	s.insertLateHist(withHint(hs, lateHint(hs)))
	stats.late.Add(1)
	return nil
}

// lateHint is the hint of a histogram stored out of order: gauges stay
// gauges, a counter's reset is unknown (it is read between other samples).
func lateHint(hs HistogramSample) histogram.CounterResetHint {
	if hs.H != nil && hs.H.CounterResetHint == histogram.GaugeType || hs.FH != nil && hs.FH.CounterResetHint == histogram.GaugeType {
		return histogram.GaugeType
	}
	return histogram.UnknownCounterReset
}

// findLateAny returns s's late sample at t, float or histogram.
func (s *memSeries) findLateAny(t int64) (sampleValue, bool) {
	x := s.x
	if x == nil {
		return sampleValue{}, false
	}
	if v, ok := x.findLate(t); ok {
		return sampleValue{v: v}, true
	}
	if i, ok := searchHistograms(x.lateH, t); ok {
		return sampleValue{h: x.lateH[i].H, fh: x.lateH[i].FH}, true
	}
	return sampleValue{}, false
}

func searchHistograms(hs []HistogramSample, t int64) (int, bool) {
	return slices.BinarySearchFunc(hs, t, func(a HistogramSample, t int64) int { return cmp.Compare(a.T, t) })
}

// insertLateHist keeps a histogram accepted out of order, which the caller
// made sure is absent at its time.
func (s *memSeries) insertLateHist(hs HistogramSample) {
	x := s.extra()
	i, _ := searchHistograms(x.lateH, hs.T)
	x.lateH = slices.Insert(x.lateH, i, hs)
	s.minT = min(s.minT, hs.T)
}

// addLateHist keeps a replayed histogram older than the series' newest
// sample (one already kept at its time stays).
func (s *memSeries) addLateHist(hs HistogramSample) {
	if _, found := s.findLateAny(hs.T); !found {
		s.insertLateHist(withHint(hs, lateHint(hs)))
	}
}

// lateHistIn returns the late histograms in [mint, maxt] (a sub-slice).
func lateHistIn(hs []HistogramSample, mint, maxt int64) []HistogramSample {
	i, _ := searchHistograms(hs, mint)
	j, found := searchHistograms(hs, maxt)
	if found {
		j++
	}
	if i >= j {
		return nil
	}
	return hs[i:j]
}

// validHistogram checks hs as Prometheus's head does (histogram.Validate:
// a known schema, buckets matching their spans, consistent counts).
func validHistogram(hs HistogramSample) error {
	switch {
	case (hs.H == nil) == (hs.FH == nil):
		return errors.New("a histogram sample needs exactly one of integer or float counts")
	case hs.H != nil:
		return hs.H.Validate()
	}
	return hs.FH.Validate()
}
