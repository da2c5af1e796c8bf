package tsdb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/head"
	"github.com/tandem-tsdb/tandem/tsdb/internal/tsdbtest"
)

// dbWithBlocks writes 4 h of one series into a fresh DB in a directory that
// user nobody can traverse, flushes (two or more blocks) and closes it.
func dbWithBlocks(t *testing.T) (string, []block.Meta, model) {
	t.Helper()
	dir, err := os.MkdirTemp("", "tandem-blockopen")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, dir, func(o *DBOptions) { o.Head.BlockRange = time.Hour })
	l := series("r", "job", "j", "instance", "i")
	for s := range 4 * 240 {
		if _, err := db.AppendBatch(context.Background(), &head.Batch{Series: []head.BatchSeries{{Labels: l, Samples: []head.Sample{{T: int64(s) * 15000, V: float64(s)}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(false); err != nil {
		t.Fatal(err)
	}
	want := dbAll(t, db)
	bs := db.Blocks()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if len(bs) < 2 {
		t.Fatalf("%d blocks, want at least 2", len(bs))
	}
	return dir, bs, want
}

// chownAll gives dir and everything in it to nobody (as root), so that
// nobody may create <dir>/quarantine and move blocks into it.
func chownAll(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpenBlocksPermissionDenied: a block whose index cannot be opened
// (EACCES, a real one: the check runs as nobody when the test runs as root)
// fails the start-up with an error naming the block and is left in place, not
// quarantined; once readable again, it opens with all its samples. Before,
// start-up moved it to quarantine and went on without its data.
func TestOpenBlocksPermissionDenied(t *testing.T) {
	dir, bs, want := dbWithBlocks(t)
	victim := filepath.Join(dir, bs[0].ULID)
	chownAll(t, dir)
	if err := os.Chmod(filepath.Join(victim, block.IndexFilename), 0); err != nil {
		t.Fatal(err)
	}
	var openErr error
	tsdbtest.AsNobody(t, func() {
		opts := DBOptions{Head: head.DefaultOptions()}
		opts.Head.BlockRange = time.Hour
		opts.Head.Now = func() int64 { return 1 << 50 }
		db, err := OpenDB(dir, opts)
		if err == nil {
			db.Close()
		}
		openErr = err
	})
	if openErr == nil || !errors.Is(openErr, fs.ErrPermission) || !strings.Contains(openErr.Error(), bs[0].ULID) {
		t.Fatalf("open with an unreadable index: %v; want a permission error naming block %s", openErr, bs[0].ULID)
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine", bs[0].ULID)); err == nil {
		t.Fatal("a block that could not be read for lack of permission was quarantined")
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("block gone from the data directory: %v", err)
	}
	if err := os.Chmod(filepath.Join(victim, block.IndexFilename), 0o644); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, dir, func(o *DBOptions) { o.Head.BlockRange = time.Hour })
	defer db.Close()
	if n := len(db.Blocks()); n != len(bs) {
		t.Fatalf("%d blocks after the permission came back, want %d", n, len(bs))
	}
	if got := dbAll(t, db); !reflect.DeepEqual(got, want) {
		t.Fatalf("samples changed across the failed start-up: %d series, want %d", len(got), len(want))
	}
}

// TestOpenBlocksDamage: what proves a block damaged moves it to quarantine
// and the start-up goes on; what does not (a newer format version) fails the
// start-up and leaves the block.
func TestOpenBlocksDamage(t *testing.T) {
	for _, c := range []struct {
		name       string
		damage     func(t *testing.T, blockDir string)
		quarantine bool
	}{
		{"garbage index", func(t *testing.T, d string) { tsdbtest.WriteFile(t, filepath.Join(d, block.IndexFilename), "garbage") }, true},
		{"index flipped byte", func(t *testing.T, d string) { tsdbtest.FlipByte(t, filepath.Join(d, block.IndexFilename), 20) }, true},
		{"empty chunks", func(t *testing.T, d string) { tsdbtest.WriteFile(t, filepath.Join(d, block.ChunksFilename), "") }, true},
		{"missing chunks", func(t *testing.T, d string) { tsdbtest.RemoveFile(t, filepath.Join(d, block.ChunksFilename)) }, true},
		{"missing meta.json", func(t *testing.T, d string) { tsdbtest.RemoveFile(t, filepath.Join(d, block.MetaFilename)) }, true},
		{"torn meta.json", func(t *testing.T, d string) {
			tsdbtest.WriteFile(t, filepath.Join(d, block.MetaFilename), `{"ulid": "01`)
		}, true},
		{"newer version", func(t *testing.T, d string) {
			p := filepath.Join(d, block.MetaFilename)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			s := strings.Replace(string(b), fmt.Sprintf(`"version": %d`, block.FormatVersion), `"version": 99`, 1)
			if s == string(b) {
				t.Fatalf("no version field in %s", b)
			}
			tsdbtest.WriteFile(t, p, s)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, bs, _ := dbWithBlocks(t)
			victim := filepath.Join(dir, bs[0].ULID)
			c.damage(t, victim)
			opts := DBOptions{Head: head.DefaultOptions()}
			opts.Head.BlockRange = time.Hour
			opts.Head.Now = func() int64 { return 1 << 50 }
			db, err := OpenDB(dir, opts)
			_, qerr := os.Stat(filepath.Join(dir, "quarantine", bs[0].ULID))
			if !c.quarantine {
				if err == nil {
					db.Close()
					t.Fatal("start-up succeeded over a block it cannot read")
				}
				if qerr == nil {
					t.Fatalf("block quarantined (%v)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("start-up failed over a damaged block: %v", err)
			}
			defer db.Close()
			if qerr != nil {
				t.Fatalf("damaged block not in quarantine: %v", qerr)
			}
			if n := len(db.Blocks()); n != len(bs)-1 {
				t.Fatalf("%d blocks, want %d", n, len(bs)-1)
			}
		})
	}
}

// TestOpenBlocksInterruptedDeletion: a block deletion cut off by a crash
// (the directory renamed for deletion, some files gone) is finished at
// start-up, not quarantined; the other blocks stay.
func TestOpenBlocksInterruptedDeletion(t *testing.T) {
	dir, bs, _ := dbWithBlocks(t)
	victim := filepath.Join(dir, bs[0].ULID)
	if err := os.Rename(victim, victim+".tmp-for-deletion"); err != nil {
		t.Fatal(err)
	}
	tsdbtest.RemoveFile(t, filepath.Join(victim+".tmp-for-deletion", block.MetaFilename))
	db := openDB(t, dir, func(o *DBOptions) { o.Head.BlockRange = time.Hour })
	defer db.Close()
	if _, err := os.Stat(victim + ".tmp-for-deletion"); !os.IsNotExist(err) {
		t.Fatalf("interrupted deletion left in place: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine")); !os.IsNotExist(err) {
		t.Fatalf("quarantine after an interrupted deletion: %v", err)
	}
	if n := len(db.Blocks()); n != len(bs)-1 {
		t.Fatalf("%d blocks, want %d", n, len(bs)-1)
	}
}
