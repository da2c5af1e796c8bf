package head

import (
	"math/rand"
	"slices"
	"testing"
)

// TestSortByGroup: selections ordered by group id, then column, as a plain
// sort orders them, for dense group ids (the counting sort), sparse ones
// (the comparison sort), runs of one group out of column order, and lists
// already in order.
func TestSortByGroup(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, tc := range []struct {
		name          string
		groups, size  int
		idStep        uint64 // distance between group ids
		sortedAlready bool
	}{
		{"dense", 20, 10_000, 1, false},
		{"dense-few", 3, 7, 1, false},
		{"sparse", 50, 200, 1000, false},
		{"sorted", 20, 500, 1, true},
		{"one-group", 1, 300, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs := make([]*group, tc.groups)
			for i := range gs {
				gs[i] = newGroup(1+uint64(i)*tc.idStep, "")
			}
			cols := make([]int32, tc.groups)
			var list []*memSeries
			for range tc.size {
				g := rng.Intn(tc.groups)
				list = append(list, &memSeries{g: gs[g], col: cols[g]})
				cols[g]++
			}
			if tc.sortedAlready {
				slices.SortStableFunc(list, func(a, b *memSeries) int { return int(a.g.id) - int(b.g.id) })
			} else {
				// Postings order interleaves the groups; some groups'
				// members come out of column order too.
				rng.Shuffle(len(list)/3, func(i, j int) { list[i], list[j] = list[j], list[i] })
			}
			in := slices.Clone(list)
			sortByGroup(list)
			want := slices.Clone(in)
			slices.SortFunc(want, func(a, b *memSeries) int {
				if a.g.id != b.g.id {
					return int(a.g.id) - int(b.g.id)
				}
				return int(a.col - b.col)
			})
			if !slices.Equal(list, want) {
				t.Fatalf("sortByGroup of %d series in %d groups: order differs from a plain sort", tc.size, tc.groups)
			}
		})
	}
}

// BenchmarkSortByGroup orders the selection of every series of 20 targets
// of 521 members each, in the order their shards created them.
func BenchmarkSortByGroup(b *testing.B) {
	const targets, members = 20, 521
	gs := make([]*group, targets)
	for i := range gs {
		gs[i] = newGroup(uint64(i+1), "")
	}
	var list []*memSeries
	for m := range members {
		for g := range targets {
			list = append(list, &memSeries{g: gs[g], col: int32(m)})
		}
	}
	in := slices.Clone(list)
	b.ReportAllocs()
	for b.Loop() {
		copy(list, in)
		sortByGroup(list)
	}
}
