package head

import (
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tandem-tsdb/tandem/tsdb/encoding"
	"github.com/tandem-tsdb/tandem/tsdb/starts"
)

// soloRowsToUnalign is how many sealed rows a member may create alone, next to
// rows its group filled without it, before it is stored unaligned.
const soloRowsToUnalign = 3

// memSeries is one series of the head: a member (column) of a group.
// Fields are ordered so the struct packs into 80 bytes; what few series need
// (an own table, late samples, alignment state) is behind one pointer.
type memSeries struct {
	ref  uint64
	lset labels.Labels
	g    *group

	// rawNext is the series that followed this one in the last write batch
	// (Head.ResolveHash, Head.AppendBatch): senders repeat their order, so it
	// is most often the next series again.
	rawNext atomic.Pointer[memSeries]

	// Guarded by g.mu.
	x     *seriesExtra
	minT  int64
	lastT int64
	lastV float64

	col   int32         // column in g.aligned; guarded by g.mu
	flags atomic.Uint32 // seriesLogged, seriesRemoved
}

// seriesExtra is the part of a series that most never need; guarded by g.mu.
type seriesExtra struct {
	own *table // the member's own table, once it was ever unaligned
	// late holds samples accepted out of order that could not join an open
	// row (no open row at their time, older than the head, or logged to the
	// WAL in another order than applied): sorted, with lateRuns not merged
	// into it yet (late.go). Merged into every read.
	late     []Sample
	lateRuns [][]Sample
	// soloFrom and soloOpen: the member's rows that it opened and that no
	// other member joined, still open (group.soloOpenRun): the first one's
	// time and how many.
	soloFrom  int64
	soloOpen  int32
	matchRun  int16 // consecutive unaligned samples that matched an open group row
	solo      int16 // consecutive solo rows (group.onSeal)
	unaligned bool  // new samples go to own
	// hist: the member received native histograms, so it stays unaligned
	// (histogram.go); lastH or lastFH is its newest sample when that is a
	// histogram; lateH holds its histograms accepted out of order, sorted.
	hist   bool
	lastH  *histogram.Histogram
	lastFH *histogram.FloatHistogram
	lateH  []HistogramSample
	// starts: the start timestamps of its samples that have one (starts.go).
	starts starts.Runs
	// realignedTo: own chunks ending at or before it were looked at by
	// Realign (realign.go), when realignedAny.
	realignedTo  int64
	realignedAny bool
}

// unused reports whether x holds nothing, so the series may drop it.
func (x *seriesExtra) unused() bool {
	return x.own == nil && len(x.late) == 0 && len(x.lateRuns) == 0 && x.matchRun == 0 && x.solo == 0 && x.soloOpen == 0 && !x.unaligned &&
		!x.hist && len(x.lateH) == 0 && x.lastH == nil && x.lastFH == nil && len(x.starts) == 0
}

// lateHist returns the member's late histograms, sorted; called with g.mu held.
func (s *memSeries) lateHist() []HistogramSample {
	if s.x == nil {
		return nil
	}
	return s.x.lateH
}

// unaligned reports whether s's new samples go to its own table; called
// with g.mu held.
func (s *memSeries) unaligned() bool { return s.x != nil && s.x.unaligned }

const (
	// seriesLogged: the series record is in the WAL.
	seriesLogged = 1 << iota
	// seriesRemoved: GC took the series out of the head (GC holds gcMu and
	// g.mu then); atomic so that ResolveNext may read it without them.
	seriesRemoved
)

func (s *memSeries) logged() bool  { return s.flags.Load()&seriesLogged != 0 }
func (s *memSeries) removed() bool { return s.flags.Load()&seriesRemoved != 0 }

// own returns the member's own table, nil if it never was unaligned.
func (s *memSeries) own() *table {
	if s.x == nil {
		return nil
	}
	return s.x.own
}

// late returns the member's late samples, sorted; called with g.mu held
// (it merges the runs not merged yet).
func (s *memSeries) late() []Sample {
	if s.x == nil {
		return nil
	}
	if len(s.x.lateRuns) > 0 {
		return s.x.sortedLate()
	}
	return s.x.late
}

