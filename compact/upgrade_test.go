package compact

import (
	"path/filepath"
	"testing"

	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// TestMergeOlderVersions: a block of each older format version (the golden
// blocks of tsdb/block/testdata) merges with a block of the current
// version, as an upgraded tandem compacts them, into one block of the
// current version that holds every sample of both, bit for bit.
func TestMergeOlderVersions(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "tsdb", "block", "testdata", "v*", "*"))
	if err != nil || len(dirs) < 5 {
		t.Fatalf("golden blocks: %v (%v)", dirs, err)
	}
	older := 0
	for _, dir := range dirs {
		t.Run(filepath.Base(filepath.Dir(dir)), func(t *testing.T) {
			ob, err := block.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ob.Close()
			m := ob.Meta()
			if m.Version < block.FormatVersion {
				older++
			}
			// The same groups one span later, in a block of the current version.
			span := m.MaxTime - m.MinTime
			keys, err := ob.GroupKeys()
			if err != nil {
				t.Fatal(err)
			}
			var gs []block.Group
			for _, k := range keys {
				var g block.Group
				if ok, err := ob.ReadGroup(k, &g); !ok || err != nil {
					t.Fatalf("group %q: %v %v", k, ok, err)
				}
				for ti := range g.Tables {
					for i := range g.Tables[ti].Timestamps {
						g.Tables[ti].Timestamps[i] += span
					}
				}
				gs = append(gs, g)
			}
			nb := writeBlock(t, t.TempDir(), m.MaxTime, m.MaxTime+span, gs)
			mb := mergeBlocks(t, []*block.Block{ob, nb})
			if v := mb.Meta().Version; v != block.FormatVersion {
				t.Fatalf("merged block of version %d", v)
			}
			olds, news, merged := seriesOf(t, ob), seriesOf(t, nb), seriesOf(t, mb)
			if len(merged) != len(olds) || len(olds) == 0 {
				t.Fatalf("%d series merged from %d", len(merged), len(olds))
			}
			n := 0
			for l, id := range merged {
				want := append(collectAll(t, ob, olds[l]), collectAll(t, nb, news[l])...)
				got := collectAll(t, mb, id)
				if len(got) != len(want) {
					t.Fatalf("%s: %d samples, want %d", l, len(got), len(want))
				}
				for i := range got {
					if !sameSample(got[i], want[i]) {
						t.Fatalf("%s sample %d: %v, want %v", l, i, got[i], want[i])
					}
				}
				n += len(got)
			}
			if n < 1000 {
				t.Fatalf("only %d samples compared", n)
			}
		})
	}
	if older < 4 {
		t.Fatalf("only %d golden blocks of older versions", older)
	}
}
