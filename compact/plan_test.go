package compact

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

const hour = int64(3600_000)

func TestExponentialRanges(t *testing.T) {
	got := ExponentialRanges(2*time.Hour, 3, 5)
	want := []int64{2 * hour, 6 * hour, 18 * hour, 54 * hour, 162 * hour}
	if !slices.Equal(got, want) {
		t.Fatalf("ExponentialRanges(2h, 3, 5) = %v, want %v", got, want)
	}
	if got := ExponentialRanges(time.Minute, 2, 0); len(got) != 0 {
		t.Fatalf("ExponentialRanges with 0 steps = %v", got)
	}
}

// bm is a meta named by its range in hours.
func bm(minH, maxH float64) block.Meta {
	return block.Meta{ULID: fmt.Sprintf("%g-%g", minH, maxH), MinTime: int64(minH * float64(hour)), MaxTime: int64(maxH * float64(hour))}
}

func ids(plans [][]block.Meta) [][]string {
	out := [][]string{}
	for _, p := range plans {
		var s []string
		for _, m := range p {
			s = append(s, m.ULID)
		}
		out = append(out, s)
	}
	return out
}

func TestPlan(t *testing.T) {
	ranges := ExponentialRanges(2*time.Hour, 3, 4) // 2h 6h 18h 54h
	cases := []struct {
		name   string
		metas  []block.Meta
		safe   float64 // hours
		want   [][]string
		ranges []int64
	}{
		{name: "no blocks", safe: 100, want: [][]string{}},
		{name: "2h blocks fill a 6h window", metas: []block.Meta{bm(4, 6), bm(0, 2), bm(2, 4)}, safe: 8,
			want: [][]string{{"0-2", "2-4", "4-6"}}},
		{name: "window end reached exactly", metas: []block.Meta{bm(0, 2), bm(2, 4), bm(4, 6)}, safe: 6,
			want: [][]string{{"0-2", "2-4", "4-6"}}},
		{name: "window not yet safe", metas: []block.Meta{bm(0, 2), bm(2, 4), bm(4, 6)}, safe: 5.99,
			want: [][]string{}},
		{name: "incomplete window", metas: []block.Meta{bm(0, 2), bm(2, 4)}, safe: 5,
			want: [][]string{}},
		{name: "complete window with a gap", metas: []block.Meta{bm(0, 2), bm(4, 6)}, safe: 7,
			want: [][]string{{"0-2", "4-6"}}},
		{name: "one block per window", metas: []block.Meta{bm(0, 2), bm(6, 8), bm(12, 14)}, safe: 17,
			want: [][]string{}},
		{name: "a block spanning a whole window alone", metas: []block.Meta{bm(0, 6), bm(6, 12), bm(12, 18)}, safe: 17,
			want: [][]string{}},
		{name: "a block spanning the largest window alone", metas: []block.Meta{bm(0, 54), bm(54, 56)}, safe: 1000,
			want: [][]string{}},
		{name: "block straddling windows stays", metas: []block.Meta{bm(0, 2), bm(2, 4), bm(5, 7)}, safe: 8,
			want: [][]string{{"0-2", "2-4"}}},
		{name: "multi-level: the larger window waits for the smaller merge",
			metas: []block.Meta{bm(0, 6), bm(6, 12), bm(12, 14), bm(14, 16), bm(16, 18)}, safe: 20,
			want: [][]string{{"12-14", "14-16", "16-18"}}},
		{name: "multi-level: 6h blocks fill an 18h window, 2h blocks a 6h window",
			metas: []block.Meta{bm(0, 6), bm(6, 12), bm(12, 18), bm(18, 20), bm(20, 22), bm(22, 24)}, safe: 25,
			want: [][]string{{"0-6", "6-12", "12-18"}, {"18-20", "20-22", "22-24"}}},
		{name: "multi-level: only the smaller window is safe",
			metas: []block.Meta{bm(0, 6), bm(6, 12), bm(12, 14), bm(14, 16)}, safe: 17,
			want: [][]string{}},
		{name: "multi-level: a 6h and a 2h block in a complete 18h window",
			metas: []block.Meta{bm(0, 6), bm(6, 8)}, safe: 18,
			want: [][]string{{"0-6", "6-8"}}},
		{name: "overlapping blocks, even when not safe", metas: []block.Meta{bm(0, 2), bm(1, 1.5)}, safe: 0,
			want: [][]string{{"0-2", "1-1.5"}}},
		{name: "overlaps chain transitively", metas: []block.Meta{bm(0, 2), bm(1.5, 3), bm(2.5, 4), bm(4, 6)}, safe: 5,
			want: [][]string{{"0-2", "1.5-3", "2.5-4"}}},
		{name: "overlap and a window: the window waits",
			metas: []block.Meta{bm(0, 2), bm(1, 1.5), bm(2, 4), bm(4, 6), bm(6, 8), bm(8, 10), bm(10, 12)}, safe: 13,
			want: [][]string{{"0-2", "1-1.5"}, {"6-8", "8-10", "10-12"}}},
		{name: "negative times align to the epoch", metas: []block.Meta{bm(-6, -4), bm(-4, -2), bm(-2, 0), bm(0, 2)}, safe: 3,
			want: [][]string{{"-6--4", "-4--2", "-2-0"}}},
		{name: "no ranges beyond the first: only overlaps", metas: []block.Meta{bm(0, 2), bm(2, 4), bm(3, 5)}, safe: 100,
			ranges: ranges[:1], want: [][]string{{"2-4", "3-5"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ranges
			if c.ranges != nil {
				r = c.ranges
			}
			got := ids(Plan(c.metas, r, int64(c.safe*float64(hour))))
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("Plan = %v, want %v", got, c.want)
			}
		})
	}
}

