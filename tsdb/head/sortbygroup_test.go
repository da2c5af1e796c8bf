package head

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
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
			// The scratch a previous sort left holds other series: a pooled one.
			dirty := make([]*memSeries, 3, len(list)+5)
			for i := range dirty {
				dirty[i] = &memSeries{g: gs[0]}
			}
			sortByGroup(list, dirty)
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
		sortByGroup(list, nil)
	}
}

// TestSnapshotAllParallel: a selection large enough to be snapshotted on
// several goroutines, where a third of the series have nothing in the
// range, gives the same snapshots in the same order as one goroutine does,
// for range and newest-sample snapshots.
func TestSnapshotAllParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	h := openHead(t, t.TempDir(), nil)
	defer h.Close()
	const groups, members = 12, 500 // 6000 series: above parallelSnapshotMin
	for ts := int64(1000); ts <= 5000; ts += 1000 {
		var b Batch
		for g := range groups {
			for m := range members {
				if m%3 == 0 && ts > 1000 {
					continue // nothing after the first scrape
				}
				b.Series = append(b.Series, BatchSeries{
					Labels:  labels.FromStrings("__name__", "m", "instance", fmt.Sprint("host-", g), "job", "j", "m", fmt.Sprint(m)),
					Samples: []Sample{{T: ts, V: float64(ts + int64(m))}}})
			}
		}
		if res, err := h.AppendBatch(context.Background(), &b); err != nil || res.Err() != nil {
			t.Fatal(err, res.Err())
		}
	}
	if n := h.counters.groups.Load(); n != groups {
		t.Fatalf("%d groups, want %d: the parallel snapshot cuts between groups", n, groups)
	}
	var list []*memSeries
	for _, ref := range h.index.postingsFor(labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")) {
		list = append(list, h.seriesByRef(ref))
	}
	sortByGroup(list, nil)
	if len(list) < parallelSnapshotMin {
		t.Fatalf("%d series: too few for the parallel path", len(list))
	}
	for _, lastOnly := range []bool{false, true} {
		got, err := snapshotAll(context.Background(), list, 3000, 5000, lastOnly)
		if err != nil {
			t.Fatal(err)
		}
		want, err := snapshotRun(context.Background(), nil, list, 3000, 5000, lastOnly)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) || len(got) != groups*(members-(members+2)/3) {
			t.Fatalf("lastOnly %v: %d snapshots, one goroutine %d, want %d", lastOnly, len(got), len(want), groups*(members-(members+2)/3))
		}
		for i := range got {
			if !labels.Equal(got[i].lset, want[i].lset) {
				t.Fatalf("lastOnly %v: snapshot %d is %s, want %s", lastOnly, i, got[i].lset, want[i].lset)
			}
		}
		if n := cap(got[len(got):]); n > 0 && slices.ContainsFunc(got[len(got):cap(got)], func(s *headSeries) bool { return s != nil }) {
			t.Fatalf("lastOnly %v: stale pointers kept after the snapshots", lastOnly)
		}
	}
}
