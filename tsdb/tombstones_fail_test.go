package tsdb

import (
	"context"
	"math"
	"os"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-tsdb/tandem/internal/tmpfs"
	"github.com/tandem-tsdb/tandem/tsdb/head"
)

// TestCleanTombstonesDiskFull: a block rewrite that fails (the disk is
// full) leaves every block in place and readable, with the deleted samples
// still hidden, and releases each block once (a second release is a
// negative WaitGroup counter: a panic); once space is back, cleaning
// finishes.
func TestCleanTombstonesDiskFull(t *testing.T) {
	dir := tmpfs.Mount(t, 64<<20)
	db := openDB(t, dir, func(o *DBOptions) { o.Head.BlockRange = time.Hour })
	defer db.Close()
	want := model{}
	for s := range 4 * 240 {
		b := &head.Batch{}
		for _, inst := range []string{"a", "b"} {
			l := series("m", "job", "j", "instance", inst)
			b.Series = append(b.Series, head.BatchSeries{Labels: l, Samples: []head.Sample{{T: int64(s) * 15000, V: float64(s)}}})
			if inst == "a" {
				want.Add(l, int64(s)*15000, float64(s))
			}
		}
		if _, err := db.AppendBatch(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(true); err != nil {
		t.Fatal(err)
	}
	if n := len(db.Blocks()); n < 2 {
		t.Fatalf("%d blocks, want at least 2", n)
	}
	if err := db.Delete(context.Background(), math.MinInt64, math.MaxInt64, labels.MustNewMatcher(labels.MatchEqual, "instance", "b")); err != nil {
		t.Fatal(err)
	}
	filler := tmpfs.Fill(t, dir)
	if err := db.CleanTombstones(); err == nil {
		t.Fatal("CleanTombstones on a full disk succeeded")
	}
	compareModels(t, want, dbAll(t, db))
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := db.CleanTombstones(); err != nil {
		t.Fatalf("CleanTombstones with space back: %v", err)
	}
	compareModels(t, want, dbAll(t, db))
	for _, m := range db.Blocks() {
		if m.Stats.NumSeries != 1 {
			t.Errorf("block %s holds %d series after cleaning, want 1", m.ULID, m.Stats.NumSeries)
		}
	}
}
