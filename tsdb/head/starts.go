package head

import (
	"github.com/tandem-tsdb/tandem/tsdb/record"
	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// Start timestamps (remote write 2.0's start_timestamp, Prometheus's
// AppenderV2 st) are kept per series as runs (package starts) in the
// series' extra part: a series that never had one holds nothing, and a
// counter whose start stays put holds one run until it resets.

// recordST records the start timestamp st of s's sample at t, placed by an
// append that found prevT as the series' newest sample; called with g.mu
// held. Samples without one cost nothing unless they land among samples
// with one (an out-of-order sample splits the run holding it).
func (s *memSeries) recordST(prevT, t, st int64) {
	if st == 0 && (s.x == nil || len(s.x.starts) == 0 || t > prevT) {
		return
	}
	x := s.extra()
	if t > prevT {
		x.starts.Append(prevT, t, st)
	} else {
		x.starts.Insert(t, st)
	}
}

// startRuns returns s's start timestamp runs within [mint, maxt], copied;
// nil when it has none there. Called with g.mu held.
func (s *memSeries) startRuns(mint, maxt int64) starts.Runs {
	if s.x == nil || len(s.x.starts) == 0 {
		return nil
	}
	return s.x.starts.Clip(mint, maxt)
}

// dropStartsBefore forgets the start timestamps of samples before t (the
// series keeps none of them); called with g.mu held.
func (s *memSeries) dropStartsBefore(t int64) {
	if s.x != nil && len(s.x.starts) > 0 {
		s.x.starts.DropBefore(t)
		if len(s.x.starts) == 0 {
			s.x.starts = nil
		}
	}
}

// logST adds the start timestamp of s's float sample at t to the commit.
func (cs *commitState) logST(s *memSeries, t, st int64) {
	if st != 0 {
		cs.commit.Starts = append(cs.commit.Starts, record.RefStart{Ref: s.ref, T: t, ST: st})
	}
}

// startsCursor walks a record's start timestamps alongside its samples and
// then its histograms: they are logged in that order (those of the samples,
// then those of the histograms).
type startsCursor struct {
	list []record.RefStart
	i    int
}

// at returns the start timestamp logged for the sample of ref at t (0: none).
func (c *startsCursor) at(ref uint64, t int64) int64 {
	if c.i < len(c.list) && c.list[c.i].Ref == ref && c.list[c.i].T == t {
		c.i++
		return c.list[c.i-1].ST
	}
	return 0
}

// HasStartTimestamps reports whether the series has start timestamps in
// its snapshot (fastread.StartTimestamper).
func (s *headSeries) HasStartTimestamps() bool {
	if s.d == nil {
		return s.oneST != 0
	}
	return s.d.x != nil && len(s.d.x.starts) > 0
}

// startAt returns the start timestamp of s's sample at t (0: none); called
// with g.mu held.
func (s *memSeries) startAt(t int64) int64 {
	if s.x == nil || len(s.x.starts) == 0 {
		return 0
	}
	return s.x.starts.At(t)
}
