package head

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// Exemplar is one exemplar of a series: labels (e.g. a trace id), value and timestamp.
type Exemplar struct {
	Labels labels.Labels
	T      int64
	V      float64
}

// exemplarStore keeps the newest exemplars of all series in a ring whose
// capacity is the tenant's max_exemplars (Options.MaxExemplars, changed at
// run time by Head.SetMaxExemplars). They are logged in the WAL with their
// request and written to checkpoints, so they survive restarts. When the
// head range holding them is flushed, they are written into the block (the
// exemplars file) and removed from the ring: each exemplar is then in the
// ring or in blocks, and queries merge both (see DB.ExemplarQuerier).
type exemplarStore struct {
	mu   sync.RWMutex
	ring []exemplarEntry // allocated with the first exemplar
	// capacity is the ring's size once allocated; the ring is nil while it is 0.
	capacity int
	next     int
	n        int
	last     map[*memSeries]Exemplar // newest exemplar per series (order and duplicates)
}

type exemplarEntry struct {
	s *memSeries
	e Exemplar
}

func newExemplarStore(capacity int) *exemplarStore {
	return &exemplarStore{capacity: max(capacity, 0), last: map[*memSeries]Exemplar{}}
}

// add stores e for s. It reports whether the exemplar is stored (or already
// was: a resent identical one) and whether it is new (to be logged).
func (x *exemplarStore) add(s *memSeries, e Exemplar) (written, isNew bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.capacity == 0 {
		return false, false
	}
	if x.ring == nil {
		x.ring = make([]exemplarEntry, x.capacity)
	}
	if l, ok := x.last[s]; ok {
		if e.T == l.T && math.Float64bits(e.V) == math.Float64bits(l.V) && labels.Equal(e.Labels, l.Labels) {
			return true, false // a resent exemplar
		}
		if e.T <= l.T {
			return false, false // out of order for the series: dropped, as Prometheus does
		}
	}
	x.evict(x.ring[x.next])
	x.ring[x.next] = exemplarEntry{s: s, e: Exemplar{Labels: e.Labels.Copy(), T: e.T, V: e.V}}
	x.next = (x.next + 1) % len(x.ring)
	x.n = min(x.n+1, len(x.ring))
	x.last[s] = e
	return true, true
}

// evict forgets old's series' newest exemplar if old is it; x.mu is held.
func (x *exemplarStore) evict(old exemplarEntry) {
	if old.s == nil {
		return
	}
	if l, ok := x.last[old.s]; ok && l.T == old.e.T {
		delete(x.last, old.s)
	}
}

// resize sets the capacity to n (0 when negative), keeping the newest
// min(n, stored) exemplars in order and evicting the older ones as add
// does. A ring not allocated yet (or a capacity of 0) allocates nothing.
func (x *exemplarStore) resize(n int) {
	n = max(n, 0)
	x.mu.Lock()
	defer x.mu.Unlock()
	if n == x.capacity {
		return
	}
	x.capacity = n
	if x.ring == nil {
		return
	}
	old := len(x.ring)
	start := (x.next - x.n + old) % old
	drop := max(x.n-n, 0)
	for i := 0; i < drop; i++ {
		x.evict(x.ring[(start+i)%old])
	}
	kept := x.n - drop
	if n == 0 {
		x.ring, x.n, x.next = nil, 0, 0
		return
	}
	ring := make([]exemplarEntry, n)
	for i := 0; i < kept; i++ {
		ring[i] = x.ring[(start+drop+i)%old]
	}
	x.ring, x.n, x.next = ring, kept, kept%n
}

// all calls fn for every stored exemplar, oldest first.
func (x *exemplarStore) all(fn func(s *memSeries, e Exemplar)) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	start := (x.next - x.n + len(x.ring)) % max(len(x.ring), 1)
	for i := 0; i < x.n; i++ {
		en := x.ring[(start+i)%len(x.ring)]
		fn(en.s, en.e)
	}
}

// collect returns the stored exemplars whose timestamps keep accepts, oldest first.
func (x *exemplarStore) collect(keep func(t int64) bool) []exemplarEntry {
	var out []exemplarEntry
	x.all(func(s *memSeries, e Exemplar) {
		if keep(e.T) {
			out = append(out, exemplarEntry{s: s, e: e})
		}
	})
	return out
}