// extra returns s.x, made on first use.
func (s *memSeries) extra() *seriesExtra {
	if s.x == nil {
		s.x = &seriesExtra{}
	}
	return s.x
}

// group is a set of series sampled together (one scrape target). Its aligned
// members share one timestamp column; g.mu is the only lock on the append path.
type group struct {
	id  uint64 // creation order; orders groups cheaply
	key string
	// nMembers is numMembers, readable without mu (SeriesLimits checks).
	nMembers atomic.Int32

	mu         sync.Mutex
	aligned    *table
	members    []*memSeries
	nUnaligned int
	nHist      int     // unaligned members that hold native histograms: they never rejoin
	free       []int32 // columns of removed members (nil in members), reused first
	lastAppend int64   // wall clock (ms) of the last batch that touched the group
	maxT       int64   // newest timestamp any member wrote; the out-of-order window trails it
	joinedT    int64   // timestamp of the newest member's first sample
	inferStale int     // rows a member may miss before it is marked stale; 0 = off
	// missed counts, by column, consecutive sealed rows without the member
	// (staleness inference, made when on); -1 once a marker was written.
	missed []int32

	// HA pair deduplication: the replica whose samples the group takes, when
	// it was last seen (wall clock, ms), and after a failover the newest
	// timestamp the previous replica wrote (the new one's older samples are dropped).
	haReplica string
	haSeen    int64
	haCutoff  int64
}

func newGroup(id uint64, key string) *group {
	return &group{id: id, key: key, aligned: newTable(0), maxT: math.MinInt64, joinedT: math.MinInt64}
}

// addMember gives s a column in the group, a removed member's if there is
// one; called with g.mu held.
func (g *group) addMember(s *memSeries) {
	s.g = g
	g.nMembers.Add(1)
	s.minT, s.lastT = math.MaxInt64, math.MinInt64
	if n := len(g.free); n > 0 {
		s.col = g.free[n-1]
		g.free = g.free[:n-1]
		g.members[s.col] = s
		if int(s.col) < len(g.missed) {
			g.missed[s.col] = 0
		}
		return
	}
	s.col = int32(len(g.members))
	g.members = append(g.members, s)
	g.aligned.ncols = len(g.members)
}

// removeMember frees s's column, which holds nothing in the head any more
// (the caller checked); called with g.mu held.
func (g *group) removeMember(s *memSeries, stats *headCounters) {
	s.flags.Or(seriesRemoved)
	g.nMembers.Add(-1)
	g.members[s.col] = nil
	g.free = append(g.free, s.col)
	if s.unaligned() {
		g.nUnaligned--
		stats.unaligned.Add(-1)
	}
	if s.x != nil && s.x.hist {
		g.nHist--
	}
}

// numMembers is the number of the group's series.
func (g *group) numMembers() int { return len(g.members) - len(g.free) }

// errDupSame marks a re-sent identical sample: accepted, nothing to write.
var errDupSame = errDupSameT{}

type errDupSameT struct{}

func (errDupSameT) Error() string { return "identical duplicate sample" }

// realignAfter is how many consecutive samples of an unaligned member must
// land on rows its group already has open before it is aligned again.
const realignAfter = 3

