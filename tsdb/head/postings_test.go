package head

import (
	"encoding/binary"
	"fmt"
	"math"
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
		checkSkips(t, &pl)
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
		case k < 8 && next > 0: // a little older: into the last block
			if r = next - uint64(rng.Intn(200)); r == 0 || want[r] {
				continue
			}
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
		switch trial % 6 {
		case 1: // out of order: pending, then merged
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		case 3: // a few places late, as concurrent creations reach the index
			for i := range order {
				if j := i + rng.Intn(8); j < len(order) {
					order[i], order[j] = order[j], order[i]
				}
			}
		}
		for _, r := range order {
			p.add(r)
		}
		checkSkips(t, &p)
		if trial%6 == 5 {
			p.settle()
			if len(p.pending) > 0 {
				t.Fatalf("trial %d: %d pending after settle", trial, len(p.pending))
			}
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

// checkSkips fails unless every skip entry of p locates the reference it
// stands for: skips[b] starts the (b+1)·skipEvery-th reference of data, its
// base the reference before it.
func checkSkips(t *testing.T, p *postingList) {
	t.Helper()
	var refs []uint64
	var offs []int
	cur := uint64(0)
	for i := 0; i < len(p.data); {
		gap, n := binary.Uvarint(p.data[i:])
		offs = append(offs, i)
		i, cur = i+n, cur+gap
		refs = append(refs, cur)
	}
	if want := max(0, (len(refs)-1)/skipEvery); len(p.skips) != want {
		t.Fatalf("%d skip entries for %d references, want %d", len(p.skips), len(refs), want)
	}
	for b, s := range p.skips {
		k := (b + 1) * skipEvery
		if int(s.off) != offs[k] || s.base != refs[k-1] {
			t.Fatalf("skip %d: off %d base %d, want %d %d", b, s.off, s.base, offs[k], refs[k-1])
		}
	}
	if len(refs)+len(p.pending) != p.n || !slices.IsSorted(refs) {
		t.Fatalf("%d in data + %d pending, n %d; sorted %v", len(refs), len(p.pending), p.n, slices.IsSorted(refs))
	}
}

// TestMemIndexLateReferences: references that reach the index a few places
// late (series created concurrently) go into their lists' last blocks, not
// the pending buffer; older ones wait there until settle merges them, and
// postingsFor answers the same before and after.
func TestMemIndexLateReferences(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	ix := newMemIndex()
	const n = 5000
	order := make([]uint64, n)
	for i := range order {
		order[i] = uint64(i + 1)
	}
	for i := range order {
		if j := i + rng.Intn(6); j < n {
			order[i], order[j] = order[j], order[i]
		}
	}
	lset := func(r uint64) labels.Labels {
		return labels.FromStrings("__name__", fmt.Sprint("m", r%5), "instance", fmt.Sprint("i", r%100), "job", "node")
	}
	for _, r := range order {
		ix.add(r, lset(r))
	}
	pending := func() int {
		k := len(ix.all.pending)
		for _, vals := range ix.postings {
			for _, pl := range vals {
				k += len(pl.pending)
				checkSkips(t, pl)
			}
		}
		return k
	}
	if k := pending(); k != 0 {
		t.Fatalf("%d references pending after adds a few places late", k)
	}
	for r := uint64(n + 1); r <= n+200; r++ { // then a replay's older group: these wait
		ix.add(r, lset(r))
	}
	for r := uint64(n + 400); r > n+200; r-- {
		ix.add(r, lset(r))
	}
	if pending() == 0 {
		t.Fatal("no reference pending after adds in reverse")
	}
	eq := func(name, value string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchEqual, name, value) }
	query := []*labels.Matcher{eq("job", "node"), eq("instance", "i7"), eq("__name__", "m2")}
	var want []uint64
	for r := uint64(1); r <= n+400; r++ {
		if r%100 == 7 && r%5 == 2 {
			want = append(want, r)
		}
	}
	if got := ix.postingsFor(query...); !slices.Equal(got, want) {
		t.Fatalf("before settle: %v, want %v", got, want)
	}
	if ix.settle() == 0 || pending() != 0 {
		t.Fatalf("settle left %d pending", pending())
	}
	if got := ix.postingsFor(query...); !slices.Equal(got, want) {
		t.Fatalf("after settle: %v, want %v", got, want)
	}
	if ix.settle() != 0 {
		t.Fatal("second settle rewrote lists")
	}
}

// TestMemIndexDifferential compares postingsFor with labels.Matcher.Matches
// over every series' labels, for random series added in a shuffled order
// (some removed again) and random matchers of every type; each answer is
// given back to the pool (putRefs) filled with garbage.
func TestMemIndexDifferential(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	names := []string{"__name__", "cpu", "instance", "job", "mode", "missing"}
	values := []string{"", "a", "b", "ab", "idle", "user", "host-1", "host-12", "7"}
	regexps := []string{".*", ".+", "", "a|b", "idle|user", "idle|", "host-1.*", "(a|ab)", "[0-5]", "(?i)A", "nope|a"}
	types := []labels.MatchType{labels.MatchEqual, labels.MatchNotEqual, labels.MatchRegexp, labels.MatchNotRegexp}
	for round := range 6 {
		ix := newMemIndex()
		sets := map[uint64]labels.Labels{}
		n := 1 + rng.Intn(3000)
		for _, i := range rng.Perm(n) {
			b := labels.NewBuilder(labels.EmptyLabels())
			for _, name := range names[:5] {
				if rng.Intn(4) > 0 {
					b.Set(name, values[1+rng.Intn(len(values)-1)])
				}
			}
			ref := uint64(i + 1)
			sets[ref] = b.Set("id", fmt.Sprint(ref)).Labels()
			ix.add(ref, sets[ref])
		}
		removed := map[uint64]labels.Labels{}
		for ref, l := range sets {
			if rng.Intn(10) == 0 {
				removed[ref] = l
				delete(sets, ref)
			}
		}
		ix.remove(removed)
		if round%2 == 1 {
			ix.settle()
		}
		for range 300 {
			ms := make([]*labels.Matcher, 1+rng.Intn(3))
			for i := range ms {
				typ := types[rng.Intn(len(types))]
				v := values[rng.Intn(len(values))]
				if typ >= labels.MatchRegexp && rng.Intn(3) > 0 {
					v = regexps[rng.Intn(len(regexps))]
				}
				ms[i] = labels.MustNewMatcher(typ, names[rng.Intn(len(names))], v)
			}
			var want []uint64
			for ref, l := range sets {
				ok := true
				for _, m := range ms {
					ok = ok && m.Matches(l.Get(m.Name))
				}
				if ok {
					want = append(want, ref)
				}
			}
			slices.Sort(want)
			got := ix.postingsFor(ms...)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: postingsFor(%v) = %d refs, want %d", round, ms, len(got), len(want))
			}
			// Given back dirty: the next postingsFor may build its
			// answer in it.
			got = got[:cap(got)]
			for i := range got {
				got[i] = uint64(rng.Intn(n + 2))
			}
			putRefs(got)
		}
	}
}

// TestSortUnique checks the bitmap union against sorting, on dense and
// sparse references, with repeats and at the ends of the uint64 range.
func TestSortUnique(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for i := 0; i < 500; i++ {
		n := 1 + r.Intn(300)
		span := uint64(1 + r.Intn(4*n*64))
		base := uint64(r.Int63())
		switch i % 5 {
		case 0:
			base = 0
		case 1:
			base = math.MaxUint64 - span
		}
		refs := make([]uint64, n)
		for k := range refs {
			refs[k] = base + uint64(r.Int63n(int64(span)))
		}
		want := slices.Clone(refs)
		slices.Sort(want)
		want = slices.Compact(want)
		if got := sortUnique(refs); !slices.Equal(got, want) {
			t.Fatalf("case %d (n %d span %d base %d): got %v, want %v", i, n, span, base, got, want)
		}
	}
}