// remove drops the given exemplars (collected earlier and now in a block)
// from the ring, keeping the others in order. The newest exemplar of each
// series stays known, so that a resent one is still recognised.
func (x *exemplarStore) remove(es []exemplarEntry) {
	if len(es) == 0 {
		return
	}
	type key struct {
		s *memSeries
		t int64
	}
	drop := make(map[key]Exemplar, len(es))
	for _, en := range es {
		drop[key{en.s, en.e.T}] = en.e
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	start := (x.next - x.n + len(x.ring)) % max(len(x.ring), 1)
	kept := make([]exemplarEntry, 0, x.n)
	for i := 0; i < x.n; i++ {
		en := x.ring[(start+i)%len(x.ring)]
		if d, ok := drop[key{en.s, en.e.T}]; ok && sameExemplar(d, en.e) {
			continue
		}
		kept = append(kept, en)
	}
	if len(kept) == x.n {
		return
	}
	copy(x.ring, kept)
	clear(x.ring[len(kept):])
	x.n = len(kept)
	x.next = x.n % len(x.ring)
}

func sameExemplar(a, b Exemplar) bool {
	return a.T == b.T && math.Float64bits(a.V) == math.Float64bits(b.V) && labels.Equal(a.Labels, b.Labels)
}

// exemplarSource turns collected exemplars into a block.ExemplarSource:
// series in label order, each one's exemplars in time order (at one
// timestamp, the one stored last). Exemplars whose labels are not a valid
// label set (an empty or repeated name, which Prometheus refuses) cannot be
// written: they are left out (and so dropped from the head with the others).
func (h *Head) exemplarSource(es []exemplarEntry) block.ExemplarSource {
	if len(es) == 0 {
		return nil
	}
	bySeries := map[*memSeries][]block.Exemplar{}
	var order []*memSeries
	invalid := 0
	for _, en := range es {
		if !validExemplarLabels(en.e.Labels) {
			invalid++
			continue
		}
		if _, ok := bySeries[en.s]; !ok {
			order = append(order, en.s)
		}
		bySeries[en.s] = append(bySeries[en.s], block.Exemplar{Labels: en.e.Labels, T: en.e.T, V: en.e.V})
	}
	if invalid > 0 {
		h.logger.Warn("exemplars with invalid labels not written to the block", "exemplars", invalid)
	}
	slices.SortFunc(order, func(a, b *memSeries) int { return labels.Compare(a.lset, b.lset) })
	return func(yield func(*block.SeriesExemplars) error) error {
		for _, s := range order {
			xs := bySeries[s]
			slices.SortStableFunc(xs, func(a, b block.Exemplar) int { return cmp.Compare(a.T, b.T) })
			w := 0
			for i := range xs {
				if i+1 < len(xs) && xs[i+1].T == xs[i].T {
					continue
				}
				xs[w] = xs[i]
				w++
			}
			if err := yield(&block.SeriesExemplars{Labels: s.lset, Exemplars: xs[:w]}); err != nil {
				return err
			}
		}
		return nil
	}
}

// validExemplarLabels reports whether names are non-empty and strictly ascending.
func validExemplarLabels(ls labels.Labels) bool {
	ok, prev, first := true, "", true
	ls.Range(func(l labels.Label) {
		ok = ok && l.Name != "" && (first || l.Name > prev)
		prev, first = l.Name, false
	})
	return ok
}

// exemplarBounds returns the lowest and highest timestamp of es (ok false if es is empty).
func exemplarBounds(es []exemplarEntry) (lo, hi int64, ok bool) {
	lo, hi = math.MaxInt64, math.MinInt64
	for _, en := range es {
		lo, hi = min(lo, en.e.T), max(hi, en.e.T)
	}
	return lo, hi, len(es) > 0
}

// lateExemplars returns the exemplars of the ring older than before (their
// range is flushed already) but within --storage.late-max-age, the limit of
// late samples: they go to out-of-order blocks. Older ones stay in the
// ring, served from memory only, until it overwrites them.
func (h *Head) lateExemplars(before int64) []exemplarEntry {
	if h.opts.LateMaxAge <= 0 {
		return nil
	}
	lateMin := h.opts.Now() - h.opts.LateMaxAge.Milliseconds()
	return h.exemplars.collect(func(t int64) bool { return t < before && t >= lateMin })
}

// Exemplars calls add with the head's exemplars in [start, end] of each
// series whose labels match accepts, series by series, each series' in the
// ring's order (oldest first).
func (h *Head) Exemplars(start, end int64, match func(labels.Labels) bool, add func(lset labels.Labels, es []exemplar.Exemplar)) {
	matched := map[*memSeries]bool{}
	bySeries := map[*memSeries][]exemplar.Exemplar{}
	var order []*memSeries
	h.exemplars.all(func(s *memSeries, e Exemplar) {
		if e.T < start || e.T > end {
			return
		}
		ok, seen := matched[s]
		if !seen {
			ok = match(s.lset)
			matched[s] = ok
		}
		if !ok {
			return
		}
		if _, have := bySeries[s]; !have {
			order = append(order, s)
		}
		bySeries[s] = append(bySeries[s], exemplar.Exemplar{Labels: e.Labels, Value: e.V, Ts: e.T, HasTs: true})
	})
	for _, s := range order {
		add(s.lset, bySeries[s])
	}
}

// SetMaxExemplars changes the ring's capacity at run time; safe while
// appends, queries, flushes and checkpoints run. Shrinking keeps the newest
// min(n, stored) exemplars, growing keeps all, and 0 drops them and stores
// none from then on. Exemplars collected for a flush before the change still
// go into its block (and leave the ring, if still in it, when it is dropped).
func (h *Head) SetMaxExemplars(n int) { h.exemplars.resize(n) }

// MaxExemplars returns the ring's capacity in force.
func (h *Head) MaxExemplars() int {
	h.exemplars.mu.RLock()
	defer h.exemplars.mu.RUnlock()
	return h.exemplars.capacity
}

// NumExemplars returns the number of exemplars in the ring.
func (h *Head) NumExemplars() int {
	h.exemplars.mu.RLock()
	defer h.exemplars.mu.RUnlock()
	return h.exemplars.n
}
