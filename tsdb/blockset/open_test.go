package blockset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tandem-tsdb/tandem/tsdb/block"
	"github.com/tandem-tsdb/tandem/tsdb/internal/tsdbtest"
)

// TestOpen: blocks are listed by MinTime whatever the order of their
// directories; what interrupted writes and deletions left is removed; a
// level-1 block that a level-2 block lists among its sources is deleted,
// one that it does not list stays; nothing is quarantined.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	// Written newest first: ULIDs (and directory names) grow with time of
	// writing, so the directory order is the reverse of the time order.
	c := writeBlock(t, dir, 200, 300, 10, block.WriteOptions{})
	b := writeBlock(t, dir, 100, 200, 10, block.WriteOptions{})
	a := writeBlock(t, dir, 0, 100, 10, block.WriteOptions{})
	// x was merged into y (a crash before x was deleted); z overlaps y but
	// is not among its sources.
	x := writeBlock(t, dir, 300, 400, 10, block.WriteOptions{})
	z := writeBlock(t, dir, 350, 400, 10, block.WriteOptions{})
	y := writeBlock(t, dir, 300, 500, 10, block.WriteOptions{Level: 2, Sources: []string{x.ULID, "01ARZ3NDEKTSV4RRFFQ69G5FAV"}})

	deleting := filepath.Join(dir, "01BX5ZZKBKACTAV9WEVGEMMVRZ"+deletingSuffix)
	if err := os.MkdirAll(deleting, 0o755); err != nil {
		t.Fatal(err)
	}
	tsdbtest.WriteFile(t, filepath.Join(deleting, block.IndexFilename), "half deleted")
	creating := filepath.Join(dir, "01BX5ZZKBKACTAV9WEVGEMMVS0.tmp-for-creation")
	if err := os.MkdirAll(creating, 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "wal")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}

	s := openSet(t, dir, Options{})
	wantULIDs(t, s, a.ULID, b.ULID, c.ULID, y.ULID, z.ULID)
	for _, p := range []string{deleting, creating, filepath.Join(dir, x.ULID)} {
		if exists(t, p) {
			t.Errorf("%s left in place", filepath.Base(p))
		}
	}
	if !exists(t, other) {
		t.Error("a directory that is no block was removed")
	}
	noDebris(t, dir)
	if exists(t, filepath.Join(dir, "quarantine")) {
		t.Error("quarantine created")
	}
	if mint, ok := s.MinTime(); !ok || mint != 0 {
		t.Errorf("MinTime() = %d, %v; want 0, true", mint, ok)
	}
	if got := s.MaxTime(); got != 500 {
		t.Errorf("MaxTime() = %d, want 500", got)
	}
	var size int64
	for _, m := range s.Metas() {
		size += DirSize(filepath.Join(dir, m.ULID))
	}
	if got := s.Size(); got != size || size == 0 {
		t.Errorf("Size() = %d, want %d (> 0)", got, size)
	}
}

// TestOpenEmpty: a set without blocks.
func TestOpenEmpty(t *testing.T) {
	s := openSet(t, t.TempDir(), Options{})
	if n := len(s.Metas()); n != 0 {
		t.Fatalf("%d blocks", n)
	}
	if got := s.MaxTime(); got != math.MinInt64 {
		t.Errorf("MaxTime() = %d, want MinInt64", got)
	}
	if _, ok := s.MinTime(); ok {
		t.Error("MinTime() ok without blocks")
	}
	if got := s.Size(); got != 0 {
		t.Errorf("Size() = %d", got)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), Options{}); err == nil {
		t.Error("opened a directory that does not exist")
	}
}

