package head

import (
	"sync"
	"sync/atomic"
)

// refTable maps series references to series. References are handed out in
// increasing order, so a directory of fixed-size pages indexed by reference
// replaces a hash map: 8 bytes a series instead of about 30, and reads take
// no lock. A page whose series are all removed is freed; series created
// together (one target's) are removed together, so pages stay dense.
type refTable struct {
	mu  sync.Mutex                                // writers
	dir atomic.Pointer[[]atomic.Pointer[refPage]] // replaced, never resized in place
}

const (
	refPageBits = 9
	refPageSize = 1 << refPageBits
)

type refPage struct {
	live  int // series in the page; guarded by refTable.mu
	slots [refPageSize]atomic.Pointer[memSeries]
}

// get returns the series with reference ref, or nil.
func (t *refTable) get(ref uint64) *memSeries {
	dir := t.dir.Load()
	if dir == nil || ref>>refPageBits >= uint64(len(*dir)) {
		return nil
	}
	p := (*dir)[ref>>refPageBits].Load()
	if p == nil {
		return nil
	}
	return p.slots[ref&(refPageSize-1)].Load()
}

// set stores s under ref, which holds no series.
func (t *refTable) set(ref uint64, s *memSeries) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := ref >> refPageBits
	dir := t.dir.Load()
	if dir == nil || i >= uint64(len(*dir)) {
		n := 0
		if dir != nil {
			n = len(*dir)
		}
		grown := make([]atomic.Pointer[refPage], max(i+1, uint64(2*n), 16))
		for j := 0; j < n; j++ {
			grown[j].Store((*dir)[j].Load())
		}
		t.dir.Store(&grown)
		dir = &grown
	}
	p := (*dir)[i].Load()
	if p == nil {
		p = &refPage{}
		(*dir)[i].Store(p)
	}
	if p.slots[ref&(refPageSize-1)].Swap(s) == nil {
		p.live++
	}
}

// delete removes the series under ref.
func (t *refTable) delete(ref uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dir := t.dir.Load()
	if dir == nil || ref>>refPageBits >= uint64(len(*dir)) {
		return
	}
	slot := &(*dir)[ref>>refPageBits]
	p := slot.Load()
	if p == nil || p.slots[ref&(refPageSize-1)].Swap(nil) == nil {
		return
	}
	if p.live--; p.live == 0 {
		slot.Store(nil)
	}
}
