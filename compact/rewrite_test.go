package compact

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// randomDeletions picks deleted intervals for the members of gs: none for some, everything for
// some, a range outside [0, span) for some, one or two ranges inside for the others; every member
// of group wipe loses [wipe0, wipe1] and every member of group gone loses everything.
func randomDeletions(rng *rand.Rand, gs []block.Group, span int64, wipe, gone string, wipe0, wipe1 int64) map[string][][2]int64 {
	del := map[string][][2]int64{}
	for _, g := range gs {
		for _, l := range g.Members {
			var iv [][2]int64
			switch {
			case g.Key == gone:
				iv = [][2]int64{{math.MinInt64, math.MaxInt64}}
			case g.Key == wipe:
				iv = [][2]int64{{wipe0, wipe1}}
			default:
				switch rng.IntN(6) {
				case 0, 1:
				case 2:
					iv = [][2]int64{{math.MinInt64, math.MaxInt64}}
				case 3:
					iv = [][2]int64{{span + 1, span + 1000}, {-1000, -1}}
				default:
					for range 1 + rng.IntN(2) {
						a := rng.Int64N(span)
						iv = append(iv, [2]int64{a, a + rng.Int64N(span/3)})
					}
				}
			}
			if iv != nil {
				del[l.String()] = append(del[l.String()], iv...)
			}
		}
	}
	return del
}

// withoutDeleted applies del to want, a model of srcs: deleted samples go, and so do the series
// that lose every sample to a deleted interval meeting their group's samples' time range.
func withoutDeleted(want map[string][]sample, del map[string][][2]int64, srcs ...[]block.Group) map[string][]sample {
	lo, hi := map[string]int64{}, map[string]int64{}
	for _, gs := range srcs {
		for _, g := range gs {
			for _, tab := range g.Tables {
				for _, t := range tab.Timestamps {
					if _, ok := lo[g.Key]; !ok {
						lo[g.Key], hi[g.Key] = t, t
					}
					lo[g.Key], hi[g.Key] = min(lo[g.Key], t), max(hi[g.Key], t)
				}
			}
		}
	}
	group := map[string]string{}
	for _, gs := range srcs {
		for _, g := range gs {
			for _, l := range g.Members {
				group[l.String()] = g.Key
			}
		}
	}
	out := map[string][]sample{}
	for l, ss := range want {
		iv := del[l]
		kept := slices.DeleteFunc(slices.Clone(ss), func(s sample) bool { return deadAt(iv, s.t) })
		k := group[l]
		_, has := lo[k]
		if len(kept) == 0 && has && overlaps(iv, lo[k], hi[k]) {
			continue
		}
		out[l] = kept
	}
	return out
}

func deletedBy(del map[string][][2]int64) Deleted {
	return func(l labels.Labels) [][2]int64 { return del[l.String()] }
}

// TestRewriteDeleted rewrites blocks of random groups (members joining and leaving, unaligned
// members, jittered timestamps, special values) without random deleted intervals: the deleted
// samples are gone and every other sample is there bit for bit; series that lost everything and
// a group that lost every series are gone; rows that lost every sample are gone from the tables;
// the level and sources are the source's.
func TestRewriteDeleted(t *testing.T) {
	const span = 2 * hour
	for seed := uint64(1); seed <= 4; seed++ {
		for _, rows := range []int{0, 23} {
			t.Run(fmt.Sprintf("%d/%d", seed, rows), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				gss, want := genSources(rng, 1, span, 7)
				gs := gss[0]
				dir := t.TempDir()
				meta, err := block.Write(dir, 0, span, block.Groups(gs), block.WriteOptions{ChunkRows: rows, Level: 3, Sources: []string{"a", "b"}})
				if err != nil {
					t.Fatal(err)
				}
				src, err := block.Open(filepath.Join(dir, meta.ULID))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { src.Close() })
				const wipe0, wipe1 = span / 4, span / 2
				del := randomDeletions(rng, gs, span, "g01", "g02", wipe0, wipe1)
				out := t.TempDir()
				rm, err := Rewrite(out, src, deletedBy(del), block.WriteOptions{ChunkRows: rows})
				if err != nil {
					t.Fatal(err)
				}
				b, err := block.Open(filepath.Join(out, rm.ULID))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { b.Close() })
				if err := b.Verify(); err != nil {
					t.Fatal(err)
				}
				checkModel(t, b, withoutDeleted(want, del, gs))
				if rm.MinTime != 0 || rm.MaxTime != span || rm.Compaction.Level != 3 || !slices.Equal(rm.Compaction.Sources, []string{"a", "b"}) {
					t.Fatalf("rewritten meta %+v", rm)
				}
				keys, err := b.GroupKeys()
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(keys, "g02") || !slices.Contains(keys, "g01") {
					t.Fatalf("groups %v: want g01 and not g02", keys)
				}
				var gc block.GroupChunks
				if _, err := b.ReadGroupChunks("g01", &gc); err != nil {
					t.Fatal(err)
				}
				var rd block.ChunkReader
				for ti, cs := range gc.Tables {
					for _, c := range cs {
						if err := rd.Reset(b, c); err != nil {
							t.Fatal(err)
						}
						for _, ts := range rd.Timestamps() {
							if ts >= wipe0 && ts <= wipe1 {
								t.Fatalf("g01 table %d keeps row %d, where every member's samples are deleted", ti, ts)
							}
						}
					}
				}
			})
		}
	}
}