// TestPlanInvariants checks random block layouts: every plan has several blocks, no block is in two
// plans, plans are oldest first, and a plan is either an overlapping set or a complete aligned window.
func TestPlanInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ranges := ExponentialRanges(2*time.Hour, 3, 4)
	for iter := 0; iter < 500; iter++ {
		var metas []block.Meta
		t0 := int64(0)
		for k := 0; k < 2+rng.IntN(20); k++ {
			d := ranges[rng.IntN(2)]
			if rng.IntN(6) == 0 {
				d = int64(rng.IntN(int(hour))) + 1
			}
			if rng.IntN(8) == 0 { // late data: overlaps an earlier range
				s := rng.Int64N(t0 + 1)
				metas = append(metas, block.Meta{ULID: fmt.Sprint(len(metas)), MinTime: s, MaxTime: s + d})
				continue
			}
			t0 = (t0 / d) * d
			if t0 < metas0End(metas) {
				t0 += d
			}
			metas = append(metas, block.Meta{ULID: fmt.Sprint(len(metas)), MinTime: t0, MaxTime: t0 + d})
			t0 += d
		}
		safe := rng.Int64N(t0 + 1)
		plans := Plan(metas, ranges, safe)
		seen := map[string]bool{}
		for pi, p := range plans {
			if len(p) < 2 {
				t.Fatalf("plan %v has fewer than 2 blocks", ids([][]block.Meta{p}))
			}
			if pi > 0 && plans[pi-1][0].MinTime > p[0].MinTime {
				t.Fatalf("plans not oldest first: %v", ids(plans))
			}
			lo, hi := p[0].MinTime, p[0].MaxTime
			overlap := false
			for k, m := range p {
				if seen[m.ULID] {
					t.Fatalf("block %s in two plans: %v", m.ULID, ids(plans))
				}
				seen[m.ULID] = true
				lo, hi = min(lo, m.MinTime), max(hi, m.MaxTime)
				if k > 0 && m.MinTime < p[k-1].MaxTime {
					overlap = true
				}
			}
			if overlap {
				continue
			}
			ok := false
			for _, r := range ranges[1:] {
				ws := floorDiv(lo, r) * r
				if hi <= ws+r && ws+r <= safe {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("plan %v [%d, %d) is neither overlapping nor a complete window (safe %d)", ids([][]block.Meta{p}), lo, hi, safe)
			}
		}
	}
}

func metas0End(ms []block.Meta) int64 {
	e := int64(0)
	for _, m := range ms {
		e = max(e, m.MaxTime)
	}
	return e
}
