package head

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

// ownTables counts the head's members that keep samples in a table of their own.
func ownTables(h *Head) int {
	n := 0
	h.forEachGroup(func(g *group) {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, s := range g.members {
			if s != nil && s.x != nil && s.x.own != nil {
				n++
			}
		}
	})
	return n
}

// catchUp sends scrapes 0..scrapes-1 of one target's members, member m on
// shard m%shards, shard k lagging k*lag scrapes behind shard 0 (a sender
// replaying its backlog), then steady more with every shard in step;
// members with offset send 7 ms after the scrape (their own schedule). It
// returns what was sent.
func catchUp(t *testing.T, h *Head, members, shards, lag, scrapes, steady int, offset func(m int) bool, rng *rand.Rand) model {
	t.Helper()
	want := model{}
	lsets := make([]labels.Labels, members)
	for m := range lsets {
		lsets[m] = series(fmt.Sprintf("m%d", m), "job", "j", "instance", "i")
	}
	value := func(m, s int) float64 {
		switch {
		case m%5 == 0:
			return float64(s * m) // a counter
		case m%5 == 1 && s%50 == 49:
			return math.Float64frombits(0x7ff0000000000002) // a NaN payload
		case m%5 == 2 && s == scrapes-1:
			return math.Float64frombits(value.StaleNaN)
		case m%5 == 3:
			return 42 // a constant
		}
		return math.Round(rng.Float64()*1000) / 100
	}
	backlog := scrapes + (shards-1)*lag
	for step := 0; step < backlog+steady; step++ {
		for k := 0; k < shards; k++ {
			s := step - k*lag
			if step >= backlog {
				s = scrapes + step - backlog
			} else if s < 0 || s >= scrapes {
				continue
			}
			var b Batch
			for m := k; m < members; m += shards {
				ts := int64(s) * 15000
				if offset(m) {
					ts += 7
				}
				v := value(m, s)
				b.Series = append(b.Series, BatchSeries{Labels: lsets[m], Samples: []Sample{{T: ts, V: v}}})
				want.Add(lsets[m], ts, v)
			}
			if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
				t.Fatal(err, res.Err())
			}
		}
	}
	return want
}