// append adds one sample of member s; called with g.mu held. The head's
// open window decides when rows are sealed.
func (g *group) append(s *memSeries, t int64, v float64, o appendOpts, stats *headCounters) error {
	window, cut := o.window, o.cut
	if t <= s.lastT {
		old, ok := s.lastValue(), t == s.lastT
		if !ok {
			old, ok = g.lookup(s, t)
		}
		if ok {
			if old.same(sampleValue{v: v}) {
				return errDupSame
			}
			return ErrDuplicateSample
		}
		// Out of order for the series, but within the group's window behind
		// its newest timestamp: kept aside, merged when read and flushed.
		if o.ooo > 0 && t >= g.maxT-o.ooo {
			stats.late.Add(1)
			if !s.unaligned() && t > g.aligned.sealedMaxT {
				// Its group's row is still open: the common case stays an
				// append. No row is opened for it: a row is as wide as the
				// group, and only this member's sample would be in it.
				if r := g.aligned.openRow(t); r != nil {
					g.aligned.set(r, int(s.col), v)
					if t < s.minT {
						s.minT = t
					}
					return nil
				}
			}
			s.insertLate(t, v) // lookup found none at t
			return nil
		}
		return ErrOutOfOrderSample
	}
	prevT := s.lastT
	if t > g.maxT {
		g.maxT = t
	}
	if s.lastT == math.MinInt64 && t > g.joinedT {
		g.joinedT = t
	}
	if x := s.x; x != nil && x.unaligned {
		// A lagging member that caught up lands on its group's open rows
		// again: after a few in a row it rejoins the shared columns.
		if t > g.aligned.sealedMaxT && g.aligned.hasRow(t) {
			x.matchRun++
		} else {
			x.matchRun = 0
		}
		if x.matchRun >= realignAfter && !x.hist {
			x.unaligned, x.matchRun, x.solo = false, 0, 0
			g.nUnaligned--
			stats.unaligned.Add(-1)
		}
	}
	if !s.unaligned() && t <= g.aligned.sealedMaxT {
		// The member lags behind its group's sealed rows (a slow shard, a late
		// joiner, a different schedule): store it on its own for now.
		g.unalign(s, stats)
	}
	if !s.unaligned() && g.soloOpenRun(s, prevT, t) {
		g.unalignSolo(s, cut, stats)
	}
	if t < s.minT {
		s.minT = t
	}
	s.lastT, s.lastV = t, v
	if x := s.x; x != nil {
		x.lastH, x.lastFH = nil, nil
	}
	if x := s.x; x != nil && x.unaligned {
		r, _ := x.own.rowFor(t)
		x.own.set(r, 0, v)
		// A lone member's samples arrive in order: encode at once.
		x.own.sealUpTo(t, cut, nil)
		return nil
	}
	tb := g.aligned
	r, created := tb.rowFor(t)
	if x := s.x; !created && x != nil {
		x.solo = 0
	}
	tb.set(r, int(s.col), v)
	// Rows are sealed once they fall out of the open window, or earlier once
	// complete behind a newer row: every aligned member has a value there,
	// so only its own out-of-order samples could still land at or before it.
	// Not while a member joined within the window (more new members of the
	// same scrapes may be on their way from another shard, and a row sealed
	// before their first sample would leave them unaligned), nor while a
	// member is unaligned (it rejoins by landing on open rows).
	horizon := tb.maxT - window
	// Histogram members never land on the shared rows: a row is complete
	// without them, and they are not waiting to rejoin.
	if full := g.numMembers() - g.nHist; (created || r.n == full) && g.nUnaligned == g.nHist && g.joinedT < horizon {
		horizon = max(horizon, tb.completeBefore(full))
		if r.n == full && r != tb.open[len(tb.open)-1] {
			horizon = max(horizon, r.t) // completed behind a newer row
		}
	}
	if n, limit := len(tb.open), openRowLimit(tb.ncols); n > limit {
		// More rows open than a group of this width may hold (members that
		// agree on no timestamp): the oldest are sealed, whatever the window.
		horizon = max(horizon, tb.open[n-limit-1].t)
	}
	if len(tb.open) > 0 && tb.open[0].t <= horizon {
		tb.sealUpTo(horizon, cut, func(r *row, prevHas func(int) bool) { g.onSeal(r, prevHas, stats) })
	}
	return nil
}

// soloOpenCells bounds the open-row cells (rows × group width) one aligned
// member may hold alone, in rows that it opened and no other member joined,
// before it is stored on its own (soloOpenLimit).
const soloOpenCells = 1 << 16

// maxSoloOpenRows bounds soloOpenLimit for narrow groups.
const maxSoloOpenRows = 1024

// soloOpenLimit is how many open rows a member of a group of width ncols may
// hold alone: 13 in a group of 5,000, 1,024 in one of up to 64.
func soloOpenLimit(ncols int) int {
	return min(max(soloOpenCells/max(ncols, 1), soloRowsToUnalign), maxSoloOpenRows)
}

