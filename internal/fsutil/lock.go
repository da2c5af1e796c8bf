package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// DirLock is an exclusive flock on a data directory's lock file, so that two
// processes never use the same directory.
type DirLock struct{ f *os.File }

// LockDir takes dir's lock (the file dir/lock), failing at once if another
// process holds it.
func LockDir(dir string) (*DirLock, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory %s is in use by another process: %w", dir, err)
	}
	return &DirLock{f: f}, nil
}

// Release gives the lock up; a nil lock is a no-op.
func (l *DirLock) Release() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}
