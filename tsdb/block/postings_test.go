package block

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// randomLabelSets returns n distinct random label sets in label order, as
// groups of up to 10 members. With lead "__name__" or "Aa" every series has
// that label and none has a name before it (the leading name whose lists are
// runs); with lead "" names are present at random, "Aa" sorting before
// "__name__" and "_a" after it.
func randomLabelSets(rng *rand.Rand, n int, lead string) ([]labels.Labels, []Group) {
	names := []string{"Aa", "__name__", "_a", "cpu", "instance", "job", "mode"}
	values := []string{"a", "b", "c", "ab", "b.c", "host-1", "host-12", "host-2", "0", "7", "x\ny"}
	seen := map[string]bool{}
	var lsets []labels.Labels
	for len(lsets) < n {
		b := labels.NewBuilder(labels.EmptyLabels())
		for _, name := range names {
			switch {
			case name == lead:
				b.Set(name, values[rng.IntN(4)])
			case lead == "__name__" && name == "Aa":
			case rng.IntN(3) > 0:
				b.Set(name, values[rng.IntN(len(values))])
			}
		}
		l := b.Labels()
		if l.IsEmpty() || seen[l.String()] {
			continue
		}
		seen[l.String()] = true
		lsets = append(lsets, l)
	}
	var gs []Group
	for i, l := range rng.Perm(len(lsets)) {
		if i == 0 || rng.IntN(10) == 0 {
			gs = append(gs, Group{Key: fmt.Sprint(len(gs)), Tables: []Table{{Timestamps: []int64{1000}}}})
		}
		g := &gs[len(gs)-1]
		g.Tables[0].Columns = append(g.Tables[0].Columns, Column{Member: len(g.Members), Rows: []int32{0}, Values: []float64{1}})
		g.Members = append(g.Members, lsets[l])
	}
	slices.SortFunc(lsets, labels.Compare)
	return lsets, gs
}

// randomMatchers returns up to 4 matchers of all types over the names of
// randomLabelSets and one it never sets, with empty values, values no
// series has and set-matching regexps among theirs.
func randomMatchers(rng *rand.Rand) []*labels.Matcher {
	names := []string{"Aa", "__name__", "_a", "cpu", "instance", "job", "mode", "missing"}
	values := []string{"", "a", "b", "ab", "b.c", "host-1", "host-12", "7", "nope", "x\ny"}
	regexps := []string{".*", ".+", "", "a|b", "a|b|", "a|a", "host-1.*", "host-12|c|7", "(a|ab)", "b.c",
		"[0-5]", "nope|a", ".*b.*", "x.y", "host-.+", "(?i)A"}
	types := []labels.MatchType{labels.MatchEqual, labels.MatchNotEqual, labels.MatchRegexp, labels.MatchNotRegexp}
	ms := make([]*labels.Matcher, 1+rng.IntN(4))
	for i := range ms {
		typ := types[rng.IntN(len(types))]
		v := values[rng.IntN(len(values))]
		if (typ == labels.MatchRegexp || typ == labels.MatchNotRegexp) && rng.IntN(4) > 0 {
			v = regexps[rng.IntN(len(regexps))]
		}
		ms[i] = labels.MustNewMatcher(typ, names[rng.IntN(len(names))], v)
	}
	return ms
}

// TestPostingsDifferential compares Postings with labels.Matcher.Matches
// over every series' labels, on random blocks and random matcher sets.
func TestPostingsDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for blk := range 18 {
		lead := []string{"", "__name__", "Aa"}[blk%3]
		lsets, gs := randomLabelSets(rng, 1+rng.IntN(600), lead)
		b := writeTestBlock(t, &testBlock{groups: gs, mint: 0, maxt: 2000}, WriteOptions{})
		if got := b.leadingName(); lead != "" && (got == nil || got.name != lead) {
			t.Fatalf("block %d: leading name %v, want %q", blk, got, lead)
		}
		for range 400 {
			ms := randomMatchers(rng)
			want := []uint32{}
			for id, l := range lsets {
				ok := true
				for _, m := range ms {
					ok = ok && m.Matches(l.Get(m.Name))
				}
				if ok {
					want = append(want, uint32(id))
				}
			}
			got, err := b.Postings(ms...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("block %d (lead %q, %d series): Postings(%v) = %v, want %v", blk, lead, len(lsets), ms, got, want)
			}
		}
		if all, err := b.Postings(); err != nil || len(all) != len(lsets) {
			t.Fatalf("Postings() = %d ids, %v; want %d", len(all), err, len(lsets))
		}
	}
}