// TestHeadRealign: after a catch-up with shards minutes apart, Realign moves
// the lagging members' samples into the shared chunks; every sample reads
// back exact, from new readers and from a reader that took the old chunks,
// duplicates are still recognised, a member on its own schedule stays on
// its own, and the WAL replays to the same data.
func TestHeadRealign(t *testing.T) {
	dir := t.TempDir()
	opts := func(o *Options) { o.ChunkRows = 32 }
	h := openHead(t, dir, opts)
	rng := rand.New(rand.NewPCG(1, 2))
	const members, shards = 40, 8
	own := func(m int) bool { return m == 13 }
	want := catchUp(t, h, members, shards, 12, 400, 80, own, rng)
	before := ownTables(h)
	if before < members/2 {
		t.Fatalf("%d members with own tables after the catch-up, want most of %d", before, members)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))

	// A reader that selected before the move keeps the chunks it took.
	q, err := h.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+"))
	var old []storage.Series
	for ss.Next() {
		old = append(old, ss.At())
	}

	moved := h.Realign()
	if moved == 0 {
		t.Fatal("nothing realigned")
	}
	if got := h.counters.realigned.Load(); got != int64(moved) {
		t.Fatalf("counter %d, moved %d", got, moved)
	}
	// All but the member on its own schedule rejoined; whatever they had on
	// their own went, save the chunk being built of a member still behind.
	if after := ownTables(h); after != 1 {
		t.Fatalf("%d members with own tables after Realign, want 1 (the one on its own schedule)", after)
	}
	if again := h.Realign(); again != 0 {
		t.Fatalf("a second pass moved %d samples", again)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	got := model{}
	for _, s := range old {
		it := s.Iterator(nil)
		for it.Next() != 0 {
			ts, v := it.At()
			got.Add(s.Labels(), ts, v)
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	compareModels(t, want, got)
	// Ranges cutting through moved and shared data.
	for _, r := range [][2]int64{{0, 14999}, {40 * 15000, 160 * 15000}, {100 * 15000, 100 * 15000}, {390 * 15000, 500 * 15000}, {470 * 15000, 480 * 15000}} {
		w := model{}
		for k, ss := range want {
			for ts, v := range ss {
				if ts >= r[0] && ts <= r[1] {
					if w[k] == nil {
						w[k] = map[int64]uint64{}
					}
					w[k][ts] = v
				}
			}
		}
		compareModels(t, w, readAll(t, h, r[0], r[1]))
	}

	// A re-sent moved sample is a duplicate: the same value is accepted, another refused.
	l := series("m7", "job", "j", "instance", "i")
	v := math.Float64frombits(want[l.String()][100*15000])
	res, err := h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: 100 * 15000, V: v}}}}})
	if err != nil || res.Err() != nil {
		t.Fatalf("identical re-sent sample: %v %v", err, res.Err())
	}
	res, err = h.AppendBatch(context.Background(), &Batch{Series: []BatchSeries{{Labels: l, Samples: []Sample{{T: 100 * 15000, V: v + 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Err() == nil {
		t.Fatal("a different value at a moved sample's timestamp was accepted")
	}
	h.Close()
	h2 := openHead(t, dir, opts)
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}

// BenchmarkHeadCatchUpQuery reads every series of a head filled by a sender
// catching up (8 shards, each 40 scrapes behind the previous), before and
// after Realign, next to one filled in step.
func BenchmarkHeadCatchUpQuery(b *testing.B) {
	read := func(b *testing.B, h *Head) {
		b.ReportAllocs()
		for b.Loop() {
			q, err := h.Querier(math.MinInt64, math.MaxInt64)
			if err != nil {
				b.Fatal(err)
			}
			ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+"))
			for ss.Next() {
				it := ss.At().Iterator(nil)
				for it.Next() != 0 {
				}
			}
		}
	}
	fill := func(b *testing.B, lag int) *Head {
		t := &testing.T{}
		h := openHead(b, b.TempDir(), nil)
		want := catchUp(t, h, 500, 8, lag, 480, 80, func(int) bool { return false }, rand.New(rand.NewPCG(1, 2)))
		if t.Failed() || len(want) != 500 {
			b.Fatal("fill failed")
		}
		return h
	}
	steady := fill(b, 0)
	defer steady.Close()
	b.Run("in_step", func(b *testing.B) { read(b, steady) })
	lagging := fill(b, 40)
	defer lagging.Close()
	b.Run("catch_up", func(b *testing.B) { read(b, lagging) })
	lagging.Realign()
	b.Run("catch_up_realigned", func(b *testing.B) { read(b, lagging) })
}

// TestHeadRealignTail: when the catch-up ends with the data (the sender
// stops, or is idle until its next scrape), the lagging members' last own
// chunks overlap the shared chunk still being built; Realign freezes that
// chunk early once the group is idle so they move as well, and nothing is
// left on its own.
func TestHeadRealignTail(t *testing.T) {
	now := int64(1 << 40)
	dir := t.TempDir()
	h := openHead(t, dir, func(o *Options) { o.ChunkRows = 32; o.Now = func() int64 { return now } })
	rng := rand.New(rand.NewPCG(3, 4))
	want := catchUp(t, h, 24, 6, 10, 200, 2, func(int) bool { return false }, rng)
	if ownTables(h) == 0 {
		t.Fatal("no member on its own after the catch-up")
	}
	// While the group is written, the shared chunk being built is short
	// (fewer than half of ChunkRows rows): it is not frozen early, and the
	// own chunks overlapping it wait.
	h.Realign()
	if ownTables(h) == 0 {
		t.Fatal("the short shared chunk of a group being written was frozen early")
	}
	now = 1 << 50 // idle: the open rows are sealed
	h.SealIdle()
	h.Realign()
	if n := ownTables(h); n != 0 {
		t.Fatalf("%d members still on their own", n)
	}
	compareModels(t, want, readAll(t, h, math.MinInt64, math.MaxInt64))
	// A checkpoint taken from the realigned chunks replays to the same data.
	if err := h.Checkpoint(math.MinInt64); err != nil {
		t.Fatal(err)
	}
	h.Close()
	h2 := openHead(t, dir, func(o *Options) { o.ChunkRows = 32; o.Now = func() int64 { return now } })
	defer h2.Close()
	compareModels(t, want, readAll(t, h2, math.MinInt64, math.MaxInt64))
}
