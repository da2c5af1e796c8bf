package block

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// TestGroupsRoundTrip writes random groups, reads them back with Groups and writes them again:
// both blocks must hold the same series with bit-identical samples.
func TestGroupsRoundTrip(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			tb := genBlock(rng, 1+rng.IntN(6))
			b1 := writeTestBlock(t, tb, WriteOptions{ChunkRows: []int{1, 7, 120, 240}[rng.IntN(4)]})
			if b1.NumGroups() != len(tb.groups) {
				t.Fatalf("NumGroups %d, want %d", b1.NumGroups(), len(tb.groups))
			}
			dir := t.TempDir()
			var keys []string
			err := b1.Groups()(func(g *Group) error {
				keys = append(keys, g.Key)
				if len(g.Tables) == 0 {
					return fmt.Errorf("group %q: no shared table", g.Key)
				}
				for ti, tab := range g.Tables {
					if !slices.IsSortedFunc(tab.Columns, func(a, b Column) int { return a.Member - b.Member }) {
						return fmt.Errorf("group %q table %d: columns not sorted by member", g.Key, ti)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.IsSorted(keys) || len(keys) != len(tb.groups) {
				t.Fatalf("Groups yielded keys %v", keys)
			}
			gk, err := b1.GroupKeys()
			if err != nil || !slices.Equal(gk, keys) {
				t.Fatalf("GroupKeys = %v, %v; want %v", gk, err, keys)
			}
			meta, err := Write(dir, tb.mint, tb.maxt, b1.Groups(), WriteOptions{ChunkRows: []int{3, 240}[rng.IntN(2)]})
			if err != nil {
				t.Fatal(err)
			}
			b2, err := Open(filepath.Join(dir, meta.ULID))
			if err != nil {
				t.Fatal(err)
			}
			defer b2.Close()
			if err := b2.Verify(); err != nil {
				t.Fatal(err)
			}
			m1, m2 := b1.Meta().Stats, meta.Stats
			if m1.NumSamples != m2.NumSamples || m1.NumSeries != m2.NumSeries || m1.NumGroups != m2.NumGroups {
				t.Fatalf("stats %+v, rewritten %+v", m1, m2)
			}
			var it1, it2 chunkenc.Iterator
			for id := 0; id < b1.NumSeries(); id++ {
				l1, err1 := b1.Labels(uint32(id))
				l2, err2 := b2.Labels(uint32(id))
				if err1 != nil || err2 != nil || !labels.Equal(l1, l2) {
					t.Fatalf("series %d: labels %s, %s (%v, %v)", id, l1, l2, err1, err2)
				}
				it1 = b1.Iterator(uint32(id), math.MinInt64, math.MaxInt64, it1)
				it2 = b2.Iterator(uint32(id), math.MinInt64, math.MaxInt64, it2)
				s1, err1 := collect(it1)
				s2, err2 := collect(it2)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				equalSamples(t, l1.String(), s2, s1)
				equalSamples(t, l1.String()+" (input)", s1, tb.expected[l1.String()])
			}
		})
	}
}

// TestReadGroup checks single-group reads against the input groups, buffer reuse, and a missing key.
func TestReadGroup(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	tb := genBlock(rng, 6)
	b := writeTestBlock(t, tb, WriteOptions{ChunkRows: 50})
	var reused Group
	for _, in := range tb.groups {
		g, ok, err := b.Group(in.Key)
		if err != nil || !ok {
			t.Fatalf("Group(%q) = %v, %v", in.Key, ok, err)
		}
		if ok, err := b.ReadGroup(in.Key, &reused); err != nil || !ok {
			t.Fatalf("ReadGroup(%q) = %v, %v", in.Key, ok, err)
		}
		for _, got := range []*Group{g, &reused} {
			if got.Key != in.Key || len(got.Members) != len(in.Members) {
				t.Fatalf("group %q: key %q, %d members, want %d", in.Key, got.Key, len(got.Members), len(in.Members))
			}
			for m := range in.Members {
				if !labels.Equal(got.Members[m], in.Members[m]) {
					t.Fatalf("group %q member %d: %s, want %s", in.Key, m, got.Members[m], in.Members[m])
				}
				equalSamples(t, fmt.Sprintf("%q member %d", in.Key, m), groupSamples(got, m), groupSamples(&in, m))
			}
		}
	}
	if g, ok, err := b.Group("no such group"); ok || err != nil || g != nil {
		t.Fatalf("Group(missing) = %v, %v, %v", g, ok, err)
	}
	if g, ok, err := b.Group(""); ok || err != nil || g != nil {
		t.Fatalf("Group(\"\") = %v, %v, %v", g, ok, err)
	}
}

// groupSamples returns member m's samples of g, merged over its tables in time order.
func groupSamples(g *Group, m int) []sample {
	var out []sample
	for _, tab := range g.Tables {
		for _, c := range tab.Columns {
			if c.Member == m {
				for i, r := range c.Rows {
					out = append(out, sample{tab.Timestamps[r], c.Values[i]})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b sample) int { return int(a.t - b.t) })
	return out
}

// TestGroupsDetectsCorruption flips a byte inside a chunk: reading the groups must fail with ErrCorrupt.
func TestGroupsDetectsCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	tb := genBlock(rng, 3)
	dir := t.TempDir()
	meta, err := Write(dir, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, meta.ULID, ChunksFilename)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[12] ^= 0x40 // inside the first chunk's body
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Groups()(func(*Group) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Groups over a corrupt chunk: %v", err)
	}
}
