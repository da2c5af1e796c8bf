package head

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/tsdb/internal/sorted"
)

// TestPostingList: adds (mostly increasing, some older, some repeated) and
// removals keep the list equal to a sorted set of the same references,
// across gaps of one to nine bytes.
func TestPostingList(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var pl postingList
	want := map[uint64]bool{}
	check := func(step string) {
		t.Helper()
		var ref []uint64
		for r := range want {
			ref = append(ref, r)
		}
		slices.Sort(ref)
		got := pl.appendTo(nil)
		if !slices.Equal(got, ref) || pl.n != len(ref) {
			t.Fatalf("%s: list %v (n %d), want %v", step, got, pl.n, ref)
		}
		if len(ref) > 0 && pl.last != ref[len(ref)-1] || len(ref) == 0 && pl.last != 0 {
			t.Fatalf("%s: last %d", step, pl.last)
		}
	}
	next := uint64(0)
	for i := 0; i < 2000; i++ {
		var r uint64
		switch k := rng.Intn(10); {
		case k < 7: // the common case: a new, larger reference
			next += 1 + uint64(rng.Intn(300))
			if rng.Intn(50) == 0 {
				next += 1 << (20 + rng.Intn(40)) // long gaps
			}
			r = next
		case k < 9 && next > 0: // older
			if r = 1 + uint64(rng.Int63n(int64(next))); want[r] {
				continue
			}
		default:
			continue
		}
		pl.add(r)
		want[r] = true
		if i%100 == 0 {
			check("adds")
		}
	}
	check("adds")
	pl.removeIf(func(r uint64) bool { return r%3 == 0 })
	for r := range want {
		if r%3 == 0 {
			delete(want, r)
		}
	}
	check("remove a third")
	pl.add(next + 1)
	want[next+1] = true
	check("add after removal")
	pl.removeIf(func(uint64) bool { return true })
	clear(want)
	check("remove all")
	pl.add(5)
	want[5] = true
	check("add to emptied")
}

// TestPostingListGroupOrder: a list built in the order a checkpoint replays
// series (group by group, groups in any order) holds them all, sorted, and
// merges the older references in batches, not one rewrite each.
func TestPostingListGroupOrder(t *testing.T) {
	const groups, members = 200, 50
	order := rand.New(rand.NewSource(2)).Perm(groups)
	var pl postingList
	rewrites := 0
	for _, g := range order {
		for m := 1; m <= members; m++ {
			before := len(pl.pending)
			pl.add(uint64(g*members + m))
			if before > 0 && len(pl.pending) == 0 {
				rewrites++
			}
		}
	}
	got := pl.appendTo(nil)
	if len(got) != groups*members || pl.n != len(got) || !slices.IsSorted(got) || got[0] != 1 || got[len(got)-1] != groups*members {
		t.Fatalf("%d refs (n %d), sorted %v", len(got), pl.n, slices.IsSorted(got))
	}
	if rewrites > 100 {
		t.Fatalf("%d rewrites of the list for %d adds", rewrites, groups*members)
	}
}

// TestMemIndexRemove: removing series rewrites every list they are in; lists
// left empty disappear with their value, and names with no value left too.
func TestMemIndexRemove(t *testing.T) {
	ix := newMemIndex()
	sets := map[uint64]labels.Labels{
		1: labels.FromStrings("__name__", "a", "job", "j", "x", "1"),
		2: labels.FromStrings("__name__", "a", "job", "j"),
		3: labels.FromStrings("__name__", "b", "job", "j", "x", "2"),
		4: labels.FromStrings("__name__", "b", "job", "k"),
	}
	for ref := uint64(1); ref <= 4; ref++ {
		ix.add(ref, sets[ref])
	}
	eq := func(name, value string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchEqual, name, value) }
	if got := ix.postingsFor(eq("job", "j")); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("job=j: %v", got)
	}
	ix.remove(map[uint64]labels.Labels{1: sets[1], 3: sets[3]})
	if got := ix.postingsFor(eq("job", "j")); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("job=j after removal: %v", got)
	}
	if got := ix.postingsFor(labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")); !slices.Equal(got, []uint64{2, 4}) {
		t.Fatalf("all: %v", got)
	}
	if names := ix.labelNames(); !slices.Equal(names, []string{"__name__", "job"}) {
		t.Fatalf("label names %v: x should be gone", names)
	}
	if n := ix.numSeries(); n != 2 {
		t.Fatalf("%d series, want 2", n)
	}
	// x="" matches series without x: both that remain.
	if got := ix.postingsFor(eq("x", "")); !slices.Equal(got, []uint64{2, 4}) {
		t.Fatalf(`x="": %v`, got)
	}
}

// TestPostingListFilter checks filter against a plain intersection, for
// lists built in order, with pending references, after removals, and for
// refs that are shorter, longer, denser and sparser than the list.
func TestPostingListFilter(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for trial := range 300 {
		var p postingList
		n := rng.Intn(3000)
		var all []uint64
		ref := uint64(0)
		for range n {
			ref += 1 + uint64(rng.Intn(1+rng.Intn(300)))
			all = append(all, ref)
		}
		order := slices.Clone(all)
		if trial%3 == 1 { // some out of order: pending, then merged
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for _, r := range order {
			p.add(r)
		}
		if trial%5 == 2 {
			p.removeIf(func(r uint64) bool { return r%7 == 0 })
			all = slices.DeleteFunc(all, func(r uint64) bool { return r%7 == 0 })
		}
		max := ref + 100
		var refs []uint64
		switch trial % 4 {
		case 0: // the list's block ends and starts, where seeks land
			for k, r := range all {
				if k%skipEvery == 0 || k%skipEvery == skipEvery-1 || rng.Intn(200) == 0 {
					refs = append(refs, r)
				}
			}
		case 1: // the ends of blocks far apart, reached by seeks over blocks
			for k, r := range all {
				if k%(3*skipEvery) == skipEvery-1 || k%(5*skipEvery) == 0 {
					refs = append(refs, r)
				}
			}
		default:
			for r := uint64(1); r <= max; r++ {
				if rng.Intn(1+trial%50) == 0 {
					refs = append(refs, r)
				}
			}
		}
		if trial%7 == 3 && len(all) > 0 { // references beyond the list's last, alone or after others
			if trial%2 == 0 {
				refs = refs[:0]
			}
			refs = append(refs, max+1, max+1000)
		}
		want := sorted.Intersect(nil, slices.Clone(refs), all)
		got := p.filter(slices.Clone(refs))
		if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("trial %d: filter of %d refs against %d: %d kept, want %d", trial, len(refs), len(all), len(got), len(want))
		}
	}
}
