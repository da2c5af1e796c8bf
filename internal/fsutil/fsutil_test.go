package fsutil

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	err := SyncDir(missing)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("SyncDir(missing) = %v, want a not-exist error naming the directory", err)
	}
}
