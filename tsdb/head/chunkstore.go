package head

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// defaultSegmentSize is the size of one chunk file of the head, reserved on
// disk when the file is made.
const defaultSegmentSize = 32 << 20

// chunkStore keeps the head's frozen chunks in memory-mapped files under
// <data>/chunks_head, outside the Go heap, as Prometheus's head keeps its
// full chunks: the kernel may write the pages out and drop them under
// memory pressure, and the garbage collector neither counts nor paces on
// them. The files are a cache, not a log: Open empties the directory and
// the WAL replay refills it. Each chunk holds a reference on its file
// (runtime.AddCleanup), so a file is unmapped and removed only once no chunk
// in it is reachable: a reader that holds a chunk keeps its bytes mapped.
type chunkStore struct {
	dir     string
	segSize int
	logger  *slog.Logger

	mu     sync.Mutex
	cur    *chunkSegment
	run    int64 // names this store's files apart from an earlier store's on the same directory
	seq    int
	closed bool
	failed time.Time // when a file could not be made: chunks stay in the heap for a minute

	liveBytes atomic.Int64 // bytes of chunks in files that are still reachable
	fileBytes atomic.Int64 // bytes written to files still mapped (unreachable chunks included)
	files     atomic.Int64 // files mapped
}

// chunkSegment is one mapped chunk file.
type chunkSegment struct {
	store *chunkStore
	path  string
	data  []byte
	used  int // guarded by store.mu
	// refs counts the segment's reachable chunks, plus one while it takes new ones.
	refs atomic.Int64
}

// keepDeadMappings, set by tests, leaves a released segment mapped without
// access instead of unmapping it, so a read of a released chunk faults
// instead of reading whatever the kernel mapped at that address later.
var keepDeadMappings bool

// openChunkStore empties dir (chunk files of an earlier run) and returns a
// store writing there.
func openChunkStore(dir string, logger *slog.Logger) (*chunkStore, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("remove old head chunks: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create head chunks directory: %w", err)
	}
	return &chunkStore{dir: dir, segSize: defaultSegmentSize, logger: logger, run: time.Now().UnixNano()}, nil
}

// alloc returns n bytes (8-byte aligned) of mapped memory and their segment,
// which holds one more reference; nil if the store is closed or no file
// could be made (the caller keeps the chunk in the heap).
func (cs *chunkStore) alloc(n int) ([]byte, *chunkSegment) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed || !cs.failed.IsZero() && time.Since(cs.failed) < time.Minute {
		return nil, nil
	}
	if s := cs.cur; s == nil || s.used+n > len(s.data) {
		if s != nil {
			cs.cur = nil
			s.release()
		}
		s, err := cs.newSegment(max(cs.segSize, n))
		if err != nil {
			if cs.failed.IsZero() {
				cs.logger.Error("head chunks stay in the heap until a chunk file can be made (retried every minute)", "err", err)
			}
			cs.failed = time.Now()
			return nil, nil
		}
		if !cs.failed.IsZero() {
			cs.logger.Info("head chunks go to chunk files again")
			cs.failed = time.Time{}
		}
		cs.cur = s
	}
	s := cs.cur
	b := s.data[s.used : s.used+n : s.used+n]
	n = (n + 7) &^ 7
	s.used += n
	s.refs.Add(1)
	cs.fileBytes.Add(int64(n))
	cs.liveBytes.Add(int64(n))
	return b, s
}

func (cs *chunkStore) newSegment(size int) (*chunkSegment, error) {
	cs.seq++
	// A head closed and opened again in one process may still have files
	// mapped whose cleanup removes them by name later: names never repeat.
	path := filepath.Join(cs.dir, fmt.Sprintf("%x-%06d", cs.run, cs.seq))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create chunk file: %w", err)
	}
	defer f.Close() // the mapping stays valid
	// The file's blocks are reserved now: a write through the mapping to a
	// block the file system cannot allocate (a full disk) would be a SIGBUS.
	if err := preallocate(f, int64(size)); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("reserve %d bytes for chunk file %s: %w", size, path, err)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("map chunk file %s: %w", path, err)
	}
	s := &chunkSegment{store: cs, path: path, data: data}
	s.refs.Store(1)
	cs.files.Add(1)
	return s, nil
}

// release drops one reference; the last unmaps and removes the file.
func (s *chunkSegment) release() {
	if s.refs.Add(-1) != 0 {
		return
	}
	cs := s.store
	cs.fileBytes.Add(-int64(s.used))
	cs.files.Add(-1)
	os.Remove(s.path)
	if keepDeadMappings {
		syscall.Mprotect(s.data, syscall.PROT_NONE)
		return
	}
	if err := syscall.Munmap(s.data); err != nil {
		cs.logger.Error("unmap head chunk file", "path", s.path, "err", err)
	}
}

// close stops new allocations; the files go once their chunks are unreachable.
func (cs *chunkStore) close() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	if cs.cur != nil {
		cs.cur.release()
		cs.cur = nil
	}
}

// place copies c's buffers into mapped memory, points c at the copy and
// ties the mapping's lifetime to c. It reports false, leaving c as it is,
// without a store or when mapping fails.
func (cs *chunkStore) place(c *chunk) bool {
	if cs == nil {
		return false
	}
	colBytes := len(c.cols) * int(unsafe.Sizeof(colData{}))
	bitsOff := (colBytes + 7) &^ 7
	tsOff := bitsOff + 8*len(c.bits)
	dataOff := tsOff + len(c.ts)
	n := dataOff + len(c.data)
	if n == 0 {
		return false
	}
	b, seg := cs.alloc(n)
	if seg == nil {
		return false
	}
	// Nothing of c may keep pointing at the caller's buffers.
	var cols []colData
	if len(c.cols) > 0 {
		cols = unsafe.Slice((*colData)(unsafe.Pointer(&b[0])), len(c.cols))
		copy(cols, c.cols)
	}
	c.cols = cols
	var bits []uint64
	if len(c.bits) > 0 {
		bits = unsafe.Slice((*uint64)(unsafe.Pointer(&b[bitsOff])), len(c.bits))
		copy(bits, c.bits)
	}
	c.bits = bits
	copy(b[tsOff:], c.ts)
	c.ts = b[tsOff:dataOff:dataOff]
	copy(b[dataOff:], c.data)
	c.data = b[dataOff:n:n]
	runtime.AddCleanup(c, chunkRef.release, chunkRef{seg, int64(n+7) &^ 7})
	return true
}

// chunkRef is a chunk's reference on its segment, dropped by the chunk's cleanup.
type chunkRef struct {
	seg  *chunkSegment
	size int64
}

func (r chunkRef) release() {
	r.seg.store.liveBytes.Add(-r.size)
	r.seg.release()
}

// MappedChunkBytes returns the bytes of the head's frozen chunks in
// memory-mapped files that are still reachable.
func (h *Head) MappedChunkBytes() int64 { return h.chunks.liveBytes.Load() }
