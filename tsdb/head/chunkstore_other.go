//go:build !linux

package head

import "os"

// preallocate sizes f to size bytes. Without fallocate the file is sparse:
// on a full disk a write through the mapping faults.
func preallocate(f *os.File, size int64) error {
	return f.Truncate(size)
}