// maxOpenCells and minOpenRowLimit bound the open rows of a group's table
// whatever its members send (openRowLimit): 32 MiB of values.
const (
	maxOpenCells    = 1 << 22
	minOpenRowLimit = 128
)

// openRowLimit is how many rows a table of width ncols keeps open at most.
func openRowLimit(ncols int) int {
	return max(maxOpenCells/max(ncols, 1), minOpenRowLimit)
}

// soloOpenRun reports whether aligned member s, about to place an in-order
// sample at t after its previous one at prevT, must be stored on its own:
// it would open yet another row at t while its rows that no other member
// joined, still open, are as many as soloOpenLimit allows. Each open row is
// as wide as the group, so a member sending timestamps the others do not
// share (thousands of distinct milliseconds) would otherwise cost the group
// a row per sample. Called with g.mu held.
func (g *group) soloOpenRun(s *memSeries, prevT, t int64) bool {
	tb := g.aligned
	if g.numMembers() < 2 || tb.hasRow(t) {
		return false
	}
	prev := tb.openRow(prevT)
	if prev == nil || prev.n != 1 || !prev.has(int(s.col)) {
		if s.x != nil {
			s.x.soloOpen = 0
		}
		return false
	}
	x := s.extra()
	if x.soloOpen == 0 || x.soloFrom <= tb.sealedMaxT {
		// A new run, or its first rows were sealed since: count from prev.
		x.soloFrom, x.soloOpen = prevT, 1
	} else {
		x.soloOpen++
	}
	return int(x.soloOpen) >= soloOpenLimit(tb.ncols)
}

// unalignSolo stores member s on its own from now on (soloOpenRun) and
// moves its open rows that no other member joined to its own table.
func (g *group) unalignSolo(s *memSeries, cut chunkCut, stats *headCounters) {
	g.unalign(s, stats)
	x := s.x
	x.matchRun = -soloRowsToUnalign // on its own schedule: slower to realign
	x.soloOpen, x.solo = 0, 0
	tb, c, own := g.aligned, int(s.col), x.own
	keep := tb.open[:0]
	for _, r := range tb.open {
		if r.n != 1 || !r.has(c) || r.t <= own.maxT {
			keep = append(keep, r)
			continue
		}
		or, _ := own.rowFor(r.t)
		own.set(or, 0, r.vals[c])
		tb.recycle(r)
	}
	clear(tb.open[len(keep):])
	tb.open = keep
	own.sealUpTo(own.maxT, cut, nil)
	// The newest timestamp left in the shared table: the moved rows must not
	// move the group's open window.
	tb.maxT = tb.sealedMaxT
	if n := len(tb.open); n > 0 {
		tb.maxT = max(tb.maxT, tb.open[n-1].t)
	}
}

// unalign sends member s's next samples to a table of its own.
func (g *group) unalign(s *memSeries, stats *headCounters) {
	x := s.extra()
	if x.unaligned {
		return
	}
	if x.own == nil {
		x.own = newTable(1)
	}
	x.unaligned, x.matchRun = true, 0
	g.nUnaligned++
	stats.unaligned.Add(1)
}

// onSeal watches sealed rows for members whose timestamps do not line up with
// the group's: a row holding only one member, right after a row the group
// filled without it, is a solo row; a few in a row make the member unaligned.
func (g *group) onSeal(r *row, prevHas func(int) bool, stats *headCounters) {
	prevN := g.aligned.rowsSealed
	g.aligned.rowsSealed = r.n
	if g.inferStale > 0 && r.n >= 2 && 2*r.n >= prevN {
		g.inferStaleness(r, stats)
	}
	if r.n != 1 || prevN < 2 {
		return
	}
	c := -1
	for w, word := range r.present {
		if word != 0 {
			c = w<<6 + bits.TrailingZeros64(word)
			break
		}
	}
	if c < 0 || prevHas(c) {
		return
	}
	s := g.members[c]
	if s == nil {
		return
	}
	x := s.extra()
	x.solo++
	if x.solo >= soloRowsToUnalign {
		g.unalign(s, stats)
		x.matchRun = -soloRowsToUnalign // a member on its own schedule: be slower to realign
	}
}