// TestOpenDamage: what proves a block damaged moves it to quarantine and the
// set opens without it; what does not (a newer format version) fails Open
// and leaves the block.
func TestOpenDamage(t *testing.T) {
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
			dir := t.TempDir()
			ok := writeBlock(t, dir, 0, 100, 50, block.WriteOptions{})
			bad := writeBlock(t, dir, 100, 200, 50, block.WriteOptions{})
			victim := filepath.Join(dir, bad.ULID)
			c.damage(t, victim)
			s, err := Open(dir, Options{})
			qpath := filepath.Join(dir, "quarantine", bad.ULID)
			if !c.quarantine {
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded over a block it cannot read")
				}
				if !strings.Contains(err.Error(), bad.ULID) || !strings.Contains(err.Error(), "left in place") {
					t.Errorf("error %q does not name the block left in place", err)
				}
				if exists(t, qpath) || !exists(t, victim) {
					t.Fatalf("block moved (%v)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open failed over a damaged block: %v", err)
			}
			defer s.Close()
			if !exists(t, qpath) || exists(t, victim) {
				t.Fatal("damaged block not moved to quarantine")
			}
			wantULIDs(t, s, ok.ULID)
		})
	}
}

// TestOpenPermissionDenied: a block whose index cannot be opened (EACCES, a
// real one: the check runs as nobody when the test runs as root) fails Open
// with an error naming the block, and the block is left in place; once
// readable again, it opens.
func TestOpenPermissionDenied(t *testing.T) {
	dir := traversableDir(t)
	a := writeBlock(t, dir, 0, 100, 50, block.WriteOptions{})
	b := writeBlock(t, dir, 100, 200, 50, block.WriteOptions{})
	victim := filepath.Join(dir, a.ULID)
	index := filepath.Join(victim, block.IndexFilename)
	if err := os.Chmod(index, 0); err != nil {
		t.Fatal(err)
	}
	var openErr error
	tsdbtest.AsNobody(t, func() {
		s, err := Open(dir, Options{})
		if err == nil {
			s.Close()
		}
		openErr = err
	})
	if openErr == nil || !errors.Is(openErr, fs.ErrPermission) || !strings.Contains(openErr.Error(), a.ULID) {
		t.Fatalf("Open with an unreadable index: %v; want a permission error naming block %s", openErr, a.ULID)
	}
	if exists(t, filepath.Join(dir, "quarantine", a.ULID)) || !exists(t, victim) {
		t.Fatal("a block that could not be read for lack of permission was moved")
	}
	if err := os.Chmod(index, 0o644); err != nil {
		t.Fatal(err)
	}
	s := openSet(t, dir, Options{})
	wantULIDs(t, s, a.ULID, b.ULID)
}

// TestBlockDamaged classifies the errors a block's files can give.
func TestBlockDamaged(t *testing.T) {
	pathErr := func(e error) error {
		return fmt.Errorf("open block: %w", &fs.PathError{Op: "open", Path: "/data/01X/index", Err: e})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{pathErr(syscall.EMFILE), false},
		{pathErr(syscall.ENFILE), false},
		{pathErr(syscall.ENOMEM), false},
		{pathErr(syscall.EACCES), false},
		{pathErr(syscall.EIO), false},
		{fmt.Errorf("mmap /data/01X/chunks: %w", syscall.ENOMEM), false},
		{errors.New("open block: /data/01X/meta.json: unsupported version 99"), false},
		{pathErr(syscall.ENOENT), true},
		{fmt.Errorf("open block: index: %w", block.ErrCorrupt), true},
		{fmt.Errorf("open block: meta.json: %w", json.Unmarshal([]byte(`{"ulid": "01`), &block.Meta{})), true},
		{fmt.Errorf("open block: meta.json: %w", json.Unmarshal([]byte(`{"ulid": 1}`), &block.Meta{})), true},
	} {
		if got := blockDamaged(c.err); got != c.want {
			t.Errorf("blockDamaged(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestRemoveBlockDir: a deleted block leaves neither its directory nor the
// renamed one behind.
func TestRemoveBlockDir(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	tsdbtest.WriteFile(t, filepath.Join(p, block.MetaFilename), "{}")
	if err := removeBlockDir(dir, p); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{p, p + deletingSuffix} {
		if exists(t, q) {
			t.Fatalf("%s still there", q)
		}
	}
}