// TestRewriteNothingDeleted rewrites blocks with nothing to delete (no function, deletions of
// other series, deletions outside the block's time): the chunks and index are the source's byte for byte.
func TestRewriteNothingDeleted(t *testing.T) {
	const span = 2 * hour
	for seed := uint64(1); seed <= 3; seed++ {
		gss, _ := genSources(rand.New(rand.NewPCG(seed, 5)), 1, span, 6)
		slices.SortFunc(gss[0], func(a, b block.Group) int { return strings.Compare(a.Key, b.Key) }) // as the rewrite writes them
		dir := t.TempDir()
		src := writeBlock(t, dir, 0, span, gss[0])
		other := map[string][][2]int64{`{__name__="nope"}`: {{0, span}}}
		outside := map[string][][2]int64{}
		for _, g := range gss[0] {
			for _, l := range g.Members {
				outside[l.String()] = [][2]int64{{span, math.MaxInt64}, {math.MinInt64, -1}}
			}
		}
		for _, del := range []Deleted{nil, deletedBy(other), deletedBy(outside)} {
			out := t.TempDir()
			rm, err := Rewrite(out, src, del, block.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sameFiles(t, filepath.Join(out, rm.ULID), src.Dir())
		}
	}
}

// TestMergeDeletedOverlapping merges overlapping blocks (conflicting values, a shifted block)
// without deleted intervals: the result is the merge's model without the deleted samples.
func TestMergeDeletedOverlapping(t *testing.T) {
	const span = 2 * hour
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			a, _ := genSources(rand.New(rand.NewPCG(seed, 1)), 1, span, 5)
			b, _ := genSources(rand.New(rand.NewPCG(seed, 1)), 1, span, 5)
			rng := rand.New(rand.NewPCG(seed, 8))
			for gi := range b[0] {
				b[0][gi] = regroup(rng, &b[0][gi])
			}
			c, _ := genSources(rand.New(rand.NewPCG(seed, 4)), 1, span, 5)
			for _, g := range c[0] {
				for _, tab := range g.Tables {
					for i := range tab.Timestamps {
						tab.Timestamps[i] += span / 2
					}
				}
			}
			dir := t.TempDir()
			srcs := []*block.Block{writeBlock(t, dir, 0, span, a[0]), writeBlock(t, dir, 0, span, b[0]), writeBlock(t, dir, span/2, span+span/2, c[0])}
			del := randomDeletions(rng, slices.Concat(a[0], c[0]), span, "g01", "g02", span/3, span)
			out := t.TempDir()
			meta, err := write(out, srcs, deletedBy(del), block.WriteOptions{ChunkRows: 31})
			if err != nil {
				t.Fatal(err)
			}
			m, err := block.Open(filepath.Join(out, meta.ULID))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			if err := m.Verify(); err != nil {
				t.Fatal(err)
			}
			checkModel(t, m, withoutDeleted(model(a[0], b[0], c[0]), del, a[0], b[0], c[0]))
		})
	}
}