// inferStaleness marks members stale that a sender without staleness markers
// stopped sending: a member missing from inferStale consecutive sealed rows
// that the group did fill (the target was scraped) gets a staleness marker
// in the last of them. Called with g.mu held, before r is encoded.
func (g *group) inferStaleness(r *row, stats *headCounters) {
	if n := len(g.members); len(g.missed) < n {
		g.missed = append(g.missed, make([]int32, n-len(g.missed))...)
	}
	for c, s := range g.members {
		if s == nil || s.unaligned() || s.lastT == math.MinInt64 || g.missed[c] < 0 && !r.has(c) {
			continue
		}
		if r.has(c) || s.lastT >= r.t {
			g.missed[c] = 0
			continue
		}
		g.missed[c]++
		if int(g.missed[c]) < g.inferStale {
			continue
		}
		g.missed[c] = -1 // marked: until it is seen again
		if value.IsStaleNaN(s.lastV) {
			continue // the sender marked it itself
		}
		g.aligned.set(r, c, math.Float64frombits(value.StaleNaN))
		s.lastT, s.lastV = r.t, math.Float64frombits(value.StaleNaN)
		s.minT = min(s.minT, r.t) // after a flush, the marker may be all the head holds
		stats.inferredStale.Add(1)
	}
}

// lookup finds member s's value at t; called with g.mu held.
func (g *group) lookup(s *memSeries, t int64) (sampleValue, bool) {
	if v, found := s.findLateAny(t); found {
		return v, true
	}
	// Newer than a table's sealed rows, t can only be in its open rows: no
	// chunk to decode (the common case of a sample a few scrapes late).
	inChunks := false
	for _, tc := range [2]struct {
		tb  *table
		col int
	}{{g.aligned, int(s.col)}, {s.own(), 0}} {
		if tc.tb == nil {
			continue
		}
		if t <= tc.tb.sealedMaxT {
			inChunks = inChunks || tc.tb.sealedRow(t)
			continue
		}
		if r := tc.tb.openRow(t); r != nil && r.has(tc.col) {
			return sampleValue{v: r.vals[tc.col]}, true
		}
	}
	if !inChunks || t < s.minT || s.removed() {
		return sampleValue{}, false
	}
	// The tables' chunks at t only: the late samples were searched above.
	d := &seriesData{mint: t, maxt: t}
	d.parts = d.add(d.parts, g.aligned, int(s.col))
	if own := s.own(); own != nil {
		x := d.extra()
		x.own = d.add(x.own, own, 0)
	}
	it := newSeriesIterator(d)
	if vt := it.Next(); vt != chunkenc.ValNone && it.AtT() == t {
		return it.value(vt), true
	}
	return sampleValue{}, false
}

// snapshot captures member s's data overlapping [mint, maxt]; called with g.mu
// held. Frozen chunks are shared; the chunk being built and open rows are copied.
func (g *group) snapshot(s *memSeries, mint, maxt int64) *seriesData {
	d := new(seriesData)
	g.snapshotInto(d, s, mint, maxt, nil, nil)
	return d
}

// snapshotInto is snapshot into d (zero), with the copy of the chunk being
// built shared through sc (nil: nothing shared) by the snapshots of one
// query, and the parts taken from sl (nil: allocated).
func (g *group) snapshotInto(d *seriesData, s *memSeries, mint, maxt int64, sc *snapCache, sl *snapSlab) {
	d.mint, d.maxt, d.sc = mint, maxt, sc
	if s.removed() {
		return // GC removed it; its column may belong to another series now
	}
	newest := s.lastT
	if n := len(s.late()); n > 0 && s.late()[n-1].T > newest {
		newest = s.late()[n-1].T // late samples newer than its in-order ones
	}
	if n := len(s.lateHist()); n > 0 && s.lateHist()[n-1].T > newest {
		newest = s.lateHist()[n-1].T
	}
	if newest < mint || s.minT > maxt {
		return
	}
	d.sl = sl
	d.parts = d.add(d.parts, g.aligned, int(s.col))
	if s.own() != nil {
		x := d.extra()
		x.own = d.add(x.own, s.own(), 0)
	}
	d.sl = nil
	if in := lateIn(s.late(), mint, maxt); len(in) > 0 {
		d.extra().late = slices.Clone(in)
	}
	if in := lateHistIn(s.lateHist(), mint, maxt); len(in) > 0 {
		d.extra().lateH = slices.Clone(in)
	}
	if r := s.startRuns(mint, maxt); len(r) > 0 {
		d.extra().starts = r
	}
}

