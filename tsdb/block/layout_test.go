package block

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCompactLayouts checks the writer's version 7 choices on random blocks:
// a postings list of two or more consecutive ids is written as a run and
// any other as deltas, and both decode to the ids of the series with that
// label pair; a column directory leaves out the members exactly when they
// are 0..n-1; series records list their tables exactly when the member
// lacks some chunk of its group's shared table. Each case must occur.
func TestCompactLayouts(t *testing.T) {
	var runs, lists, dense, sparse, listed, unlisted int
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		b := writeTestBlock(t, genBlock(rng, 1+rng.IntN(6)), WriteOptions{ChunkRows: 50})
		if !b.compact {
			t.Fatalf("block of version %d read as an older version", FormatVersion)
		}
		for i := range b.names {
			e := &b.names[i]
			err := b.forValues(e, func(v []byte, off uint32) bool {
				var want []uint32
				for id := 0; id < b.nseries; id++ {
					l, err := b.Labels(uint32(id))
					if err != nil {
						t.Fatal(err)
					}
					if l.Get(e.name) == string(v) && l.Has(e.name) {
						want = append(want, uint32(id))
					}
				}
				head, _ := binary.Uvarint(b.sec[secPostings][off:])
				run := len(want) > 1 && int(want[len(want)-1]-want[0]) == len(want)-1
				if head&1 == 1 != run || int(head>>1) != len(want) {
					t.Fatalf("seed %d: %s=%q: head %#x for ids %v", seed, e.name, v, head, want)
				}
				if run {
					runs++
				} else {
					lists++
				}
				got, err := b.postingsAt(off, ^uint32(0), nil)
				if err != nil || !slices.Equal(got, want) {
					t.Fatalf("seed %d: %s=%q: postings %v (%v), want %v", seed, e.name, v, got, err, want)
				}
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for g := 0; g < b.ngroups; g++ {
			_, members, tables, err := b.groupInfo(g)
			if err != nil {
				t.Fatal(err)
			}
			for _, cms := range tables {
				for _, cm := range cms {
					body, _, err := b.chunkBody(cm.off, false)
					if err != nil {
						t.Fatal(err)
					}
					ch, err := parseChunk(body)
					if err != nil {
						t.Fatal(err)
					}
					consecutive := true
					for i := 0; i < ch.ncols; i++ {
						col, err := ch.column(i)
						if err != nil {
							t.Fatal(err)
						}
						consecutive = consecutive && col.member == i
						if ch.find(col.member) != i {
							t.Fatalf("seed %d: member %d found at %d, want %d", seed, col.member, ch.find(col.member), i)
						}
					}
					if (ch.wm == 0) != consecutive {
						t.Fatalf("seed %d: member width %d for members 0..%d consecutive=%v", seed, ch.wm, ch.ncols-1, consecutive)
					}
					if ch.wm == 0 {
						dense++
						if ch.find(ch.ncols) != -1 || ch.find(-1) != -1 {
							t.Fatalf("seed %d: a member beyond the directory was found", seed)
						}
					} else {
						sparse++
					}
				}
			}
			for _, id := range members {
				rec, err := b.seriesRecord(int(id))
				if err != nil {
					t.Fatal(err)
				}
				si, err := b.series(id, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				every := len(si.tables) == 1 && si.tables[0] == memberTable{table: 0, first: 0, last: allChunks}
				if rec[0]&1 == 1 {
					listed++
					if every {
						t.Fatalf("seed %d: series %d lists its tables but has every chunk of table 0", seed, id)
					}
				} else {
					unlisted++
					if !every {
						t.Fatalf("seed %d: series %d lists no tables but has %v", seed, id, si.tables)
					}
				}
			}
		}
	}
	if runs == 0 || lists == 0 || dense == 0 || sparse == 0 || listed == 0 || unlisted == 0 {
		t.Fatalf("runs %d lists %d, directories dense %d sparse %d, series listed %d unlisted %d: a case is missing",
			runs, lists, dense, sparse, listed, unlisted)
	}
	t.Logf("runs %d lists %d, directories dense %d sparse %d, series listed %d unlisted %d", runs, lists, dense, sparse, listed, unlisted)
}
