package blockset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tandem-tsdb/tandem/internal/fsutil"
	"github.com/tandem-tsdb/tandem/tsdb/block"
)

// blockDamaged reports whether err, returned by opening a block, proves that
// the block's bytes are bad, so that moving it to quarantine loses nothing
// readable: a checksum, header or format error (block.ErrCorrupt), a
// meta.json that is not valid JSON, or a file of the block missing.
//
// Anything else leaves the block in place and fails the start-up: a
// transient condition (too many open files, out of memory, permission
// denied, an I/O error that a retry may not repeat) or a block from a newer
// version, which a downgrade would otherwise hide for good.
func blockDamaged(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.Is(err, block.ErrCorrupt) || errors.Is(err, fs.ErrNotExist) ||
		errors.As(err, &syntax) || errors.As(err, &typ)
}

// errBlockUnavailable wraps the error of a block that could not be opened but
// is not proven damaged.
func errBlockUnavailable(dir string, err error) error {
	return fmt.Errorf("cannot open block %s (left in place, not quarantined: the error does not show damaged data; "+
		"fix its cause and start again, or move the block away if it is really damaged): %w", dir, err)
}

// deletingSuffix marks a block directory being deleted: a crash in the
// middle of the deletion leaves it under this name, which start-up removes,
// and never a block directory with some of its files gone (which start-up
// would have to quarantine).
const deletingSuffix = ".tmp-for-deletion"

// removeBlockDir deletes the block directory p of the data directory dir:
// renamed first (durably), then removed.
func removeBlockDir(dir, p string) error {
	tmp := p + deletingSuffix
	if err := os.Rename(p, tmp); err != nil {
		return err
	}
	if err := fsutil.SyncDir(dir); err != nil {
		return err
	}
	return os.RemoveAll(tmp)
}

// removeDeleting finishes the block deletions a crash interrupted.
func removeDeleting(dir string, entries []os.DirEntry) error {
	for _, e := range entries {
		if e.IsDir() && strings.HasSuffix(e.Name(), deletingSuffix) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("remove %s (a deletion a crash interrupted): %w", e.Name(), err)
			}
		}
	}
	return nil
}