// appendLate places a sample older than the head's range (its block range is
// already flushed): it is kept aside and written to an out-of-order block.
// Called with g.mu held.
func (g *group) appendLate(s *memSeries, t int64, v float64, stats *headCounters) error {
	if s.x != nil {
		if old, found := s.x.findLate(t); found {
			if math.Float64bits(old) == math.Float64bits(v) {
				return errDupSame
			}
			return ErrDuplicateSample
		}
	}
	s.insertLate(t, v)
	stats.late.Add(1)
	return nil
}

// haAccept decides, per group, whether samples from an HA replica are
// written: the first replica seen is elected; another replica takes over once
// the elected one was silent for longer than failover; samples of a replica
// that is not elected are dropped. It returns the timestamp up to which the
// elected replica's samples are dropped (after a failover). Called with g.mu held.
func (g *group) haAccept(replica string, now, failover int64) (bool, int64) {
	// replica points into the batch's labels, which the writer reuses: the
	// elected one is kept as a copy.
	switch {
	case g.haReplica == replica:
	case g.haReplica == "":
		g.haReplica, g.haCutoff = strings.Clone(replica), math.MinInt64
	case now-g.haSeen > failover:
		g.haReplica, g.haCutoff = strings.Clone(replica), g.maxT
	default:
		return false, 0
	}
	g.haSeen = now
	return true, g.haCutoff
}

// appendOpts are the head's settings an append needs.
type appendOpts struct {
	window int64    // open-row window, ms
	cut    chunkCut // where chunks end
	ooo    int64    // out-of-order window behind the group's newest timestamp, ms; 0 disables
}

// addLate keeps a sample that is older than the series' newest one (one
// already kept at t stays).
func (s *memSeries) addLate(t int64, v float64) {
	if s.x != nil {
		if _, found := s.x.findLate(t); found {
			return
		}
	}
	s.insertLate(t, v)
}

// insertLate adds a late sample at t, which the caller made sure is absent.
func (s *memSeries) insertLate(t int64, v float64) {
	s.extra().insertLate(t, v)
	if t < s.minT {
		s.minT = t
	}
}

// seriesData is a member's data for one query: the parts in the group's
// shared table and, if the member was ever unaligned, the parts in its own
// table. Each list is in time order; the two may interleave in time (a member
// that lagged and caught up), so iterators merge them.
type seriesData struct {
	mint, maxt int64
	sc         *snapCache // shared decoded timestamps; nil when not shared
	sl         *snapSlab  // where the parts are taken from while snapshotting; nil otherwise
	parts      []part
	x          *dataExtra // what most members do not have; nil when none
}

// dataExtra is the part of a member's snapshot that most never need: a
// query's snapshots hold one seriesData per series, kept small without it.
type dataExtra struct {
	own    []part
	late   []Sample // accepted out of order, sorted (copied)
	lateH  []HistogramSample
	starts starts.Runs // start timestamps within [mint, maxt] (copied)
}

// extra returns d's dataExtra, made on first use.
func (d *seriesData) extra() *dataExtra {
	if d.x == nil {
		d.x = new(dataExtra)
	}
	return d.x
}

// more reports whether d has parts beyond its aligned ones to merge.
func (d *seriesData) more() bool {
	x := d.x
	return x != nil && (len(x.own) > 0 || len(x.late) > 0 || len(x.lateH) > 0)
}

// part is either a chunk column or a run of uncompressed samples. It is kept
// small (a query's snapshot holds one per chunk per series): the rarer runs
// are behind a pointer.
type part struct {
	c      *chunk
	tss    []int64 // decoded timestamps of a copy of the chunk being built, shared by a group's members; else nil
	col    int32
	frozen bool    // c is a frozen chunk of a table: its decoded timestamps are c.timestamps()
	raw    *rawRun // the samples when c is nil
}

