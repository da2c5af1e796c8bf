package block

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// TestWriteSyncOrder checks the order that makes a block durable, as Prometheus orders it: every file
// of the block is fsynced, then the temporary directory (so that the files' entries survive a power
// loss), then the directory is renamed into place and its parent fsynced (so that the name does).
func TestWriteSyncOrder(t *testing.T) {
	tb := genBlock(rand.New(rand.NewPCG(3, 4)), 3)
	ex := []SeriesExemplars{{Labels: tb.lsets[0], Exemplars: []Exemplar{{Labels: labels.FromStrings("trace_id", "1"), T: tb.mint, V: 1}}}}
	type op struct{ op, path string }
	var ops []op
	testHookFS = func(o, path string) { ops = append(ops, op{o, path}) }
	defer func() { testHookFS = nil }()
	dir := t.TempDir()
	meta, err := Write(dir, tb.mint, tb.maxt, Groups(tb.groups), WriteOptions{Exemplars: exemplarSlice(ex)})
	testHookFS = nil
	if err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(dir, meta.ULID)
	tmp := final + tmpSuffix
	idx := func(o, path string) int { return slices.Index(ops, op{o, path}) }
	syncTmp, rename, syncParent := idx("syncdir", tmp), idx("rename", final), idx("syncdir", dir)
	t.Logf("operations: %v", ops)
	if syncTmp < 0 || rename < 0 || syncParent < 0 || !(syncTmp < rename && rename < syncParent) {
		t.Fatalf("want sync of %s, rename to %s, sync of %s in this order; got %v", tmp, final, dir, ops)
	}
	files, err := os.ReadDir(final)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("block holds %d files, want 4 (with exemplars)", len(files))
	}
	for _, f := range files {
		if i := idx("sync", filepath.Join(tmp, f.Name())); i < 0 || i > syncTmp {
			t.Fatalf("%s fsynced at step %d, the temporary directory at %d: %v", f.Name(), i, syncTmp, ops)
		}
	}
}
