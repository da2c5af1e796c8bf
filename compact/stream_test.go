package compact

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// wholeGroupMerge merges sources that do not overlap in time as Merge did
// before it streamed: each group decoded whole from every source, the shared
// tables concatenated in time order, a member's single-column unaligned
// tables concatenated across sources, and the groups written by block.Write.
func wholeGroupMerge(t *testing.T, dir string, srcs []*block.Block, opts block.WriteOptions) string {
	t.Helper()
	mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
	var keys []string
	for _, b := range srcs {
		mint, maxt = min(mint, b.Meta().MinTime), max(maxt, b.Meta().MaxTime)
		ks, err := b.GroupKeys()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, ks...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var out []block.Group
	for _, k := range keys {
		g := block.Group{Key: k, Tables: []block.Table{{}}}
		idx := map[string]int{}
		type src struct {
			g     *block.Group
			remap []int
		}
		var in []src
		for _, b := range srcs { // listed order: members in order of first appearance
			sg, ok, err := b.Group(k)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			s := src{g: sg}
			for _, l := range sg.Members {
				mm, ok := idx[l.String()]
				if !ok {
					mm = len(g.Members)
					idx[l.String()] = mm
					g.Members = append(g.Members, l)
				}
				s.remap = append(s.remap, mm)
			}
			if slices.ContainsFunc(sg.Tables, func(tb block.Table) bool { return len(tb.Timestamps) > 0 }) {
				in = append(in, s)
			}
		}
		first := func(s src) int64 {
			lo := int64(math.MaxInt64)
			for _, tb := range s.g.Tables {
				if len(tb.Timestamps) > 0 {
					lo = min(lo, tb.Timestamps[0])
				}
			}
			return lo
		}
		slices.SortStableFunc(in, func(a, b src) int { return cmp.Compare(first(a), first(b)) })
		appendCol := func(tb *block.Table, mm int, c *block.Column, base int32) {
			ci := slices.IndexFunc(tb.Columns, func(c block.Column) bool { return c.Member == mm })
			if ci < 0 {
				ci = len(tb.Columns)
				tb.Columns = append(tb.Columns, block.Column{Member: mm})
			}
			for _, r := range c.Rows {
				tb.Columns[ci].Rows = append(tb.Columns[ci].Rows, r+base)
			}
			tb.Columns[ci].Values = append(tb.Columns[ci].Values, c.Values...)
		}
		open := map[int]int{} // merged member → its unaligned table in g and the position that filled it
		openPos := map[int]int{}
		for pos, s := range in {
			sh := &g.Tables[0]
			base := int32(len(sh.Timestamps))
			sh.Timestamps = append(sh.Timestamps, s.g.Tables[0].Timestamps...)
			for ci := range s.g.Tables[0].Columns {
				c := &s.g.Tables[0].Columns[ci]
				appendCol(sh, s.remap[c.Member], c, base)
			}
			for _, tb := range s.g.Tables[1:] {
				if len(tb.Columns) == 0 {
					continue
				}
				if len(tb.Columns) == 1 {
					mm := s.remap[tb.Columns[0].Member]
					if o, ok := open[mm]; ok && openPos[mm] < pos {
						dst := &g.Tables[o]
						base := int32(len(dst.Timestamps))
						dst.Timestamps = append(dst.Timestamps, tb.Timestamps...)
						appendCol(dst, mm, &tb.Columns[0], base)
						openPos[mm] = pos
						continue
					}
					open[mm], openPos[mm] = len(g.Tables), pos
				}
				dst := block.Table{Timestamps: slices.Clone(tb.Timestamps)}
				for ci := range tb.Columns {
					appendCol(&dst, s.remap[tb.Columns[ci].Member], &tb.Columns[ci], 0)
				}
				g.Tables = append(g.Tables, dst)
			}
		}
		out = append(out, g)
	}
	meta, err := block.Write(dir, mint, maxt, block.Groups(out), opts)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, meta.ULID)
}

// sameFiles fails unless the chunks and index files of blocks a and b are identical.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	for _, f := range []string{block.ChunksFilename, block.IndexFilename} {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs: %d bytes merged chunk by chunk, %d merged whole", f, len(x), len(y))
		}
	}
}

// TestMergeStreamedMatchesWhole merges adjacent blocks (members joining, leaving and moving between
// tables, jittered timestamps, special values) chunk by chunk and as whole groups: the blocks are
// byte for byte the same, also with output chunks that straddle the sources' chunks.
func TestMergeStreamedMatchesWhole(t *testing.T) {
	const span = 2 * hour
	for seed := uint64(1); seed <= 4; seed++ {
		for _, rows := range [2][2]int{{0, 0}, {50, 7}} { // source and merged chunk rows
			t.Run(fmt.Sprintf("%d/%d-%d", seed, rows[0], rows[1]), func(t *testing.T) {
				gss, _ := genSources(rand.New(rand.NewPCG(seed, 9)), 3, span, 6)
				dir := t.TempDir()
				var srcs []*block.Block
				for i, gs := range gss {
					meta, err := block.Write(dir, int64(i)*span, int64(i+1)*span, block.Groups(gs), block.WriteOptions{ChunkRows: rows[0]})
					if err != nil {
						t.Fatal(err)
					}
					b, err := block.Open(filepath.Join(dir, meta.ULID))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { b.Close() })
					srcs = append(srcs, b)
				}
				listed := []*block.Block{srcs[1], srcs[2], srcs[0]}
				opts := block.WriteOptions{ChunkRows: rows[1]}
				meta, err := Merge(dir, listed, opts)
				if err != nil {
					t.Fatal(err)
				}
				sameFiles(t, filepath.Join(dir, meta.ULID), wholeGroupMerge(t, t.TempDir(), listed, opts))
			})
		}
	}
}