// rawRun is a part's run of uncompressed samples, or of histograms (late ones).
type rawRun struct {
	samples []Sample
	hists   []HistogramSample
}

// snapCache holds what the snapshots of one query share within a group:
// one copy of the chunk being built, its timestamps decoded once. It is
// filled under the group's lock and read-only afterwards. (A frozen chunk's
// decoded timestamps are shared by chunk.timestamps.)
//
// A stream's cache serves its groups one after the other: reset lets the
// next group's copy overwrite the last group's (nothing reads those any
// more), once; a second builder in the same group gets new buffers.
type snapCache struct {
	building *chunkBuilder // the builder the copy below was taken of
	bts      []byte        // its timestamp column, copied once
	btss     []int64
	reuse    bool // bts and btss may be overwritten by the next copy
}

func newSnapCache() *snapCache { return &snapCache{} }

// reset readies a stream's cache for its next group.
func (sc *snapCache) reset() { sc.building, sc.reuse = nil, true }

// take copies b's timestamp column and decodes it.
func (sc *snapCache) take(b *chunkBuilder) {
	if sc.reuse {
		sc.bts = append(sc.bts[:0], b.ts.Bytes()...)
		sc.btss = appendTimestamps(sc.btss[:0], sc.bts, b.rows)
		sc.reuse = false
	} else {
		sc.bts = slices.Clone(b.ts.Bytes())
		sc.btss = appendTimestamps(nil, sc.bts, b.rows)
	}
	sc.building = b
}

func decodeTimestamps(b []byte, rows int) []int64 { return appendTimestamps(nil, b, rows) }

// appendTimestamps appends the rows timestamps of the column b to dst (nil
// if they do not decode).
func appendTimestamps(dst []int64, b []byte, rows int) []int64 {
	if dst == nil {
		dst = make([]int64, 0, rows)
	}
	var d encoding.TSDecoder
	d.Reset(b, rows)
	tss, err := d.AppendAll(slices.Grow(dst, rows))
	if err != nil || len(tss) != len(dst)+rows {
		return nil
	}
	return tss
}

func (d *seriesData) add(parts []part, tb *table, c int) []part {
	// Chunks are in time order: those in range are found by binary search.
	chunks := tb.chunks
	chunks = chunks[sort.Search(len(chunks), func(i int) bool { return chunks[i].maxT >= d.mint }):]
	chunks = chunks[:sort.Search(len(chunks), func(i int) bool { return chunks[i].minT > d.maxt })]
	// Count first: one allocation of the parts, one of the open samples.
	n, nopen := len(chunks), 0
	for _, r := range tb.open {
		if r.t >= d.mint && r.t <= d.maxt && r.has(c) {
			nopen++
		}
	}
	if len(parts) == 0 && d.sl != nil {
		parts = d.sl.parts(n + 2)
	} else {
		parts = slices.Grow(parts, n+2)
	}
	for _, ch := range chunks {
		if ch.maxT < d.mint || ch.minT > d.maxt || ch.col(c) == nil {
			continue
		}
		parts = append(parts, part{c: ch, col: int32(c), frozen: true})
	}
	if b := tb.building; b != nil && b.maxT >= d.mint && b.minT <= d.maxt {
		if d.sc != nil && tb.ncols > 1 {
			sc := d.sc
			if sc.building != b {
				sc.take(b)
			}
			if ch := b.snapshotColTS(c, sc.bts, d.sl); ch != nil {
				parts = append(parts, part{c: ch, col: 0, tss: sc.btss})
			}
		} else if ch := b.snapshotCol(c); ch != nil {
			parts = append(parts, part{c: ch, col: 0})
		}
	}
	if nopen == 0 {
		return parts
	}
	open := d.sl.samples(nopen)
	for _, r := range tb.open {
		if r.t < d.mint || r.t > d.maxt || !r.has(c) {
			continue
		}
		open = append(open, Sample{T: r.t, V: r.vals[c]})
	}
	return append(parts, part{raw: d.sl.raw(open)})
}

func (d *seriesData) empty() bool {
	return len(d.parts) == 0 && !d.more()
}
