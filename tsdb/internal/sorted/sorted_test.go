package sorted

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

func TestIntersect(t *testing.T) {
	for _, c := range []struct{ a, b, want []uint64 }{
		{nil, nil, nil},
		{[]uint64{1, 2, 3}, nil, nil},
		{[]uint64{1, 3, 5, 7}, []uint64{2, 3, 4, 7, 9}, []uint64{3, 7}},
		{[]uint64{1, 2}, []uint64{3, 4}, nil},
		{[]uint64{5}, []uint64{5}, []uint64{5}},
	} {
		if got := Intersect(nil, c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("Intersect(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
		// In place, into a's own array.
		a := slices.Clone(c.a)
		if got := Intersect(a[:0], a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("Intersect in place (%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := Intersects(c.a, c.b); got != (len(c.want) > 0) {
			t.Errorf("Intersects(%v, %v) = %v", c.a, c.b, got)
		}
	}
}

func TestSubtract(t *testing.T) {
	for _, c := range []struct{ a, b, want []uint32 }{
		{nil, nil, nil},
		{[]uint32{1, 2, 3}, nil, []uint32{1, 2, 3}},
		{nil, []uint32{1}, nil},
		{[]uint32{1, 3, 5, 7}, []uint32{2, 3, 4, 7, 9}, []uint32{1, 5}},
		{[]uint32{1, 2}, []uint32{3, 4}, []uint32{1, 2}},
		{[]uint32{5}, []uint32{5}, nil},
	} {
		if got := Subtract(nil, c.a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("Subtract(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
		a := slices.Clone(c.a)
		if got := Subtract(a[:0], a, c.b); !slices.Equal(got, c.want) {
			t.Errorf("Subtract in place (%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestMerge(t *testing.T) {
	for _, c := range []struct {
		lists [][]uint32
		want  []uint32
	}{
		{nil, nil},
		{[][]uint32{{1, 4}}, []uint32{1, 4}},
		{[][]uint32{{1, 4}, {2, 3, 9}}, []uint32{1, 2, 3, 4, 9}},
		{[][]uint32{{1, 4}, {1, 4}, {}, {4, 5}}, []uint32{1, 4, 5}},
		{[][]uint32{{7}, {3}, {5}, {1}, {9, 10}}, []uint32{1, 3, 5, 7, 9, 10}},
	} {
		if got := Merge(nil, c.lists...); !slices.Equal(got, c.want) {
			t.Errorf("Merge(%v) = %v, want %v", c.lists, got, c.want)
		}
		// Appended after what dst holds, equal to its last value or not.
		if got := Merge([]uint32{1}, c.lists...); !slices.Equal(got, append([]uint32{1}, c.want...)) {
			t.Errorf("Merge([1], %v) = %v", c.lists, got)
		}
	}
}

// TestSetOpsRandom compares the operations with a map over random lists.
func TestSetOpsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	list := func() []uint32 {
		set := map[uint32]bool{}
		for range rng.IntN(40) {
			set[uint32(rng.IntN(60))] = true
		}
		return sortedSet(set)
	}
	for range 2000 {
		lists := make([][]uint32, rng.IntN(7))
		union := map[uint32]bool{}
		for i := range lists {
			lists[i] = list()
			for _, v := range lists[i] {
				union[v] = true
			}
		}
		if got, want := Merge(nil, lists...), sortedSet(union); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("Merge(%v) = %v, want %v", lists, got, want)
		}
		a, b := list(), list()
		inB := map[uint32]bool{}
		for _, v := range b {
			inB[v] = true
		}
		var inter, diff []uint32
		for _, v := range a {
			if inB[v] {
				inter = append(inter, v)
			} else {
				diff = append(diff, v)
			}
		}
		if got := Intersect(nil, a, b); !slices.Equal(got, inter) {
			t.Fatalf("Intersect(%v, %v) = %v, want %v", a, b, got, inter)
		}
		if got := Subtract(nil, a, b); !slices.Equal(got, diff) {
			t.Fatalf("Subtract(%v, %v) = %v, want %v", a, b, got, diff)
		}
		if ac := slices.Clone(a); !slices.Equal(Subtract(ac[:0], ac, b), diff) {
			t.Fatalf("Subtract in place (%v, %v) != %v", a, b, diff)
		}
	}
}

func sortedSet(set map[uint32]bool) []uint32 {
	var out []uint32
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// TestAddNames: merging random label sets one after another gives the
// sorted set of all their names.
func TestAddNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := []string{"__name__", "a", "b", "cpu", "device", "instance", "job", "le", "mode", "z", "zz"}
	for round := range 2000 {
		var names []string
		want := map[string]bool{}
		for range rng.IntN(6) {
			b := labels.NewScratchBuilder(0)
			for _, n := range pool {
				if rng.IntN(3) == 0 {
					b.Add(n, "v")
					want[n] = true
				}
			}
			b.Sort()
			names = AddNames(names, b.Labels())
		}
		var ref []string
		for n := range want {
			ref = append(ref, n)
		}
		slices.Sort(ref)
		if !slices.Equal(names, ref) {
			t.Fatalf("round %d: %v, want %v", round, names, ref)
		}
	}
}
