package head

import (
	"os"
	"syscall"
)

// preallocate gives f size bytes of allocated blocks.
func preallocate(f *os.File, size int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, 0, size)
}
