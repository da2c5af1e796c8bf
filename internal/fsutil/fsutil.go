// Package fsutil holds the file-system helpers that the storage packages
// share for durability.
package fsutil

import (
	"fmt"
	"os"
)

// SyncDir fsyncs a directory so that renames and creates in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
