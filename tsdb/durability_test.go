package tsdb

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/tsdb/record"
	"github.com/tandem-tsdb/tandem/tsdb/wal"
)

// scrape builds one scrape of n series of a target at t.
func scrape(target string, n int, t int64) *head.Batch {
	b := &head.Batch{}
	for i := range n {
		b.Series = append(b.Series, head.BatchSeries{
			Labels:  series("m", "job", "j", "instance", target, "i", fmt.Sprint(i)),
			Samples: []head.Sample{{T: t, V: float64(i) + float64(t)/1000}},
		})
	}
	return b
}

// TestFlushSkipsEmptyRanges: one sample at the epoch and the rest at the
// clock (a database without an age bound, or a WAL from before it) must
// not make a flush walk every empty range between them or leave empty blocks.
func TestFlushSkipsEmptyRanges(t *testing.T) {
	dir := t.TempDir()
	const now = int64(1 << 42) // ~139 years: 1.2e9 two-minute ranges from the epoch
	db := openDB(t, dir, func(o *DBOptions) {
		o.Head.BlockRange = 2 * time.Minute
		o.Head.Now = func() int64 { return now }
	})
	defer db.Close()
	l := series("m", "job", "j", "instance", "i")
	smps := []head.Sample{{T: 0, V: 1}}
	for ts := now - 10*60000; ts <= now; ts += 15000 {
		smps = append(smps, head.Sample{T: ts, V: 2})
	}
	if res, err := db.AppendBatch(context.Background(), &head.Batch{Series: []head.BatchSeries{{Labels: l, Samples: smps}}}); err != nil || res.Err() != nil {
		t.Fatalf("%v %v", err, res.Err())
	}
	done := make(chan error, 1)
	go func() { done <- db.Flush(false) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("flush walks empty block ranges one by one")
	}
	entries, _ := os.ReadDir(dir)
	var blocks []string
	for _, e := range entries {
		if e.IsDir() && isULID(e.Name()) {
			blocks = append(blocks, e.Name())
		}
	}
	if len(blocks) != len(db.Blocks()) {
		t.Fatalf("%d block directories, %d blocks listed: empty ranges left orphan blocks", len(blocks), len(db.Blocks()))
	}
	if len(blocks) < 2 || len(blocks) > 6 {
		t.Fatalf("%d blocks, want the epoch's and a few of the last 10 minutes", len(blocks))
	}
	got := dbAll(t, db)
	if n := len(got[l.String()]); n != len(smps) {
		t.Fatalf("%d samples read back, want %d", n, len(smps))
	}
}

// TestReplayUnplaceableTimestamp: a WAL written before timestamps were
// bounded may hold MinInt64+1; replay drops only that sample and flushes
// go on.
func TestReplayUnplaceableTimestamp(t *testing.T) {
	dir := t.TempDir()
	const now = int64(1 << 42)
	w, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := series("m", "job", "j", "instance", "i")
	c := record.Commit{Series: []record.RefSeries{{Ref: 1, Labels: l}}}
	c.Samples = append(c.Samples, record.RefSample{Ref: 1, T: math.MinInt64 + 1, V: 1})
	for ts := now - 10*60000; ts <= now; ts += 15000 {
		c.Samples = append(c.Samples, record.RefSample{Ref: 1, T: ts, V: 2})
	}
	if err := w.Log(c.Encode(nil)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	db := openDB(t, dir, func(o *DBOptions) {
		o.Head.BlockRange = 2 * time.Minute
		o.Head.Now = func() int64 { return now }
	})
	defer db.Close()
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	if len(db.Blocks()) == 0 {
		t.Fatal("no block flushed")
	}
	if n := len(dbAll(t, db)[l.String()]); n != len(c.Samples)-1 {
		t.Fatalf("%d samples, want %d", n, len(c.Samples)-1)
	}
}

// isULID reports whether name is a block directory's (a ULID).
func isULID(name string) bool {
	_, err := ulid.ParseStrict(name)
	return err == nil
}