// TestMergeOverlappingSmallChunks merges overlapping blocks whose chunks are small and unaligned
// with the merged block's, so that every output chunk merges columns of several source chunks.
func TestMergeOverlappingSmallChunks(t *testing.T) {
	const span = 2 * hour
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			a, _ := genSources(rand.New(rand.NewPCG(seed, 1)), 1, span, 4)
			b, _ := genSources(rand.New(rand.NewPCG(seed, 1)), 1, span, 4)
			rng := rand.New(rand.NewPCG(seed, 7))
			for gi := range b[0] { // b: a's samples, some changed, moved between tables at random
				b[0][gi] = regroup(rng, &b[0][gi])
			}
			c, _ := genSources(rand.New(rand.NewPCG(seed, 6)), 1, span, 4)
			for _, g := range c[0] { // c: a quarter range later, and 3 ms off
				for _, tab := range g.Tables {
					for i := range tab.Timestamps {
						tab.Timestamps[i] += span/4 + 3
					}
				}
			}
			dir := t.TempDir()
			var srcs []*block.Block
			for i, gs := range [][]block.Group{a[0], b[0], c[0]} {
				lo := int64(0)
				if i == 2 {
					lo = span / 4
				}
				meta, err := block.Write(dir, lo, lo+span+4, block.Groups(gs), block.WriteOptions{ChunkRows: 37 + 10*i})
				if err != nil {
					t.Fatal(err)
				}
				bl, err := block.Open(filepath.Join(dir, meta.ULID))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { bl.Close() })
				srcs = append(srcs, bl)
			}
			for _, order := range [][]int{{0, 1, 2}, {2, 0, 1}} {
				listed := []*block.Block{srcs[order[0]], srcs[order[1]], srcs[order[2]]}
				gs := [][]block.Group{a[0], b[0], c[0]}
				checkModel(t, mergeOpen(t, listed, block.WriteOptions{ChunkRows: 20}), model(gs[order[0]], gs[order[1]], gs[order[2]]))
			}
		})
	}
}

// mergeOpen merges srcs with opts into a temporary directory and opens and verifies the result.
func mergeOpen(t *testing.T, srcs []*block.Block, opts block.WriteOptions) *block.Block {
	t.Helper()
	dir := t.TempDir()
	meta, err := Merge(dir, srcs, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := block.Open(filepath.Join(dir, meta.ULID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	return b
}

// regroup returns g with its samples reassigned at random between the shared table and tables of
// their members' own (at the same timestamps), a tenth of the values changed.
func regroup(rng *rand.Rand, g *block.Group) block.Group {
	type smp struct {
		m int
		t int64
		v float64
	}
	var all []smp
	for _, tab := range g.Tables {
		for _, c := range tab.Columns {
			for i, r := range c.Rows {
				v := c.Values[i]
				if rng.IntN(10) == 0 {
					v = float64(rng.IntN(1000))
				}
				all = append(all, smp{c.Member, tab.Timestamps[r], v})
			}
		}
	}
	slices.SortFunc(all, func(a, b smp) int { return cmp.Or(cmp.Compare(a.m, b.m), cmp.Compare(a.t, b.t)) })
	shared := map[int64]bool{}
	own := make([]bool, len(all))
	for i, s := range all {
		if own[i] = rng.IntN(3) == 0; !own[i] {
			shared[s.t] = true
		}
	}
	out := block.Group{Key: g.Key, Members: g.Members, Tables: []block.Table{{}}}
	for t := range shared {
		out.Tables[0].Timestamps = append(out.Tables[0].Timestamps, t)
	}
	slices.Sort(out.Tables[0].Timestamps)
	cols := map[int]*block.Column{}
	tabs := map[int]*block.Table{}
	for i, s := range all {
		if own[i] {
			tb := tabs[s.m]
			if tb == nil {
				tb = &block.Table{Columns: []block.Column{{Member: s.m}}}
				tabs[s.m] = tb
			}
			tb.Timestamps = append(tb.Timestamps, s.t)
			tb.Columns[0].Rows = append(tb.Columns[0].Rows, int32(len(tb.Timestamps)-1))
			tb.Columns[0].Values = append(tb.Columns[0].Values, s.v)
			continue
		}
		c := cols[s.m]
		if c == nil {
			c = &block.Column{Member: s.m}
			cols[s.m] = c
		}
		r, _ := slices.BinarySearch(out.Tables[0].Timestamps, s.t)
		c.Rows = append(c.Rows, int32(r))
		c.Values = append(c.Values, s.v)
	}
	for m := range g.Members {
		if c := cols[m]; c != nil {
			out.Tables[0].Columns = append(out.Tables[0].Columns, *c)
		}
	}
	for m := range g.Members {
		if tb := tabs[m]; tb != nil {
			out.Tables = append(out.Tables, *tb)
		}
	}
	return out
}
