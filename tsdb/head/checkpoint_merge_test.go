package head

import (
	"cmp"
	"math/rand"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

type sliceIter struct {
	ts []int64
	i  int
}

func (s *sliceIter) Next() chunkenc.ValueType {
	if s.i++; s.i > len(s.ts) {
		return chunkenc.ValNone
	}
	return chunkenc.ValFloat
}
func (s *sliceIter) AtT() int64           { return s.ts[s.i-1] }
func (s *sliceIter) At() (int64, float64) { return s.ts[s.i-1], float64(s.ts[s.i-1]) }

// TestMergeRows: the checkpoint's merge lists every sample once, by time
// then member, for aligned members (one scan per row), members on their own
// schedules (the heap takes over) and a mix.
func TestMergeRows(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, tc := range []struct {
		name    string
		members int
		jitter  bool // every member on its own timestamps
	}{{"aligned", 300, false}, {"own-schedules", 300, true}, {"few", 3, true}} {
		t.Run(tc.name, func(t *testing.T) {
			type smp struct {
				t int64
				i int
			}
			var want []smp
			its := make([]*sliceIter, tc.members)
			for i := range its {
				its[i] = &sliceIter{}
				for k := int64(0); k < 200; k++ {
					if rng.Intn(10) == 0 {
						continue // a missed scrape
					}
					ts := k * 15000
					if tc.jitter {
						ts += int64(i)
					}
					its[i].ts = append(its[i].ts, ts)
					want = append(want, smp{ts, i})
				}
			}
			slices.SortFunc(want, func(a, b smp) int { return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.i, b.i)) })
			var got []smp
			if err := mergeRows(its, func(i int, _ chunkenc.ValueType) error {
				ts, v := its[i].At()
				if v != float64(ts) {
					t.Fatalf("member %d: value %v at %d", i, v, ts)
				}
				got = append(got, smp{ts, i})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%d samples merged, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}

func firstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
