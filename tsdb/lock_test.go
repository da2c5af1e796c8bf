package tsdb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenDBLockedFirst: opening a data directory another DB holds fails
// before anything in it is touched: the running DB's block being written
// (a .tmp-for-creation directory, which start-up otherwise removes as a crash's leftover)
// stays, and the directory opens again once the first DB is closed.
func TestOpenDBLockedFirst(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, nil)
	inProgress := filepath.Join(dir, "01KAAAAAAAAAAAAAAAAAAAAAAA.tmp-for-creation")
	if err := os.MkdirAll(inProgress, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDB(dir, DBOptions{Head: db.head.Options()}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second OpenDB of a directory in use: %v", err)
	}
	if _, err := os.Stat(inProgress); err != nil {
		t.Fatalf("the second OpenDB removed the running DB's block in progress: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, dir, nil)
	defer db2.Close()
	if _, err := os.Stat(inProgress); !os.IsNotExist(err) {
		t.Fatalf("a crash's leftover .tmp-for-creation directory not removed at start-up: %v", err)
	}
}
