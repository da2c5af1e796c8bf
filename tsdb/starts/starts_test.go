package starts

import (
	"errors"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// model checks rs against the start timestamps recorded in want.
func check(t *testing.T, rs Runs, want map[int64]int64, ts []int64) {
	t.Helper()
	for i := 1; i < len(rs); i++ {
		if rs[i].From <= rs[i-1].To || rs[i].To < rs[i].From {
			t.Fatalf("runs out of order at %d: %+v", i, rs)
		}
	}
	var c Cursor
	c.Reset(rs)
	for _, at := range ts {
		if got := rs.At(at); got != want[at] {
			t.Fatalf("At(%d) = %d, want %d (runs %+v)", at, got, want[at], rs)
		}
		if got := c.At(at); got != want[at] {
			t.Fatalf("Cursor.At(%d) = %d, want %d (runs %+v)", at, got, want[at], rs)
		}
	}
	b := rs.AppendEncoded(nil)
	got, n, err := Decode(nil, b)
	if err != nil || n != len(b) || !slices.Equal(got, rs) {
		t.Fatalf("round trip: %v, %d of %d bytes, %+v want %+v", err, n, len(b), got, rs)
	}
}

func TestRunsAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 300; iter++ {
		var rs Runs
		want := map[int64]int64{}
		var ts []int64
		newest := int64(math.MinInt64)
		next := int64(rng.Intn(100)) - 50
		start := int64(rng.Intn(1000)) - 500
		for i := 0; i < 60; i++ {
			var at int64
			if len(ts) > 0 && rng.Intn(4) == 0 {
				at = ts[rng.Intn(len(ts))] + int64(rng.Intn(3)) - 1 // late, duplicate or between
			} else {
				next += int64(1 + rng.Intn(3))
				at = next
			}
			var st int64
			switch rng.Intn(5) {
			case 0:
				st = 0
			case 1:
				st = at - 1 // delta
			case 2:
				start = at - int64(rng.Intn(5)) // a reset
				st = start
			default:
				st = start
			}
			if _, ok := want[at]; !ok {
				ts = append(ts, at)
			}
			want[at] = st
			if at > newest {
				rs.Append(newest, at, st)
				newest = at
			} else {
				rs.Insert(at, st)
			}
			slices.Sort(ts)
			check(t, rs, want, ts)
		}
		// DropBefore and Clip keep what is at or after the bound.
		cut := ts[len(ts)/2]
		clip := rs.Clip(cut, ts[len(ts)-1])
		for _, at := range ts {
			if at >= cut && clip.At(at) != want[at] {
				t.Fatalf("Clip: At(%d) = %d, want %d", at, clip.At(at), want[at])
			}
		}
		rs.DropBefore(cut)
		for _, at := range ts {
			w := want[at]
			if at < cut {
				w = 0
			}
			if got := rs.At(at); got != w {
				t.Fatalf("DropBefore: At(%d) = %d, want %d", at, got, w)
			}
		}
	}
}

func TestRunsCompact(t *testing.T) {
	var cum, delta, none Runs
	prev := int64(math.MinInt64)
	for i := int64(1); i <= 1000; i++ {
		cum.Append(prev, i*15000, 42)
		delta.Append(prev, i*15000, i*15000-15000)
		none.Append(prev, i*15000, 0)
		prev = i * 15000
	}
	if len(cum) != 1 || len(delta) != 1 || none != nil {
		t.Fatalf("runs: cumulative %d, delta %d, none %v; want 1, 1, nil", len(cum), len(delta), none)
	}
	if cum.At(7*15000) != 42 || delta.At(7*15000) != 6*15000 {
		t.Fatalf("lookups: %d %d", cum.At(7*15000), delta.At(7*15000))
	}
}

func TestDecodeRefuses(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":       {},
		"count":       {0x7f, 0, 0, 0},
		"kind":        Runs{{From: 1, To: 2, Kind: 1, V: 3}}.AppendEncoded(nil)[:3],
		"bad kind":    {1, 2, 0, 2, 0},
		"overlapping": {2, 2, 1, 0, 2, 0x7f, 0, 0, 2},
	} {
		if _, _, err := Decode(nil, b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Runs{{From: 1, To: 5, V: 1}, {From: 6, To: 9, Kind: Offset, V: 15000}}.AppendEncoded(nil))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, n, err := Decode(nil, b)
		if err != nil {
			return
		}
		if again := rs.AppendEncoded(nil); !slices.Equal(again, b[:n]) {
			t.Fatalf("re-encoding differs: %x vs %x", again, b[:n])
		}
	})
}
